//! `paravault broker` driven as an agent meets it: a real broker process on a temporary
//! socket, a replica with a real bare git remote, and `infra_action` called through the MCP
//! server. Status, probe, the dry-run admission, an explicit approval made by a person, its
//! replay refused, idempotent replays, verify, the blocks of each refusal, and never a URL or
//! a path of the remote in an answer. Then the socket's life: a live broker is never
//! displaced, a stale socket is replaced, a stop removes it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::mcp::Server;
use crate::support::{paravault, paravault_with_input};

const SECRET: &str = "correct horse battery staple";

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).env("GIT_TERMINAL_PROMPT", "0").output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// `paravault --json …`, asserting the exit code; its JSON.
fn pv(vault: &Path, args: &[&str], exit: i32) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = paravault(vault, &all);
    let said = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(exit), "paravault {args:?}: {said}");
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn ingest(vault: &Path, name: &str, title: &str) {
    pv(vault, &["ingest", name, "--title", title, "--description", &format!("{title} note"), "--content", "Body words."], 0);
}

fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// A replica `a` of a bare remote, in sync, whose agent waits long enough for a replicate.
fn replica(dir: &Path, policy: &str) -> PathBuf {
    git(dir, &["init", "-q", "--bare", "remote.git"]);
    let a = dir.join("a");
    pv(&a, &["init"], 0);
    std::fs::write(a.join(".paravault/policy.yaml"), format!("infra:\n  timeout_ms: 120000\n{policy}")).unwrap();
    pv(&a, &["remote", "add", "origin", dir.join("remote.git").to_str().unwrap()], 0);
    ingest(&a, "03_Resources/alpha.md", "Alpha");
    assert_eq!(pv(&a, &["replicate"], 0)["pushed"], true);
    a
}

fn config(me: u32) -> String {
    format!(
        "schema: paravault.broker.v1\ntargets:\n  backup-1:\n    remote: origin\n    approval: explicit\n    dry_run_policy: required\n    \
         principals: ['uid:{me}']\n    profiles:\n      nightly: {{ approval: standing, dry_run_policy: standing }}\n      careful: {{ dry_run_policy: standing }}\n  others:\n    \
         remote: origin\n    approval: standing\n    dry_run_policy: standing\n    principals: ['uid:{}']\n",
        me.wrapping_add(4242)
    )
}

/// A running `paravault broker`; dropped, it is killed.
struct Broker {
    child: Child,
}

