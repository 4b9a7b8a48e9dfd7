//! `paravault web` over real sockets, raw bytes through std `TcpStream` (issue 45 items 5 and
//! 6): the `Host` check on every route, in every mode (read-only, no approver, logged in), for
//! a served listener and for the `paravault web` binary with `--public-host`; the header
//! deadline (a connection drip-feeding its headers, or sending nothing, is closed); the
//! per-client and total connection caps (one more is refused at once while a person's
//! connection still answers).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use paravault::approvals::secrets;
use paravault::retrieval::SyncParams;
use paravault::web::{self, WebOptions};

use crate::support::{note, vault};

const SECRET: &str = "correct horse battery staple";

/// Every page a GET can reach, the stylesheet and a page that does not exist.
const ROUTES: &[&str] = &[
    "/",
    "/static/style.css",
    "/healthz",
    "/browse",
    "/browse/01_Projects",
    "/note/01_Projects/plan.md",
    "/edit/01_Projects/plan.md",
    "/search?q=zebras&mode=fts",
    "/proposals",
    "/receipts",
    "/tasks",
    "/maintenance",
    "/login",
    "/no/such/page",
];

/// A vault's Router served on 127.0.0.1 by `web::serve_connections` on its own runtime thread,
/// stopped when dropped.
struct Served {
    address: SocketAddr,
    app: axum::Router,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.stop.take().map(|stop| stop.send(()));
        let _ = self.thread.take().map(std::thread::JoinHandle::join);
    }
}

/// Serves a vault holding `fixture` and a plan note that mentions zebras (the text no refused
/// answer may carry), with the test's options changed by `adjust`.
fn serve(fixture: &str, read_only: bool, with_approver: bool, adjust: impl FnOnce(&mut WebOptions)) -> Served {
    let fixture = format!("{fixture}-- 01_Projects/plan.md --\n{}", note("Project", "Plan", "The plan body mentions zebras.\n"));
    let (dir, vault) = vault(&fixture);
    vault.sync_vault(&SyncParams::default()).unwrap();
    let config = tempfile::tempdir().unwrap();
    if with_approver {
        secrets::add_approver(config.path(), "alice", SECRET).unwrap();
    }
    let mut options = WebOptions {
        bind: SocketAddr::from(([127, 0, 0, 1], 0)),
        read_only,
        approvers_dir: config.path().to_path_buf(),
        request_timeout: Duration::from_secs(10),
        login_attempts_per_minute: 5,
        public_hosts: Vec::new(),
        max_connections: 128,
        max_connections_per_client: 32,
    };
    adjust(&mut options);
    web::check_bind(&options).unwrap();
    let app = web::router(vault, &options);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = app.clone();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let stopped = async {
                let _ = stopped.await;
            };
            web::serve_connections(listener, served, &options, stopped).await.unwrap();
        });
    });
    Served { address, app, stop: Some(stop), thread: Some(thread), _dirs: (dir, config) }
}

/// The status code and the whole text of the answer to `request`, sent as raw bytes on a fresh
/// connection (`Connection: close`, so the answer ends with the connection).
fn exchange(address: SocketAddr, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    (text.get(9..12).and_then(|code| code.parse().ok()).unwrap_or(0), text)
}

/// `method target` naming `host` (none: no `Host` line), with the session `cookie`.
fn request(method: &str, target: &str, host: Option<&str>, cookie: Option<&str>) -> String {
    let mut text = format!("{method} {target} HTTP/1.1\r\n");
    if let Some(host) = host {
        text.push_str(&format!("Host: {host}\r\n"));
    }
    if let Some(cookie) = cookie {
        text.push_str(&format!("Cookie: {cookie}\r\n"));
    }
    if method == "POST" {
        text.push_str("Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 0\r\n");
    }
    text + "Connection: close\r\n\r\n"
}

/// Asserts a refused answer: `status`, the security headers, no note text, no stylesheet.
fn assert_refused(answer: &(u16, String), status: u16, what: &str) {
    let (code, text) = answer;
    assert_eq!(*code, status, "{what}: {text}");
    assert!(!text.contains("zebras"), "{what} answered the note's text: {text}");
    assert!(!text.contains("font-family"), "{what} answered the stylesheet: {text}");
    assert!(text.to_lowercase().contains(&format!("content-security-policy: {}", web::CONTENT_SECURITY_POLICY)), "{what}: {text}");
}

