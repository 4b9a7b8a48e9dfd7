//! Web UI benchmark (`paravault web`, docs/web.md): the dashboard, a note page, a search page,
//! browse (the root and a folder) and the link graph (whole vault and a note's neighbourhood)
//! (p50/p99, in-process through the Router without a socket) next to the floor measured in the
//! same run — `/healthz`, a no-op handler behind the same layers (headers, limits, timeout) —
//! and a bounded loopback load test: 64 concurrent HTTP/1 clients (hyper) for a fixed time
//! against note pages over a real socket, reporting throughput, p50/p99 and errors (must be 0).
//! Then the slow-connection flood (issue 45 item 6) against the `paravault web` binary under a
//! descriptor limit of 256: a person's keep-alive connection opened first, then
//! `PARAVAULT_BENCH_WEB_FLOOD` (1,000) connections from 127.0.0.1 that each send part of their
//! headers and stop; it reports how many the server holds and how many it refuses, the server's
//! RSS before and after, and `GET /` on the person's connection before and during the flood
//! (p50/p99), once with the default caps and once with the per-client cap lifted (the total cap
//! binds); then, 31 s after the flood began, how many are still open (the 30 s header deadline)
//! and whether a new connection is answered.
//! The generated vault gets `PARAVAULT_BENCH_WEB_RECEIPTS` (20,000) receipts over 120 days for
//! the charts page.
//! Run: `cargo bench --locked --profile dev --bench web` (`PARAVAULT_BENCH_WEB_NOTES=100000`,
//! `PARAVAULT_BENCH_RUNS=40`, `PARAVAULT_BENCH_WEB_LOAD_SECS=30`, `PARAVAULT_BENCH_WEB_CLIENTS=64`,
//! `PARAVAULT_BENCH_WEB_FLOOD=1000`; `PARAVAULT_BENCH_WEB_FLOOD_ONLY=1` runs only the flood;
//! `PARAVAULT_BENCH_WEB_PREVIOUS_BIN=<path>` floods an earlier `paravault` binary first, paired).

// Bench fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use paravault::approvals::secrets;
use paravault::retrieval::SyncParams;
use paravault::vault::{Vault, VaultOptions};
use paravault::web::{self, WebOptions};
use tower::ServiceExt;

const SECRET: &str = "correct horse battery staple";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

async fn oneshot(app: &Router, uri: &str, cookie: &str) -> (StatusCode, Duration) {
    let request = Request::get(uri).header(header::HOST, "127.0.0.1").header(header::COOKIE, cookie).body(Body::empty()).unwrap();
    let start = Instant::now();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let _ = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, start.elapsed())
}

/// Logs in through the Router; the session cookie.
async fn log_in(app: &Router) -> String {
    let form = app.clone().oneshot(Request::get("/login").header(header::HOST, "127.0.0.1").body(Body::empty()).unwrap()).await.unwrap();
    let cookie = form.headers().get(header::SET_COOKIE).unwrap().to_str().unwrap().split(';').next().unwrap().to_string();
    let body = String::from_utf8(axum::body::to_bytes(form.into_body(), usize::MAX).await.unwrap().to_vec()).unwrap();
    let at = body.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
    let csrf = &body[at..at + 64];
    let fields = format!("csrf={csrf}&approver=alice&secret={}", SECRET.replace(' ', "+"));
    let done = app
        .clone()
        .oneshot(
            Request::post("/login")
                .header(header::HOST, "127.0.0.1")
                .header(header::COOKIE, &cookie)
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(fields))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(done.status(), StatusCode::SEE_OTHER, "login");
    done.headers().get(header::SET_COOKIE).unwrap().to_str().unwrap().split(';').next().unwrap().to_string()
}

async fn measure(app: &Router, label: &str, uri: &str, cookie: &str, runs: usize, floor: Option<Duration>) -> Duration {
    let (status, _) = oneshot(app, uri, cookie).await; // warm
    assert_eq!(status, StatusCode::OK, "{uri}");
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (status, took) = oneshot(app, uri, cookie).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        samples.push(took);
    }
    support::stats::report(label, samples, floor)
}