impl Broker {
    /// Starts it and waits for its ready line.
    fn start(vault: &Path, socket: &Path, config: &Path) -> (Broker, Value) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_paravault"))
            .arg("--vault")
            .arg(vault)
            .arg("broker")
            .arg("--socket")
            .arg(socket)
            .arg("--config")
            .arg(config)
            .env_remove("PARAVAULT_VAULT_DIR")
            .env_remove("POWER_VAULT_DIR")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let ready: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("no ready line ({e}): {line:?}"));
        (Broker { child }, ready)
    }

    /// SIGTERM; the exit status.
    fn stop(mut self) -> std::process::ExitStatus {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(std::time::Instant::now() < deadline, "the broker did not stop on SIGTERM");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An MCP agent of `vault` whose `infra_action` goes to `socket`; every answer's text is kept.
struct Agent {
    server: Server,
    seen: Vec<String>,
}

impl Agent {
    fn start(vault: &Path, socket: &Path) -> Agent {
        let mut server = Server::start_with_env(vault, &[], &[("PARAVAULT_INFRA_SOCKET", socket)]);
        server.initialize();
        Agent { server, seen: Vec::new() }
    }

    fn infra(&mut self, args: Value) -> Value {
        let result = self.server.call("infra_action", args.clone());
        self.seen.push(result.to_string());
        assert_eq!(result["isError"], false, "infra_action({args}): {result}");
        result["structuredContent"].clone()
    }

    fn ok(&mut self, args: Value) -> Value {
        let result = self.infra(args.clone());
        assert_eq!(result["status"], "ok", "{args}: {result}");
        assert_eq!(result["receipt"]["schema"], "power.infra-receipt.v1");
        result["receipt"].clone()
    }

    fn blocked(&mut self, args: Value, code: &str) -> Value {
        let result = self.infra(args.clone());
        assert_eq!(result["status"], "blocked", "{args}: {result}");
        assert_eq!(result["block"]["reason_code"], code, "{args}: {result}");
        assert_eq!(result["block"]["source"], "broker", "{result}");
        result["block"].clone()
    }
}

/// The remote's branch head (asked of the bare repository itself).
fn remote_head(dir: &Path) -> String {
    git(&dir.join("remote.git"), &["rev-parse", "refs/heads/main"])
}

fn remote_has(dir: &Path, path: &str) -> bool {
    git(&dir.join("remote.git"), &["ls-tree", "-r", "--name-only", "main"]).lines().any(|l| l == path)
}

#[test]
fn an_agent_replicates_through_the_broker_under_a_persons_approval() {
    let site = tempfile::tempdir().unwrap();
    let dir = site.path();
    let a = replica(dir, "");
    let config_file = dir.join("broker.yaml");
    std::fs::write(&config_file, config(uid())).unwrap();
    let socket = dir.join("broker.sock");
    let (broker, ready) = Broker::start(&a, &socket, &config_file);
    assert_eq!(ready["targets"], json!(["backup-1", "others"]), "{ready}");
    let mut agent = Agent::start(&a, &socket);

    // Where the target stands, as counts and commit ids.
    let status = agent.ok(json!({"operation": "status", "target": "backup-1"}));
    assert_eq!(status["transport"], "git");
    assert_eq!(status["remote_reachable"], true, "{status}");
    assert_eq!(status["counts"]["ahead"], 0, "{status}");
    assert_eq!(status["digests"]["head"], git(&a, &["rev-parse", "HEAD"]));
    let probe = agent.ok(json!({"operation": "probe", "target": "backup-1"}));
    assert_eq!((probe["reachable"].clone(), probe["digests"]["remote_head"].clone()), (json!(true), json!(remote_head(dir))));

    // Refusals by configuration.
    agent.blocked(json!({"operation": "status", "target": "nowhere"}), "TARGET_NOT_ALLOWED");
    agent.blocked(json!({"operation": "status", "target": "others"}), "PRINCIPAL_DENIED");
    agent.blocked(json!({"operation": "status", "target": "backup-1", "profile": "weekly"}), "PROFILE_NOT_FOUND");

    // A new note; a replicate needs a dry run first, and the dry run moves nothing.
    ingest(&a, "03_Resources/beta.md", "Beta");
    let before = remote_head(dir);
    let replicate = |key: &str, approval: Option<&str>| {
        let mut request = json!({"operation": "replicate", "target": "backup-1", "idempotency_key": key});
        if let Some(approval) = approval {
            request["approval_ref"] = json!(approval);
        }
        request
    };
    agent.blocked(replicate("k-1", None), "DRY_RUN_REQUIRED");
    let dry = agent.ok(json!({"operation": "rsync-dry-run", "target": "backup-1", "idempotency_key": "k-1"}));
    assert_eq!(dry["dry_run"], true);
    assert!(dry["counts"]["commits_to_push"].as_u64().unwrap() >= 1, "{dry}");
    assert!(dry["counts"]["paths_to_push"].as_u64().unwrap() >= 1, "{dry}");
    assert_eq!(dry["counts"]["commits_to_pull"], 0, "{dry}");
    assert_eq!(remote_head(dir), before, "a dry run pushes nothing");
    assert_eq!(dry["digests"]["head"], json!(git(&a, &["rev-parse", "HEAD"])), "and integrates nothing: {dry}");
    assert!(!remote_has(dir, "03_Resources/beta.md"));

    // Explicit approval: the broker holds the request for a person; the agent cannot approve.
    let needed = agent.blocked(replicate("k-1", None), "APPROVAL_REQUIRED");
    let proposal_id = needed["proposal_id"].as_str().unwrap().to_string();
    agent.blocked(replicate("k-1", Some(&proposal_id)), "APPROVAL_REQUIRED");
    assert_eq!(remote_head(dir), before, "nothing ran without a person's approval");
    let people = tempfile::tempdir().unwrap();
    for step in [vec!["approver", "add", "alice"], vec!["approver", "register", "alice"]] {
        let out = paravault_with_input(&a, people.path(), &step, &format!("{SECRET}\n"));
        assert!(out.status.success(), "{step:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let review = pv(&a, &["approvals", "show", &proposal_id], 0);
    assert_eq!(review["request"]["target"], "backup-1", "the person reviews exactly the request: {review}");
    let approved = paravault_with_input(&a, people.path(), &["approve", &proposal_id, "--approver", "alice"], &format!("{SECRET}\n"));
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));

    // Approved: the replicate runs and the note reaches the remote.
    let receipt = agent.ok(replicate("k-1", Some(&proposal_id)));
    let run_id = receipt["run_id"].as_str().unwrap().to_string();
    assert!(run_id.starts_with("run_") && run_id.len() == 68, "{receipt}");
    assert_eq!(receipt["approval"]["approver"], "alice", "{receipt}");
    assert_eq!(receipt["approval"]["approval_ref"], proposal_id.as_str());
    assert_eq!(receipt["pushed"], true, "{receipt}");
    assert!(receipt["counts"]["commits_pushed"].as_u64().unwrap() >= 1, "{receipt}");
    assert_eq!(receipt["digests"]["head"], json!(remote_head(dir)), "{receipt}");
    assert_eq!(receipt["exit_category"], "ok");
    assert!(remote_has(dir, "03_Resources/beta.md"), "the note is on the remote");

    // The same key and request: the stored receipt, no second run. Another request: refused.
    let pushed_head = remote_head(dir);
    assert_eq!(agent.ok(replicate("k-1", Some(&proposal_id))), receipt);
    assert_eq!(remote_head(dir), pushed_head);
    agent.blocked(
        json!({"operation": "replicate", "target": "backup-1", "idempotency_key": "k-1", "profile": "nightly"}),
        "IDEMPOTENCY_CONFLICT",
    );
    // The approval was used once: another replicate cannot use it again.
    ingest(&a, "03_Resources/gamma.md", "Gamma");
    agent.ok(json!({"operation": "rsync-dry-run", "target": "backup-1"}));
    agent.blocked(replicate("k-2", Some(&proposal_id)), "APPROVAL_REPLAY");
    assert!(!remote_has(dir, "03_Resources/gamma.md"));

    // Verify: the remote holds the run's head; an unknown run is not found.
    let verified = agent.ok(json!({"operation": "verify", "run_id": run_id}));
    assert_eq!((verified["verified"].clone(), verified["target"].clone()), (json!(true), json!("backup-1")), "{verified}");
    agent.blocked(json!({"operation": "verify", "run_id": format!("run_{}", "0".repeat(64))}), "RUN_NOT_FOUND");

    // A profile with standing approval and no dry run; one replicate at a time.
    let nightly = |key: &str| json!({"operation": "replicate", "target": "backup-1", "profile": "nightly", "idempotency_key": key});
    {
        let held = std::fs::File::options().write(true).create(true).truncate(false).open(a.join(".paravault/replicate.lock")).unwrap();
        held.lock().unwrap();
        agent.blocked(nightly("k-3"), "OPERATION_IN_FLIGHT");
    }
    let standing = agent.ok(nightly("k-3"));
    assert_eq!(standing["approval"]["policy"], "standing", "{standing}");
    assert!(remote_has(dir, "03_Resources/gamma.md"));

    // The remote gone: probe is NETWORK_UNAVAILABLE, status says it is unreachable.
    std::fs::rename(dir.join("remote.git"), dir.join("moved.git")).unwrap();
    agent.blocked(json!({"operation": "probe", "target": "backup-1"}), "NETWORK_UNAVAILABLE");
    assert_eq!(agent.ok(json!({"operation": "status", "target": "backup-1"}))["remote_reachable"], false);
    agent.blocked(nightly("k-4"), "NETWORK_UNAVAILABLE");
    std::fs::rename(dir.join("moved.git"), dir.join("remote.git")).unwrap();

    // A broker stopped in the middle of a keyed run (its record still says running): the
    // outcome is unknown, and the key is never run again.
    let crashed = nightly("k-crash");
    let subject = paravault::infra::approval_subject(&serde_json::from_value(crashed.clone()).unwrap());
    let record = json!({"schema": "paravault.broker-key.v1", "idempotency_key": "k-crash",
        "subject_digest": paravault::handoff::journal::digest(&subject), "state": "running", "started_at": "2026-12-06T00:00:00.000Z"});
    let keys = a.join(".paravault/broker/keys");
    std::fs::write(keys.join(format!("{}.json", paravault::hex::sha256_hex(b"k-crash"))), record.to_string()).unwrap();
    ingest(&a, "03_Resources/epsilon.md", "Epsilon");
    agent.blocked(crashed, "UNKNOWN_COMPLETION");
    assert!(!remote_has(dir, "03_Resources/epsilon.md"), "an unknown outcome is never run again");

    // A configuration that no longer loads blocks every request.
    std::fs::write(&config_file, "schema: paravault.broker.v1\ntargets: [oops\n").unwrap();
    agent.blocked(json!({"operation": "status", "target": "backup-1"}), "POLICY_INVALID");

    // No answer ever named the remote's URL or any path of this machine.
    let remote = dir.join("remote.git").display().to_string();
    for (answer, text) in agent.seen.iter().enumerate() {
        for secret in [remote.as_str(), "remote.git", "moved.git", &dir.display().to_string(), "stderr", "argv"] {
            assert!(!text.contains(secret), "answer {answer} names {secret:?}: {text}");
        }
    }
    // The broker's records are engine state: on disk, never committed, never pushed.
    assert!(a.join(".paravault/broker/keys").is_dir() && a.join(".paravault/broker/runs").is_dir());
    for tree in [git(&a, &["ls-files"]), git(&dir.join("remote.git"), &["ls-tree", "-r", "--name-only", "main"])] {
        assert!(!tree.contains(".paravault/broker"), "{tree}");
    }
    assert!(broker.stop().success());
    assert!(!socket.exists(), "the broker removes its socket when it stops");
}

#[test]
fn a_live_broker_is_never_displaced_and_a_stale_socket_is_replaced() {
    let site = tempfile::tempdir().unwrap();
    let dir = site.path();
    let vault = dir.join("v");
    pv(&vault, &["init"], 0);
    let config_file = dir.join("broker.yaml");
    std::fs::write(&config_file, config(uid())).unwrap();
    let socket = dir.join("b.sock");
    // A socket left by a process that is gone.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let (broker, ready) = Broker::start(&vault, &socket, &config_file);
    assert_eq!(ready["socket"], socket.display().to_string());
    // A second broker on the same socket refuses to start and leaves the first serving.
    let second = paravault(&vault, &["broker", "--socket", socket.to_str().unwrap(), "--config", config_file.to_str().unwrap()]);
    assert_eq!(second.status.code(), Some(2), "{}", String::from_utf8_lossy(&second.stderr));
    assert!(String::from_utf8_lossy(&second.stderr).contains("already answers"), "{}", String::from_utf8_lossy(&second.stderr));
    // The wire: a digest that does not match its fields, or a field that is not an identifier
    // of the schema, is a PROTOCOL_ERROR that echoes the nonce.
    let raw = |fields: Value, digest: Option<&str>| -> Value {
        use std::io::Write as _;
        let mut line = fields.clone();
        line["request_digest"] = json!(digest.map_or_else(|| paravault::handoff::journal::digest(&fields), str::to_string));
        line["nonce"] = json!("n-1");
        let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        writeln!(stream, "{line}").unwrap();
        let mut answer = String::new();
        BufReader::new(&stream).read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap()
    };
    let status = json!({"schema": "power.infra-request.v1", "operation": "status", "target": "backup-1"});
    let forged = raw(status.clone(), Some(&"0".repeat(64)));
    assert_eq!((forged["nonce"].clone(), forged["block"]["reason_code"].clone()), (json!("n-1"), json!("PROTOCOL_ERROR")), "{forged}");
    let mut widened = status.clone();
    widened["host"] = json!("example.org");
    assert_eq!(raw(widened, None)["block"]["reason_code"], "PROTOCOL_ERROR");
    let well_formed = raw(status, None);
    assert_eq!(well_formed["schema"], "power.infra-response.v1");
    assert_eq!(well_formed["block"]["reason_code"], "CAPABILITY_DISABLED", "{well_formed}");
    // The vault is not a replica: an agent's request is blocked, typed.
    let mut agent = Agent::start(&vault, &socket);
    agent.blocked(json!({"operation": "status", "target": "backup-1"}), "CAPABILITY_DISABLED");
    assert!(broker.stop().success());
    assert!(!socket.exists());
    // A configuration writable by others is refused before anything listens.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&config_file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let refused = paravault(&vault, &["broker", "--socket", socket.to_str().unwrap(), "--config", config_file.to_str().unwrap()]);
    assert_ne!(refused.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("writable"), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(!socket.exists());
}

/// A person approves, with their approver secret, in `vault`.
fn approve(vault: &Path, people: &Path, proposal_id: &str) {
    let approved = paravault_with_input(vault, people, &["approve", proposal_id, "--approver", "alice"], &format!("{SECRET}\n"));
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
}

#[test]
fn one_decision_serves_the_vaults_human_rule_and_the_brokers_explicit_approval() {
    let site = tempfile::tempdir().unwrap();
    let dir = site.path();
    let a = replica(dir, "approvals:\n  rules:\n    - { operations: [infra_replicate], approver: human }\n");
    let people = tempfile::tempdir().unwrap();
    for step in [vec!["approver", "add", "alice"], vec!["approver", "register", "alice"]] {
        let out = paravault_with_input(&a, people.path(), &step, &format!("{SECRET}\n"));
        assert!(out.status.success(), "{step:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let config_file = dir.join("broker.yaml");
    std::fs::write(&config_file, config(uid())).unwrap();
    let socket = dir.join("broker.sock");
    let (broker, _) = Broker::start(&a, &socket, &config_file);
    let mut agent = Agent::start(&a, &socket);
    ingest(&a, "03_Resources/delta.md", "Delta");
    let request = json!({"operation": "replicate", "target": "backup-1", "profile": "careful", "idempotency_key": "k-h"});
    // The vault's own gate holds the request first; the broker is not asked yet.
    let held = agent.server.call("infra_action", request.clone());
    assert_eq!(held["isError"], true, "{held}");
    assert_eq!(held["structuredContent"]["error"]["code"], "human_approval_required", "{held}");
    let proposal_id = held["structuredContent"]["error"]["details"]["proposal_id"].as_str().unwrap().to_string();
    approve(&a, people.path(), &proposal_id);
    // Approved, the client's gate lets it through; the broker wants the same approval named.
    let needed = agent.blocked(request.clone(), "APPROVAL_REQUIRED");
    assert_eq!(needed["proposal_id"], proposal_id.as_str(), "the broker names the same proposal: {needed}");
    let mut named = request.clone();
    named["approval_ref"] = json!(proposal_id);
    let receipt = agent.ok(named.clone());
    assert_eq!(receipt["approval"]["approval_ref"], proposal_id.as_str(), "one decision, both gates: {receipt}");
    assert!(remote_has(dir, "03_Resources/delta.md"));
    // A second request reusing that approval is refused by the broker.
    let mut reused = named;
    reused["idempotency_key"] = json!("k-h2");
    let second = agent.server.call("infra_action", reused);
    assert_eq!(second["structuredContent"]["error"]["code"], "human_approval_required", "the vault's gate holds it first: {second}");
    assert!(broker.stop().success());
}
