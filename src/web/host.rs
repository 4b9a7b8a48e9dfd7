//! The `Host` check (issue 45 item 5): the server answers only requests that name it. A page on
//! `attacker.example` whose DNS name is re-pointed at 127.0.0.1 (DNS rebinding) makes the
//! person's browser send it requests it treats as same-origin, and read the answers; those
//! requests carry `Host: attacker.example`, so refusing every name that is not the server's own
//! closes the hole whether or not a login is needed (`--read-only`, no approver).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::render::error_page;
use crate::error::{Error, Result};

/// The host names a request may name, lower-case, IPv6 literals in brackets: the loopback names
/// (`localhost`, `127.0.0.1`, `[::1]`), the bind address when it is a specific one, the public
/// names the person configured (`--public-host`) and the host of the policy's
/// `approvals.review_url` (the address people are sent to). Ports are not compared: a
/// rebinding page is on the server's own port already, and a TLS proxy's port differs.
#[derive(Debug, Clone)]
pub(crate) struct AllowedHosts(Arc<Vec<String>>);

impl AllowedHosts {
    pub(crate) fn new(bind: SocketAddr, public_hosts: &[String], review_url: Option<&str>) -> Self {
        let mut names: Vec<String> = ["localhost", "127.0.0.1", "[::1]"].map(String::from).into();
        if !bind.ip().is_unspecified() {
            names.push(match bind.ip() {
                IpAddr::V4(ip) => ip.to_string(),
                IpAddr::V6(ip) => format!("[{ip}]"),
            });
        }
        names.extend(public_hosts.iter().filter_map(|name| host_name(name).ok()));
        if let Some(host) = review_url.and_then(|url| url::Url::parse(url).ok()).and_then(|url| url.host().map(|h| h.to_string())) {
            names.extend(host_name(&host).ok());
        }
        names.sort();
        names.dedup();
        AllowedHosts(Arc::new(names))
    }

    pub(super) fn allows(&self, authority: &str) -> bool {
        host_name(authority).is_ok_and(|name| self.0.contains(&name))
    }
}

/// The host part of `authority` (`name`, `name:port`, `[v6]:port`) in the form compared:
/// lower-case, without the port and a trailing dot. Refuses what is no authority, carries
/// user information (`user@host`) or a port that is no number.
pub(crate) fn host_name(authority: &str) -> Result<String> {
    let invalid = |reason: &str| Error::InvalidArgument { name: "host", reason: format!("'{authority}' {reason}") };
    if authority.contains('@') {
        return Err(invalid("holds user information"));
    }
    let parsed: Authority = authority.parse().map_err(|_| invalid("is not a host name"))?;
    // `Authority` takes any text after the colon; a port is digits (RFC 9110: possibly none).
    let port = &authority[parsed.host().len()..];
    if !(port.is_empty() || port == ":" || parsed.port_u16().is_some()) {
        return Err(invalid("has a port that is no number"));
    }
    let host = parsed.host().trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty() {
        return Err(invalid("names no host"));
    }
    Ok(host)
}

/// The middleware: a request names exactly one allowed host in `Host` (and, when its target is
/// in absolute form, in the target too) or it is answered 421 (a name that is not this server)
/// or 400 (no `Host`, two of them, or one that does not parse), before any handler runs.
pub(crate) async fn check_host(State(hosts): State<AllowedHosts>, request: Request, next: Next) -> Response {
    let mut values = request.headers().get_all(header::HOST).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return error_page(StatusCode::BAD_REQUEST, "Bad request", "A request names exactly one Host.");
    };
    let Ok(named) = value.to_str() else {
        return error_page(StatusCode::BAD_REQUEST, "Bad request", "The Host header is not a host name.");
    };
    if host_name(named).is_err() {
        return error_page(StatusCode::BAD_REQUEST, "Bad request", "The Host header is not a host name.");
    }
    let target_allowed = request.uri().authority().is_none_or(|target| hosts.allows(target.as_str()));
    if !hosts.allows(named) || !target_allowed {
        return error_page(
            StatusCode::MISDIRECTED_REQUEST,
            "Misdirected request",
            "This server does not answer for that host name (see `paravault web --public-host`).",
        );
    }
    next.run(request).await
}
