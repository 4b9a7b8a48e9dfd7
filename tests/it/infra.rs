//! `infra_action` against a real broker on a temporary Unix socket (real listener, real framing).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use paravault::infra::InfraRequest;
use paravault::vault::{Vault, VaultOptions};
use serde_json::{Value, json};

fn vault_with_socket(socket: Option<&Path>, timeout_ms: u64) -> (tempfile::TempDir, Vault) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".paravault")).unwrap();
    let socket = socket.map_or("null".to_string(), |s| format!("'{}'", s.display()));
    std::fs::write(dir.path().join(".paravault/policy.yaml"), format!("infra:\n  broker_socket: {socket}\n  timeout_ms: {timeout_ms}\n"))
        .unwrap();
    let vault = Vault::open(dir.path(), VaultOptions::default()).unwrap();
    (dir, vault)
}

/// `infra_action`'s result as the JSON the tool sends.
fn infra(vault: &Vault, request: InfraRequest) -> paravault::Result<Value> {
    vault.infra_action(request).map(|result| serde_json::to_value(result).unwrap())
}

fn req(value: Value) -> InfraRequest {
    serde_json::from_value(value).unwrap()
}

/// Binds a broker socket and answers `connections` requests with `answer(request)` (a raw
/// line, without the newline). Returns the socket path and the received requests.
pub(crate) fn broker(
    dir: &Path,
    connections: usize,
    answer: impl Fn(&Value) -> String + Send + 'static,
) -> (PathBuf, std::thread::JoinHandle<Vec<Value>>) {
    let path = dir.join("broker.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for _ in 0..connections {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            assert!(line.ends_with('\n'), "one JSON line");
            let request: Value = serde_json::from_str(&line).unwrap();
            let mut reply = answer(&request);
            reply.push('\n');
            let _ = (&stream).write_all(reply.as_bytes());
            seen.push(request);
        }
        seen
    });
    (path, handle)
}

pub(crate) fn response(request: &Value, body: Value) -> String {
    let mut out = json!({"schema": "power.infra-response.v1", "request_digest": request["request_digest"], "nonce": request["nonce"]});
    for (k, v) in body.as_object().unwrap() {
        out[k] = v.clone();
    }
    out.to_string()
}

pub(crate) fn receipt() -> Value {
    json!({"receipt": {"schema": "power.infra-receipt.v1", "run_id": "run_abc", "files": 3, "bytes": 42, "duration_ms": 10, "exit_category": "ok"}})
}

fn reason(result: &Value) -> &str {
    assert_eq!(result["status"], "blocked", "{result}");
    result["block"]["reason_code"].as_str().unwrap()
}

#[test]
fn absent_or_unreachable_broker_is_missing_execution_capability() {
    let sockdir = tempfile::tempdir().unwrap();
    let (_dir, vault) = vault_with_socket(Some(&sockdir.path().join("nobody-listens.sock")), 1000);
    let result = infra(&vault, req(json!({"operation": "status"}))).unwrap();
    assert_eq!(reason(&result), "MISSING_EXECUTION_CAPABILITY");
    assert_eq!(result["block"]["source"], "client");
    if std::env::var_os("PARAVAULT_INFRA_SOCKET").is_none() {
        let (_dir, vault) = vault_with_socket(None, 1000);
        let result = infra(&vault, req(json!({"operation": "probe", "target": "backup-1"}))).unwrap();
        assert_eq!(reason(&result), "MISSING_EXECUTION_CAPABILITY");
    }
}