#[test]
fn a_request_naming_another_host_is_refused_on_every_route_in_every_mode() {
    for (mode, read_only, with_approver) in [("read-only", true, false), ("no approver", false, false), ("logged in", false, true)] {
        let served = serve("", read_only, with_approver, |_| {});
        let (address, port) = (served.address, served.address.port());
        let cookie = with_approver.then(|| tokio::runtime::Runtime::new().unwrap().block_on(crate::web::log_in(&served.app)).0);
        let cookie = cookie.as_deref();
        let attacker_with_port = format!("attacker.example:{port}");
        let rebound = format!("127.0.0.1.attacker.example:{port}");
        for route in ROUTES {
            for host in ["attacker.example", attacker_with_port.as_str(), rebound.as_str(), "localhost.attacker.example"] {
                let answer = exchange(address, &request("GET", route, Some(host), cookie));
                assert_refused(&answer, 421, &format!("{mode}: GET {route} naming {host}"));
            }
        }
        for route in ["/login", "/logout", "/edit/01_Projects/plan.md", "/maintenance/archive", "/"] {
            assert_refused(
                &exchange(address, &request("POST", route, Some("attacker.example"), cookie)),
                421,
                &format!("{mode}: POST {route}"),
            );
        }
        // An absolute-form target names the host too: both must be this server's.
        let absolute = request("GET", "http://attacker.example/note/01_Projects/plan.md", Some(&format!("127.0.0.1:{port}")), cookie);
        assert_refused(&exchange(address, &absolute), 421, &format!("{mode}: an absolute target naming another host"));
        // No Host (HTTP/1.1 requires one; HTTP/1.0 gets the same answer), two, or one that is
        // no host name: 400.
        let note = "/note/01_Projects/plan.md";
        assert_refused(&exchange(address, &request("GET", note, None, cookie)), 400, &format!("{mode}: no Host"));
        let http10 = format!("GET {note} HTTP/1.0\r\n\r\n");
        assert_refused(&exchange(address, &http10), 400, &format!("{mode}: HTTP/1.0 without Host"));
        let two = format!("GET {note} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: attacker.example\r\nConnection: close\r\n\r\n");
        assert_refused(&exchange(address, &two), 400, &format!("{mode}: two Hosts"));
        for bad in ["alice@127.0.0.1", "127.0.0.1/x", ""] {
            assert_refused(&exchange(address, &request("GET", note, Some(bad), cookie)), 400, &format!("{mode}: Host {bad:?}"));
        }
        // The server's own names are answered.
        for host in
            [format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("[::1]:{port}"), "LocalHost".into(), "localhost.".into()]
        {
            let (status, text) = exchange(address, &request("GET", note, Some(&host), cookie));
            assert_eq!(status, 200, "{mode}: naming {host}: {text}");
            assert!(text.contains("zebras"), "{mode}: naming {host}");
            let (status, text) = exchange(address, &request("GET", "/static/style.css", Some(&host), cookie));
            assert!(status == 200 && text.contains("font-family"), "{mode}: the stylesheet naming {host}: {text}");
        }
    }
}

#[test]
fn a_configured_public_name_and_the_review_url_host_are_answered_and_no_other() {
    let policy = "-- .paravault/policy.yaml --\napprovals:\n  review_url: \"https://Review.example.net/vault\"\n";
    let served = serve(policy, true, false, |options| options.public_hosts = vec!["notes.example.org".into()]);
    let note = "/note/01_Projects/plan.md";
    for host in ["notes.example.org", "NOTES.example.org:443", "review.example.net", "review.example.net:8443"] {
        let (status, text) = exchange(served.address, &request("GET", note, Some(host), None));
        assert!(status == 200 && text.contains("zebras"), "naming {host}: {text}");
    }
    for host in ["other.example.org", "example.org", "notes.example.org.attacker.example", "net"] {
        assert_refused(&exchange(served.address, &request("GET", note, Some(host), None)), 421, &format!("naming {host}"));
    }
    // A public name that is no host name is refused before the server starts.
    let config = tempfile::tempdir().unwrap();
    for bad in ["alice@notes.example.org", "notes.example.org/path", "", "two words"] {
        let options = WebOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            read_only: true,
            approvers_dir: config.path().to_path_buf(),
            request_timeout: Duration::from_secs(30),
            login_attempts_per_minute: 5,
            public_hosts: vec![bad.into()],
            max_connections: 128,
            max_connections_per_client: 32,
        };
        assert_eq!(web::check_bind(&options).unwrap_err().code(), "invalid_argument", "--public-host {bad:?}");
    }
}

#[test]
fn the_paravault_web_binary_answers_its_public_host_and_refuses_others() {
    use std::io::BufRead;
    let fixture = format!("-- 01_Projects/plan.md --\n{}", note("Project", "Plan", "The plan body mentions zebras.\n"));
    let (dir, _vault) = vault(&fixture);
    let config = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_paravault"))
        .arg("--vault")
        .arg(dir.path())
        .args(["web", "--bind", "127.0.0.1:0", "--read-only", "--public-host", "notes.example.org"])
        .env("PARAVAULT_CONFIG_DIR", config.path())
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let mut address = None;
    while address.is_none() && stderr.read_line(&mut line).unwrap_or(0) > 0 {
        address = line.split("http://").nth(1).and_then(|rest| rest.split('/').next()).and_then(|a| a.parse::<SocketAddr>().ok());
        line.clear();
    }
    let Some(address) = address else {
        let _ = child.kill();
        panic!("`paravault web` printed no address");
    };
    let note = "/note/01_Projects/plan.md";
    let answers: Vec<(String, (u16, String))> =
        ["notes.example.org".to_string(), format!("localhost:{}", address.port()), "attacker.example".into()]
            .into_iter()
            .map(|host| (host.clone(), exchange(address, &request("GET", note, Some(&host), None))))
            .collect();
    let _ = child.kill();
    let _ = child.wait();
    for (host, (status, text)) in &answers[..2] {
        assert!(*status == 200 && text.contains("zebras"), "naming {host}: {text}");
    }
    assert_refused(&answers[2].1, 421, "the binary, naming attacker.example");
}