/// A receipt history for the charts: `count` chained, content-free ok receipts (every tenth an
/// approved write of three notes) spread evenly over the last `days` days, written as the
/// receipt log before the vault opens (the generated vault has none).
fn write_receipt_history(root: &std::path::Path, count: usize, days: i64) {
    use std::io::Write;
    if count == 0 {
        return;
    }
    let now = chrono::Utc::now();
    let span = chrono::Duration::days(days).num_seconds();
    let mut prev = "0".repeat(64);
    std::fs::create_dir_all(root.join(".paravault")).unwrap();
    let mut out = std::io::BufWriter::new(std::fs::File::create(root.join(".paravault").join("receipts.jsonl")).unwrap());
    for i in 0..count {
        let at = now - chrono::Duration::seconds(span - span * i as i64 / count as i64);
        let mut receipt = serde_json::json!({
            "at": at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true), "lint_orphans": (i % 3).to_string(),
            "notes_excluded": (i % 17).to_string(), "notes_scanned": (1000 + i).to_string(), "operation": "ingest_note",
            "path": format!("03_Resources/r-{i}.md"), "prev": prev, "receipt_schema": "power.receipt.v1", "seq": i + 1, "status": "ok",
        });
        if i % 10 == 0 {
            receipt["approval"] = serde_json::json!({"approver": "alice", "channel": "web"});
            receipt["notes"] = serde_json::json!([{"path": "a.md", "before_sha256": "", "after_sha256": ""}, {"path": "b.md", "before_sha256": "", "after_sha256": ""}, {"path": "c.md", "before_sha256": "", "after_sha256": ""}]);
        }
        let line = serde_json::to_vec(&receipt).unwrap();
        prev = blake3::hash(&line).to_hex().to_string();
        out.write_all(&line).unwrap();
        out.write_all(b"\n").unwrap();
    }
    out.flush().unwrap();
}

/// `clients` HTTP/1 keep-alive connections, each requesting note pages in turn for `seconds`.
async fn load_test(app: Router, options: WebOptions, cookie: String, paths: Arc<Vec<String>>, clients: usize, seconds: u64) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        web::serve_connections(listener, app, &options, std::future::pending()).await.unwrap();
    });
    let errors = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in 0..clients {
        let (cookie, paths, errors) = (cookie.clone(), Arc::clone(&paths), Arc::clone(&errors));
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(address).await.unwrap();
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
            tokio::spawn(connection);
            let mut samples = Vec::new();
            let mut i = client;
            while Instant::now() < deadline {
                let uri = format!("/note/{}", paths[i % paths.len()]);
                i += clients;
                let request = Request::get(uri)
                    .header(header::HOST, address.to_string())
                    .header(header::COOKIE, &cookie)
                    .body(Empty::<Bytes>::new())
                    .unwrap();
                let start = Instant::now();
                let ok = match sender.send_request(request).await {
                    Ok(response) => {
                        let status = response.status();
                        response.into_body().collect().await.is_ok() && status == StatusCode::OK
                    }
                    Err(_) => false,
                };
                if ok {
                    samples.push(start.elapsed());
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            samples
        }));
    }
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed();
    server.abort();
    let errors = errors.load(Ordering::Relaxed);
    println!(
        "load test: {clients} clients x {seconds} s on 127.0.0.1: {} requests ({:.0}/s), {errors} errors",
        samples.len(),
        samples.len() as f64 / elapsed.as_secs_f64()
    );
    support::stats::report("load test note page (per request, under load)", samples, None);
    assert_eq!(errors, 0, "the load test had errors");
}

/// The resident set of process `pid` in KiB (`VmRSS` in /proc).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

/// `GET /` on a kept-alive connection, reading exactly its answer: the status and the time.
fn get_root(stream: &mut TcpStream) -> (u16, Duration) {
    let start = Instant::now();
    stream.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut buffer).unwrap_or(0);
        if n == 0 {
            return (0, start.elapsed());
        }
        answer.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&answer);
        let Some(end) = text.find("\r\n\r\n") else { continue };
        let head = text[..end].to_lowercase();
        let length = head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse::<usize>().ok());
        let done = length.map_or_else(|| text.ends_with("\r\n0\r\n\r\n"), |length| answer.len() >= end + 4 + length);
        if done {
            return (text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0), start.elapsed());
        }
    }
}

/// A status for the report (0: none within the 5 s read timeout).
fn answer_text(status: u16) -> String {
    if status == 0 { "no answer within 5 s".into() } else { status.to_string() }
}

/// `runs` timed `GET /` on `stream`: the times of the 200s and the other statuses (0: no
/// answer within the stream's read timeout, or the connection closed; sampling stops there).
fn sample_root(stream: &mut TcpStream, runs: usize) -> (Vec<Duration>, Vec<u16>) {
    let (mut times, mut others) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        match get_root(stream) {
            (200, took) => times.push(took),
            (0, _) => {
                others.push(0);
                break;
            }
            (status, _) => others.push(status),
        }
    }
    (times, others)
}

