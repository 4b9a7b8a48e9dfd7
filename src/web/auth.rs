//! Web sessions: the login session cookie (HttpOnly, SameSite=Strict, Secure off loopback), the
//! per-session synchronizer CSRF token, the login rate limit per client (governor), and the
//! `Viewer` extractor that sends a visitor without a login to `/login`.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cookie::{Cookie, SameSite};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use super::WebState;
use super::render::error_page;
use crate::api::approvals::secrets::AuthenticatedApprover;

/// The session cookie's name.
pub(crate) const SESSION_COOKIE: &str = "paravault_session";
/// A session ends this long after login, whatever its use.
const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// A session unused this long ends.
const SESSION_IDLE: Duration = Duration::from_secs(2 * 3600);
/// Most sessions kept (anonymous ones, made by showing the login form, go first).
const SESSIONS_MAX: usize = 10_000;

/// One browser's session: anonymous until a login, with its CSRF token.
#[derive(Debug, Clone)]
pub struct Session {
    pub approver: Option<AuthenticatedApprover>,
    pub csrf: String,
    created: Instant,
    last_seen: Instant,
}

/// The server's sessions, by random id (in memory: a restart logs everyone out).
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    by_id: Mutex<HashMap<String, Session>>,
}

/// 32 random bytes from the OS, hex-encoded.
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source is unavailable");
    crate::api::engine::hex_encode(&bytes)
}

/// Compares two tokens in time independent of where they differ.
pub(crate) fn tokens_equal(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Sessions {
    fn live(session: &Session, now: Instant) -> bool {
        now.duration_since(session.created) < SESSION_LIFETIME && now.duration_since(session.last_seen) < SESSION_IDLE
    }

    /// The live session `id` names (touching it), if any.
    pub fn get(&self, id: &str) -> Option<Session> {
        let mut map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let session = map.get_mut(id)?;
        if !Self::live(session, now) {
            map.remove(id);
            return None;
        }
        session.last_seen = now;
        Some(session.clone())
    }

    /// A new session (anonymous, or logged in as `approver`) with a fresh id and CSRF token.
    pub fn create(&self, approver: Option<AuthenticatedApprover>) -> (String, Session) {
        let mut map = self.by_id.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if map.len() >= SESSIONS_MAX {
            map.retain(|_, s| Self::live(s, now));
        }
        if map.len() >= SESSIONS_MAX {
            let anonymous: Vec<String> = map.iter().filter(|(_, s)| s.approver.is_none()).map(|(id, _)| id.clone()).collect();
            for id in anonymous {
                map.remove(&id);
            }
        }
        if map.len() >= SESSIONS_MAX
            && let Some(oldest) = map.iter().min_by_key(|(_, s)| s.last_seen).map(|(id, _)| id.clone())
        {
            map.remove(&oldest);
        }
        let session = Session { approver, csrf: random_token(), created: now, last_seen: now };
        let id = random_token();
        map.insert(id.clone(), session.clone());
        (id, session)
    }

    /// Ends session `id`.
    pub fn remove(&self, id: &str) {
        self.by_id.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
    }
}

/// The `Set-Cookie` value for session `id` (an empty id with max-age 0 clears it).
pub fn session_cookie(id: &str, secure: bool) -> String {
    let mut cookie = Cookie::build((SESSION_COOKIE, id.to_string())).path("/").http_only(true).same_site(SameSite::Strict).secure(secure);
    if id.is_empty() {
        cookie = cookie.max_age(cookie::time::Duration::ZERO);
    }
    cookie.build().to_string()
}

/// The session id a request's `Cookie` headers carry.
fn cookie_session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(std::result::Result::ok)
        .find(|c| c.name() == SESSION_COOKIE)
        .map(|c| c.value().to_string())
}

/// Login attempts per client address (governor's keyed limiter).
pub(crate) struct LoginLimiter {
    limiter: DefaultKeyedRateLimiter<IpAddr>,
}

impl std::fmt::Debug for LoginLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoginLimiter")
    }
}

impl LoginLimiter {
    pub fn new(per_minute: u32) -> Self {
        let per_minute = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        LoginLimiter { limiter: RateLimiter::keyed(Quota::per_minute(per_minute)) }
    }

    /// Charges one attempt to `client`; `Err(seconds)` to wait when it has none left.
    pub fn check(&self, client: IpAddr) -> Result<(), u64> {
        self.limiter.check_key(&client).map_err(|not_until| {
            let clock = governor::clock::DefaultClock::default();
            not_until.wait_time_from(governor::clock::Clock::now(&clock)).as_secs().max(1)
        })
    }
}

/// The address of the client (loopback when the request came without a socket: tests).
pub(crate) struct ClientAddr(pub IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let address = parts.extensions.get::<ConnectInfo<SocketAddr>>().map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |c| c.0.ip());
        Ok(ClientAddr(address))
    }
}

/// Who is looking: their session (if any) and whether they logged in. Extracting it refuses a
/// visitor without a login where one is needed: a page read is sent to `/login` (302), a POST
/// is refused (403).
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    pub session_id: Option<String>,
    pub session: Option<Session>,
    /// Whether the server takes logins (an approver exists and it is not read-only).
    pub logins: bool,
}

impl Viewer {
    /// The logged-in approver.
    pub fn approver(&self) -> Option<&AuthenticatedApprover> {
        self.session.as_ref().and_then(|s| s.approver.as_ref())
    }

    /// The CSRF token forms of this session carry.
    pub fn csrf(&self) -> Option<&str> {
        self.session.as_ref().map(|s| s.csrf.as_str())
    }

    /// Refuses a state-changing request whose form does not carry this session's CSRF token,
    /// or that comes without a logged-in approver.
    pub(crate) fn authorise(&self, token: Option<&str>) -> Result<&AuthenticatedApprover, Box<Response>> {
        let (Some(expected), Some(given)) = (self.csrf(), token) else {
            return Err(Box::new(error_page(
                StatusCode::FORBIDDEN,
                "Refused",
                "This request carries no valid CSRF token. Reload the page and try again.",
            )));
        };
        if !tokens_equal(expected, given) {
            return Err(Box::new(error_page(
                StatusCode::FORBIDDEN,
                "Refused",
                "This request carries no valid CSRF token. Reload the page and try again.",
            )));
        }
        self.approver().ok_or_else(|| {
            Box::new(error_page(
                StatusCode::FORBIDDEN,
                "Log in first",
                "Changing the vault needs a logged-in approver (register one with `paravault approver add NAME`).",
            ))
        })
    }
}

impl FromRequestParts<Arc<WebState>> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<WebState>) -> Result<Self, Self::Rejection> {
        let mut viewer = visitor(&parts.headers, state);
        viewer.logins = state.login_required().map_err(|e| super::pages::engine_error(&e))?;
        if viewer.logins && viewer.approver().is_none() {
            return Err(if parts.method == Method::GET || parts.method == Method::HEAD {
                (StatusCode::FOUND, [(header::LOCATION, "/login")]).into_response()
            } else {
                error_page(StatusCode::FORBIDDEN, "Log in first", "This request needs a logged-in approver.")
            });
        }
        Ok(viewer)
    }
}

/// The session a request's cookie names, without any login check (the login pages).
pub fn visitor(headers: &HeaderMap, state: &WebState) -> Viewer {
    let session_id = cookie_session_id(headers);
    let session = session_id.as_deref().and_then(|id| state.sessions.get(id));
    Viewer { session_id: session.as_ref().and(session_id), session, logins: !state.read_only }
}