/// Reads on `stream` until the server closes it (EOF or a reset) or `within` passes, first
/// writing one more header line each round when `drip`; how long it stayed open, or none.
fn closed_within(stream: &mut TcpStream, drip: bool, started: Instant, within: Duration) -> Option<Duration> {
    stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let mut buffer = [0u8; 1024];
    while started.elapsed() < within {
        if drip && stream.write_all(b"X-Drip: 1\r\n").is_err() {
            return Some(started.elapsed());
        }
        match stream.read(&mut buffer) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Some(started.elapsed()),
        }
        if drip {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    None
}

#[test]
fn a_connection_that_has_not_sent_its_headers_within_the_deadline_is_closed() {
    let served = serve("", true, false, |options| options.request_timeout = Duration::from_secs(1));
    let started = Instant::now();
    let mut drip = TcpStream::connect(served.address).unwrap();
    drip.write_all(format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n", served.address.port()).as_bytes()).unwrap();
    let mut silent = TcpStream::connect(served.address).unwrap();
    let within = Duration::from_secs(4);
    let drip_open =
        closed_within(&mut drip, true, started, within).expect("a connection drip-feeding its headers stays open past the deadline");
    let silent_open =
        closed_within(&mut silent, false, started, within).expect("a connection that sends nothing stays open past the deadline");
    for (what, open) in [("drip-feeding", drip_open), ("silent", silent_open)] {
        assert!(open >= Duration::from_millis(900), "the {what} connection was closed after {open:?}, before the 1 s deadline");
    }
    // The server goes on answering.
    let (status, _) = exchange(served.address, &request("GET", "/", Some("127.0.0.1"), None));
    assert_eq!(status, 200);
    // The default deadline is 30 s, headers included.
    assert_eq!(WebOptions::loopback(8742).unwrap().request_timeout, Duration::from_secs(30));
}

/// Sends `GET /` on a kept-alive connection and reads exactly its answer; the status.
fn get_kept_alive(stream: &mut TcpStream, port: u16) -> u16 {
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut buffer).unwrap_or(0);
        if n == 0 {
            return 0;
        }
        answer.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&answer).to_string();
        let Some(end) = text.find("\r\n\r\n") else { continue };
        let head = text[..end].to_lowercase();
        let length = head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse::<usize>().ok());
        let done = match length {
            Some(length) => answer.len() >= end + 4 + length,
            None => text.ends_with("\r\n0\r\n\r\n"),
        };
        if done {
            return text.get(9..12).and_then(|code| code.parse().ok()).unwrap_or(0);
        }
    }
}

/// Opens a connection that sends part of its headers.
fn slow(address: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1\r\n").unwrap();
    stream
}

/// Whether the server keeps `stream` open (nothing to read for 300 ms).
fn held(stream: &mut TcpStream) -> bool {
    stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    matches!(stream.read(&mut [0u8; 256]), Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
}

/// Whether the server refuses `stream` within a second: a 503 and then the end, or the end.
fn refused(stream: &mut TcpStream) -> bool {
    stream.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut answer = Vec::new();
    match stream.read_to_end(&mut answer) {
        Ok(_) => answer.is_empty() || answer.starts_with(b"HTTP/1.1 503"),
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

#[test]
fn connections_past_the_per_client_or_the_total_cap_are_refused_at_once_and_a_persons_still_answers() {
    for (cap, per_client, total) in [("per-client", 3, 100), ("total", 100, 3)] {
        let served = serve("", true, false, |options| {
            options.max_connections_per_client = per_client;
            options.max_connections = total;
        });
        let (address, port) = (served.address, served.address.port());
        let mut person = TcpStream::connect(address).unwrap();
        assert_eq!(get_kept_alive(&mut person, port), 200, "{cap}");
        let mut slow_ones: Vec<TcpStream> = (0..2).map(|_| slow(address)).collect();
        for stream in &mut slow_ones {
            assert!(held(stream), "{cap}: a connection under the cap is kept");
        }
        let started = Instant::now();
        for _ in 0..3 {
            let mut extra = slow(address);
            assert!(refused(&mut extra), "{cap} cap of 3: a 4th connection is refused");
        }
        assert!(started.elapsed() < Duration::from_secs(2), "{cap}: refused at once ({:?} for three)", started.elapsed());
        assert_eq!(get_kept_alive(&mut person, port), 200, "{cap}: the person's connection still answers");
        // A closed connection gives its place back.
        drop(slow_ones.pop());
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut again = slow(address);
        while !held(&mut again) {
            assert!(Instant::now() < deadline, "{cap}: the place of a closed connection is never given back");
            std::thread::sleep(Duration::from_millis(50));
            again = slow(address);
        }
    }
}
