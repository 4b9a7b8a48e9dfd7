//! Web UI benchmark (`paravault web`, docs/web.md): the dashboard, a note page and a search page
//! (p50/p99, in-process through the Router without a socket) next to the floor measured in the
//! same run — `/healthz`, a no-op handler behind the same layers (headers, limits, timeout) —
//! and a bounded loopback load test: 64 concurrent HTTP/1 clients (hyper) for a fixed time
//! against note pages over a real socket, reporting throughput, p50/p99 and errors (must be 0).
//! Run: `cargo bench --locked --profile dev --bench web` (`PARAVAULT_BENCH_WEB_NOTES=100000`,
//! `PARAVAULT_BENCH_RUNS=40`, `PARAVAULT_BENCH_WEB_LOAD_SECS=30`, `PARAVAULT_BENCH_WEB_CLIENTS=64`).

// Bench fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

#[path = "support/mod.rs"]
mod support;

use std::net::SocketAddr;
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
    let request = Request::get(uri).header(header::COOKIE, cookie).body(Body::empty()).unwrap();
    let start = Instant::now();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let _ = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, start.elapsed())
}

/// Logs in through the Router; the session cookie.
async fn log_in(app: &Router) -> String {
    let form = app.clone().oneshot(Request::get("/login").body(Body::empty()).unwrap()).await.unwrap();
    let cookie = form.headers().get(header::SET_COOKIE).unwrap().to_str().unwrap().split(';').next().unwrap().to_string();
    let body = String::from_utf8(axum::body::to_bytes(form.into_body(), usize::MAX).await.unwrap().to_vec()).unwrap();
    let at = body.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
    let csrf = &body[at..at + 64];
    let fields = format!("csrf={csrf}&approver=alice&secret={}", SECRET.replace(' ', "+"));
    let done = app
        .clone()
        .oneshot(
            Request::post("/login")
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

/// `clients` HTTP/1 keep-alive connections, each requesting note pages in turn for `seconds`.
async fn load_test(app: Router, cookie: String, paths: Arc<Vec<String>>, clients: usize, seconds: u64) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await.unwrap();
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

fn main() {
    let notes = env_usize("PARAVAULT_BENCH_WEB_NOTES", 2000);
    let runs = env_usize("PARAVAULT_BENCH_RUNS", 40);
    let clients = env_usize("PARAVAULT_BENCH_WEB_CLIENTS", 64);
    let seconds = env_usize("PARAVAULT_BENCH_WEB_LOAD_SECS", 30) as u64;
    println!("web bench: {notes} notes, {runs} runs per page, load test {clients} clients x {seconds} s");
    let started = Instant::now();
    let root = support::fresh_generated_vault(notes);
    let vault = Vault::open(&root, VaultOptions::default()).expect("open the generated vault");
    vault.sync_vault(&SyncParams::default()).expect("sync");
    println!("generated, opened and synced in {:.1} s", started.elapsed().as_secs_f64());
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
    };
    let app = web::router(vault, &options);
    let paths: Arc<Vec<String>> = Arc::new((0..notes.min(5000)).map(|i| support::note_rel_path(notes, i)).collect());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let cookie = log_in(&app).await;
        let floor = measure(&app, "floor: /healthz (no-op handler, same layers)", "/healthz", &cookie, runs * 5, None).await;
        measure(&app, "note page /note/<path>", &format!("/note/{}", paths[notes.min(5000) / 2]), &cookie, runs, Some(floor)).await;
        measure(&app, "search page /search?q=…&mode=fts", "/search?q=garden+river&mode=fts", &cookie, runs, Some(floor)).await;
        measure(&app, "dashboard / (doctor, approvals, receipts, tasks)", "/", &cookie, runs.clamp(3, 10), Some(floor)).await;
        load_test(app, cookie, paths, clients, seconds).await;
    });
}