#[test]
fn a_receipt_is_ok_and_the_request_is_well_formed() {
    let sockdir = tempfile::tempdir().unwrap();
    let (socket, broker) = broker(sockdir.path(), 1, |r| response(r, receipt()));
    let (_dir, vault) = vault_with_socket(Some(&socket), 2000);
    let result = infra(
        &vault,
        req(json!({"operation": "replicate", "target": "nas-1", "profile": "nightly", "idempotency_key": "k-1", "approval_ref": "appr:7"})),
    )
    .unwrap();
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["receipt"]["run_id"], "run_abc");
    let seen = broker.join().unwrap();
    let request = &seen[0];
    assert_eq!(request["schema"], "power.infra-request.v1");
    assert_eq!(request["operation"], "replicate");
    assert_eq!(request["target"], "nas-1");
    assert_eq!(request["run_id"], Value::Null);
    assert_eq!(request["nonce"].as_str().unwrap().len(), 32);
    // The digest covers the request fields (everything but digest and nonce).
    let mut fields = request.clone();
    fields.as_object_mut().unwrap().remove("request_digest");
    fields.as_object_mut().unwrap().remove("nonce");
    assert_eq!(request["request_digest"], paravault::handoff::journal::digest(&fields));
    assert_eq!(result["request_digest"], request["request_digest"]);
}

#[test]
fn a_broker_block_passes_through_with_its_code() {
    let sockdir = tempfile::tempdir().unwrap();
    let (socket, broker) = broker(sockdir.path(), 2, |r| {
        let code = if r["operation"] == "replicate" { "APPROVAL_REQUIRED" } else { "HOST_IDENTITY_MISMATCH" };
        response(r, json!({"block": {"schema": "power.infra-block.v1", "reason_code": code, "detail": "operator policy"}}))
    });
    let (_dir, vault) = vault_with_socket(Some(&socket), 2000);
    let blocked = infra(&vault, req(json!({"operation": "replicate", "idempotency_key": "k"}))).unwrap();
    assert_eq!(reason(&blocked), "APPROVAL_REQUIRED");
    assert_eq!(blocked["block"]["detail"], "operator policy");
    let probe = infra(&vault, req(json!({"operation": "probe", "target": "nas-1"}))).unwrap();
    assert_eq!(reason(&probe), "HOST_IDENTITY_MISMATCH");
    broker.join().unwrap();
}

#[test]
fn protocol_violations_are_protocol_errors() {
    type Answer = Box<dyn Fn(&Value) -> String + Send>;
    let cases: Vec<(&str, Answer)> = vec![
        (
            "digest mismatch",
            Box::new(|r| {
                let mut v: Value = serde_json::from_str(&response(r, receipt())).unwrap();
                v["request_digest"] = json!("0".repeat(64));
                v.to_string()
            }),
        ),
        (
            "nonce mismatch",
            Box::new(|r| {
                let mut v: Value = serde_json::from_str(&response(r, receipt())).unwrap();
                v["nonce"] = json!("ffffffffffffffffffffffffffffffff");
                v.to_string()
            }),
        ),
        (
            "forbidden key at depth",
            Box::new(|r| {
                response(r, json!({"receipt": {"schema": "power.infra-receipt.v1", "details": [{"stderr": "Permission denied"}]}}))
            }),
        ),
        (
            "forbidden top-level key",
            Box::new(|r| {
                let mut v: Value = serde_json::from_str(&response(r, receipt())).unwrap();
                v["token"] = json!("secret");
                v.to_string()
            }),
        ),
        ("unknown reason code", Box::new(|r| response(r, json!({"block": {"schema": "power.infra-block.v1", "reason_code": "NOPE"}})))),
        (
            "both receipt and block",
            Box::new(|r| {
                response(r, json!({"receipt": receipt()["receipt"], "block": {"schema": "power.infra-block.v1", "reason_code": "TIMEOUT"}}))
            }),
        ),
        ("wrong schema", Box::new(|r| response(r, receipt()).replace("power.infra-response.v1", "power.infra-response.v2"))),
        ("not JSON", Box::new(|_| "hello".to_string())),
        ("oversized", Box::new(|r| response(r, json!({"receipt": {"schema": "power.infra-receipt.v1", "pad": "x".repeat(70_000)}})))),
    ];
    for (name, answer) in cases {
        let sockdir = tempfile::tempdir().unwrap();
        let (socket, broker) = broker(sockdir.path(), 1, answer);
        let (_dir, vault) = vault_with_socket(Some(&socket), 2000);
        let result = infra(&vault, req(json!({"operation": "status"}))).unwrap();
        assert_eq!(reason(&result), "PROTOCOL_ERROR", "{name}: {result}");
        assert!(result.get("receipt").is_none(), "{name}");
        assert!(!result.to_string().contains("Permission denied") && !result.to_string().contains("secret"), "{name}: nothing leaks");
        broker.join().unwrap();
    }
}

