//! `paravault web`: the people's HTTP surface (issue 21), a thin adapter over the same
//! application API the CLI and the MCP server use. Server-rendered pages (maud), login against
//! the approver secrets, a session cookie plus a synchronizer CSRF token, and the security
//! headers and limits docs/web.md lists. No engine logic lives here.

mod auth;
mod charts;
mod conn;
mod graph;
mod host;
mod markdown;
mod overview;
mod pages;
mod render;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware;
use axum::routing::{get, post};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};

use crate::api::approvals::secrets;
use crate::error::{Error, Result};
use crate::vault::{Channel, Vault};

pub use conn::serve_connections;

/// The Content-Security-Policy every response carries: same-origin resources only (the one
/// script, `/static/app.js`, is this origin's), no inline script or style, no plugins, no framing, forms post only to this server.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// How `paravault web` serves.
#[derive(Debug, Clone)]
pub struct WebOptions {
    /// Where to listen; loopback unless an approver is registered (`check_bind`).
    pub bind: SocketAddr,
    /// No POST route at all: browse, search and review only, anonymously, on loopback.
    pub read_only: bool,
    /// The folder holding the approvers file (`approvals::secrets::default_dir`; tests pass a
    /// temporary one).
    pub approvers_dir: PathBuf,
    /// The header deadline and the request deadline: a connection whose request headers have
    /// not all arrived this long after it opened (or after its previous answer) is closed, and
    /// a request then has this long again for its body and its answer (408 after it).
    pub request_timeout: Duration,
    /// Login attempts one client may make per minute (429 after them).
    pub login_attempts_per_minute: u32,
    /// Host names requests may name in `Host` besides the loopback names, the bind address and
    /// the host of the policy's `approvals.review_url` (`--public-host`): the name people type
    /// when the server sits behind a TLS proxy. Any other name is answered 421 (DNS
    /// rebinding; `host.rs`).
    pub public_hosts: Vec<String>,
    /// Connections open at once, all clients together; one more is answered 503 and closed.
    pub max_connections: usize,
    /// Connections open at once from one client (an IPv4 address, an IPv6 /64).
    pub max_connections_per_client: usize,
}

impl WebOptions {
    /// Loopback on `port`, read-write, the per-user approvers file, 30 s for a request's headers
    /// and 30 s for the rest of it, 5 logins per minute per client, no public name, 128
    /// connections at once and 32 per client (a browser opens at most 6 per server; a TLS
    /// proxy's pool is one client).
    pub fn loopback(port: u16) -> Result<Self> {
        Ok(WebOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], port)),
            read_only: false,
            approvers_dir: secrets::default_dir()?,
            request_timeout: Duration::from_secs(30),
            login_attempts_per_minute: 5,
            public_hosts: Vec::new(),
            max_connections: 128,
            max_connections_per_client: 32,
        })
    }
}

/// Refuses an address other people could reach unless logging in is possible (an approver is
/// registered) and the server is not read-only (a read-only server has no login), and a public
/// host name that is not one (`user@host`, a path, an empty name).
pub fn check_bind(options: &WebOptions) -> Result<()> {
    for name in &options.public_hosts {
        host::host_name(name)?;
    }
    if options.bind.ip().is_loopback() {
        return Ok(());
    }
    if options.read_only {
        return Err(Error::NotConfigured {
            capability: "web on a non-loopback address",
            remediation: "a --read-only server has no login; bind it to 127.0.0.1 or ::1".into(),
        });
    }
    if secrets::approver_names(&options.approvers_dir)?.is_empty() {
        return Err(Error::NotConfigured {
            capability: "web on a non-loopback address",
            remediation:
                "register an approver first (`paravault approver add NAME`) so that every page needs a login, or bind to 127.0.0.1".into(),
        });
    }
    Ok(())
}

/// What every handler shares.
pub(crate) struct WebState {
    vault: Arc<Vault>,
    read_only: bool,
    approvers_dir: PathBuf,
    /// Cookies get `Secure` when the server is reachable from elsewhere (behind TLS).
    secure_cookies: bool,
    sessions: auth::Sessions,
    login_limiter: auth::LoginLimiter,
    /// Set while a health summary is being recomputed for the dashboard (one at a time).
    health_refresh: std::sync::atomic::AtomicBool,
}

impl WebState {
    /// Whether pages need a login: an approver is registered and the server takes logins.
    fn login_required(&self) -> Result<bool> {
        Ok(!self.read_only && !secrets::approver_names(&self.approvers_dir)?.is_empty())
    }
}

