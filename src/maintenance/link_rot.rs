//! Link rot checks for `rot_audit`: every external http(s) link is checked with HEAD (then GET
//! when the server refuses HEAD), under timeouts, following redirects by hand, and only ever
//! connecting to public addresses: the resolver drops private, loopback, link-local and other
//! non-public addresses at connect time, on every hop (no DNS-rebinding window).

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use serde::Serialize;

/// How one link fared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkState {
    /// A 2xx answer (after redirects).
    Ok,
    /// A 4xx or 5xx answer.
    Broken,
    /// No answer: DNS failure, refused connection, timeout, TLS failure.
    Unreachable,
    /// Not checked: not http(s), a non-public address, or too many redirects.
    Refused,
}

/// One external link checked.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LinkCheck {
    /// The note's vault-relative path.
    pub path: String,
    /// The link's line in the note.
    pub line: usize,
    /// The link.
    pub url: String,
    /// What the check found.
    pub state: LinkState,
    /// The HTTP status answered, if any.
    pub http_status: Option<u16>,
    /// What happened, in words.
    pub detail: String,
}

/// Limits of one audit's link checks (from policy).
#[derive(Debug, Clone, Copy)]
pub struct LinkRotLimits {
    pub timeout: Duration,
    pub max_redirects: usize,
    pub max_links: usize,
}

/// True for addresses on the public internet: not private, loopback, link-local, unspecified,
/// shared (CGNAT), documentation, benchmarking, multicast, broadcast or reserved ranges.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated) fec0::/10
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || (s[0] == 0x0064 && s[1] == 0xff9b) // NAT64: may reach private IPv4
                || (s[0] == 0x2002) // 6to4: may embed private IPv4
                || (s[0] == 0x2001 && s[1] == 0)) // Teredo
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || o[0] == 0
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // shared address space 100.64.0.0/10
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking 198.18.0.0/15
        || o[0] >= 240) // reserved
}

/// Resolves host names and keeps only the addresses `allow` accepts.
struct FilteringResolver {
    allow: fn(IpAddr) -> bool,
}

const NON_PUBLIC: &str = "resolves only to non-public addresses";

impl ureq::Resolver for FilteringResolver {
    fn resolve(&self, netloc: &str) -> io::Result<Vec<SocketAddr>> {
        let all: Vec<SocketAddr> = netloc.to_socket_addrs()?.collect();
        let kept: Vec<SocketAddr> = all.iter().copied().filter(|a| (self.allow)(a.ip())).collect();
        if kept.is_empty() && !all.is_empty() {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, NON_PUBLIC));
        }
        Ok(kept)
    }
}

fn agent(limits: &LinkRotLimits, allow: fn(IpAddr) -> bool) -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout_connect(limits.timeout)
        .timeout(limits.timeout)
        .redirects(0)
        .resolver(FilteringResolver { allow })
        .user_agent(concat!("paravault-rot-audit/", env!("CARGO_PKG_VERSION")))
        .build()
}

enum Answer {
    Status(u16, Option<String>),
    Failed(String),
}

fn ask(agent: &ureq::Agent, method: &str, url: &url::Url) -> Answer {
    let response = agent.request_url(method, url).call();
    match response {
        Ok(r) => {
            let location = r.header("location").map(str::to_string);
            let status = r.status();
            // Never read a body: only the status line and headers matter.
            drop(r);
            Answer::Status(status, location)
        }
        Err(ureq::Error::Status(code, r)) => Answer::Status(code, r.header("location").map(str::to_string)),
        Err(ureq::Error::Transport(t)) => Answer::Failed(t.to_string()),
    }
}

/// Checks one URL: HEAD (GET when HEAD is refused with 405/501), following at most
/// `max_redirects` redirects, each hop checked again.
pub fn check_url(url: &str, limits: &LinkRotLimits, allow: fn(IpAddr) -> bool) -> (LinkState, Option<u16>, String) {
    let agent = agent(limits, allow);
    let mut current = match url::Url::parse(url) {
        Ok(u) => u,
        Err(e) => return (LinkState::Refused, None, format!("not a valid URL: {e}")),
    };
    for _hop in 0..=limits.max_redirects {
        if !matches!(current.scheme(), "http" | "https") {
            return (LinkState::Refused, None, format!("scheme '{}' is not checked", current.scheme()));
        }
        if let Some(url::Host::Ipv4(ip)) = current.host()
            && !allow(IpAddr::V4(ip))
        {
            return (LinkState::Refused, None, format!("{ip} is not a public address"));
        }
        if let Some(url::Host::Ipv6(ip)) = current.host()
            && !allow(IpAddr::V6(ip))
        {
            return (LinkState::Refused, None, format!("{ip} is not a public address"));
        }
        let mut answer = ask(&agent, "HEAD", &current);
        if let Answer::Status(405 | 501, _) = answer {
            answer = ask(&agent, "GET", &current);
        }
        match answer {
            Answer::Failed(reason) if reason.contains(NON_PUBLIC) => {
                return (LinkState::Refused, None, format!("{} {NON_PUBLIC}", current.host_str().unwrap_or("")));
            }
            Answer::Failed(reason) => return (LinkState::Unreachable, None, reason),
            Answer::Status(code @ 300..=399, Some(location)) => match current.join(&location) {
                Ok(next) => current = next,
                Err(e) => return (LinkState::Broken, Some(code), format!("redirect to an invalid location: {e}")),
            },
            Answer::Status(code @ 200..=299, _) => return (LinkState::Ok, Some(code), String::new()),
            Answer::Status(code, _) => return (LinkState::Broken, Some(code), format!("HTTP {code}")),
        }
    }
    (LinkState::Refused, None, format!("more than {} redirects", limits.max_redirects))
}

/// Checks links (path, line, url) in order, at most `limits.max_links` distinct URLs; every
/// occurrence of a URL gets its result. Returns the checks and how many URLs were left out.
pub(crate) fn check_links(
    links: &[(String, usize, String)],
    limits: &LinkRotLimits,
    allow: fn(IpAddr) -> bool,
    progress: super::Progress<'_>,
) -> (Vec<LinkCheck>, usize) {
    let mut results: std::collections::HashMap<&str, (LinkState, Option<u16>, String)> = std::collections::HashMap::new();
    let mut left_out = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (done, (path, line, url)) in links.iter().enumerate() {
        // Every link is reported: each may wait for a slow host.
        progress("checking links", done, links.len());
        let result = match results.get(url.as_str()) {
            Some(r) => r.clone(),
            None if results.len() >= limits.max_links => {
                left_out.insert(url.as_str());
                continue;
            }
            None => {
                let r = check_url(url, limits, allow);
                results.insert(url, r.clone());
                r
            }
        };
        out.push(LinkCheck { path: path.clone(), line: *line, url: url.clone(), state: result.0, http_status: result.1, detail: result.2 });
    }
    progress("checking links", links.len(), links.len());
    (out, left_out.len())
}

#[cfg(test)]
mod tests;