/// One flood: `binary web --read-only` (plus `extra`) on `root` under `ulimit -n 256`, a
/// person's connection, then `count` slow-header connections from 127.0.0.1.
fn flood(binary: &str, root: &Path, count: usize, runs: usize, label: &str, extra: &[&str]) {
    let config = support::bench_data_dir().join("work").join("web-flood-config");
    let _ = std::fs::remove_dir_all(&config);
    std::fs::create_dir_all(&config).unwrap();
    let mut child = std::process::Command::new("sh")
        .args(["-c", "ulimit -n 256 && exec \"$0\" \"$@\"", binary, "--vault"])
        .arg(root)
        .args(["web", "--bind", "127.0.0.1:0", "--read-only"])
        .args(extra)
        .env("PARAVAULT_CONFIG_DIR", &config)
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let address: SocketAddr = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "paravault web printed no address");
        if let Some(a) = line.split("http://").nth(1).and_then(|r| r.split('/').next()).and_then(|a| a.parse().ok()) {
            break a;
        }
    };
    let pid = child.id();
    let mut person = TcpStream::connect(address).unwrap();
    person.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let before = sample_root(&mut person, runs);
    let rss_before = rss_kib(pid);
    let started = Instant::now();
    let mut slow: Vec<TcpStream> = Vec::with_capacity(count);
    // A server that stops accepting (out of descriptors) fills its backlog and then connects
    // hang: each gets 250 ms, and after 20 in a row fail the rest are not tried.
    let (mut connect_failed, mut in_a_row) = (0, 0);
    for _ in 0..count {
        if in_a_row == 20 {
            break;
        }
        match TcpStream::connect_timeout(&address, Duration::from_millis(250)) {
            Ok(mut stream) => {
                in_a_row = 0;
                let _ = stream.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1\r\n");
                slow.push(stream);
            }
            Err(_) => (connect_failed, in_a_row) = (connect_failed + 1, in_a_row + 1),
        }
    }
    let not_tried = count - slow.len() - connect_failed;
    let opened = started.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let (mut held, mut refused) = (0, 0);
    for stream in &mut slow {
        stream.set_nonblocking(true).unwrap();
        match stream.read(&mut [0u8; 256]) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => held += 1,
            _ => refused += 1,
        }
    }
    let during = sample_root(&mut person, runs);
    let fresh = TcpStream::connect_timeout(&address, Duration::from_secs(1)).ok().map(|mut s| {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        get_root(&mut s).0
    });
    let rss_after = rss_kib(pid);
    println!(
        "flood ({label}): {count} slow-header connections from 127.0.0.1 opened in {:.2} s under `ulimit -n 256`: {held} held, {refused} refused (503 + close), {connect_failed} connects timed out, {not_tried} not tried; server RSS {:.1} MiB before, {:.1} MiB after; a new connection's GET /: {}",
        opened.as_secs_f64(),
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0,
        fresh.map_or("no connection".into(), answer_text),
    );
    for (when, (times, others)) in [("before", before), ("during", during)] {
        if !others.is_empty() {
            println!("GET / on the person's connection, {when} ({label}): {} answers not 200: {others:?}", others.len());
        }
        if !times.is_empty() {
            support::stats::report(&format!("GET / on the person's connection, {when} ({label})"), times, None);
        }
    }
    // Past the 30 s header deadline the held connections are closed and a new one is answered.
    std::thread::sleep((started + Duration::from_secs(31)).saturating_duration_since(Instant::now()));
    let still_open = slow
        .iter_mut()
        .filter_map(|s| matches!(s.read(&mut [0u8; 256]), Err(e) if e.kind() == ErrorKind::WouldBlock).then_some(()))
        .count();
    let after = TcpStream::connect_timeout(&address, Duration::from_secs(1)).ok().map(|mut s| {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        get_root(&mut s).0
    });
    println!(
        "flood ({label}), 31 s after it began: {still_open} of the slow connections still open; a new connection's GET /: {}; server RSS {:.1} MiB",
        after.map_or("no connection".into(), answer_text),
        rss_kib(pid) as f64 / 1024.0
    );
    drop(slow);
    let _ = child.kill();
    let _ = child.wait();
}

/// Raises this process's descriptor soft limit to hold `count` client sockets.
fn raise_fd_limit(count: usize) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let wanted = (count as u64 + 256).min(limit.maximum.unwrap_or(u64::MAX));
    if limit.current.is_some_and(|current| current < wanted) {
        setrlimit(Resource::Nofile, rustix::process::Rlimit { current: Some(wanted), maximum: limit.maximum })
            .expect("raise the descriptor limit");
    }
}