/// The largest request body: a note edit (the edited text and the text it started from, each
/// at most the policy's `note_bytes_max`, form-encoded at up to three bytes per byte) plus the
/// other fields.
fn body_limit(vault: &Vault) -> usize {
    let note = usize::try_from(vault.policy().policy.limits.note_bytes_max).unwrap_or(usize::MAX / 8);
    note.saturating_mul(6).saturating_add(16 * 1024)
}

/// The application: every page, the security headers and the request limits. Tests drive it
/// with `tower::ServiceExt::oneshot` (naming the server's host: a request without `Host` is
/// refused); `serve_connections` puts it on a socket.
pub fn router(vault: Vault, options: &WebOptions) -> Router {
    let limit = body_limit(&vault);
    let hosts = host::AllowedHosts::new(options.bind, &options.public_hosts, vault.policy().policy.approvals.review_url.as_deref());
    let state = Arc::new(WebState {
        // Writes made here are a person's, in the browser: receipts name `web.*` operations.
        vault: Arc::new(vault.acting_for(Channel::Web)),
        read_only: options.read_only,
        approvers_dir: options.approvers_dir.clone(),
        secure_cookies: !options.bind.ip().is_loopback(),
        sessions: auth::Sessions::default(),
        login_limiter: auth::LoginLimiter::new(options.login_attempts_per_minute),
        health_refresh: std::sync::atomic::AtomicBool::new(false),
    });
    let mut app = Router::new()
        .route("/", get(pages::dashboard))
        .route("/healthz", get(pages::healthz))
        .route("/static/style.css", get(render::stylesheet))
        .route("/static/app.js", get(render::script))
        .route("/favicon.svg", get(render::favicon))
        .route("/file/{*path}", get(pages::file))
        .route("/tags", get(pages::tags_index))
        .route("/tags/{*tag}", get(pages::tag))
        .route("/graph", get(pages::graph))
        .route("/charts", get(overview::charts))
        .route("/switch", get(overview::switch))
        .route("/switch/titles", get(overview::switch_titles))
        .route("/browse", get(pages::browse_root))
        .route("/browse/{*dir}", get(pages::browse))
        .route("/note/{*path}", get(pages::note))
        .route("/search", get(pages::search))
        .route("/proposals", get(pages::proposals))
        .route("/receipts", get(pages::receipts))
        .route("/tasks", get(pages::tasks))
        .route("/tasks/{id}", get(pages::task))
        .route("/maintenance", get(pages::maintenance));
    if options.read_only {
        app = app.route("/proposals/{id}", get(pages::proposal));
    } else {
        app = app
            .route("/login", get(pages::login_form).post(pages::login))
            .route("/logout", post(pages::logout))
            .route("/edit/{*path}", get(pages::edit_form).post(pages::edit))
            .route("/proposals/{id}", get(pages::proposal))
            .route("/proposals/{id}/decide", post(pages::decide))
            .route("/proposals/{id}/apply", post(pages::apply))
            .route("/maintenance/archive", post(pages::archive));
    }
    let header = |name: HeaderName, value: &'static str| SetResponseHeaderLayer::overriding(name, HeaderValue::from_static(value));
    app.fallback(pages::not_found)
        .with_state(state)
        .layer(middleware::from_fn_with_state(hosts, host::check_host))
        .layer(RequestBodyLimitLayer::new(limit))
        .layer(RequestBodyTimeoutLayer::new(options.request_timeout))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, options.request_timeout))
        .layer(header(header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
        .layer(header(header::X_FRAME_OPTIONS, "DENY"))
        .layer(header(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .layer(header(header::REFERRER_POLICY, "no-referrer"))
        .layer(header(header::CACHE_CONTROL, "no-store"))
}

/// Serves the vault until Ctrl-C: checks the address, watches the disk (pages answer from a
/// model equal to it, as MCP calls do), and listens under the header deadline and the
/// connection caps (`serve_connections`).
pub fn serve(vault: Vault, options: WebOptions) -> std::result::Result<(), String> {
    check_bind(&options).map_err(|e| format!("[{}] {e}", e.code()))?;
    vault.watch_disk();
    let app = router(vault, &options);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(options.bind).await.map_err(|e| format!("binding {}: {e}", options.bind))?;
        let address = listener.local_addr().map_err(|e| e.to_string())?;
        eprintln!("paravault web: http://{address}/{}", if options.read_only { " (read-only)" } else { "" });
        let ctrl_c = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        serve_connections(listener, app, &options, ctrl_c).await.map_err(|e| e.to_string())
    })
}
