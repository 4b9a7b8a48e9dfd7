//! rot_audit link checks against a local HTTP server: HEAD then GET, redirects followed by hand
//! (with a hop limit), broken and unreachable links, and the public-address rule that keeps the
//! audit from ever connecting to loopback or private hosts.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use paravault::maintenance::link_rot::{LinkRotLimits, LinkState, check_url, is_public};
use paravault::maintenance::rot::RotRequest;

use crate::support::{note, vault};

/// A tiny HTTP/1.1 server; returns its base URL and a connection counter.
pub(crate) fn server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = connections.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            seen.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
            }
            let mut parts = request_line.split_whitespace();
            let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let (status, extra) = match (method, path) {
                (_, "/ok") => ("200 OK", String::new()),
                ("HEAD", "/nohead") => ("405 Method Not Allowed", String::new()),
                ("GET", "/nohead") => ("200 OK", String::new()),
                (_, "/gone") => ("404 Not Found", String::new()),
                (_, "/moved") => ("301 Moved Permanently", "Location: /ok\r\n".to_string()),
                (_, "/loop") => ("302 Found", "Location: /loop\r\n".to_string()),
                _ => ("500 Internal Server Error", String::new()),
            };
            let _ = write!(stream, "HTTP/1.1 {status}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (base, connections)
}

fn limits() -> LinkRotLimits {
    LinkRotLimits { timeout: Duration::from_secs(5), max_redirects: 3, max_links: 10 }
}

/// The mechanics, with the address rule switched off for the local server.
fn any_address(_: std::net::IpAddr) -> bool {
    true
}

#[test]
fn head_then_get_redirects_and_broken_links() {
    let (base, _) = server();
    let check = |path: &str| check_url(&format!("{base}{path}"), &limits(), any_address);
    assert_eq!(check("/ok").0, LinkState::Ok);
    assert_eq!(check("/nohead"), (LinkState::Ok, Some(200), String::new()), "GET after a 405 to HEAD");
    assert_eq!(check("/gone").0, LinkState::Broken);
    assert_eq!(check("/gone").1, Some(404));
    assert_eq!(check("/moved").0, LinkState::Ok, "a redirect is followed");
    let looped = check("/loop");
    assert_eq!(looped.0, LinkState::Refused);
    assert!(looped.2.contains("more than 3 redirects"), "{}", looped.2);
    assert_eq!(check_url("ftp://example.org/x", &limits(), any_address).0, LinkState::Refused);
    // Nothing listens on the discard port.
    assert_eq!(check_url("http://127.0.0.1:9/", &limits(), any_address).0, LinkState::Unreachable);
}

#[test]
fn loopback_and_private_hosts_are_never_contacted() {
    let (base, connections) = server();
    let literal = check_url(&format!("{base}/ok"), &limits(), is_public);
    assert_eq!(literal.0, LinkState::Refused, "{literal:?}");
    let port = base.rsplit(':').next().unwrap();
    let named = check_url(&format!("http://localhost:{port}/ok"), &limits(), is_public);
    assert_eq!(named.0, LinkState::Refused, "{named:?}");
    assert!(named.2.contains("non-public"), "{named:?}");
    assert_eq!(connections.load(Ordering::SeqCst), 0, "the audit never connected");
}

#[test]
fn rot_audit_checks_links_only_with_approval_and_egress() {
    let (base, connections) = server();
    let port = base.rsplit(':').next().unwrap();
    let body = format!("See [the docs](http://localhost:{port}/ok) and <http://127.0.0.1:{port}/gone>.\n\n`http://in.code/ignored`");
    let fixture = format!("-- 03_Resources/links.md --\n{}\n", note("Resource", "Links", &body));
    let (dir, vault) = vault(&fixture);
    let request = RotRequest { allow_link_rot: true, ..Default::default() };
    let unapproved = vault.rot_audit(&request).unwrap();
    assert!(unapproved.link_rot.is_empty());
    assert!(unapproved.skipped.iter().any(|s| s.section == "link_rot" && s.reason.contains("approved")));
    let approved = RotRequest { approved: true, ..request.clone() };
    let denied = vault.rot_audit(&approved).unwrap();
    assert!(denied.skipped.iter().any(|s| s.section == "link_rot" && s.reason.contains("egress")), "{:?}", denied.skipped);
    drop(vault);
    std::fs::create_dir_all(dir.path().join(".paravault")).unwrap();
    std::fs::write(dir.path().join(".paravault/policy.yaml"), "egress: allow-public\n").unwrap();
    let vault = paravault::vault::Vault::open(dir.path(), Default::default()).unwrap();
    let checked = vault.rot_audit(&approved).unwrap();
    let states: Vec<(&str, &LinkState)> = checked.link_rot.iter().map(|c| (c.url.as_str(), &c.state)).collect();
    assert_eq!(states.len(), 2, "{states:?} (the URL in code is not a link)");
    assert!(checked.link_rot.iter().all(|c| c.state == LinkState::Refused && c.path == "03_Resources/links.md"), "{states:?}");
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}