fn main() {
    let notes = env_usize("PARAVAULT_BENCH_WEB_NOTES", 2000);
    let runs = env_usize("PARAVAULT_BENCH_RUNS", 40);
    let clients = env_usize("PARAVAULT_BENCH_WEB_CLIENTS", 64);
    let seconds = env_usize("PARAVAULT_BENCH_WEB_LOAD_SECS", 30) as u64;
    let flood_count = env_usize("PARAVAULT_BENCH_WEB_FLOOD", 1000);
    let flood_only = std::env::var_os("PARAVAULT_BENCH_WEB_FLOOD_ONLY").is_some();
    println!("web bench: {notes} notes, {runs} runs per page, load test {clients} clients x {seconds} s");
    let started = Instant::now();
    let root = support::fresh_generated_vault(notes);
    let receipts = env_usize("PARAVAULT_BENCH_WEB_RECEIPTS", 20_000);
    write_receipt_history(&root, receipts, 120);
    let vault = Vault::open(&root, VaultOptions::default()).expect("open the generated vault");
    vault.sync_vault(&SyncParams::default()).expect("sync");
    println!("generated, opened and synced in {:.1} s", started.elapsed().as_secs_f64());
    if flood_count > 0 {
        raise_fd_limit(flood_count);
        if let Ok(previous) = std::env::var("PARAVAULT_BENCH_WEB_PREVIOUS_BIN") {
            flood(&previous, &root, flood_count, runs, "previous binary", &[]);
        }
        let binary = env!("CARGO_BIN_EXE_paravault");
        flood(binary, &root, flood_count, runs, "default caps: 128 in all, 32 per client", &[]);
        flood(binary, &root, flood_count, runs, "per-client cap lifted: 128 in all", &["--max-connections-per-client", "100000"]);
    }
    if flood_only {
        return;
    }
    let config = support::bench_data_dir().join("work").join("web-config");
    let _ = std::fs::remove_dir_all(&config);
    std::fs::create_dir_all(&config).unwrap();
    secrets::add_approver(&config, "alice", SECRET).unwrap();
    let options = WebOptions {
        bind: SocketAddr::from(([127, 0, 0, 1], 0)),
        read_only: false,
        approvers_dir: config,
        request_timeout: Duration::from_secs(60),
        login_attempts_per_minute: 5,
        public_hosts: Vec::new(),
        max_connections: 128,
        max_connections_per_client: 128,
    };
    let app = web::router(vault, &options);
    let paths: Arc<Vec<String>> = Arc::new((0..notes.min(5000)).map(|i| support::note_rel_path(notes, i)).collect());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let held_root = root.clone();
    runtime.block_on(async move {
        let cookie = log_in(&app).await;
        let floor = measure(&app, "floor: /healthz (no-op handler, same layers)", "/healthz", &cookie, runs * 5, None).await;
        measure(&app, "note page /note/<path>", &format!("/note/{}", paths[notes.min(5000) / 2]), &cookie, runs, Some(floor)).await;
        measure(&app, "search page /search?q=…&mode=fts", "/search?q=garden+river&mode=fts", &cookie, runs, Some(floor)).await;
        measure(&app, "dashboard / (doctor, approvals, receipts, tasks)", "/", &cookie, runs, Some(floor)).await;
        measure(&app, "browse root /browse", "/browse", &cookie, runs, Some(floor)).await;
        let folder = paths[0].rsplit_once('/').map_or("", |(dir, _)| dir);
        measure(&app, "browse folder /browse/<dir>", &format!("/browse/{folder}"), &cookie, runs, Some(floor)).await;
        measure(&app, "graph /graph (whole vault, bounded)", "/graph", &cookie, runs, Some(floor)).await;
        measure(&app, "charts /charts (90 days of receipts, 30 folders)", "/charts", &cookie, runs, Some(floor)).await;
        measure(&app, "switcher /switch/titles?q=a (JSON, 20 of many)", "/switch/titles?q=a", &cookie, runs, Some(floor)).await;
        measure(&app, "switcher page /switch?q=ga", "/switch?q=ga", &cookie, runs, Some(floor)).await;
        measure(
            &app,
            "graph /graph?note=<path> (neighbourhood)",
            &format!("/graph?note={}", paths[notes.min(5000) / 2]),
            &cookie,
            runs,
            Some(floor),
        )
        .await;
        // The same pages while another holder has the writer lock (a long `sync --dense`): they
        // answer from the published state and never wait (issue 46).
        let held = support::hold_writer_lock(&held_root);
        measure(&app, "note page, writer lock held", &format!("/note/{}", paths[notes.min(5000) / 2]), &cookie, runs, Some(floor)).await;
        measure(&app, "search page, writer lock held", "/search?q=garden+river&mode=fts", &cookie, runs, Some(floor)).await;
        measure(&app, "dashboard, writer lock held", "/", &cookie, runs, Some(floor)).await;
        drop(held);
        load_test(app, options, cookie, paths, clients, seconds).await;
    });
}