#[test]
fn a_silent_broker_times_out() {
    let sockdir = tempfile::tempdir().unwrap();
    let path = sockdir.path().join("silent.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let holder = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(800));
        drop(stream);
    });
    let (_dir, vault) = vault_with_socket(Some(&path), 200);
    let result = infra(&vault, req(json!({"operation": "status"}))).unwrap();
    assert_eq!(reason(&result), "TIMEOUT");
    holder.join().unwrap();
}

/// Reference §9.2: the client checks the broker's uid. A process on the socket that runs as
/// another uid than `infra.broker_uid` is sent nothing, and the result says why; the same
/// listener passes when the policy names the uid it runs as.
#[test]
fn a_broker_running_as_another_uid_is_sent_nothing() {
    let sockdir = tempfile::tempdir().unwrap();
    let path = sockdir.path().join("impostor.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let listening = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut received = Vec::new();
        std::io::Read::read_to_end(&mut stream, &mut received).unwrap();
        received
    });
    let me = rustix::process::geteuid().as_raw();
    let other = if me == 4242 { 4243 } else { 4242 };
    let (dir, _) = vault_with_socket(Some(&path), 2000);
    let policy = dir.path().join(".paravault/policy.yaml");
    let text = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(&policy, format!("{text}  broker_uid: {other}\n")).unwrap();
    let vault = Vault::open(dir.path(), VaultOptions::default()).unwrap();
    let result = infra(&vault, req(json!({"operation": "replicate", "target": "nas-1", "idempotency_key": "k-1"}))).unwrap();
    assert_eq!(reason(&result), "PROTOCOL_ERROR");
    let detail = result["block"]["detail"].as_str().unwrap();
    assert!(detail.contains(&format!("uid {me}")) && detail.contains(&format!("uid {other}")), "{detail}");
    assert_eq!(result["block"]["source"], "client");
    assert!(listening.join().unwrap().is_empty(), "the request reached a process running as the wrong uid");

    // Named explicitly, this process's own uid is the broker's.
    let (socket, broker) = broker(sockdir.path(), 1, |r| response(r, receipt()));
    let (dir, _) = vault_with_socket(Some(&socket), 2000);
    let policy = dir.path().join(".paravault/policy.yaml");
    let text = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(&policy, format!("{text}  broker_uid: {me}\n")).unwrap();
    let vault = Vault::open(dir.path(), VaultOptions::default()).unwrap();
    let result = infra(&vault, req(json!({"operation": "status"}))).unwrap();
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(broker.join().unwrap().len(), 1);
}

#[test]
fn invalid_requests_are_refused_before_any_connection() {
    let sockdir = tempfile::tempdir().unwrap();
    let path = sockdir.path().join("watch.sock");
    let listener = UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let (_dir, vault) = vault_with_socket(Some(&path), 1000);
    for bad in [
        json!({"operation": "probe", "target": "host; rm -rf /"}),
        json!({"operation": "probe", "profile": ""}),
        json!({"operation": "probe", "target": "x".repeat(129)}),
        json!({"operation": "replicate", "target": "nas-1"}),
        json!({"operation": "verify"}),
        json!({"operation": "status", "approval_ref": "appr:1"}),
        json!({"operation": "status", "task_id": "t1"}),
        json!({"operation": "status", "expected_revision": 3}),
        json!({"operation": "verify", "run_id": "../../etc"}),
    ] {
        let error = infra(&vault, req(bad.clone())).unwrap_err();
        assert_eq!(error.code(), "invalid_argument", "{bad}: {error}");
    }
    assert!(listener.accept().is_err(), "no connection was made");
    for unknown in
        [json!({"operation": "status", "host": "10.0.0.1"}), json!({"operation": "ssh"}), json!({"operation": "status", "command": "ls"})]
    {
        assert!(serde_json::from_value::<InfraRequest>(unknown).is_err());
    }
}
