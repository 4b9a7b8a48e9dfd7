//! A team vault (issue 49, docs/governance.md "A shared vault"): a gated bare remote that
//! refuses what a replica's engine would never push, and approvals signed by a registered
//! approver's key that every replica verifies — driven as people drive it: the `paravault`
//! binary on replicas, plain `git` for the pushes a hostile or careless writer makes, each
//! person with their own configuration folder (their approver secret and sealed key).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{paravault_command, run_with_input};

const SECRET_A: &str = "alice's long secret phrase";
const SECRET_B: &str = "bob's other long secret";
const HUMAN_RULE: &str = "approvals:\n  rules:\n    - { operations: [apply], paths: [\"03_Resources/**\"], approver: human }\n";

fn git(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "someone")
        .env("GIT_AUTHOR_EMAIL", "someone@example.org")
        .env("GIT_COMMITTER_NAME", "someone")
        .env("GIT_COMMITTER_EMAIL", "someone@example.org")
        .output()
        .unwrap()
}

fn git_ok(dir: &Path, args: &[&str]) -> String {
    let out = git(dir, args);
    assert!(out.status.success(), "git {args:?}: {}", said(&out));
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// One person at one replica: the vault and their configuration folder.
struct Person {
    vault: PathBuf,
    config: PathBuf,
}

impl Person {
    /// `paravault --json ARGS` with `stdin`; the output.
    fn run(&self, args: &[&str], stdin: &str) -> Output {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        run_with_input(paravault_command(&self.vault, &self.config, &all), stdin)
    }

    /// `run`, asserting the exit code; its JSON (or the error's, from standard error).
    fn pv(&self, args: &[&str], stdin: &str, exit: i32) -> Value {
        let out = self.run(args, stdin);
        let said = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), said(&out));
        assert_eq!(out.status.code(), Some(exit), "paravault {args:?}: {said}");
        serde_json::from_slice(&out.stdout)
            .or_else(|_| serde_json::from_str(said.lines().find(|l| l.starts_with('{')).unwrap_or("null")))
            .unwrap_or(Value::String(said))
    }

    fn write(&self, path: &str, text: &str) {
        let file = self.vault.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.vault.join(path)).unwrap()
    }
}

/// A gated bare remote, Alice's replica `a` (the first approver, whose key is the registry's
/// root, and a signed policy giving `apply` under 03_Resources to a person) pushed to it, and
/// Bob's replica `b` cloned from it.
struct Team {
    dir: tempfile::TempDir,
    a: Person,
    b: Person,
}

impl Team {
    fn new() -> Team {
        let dir = tempfile::tempdir().unwrap();
        git_ok(dir.path(), &["init", "-q", "--bare", "-b", "main", "remote.git"]);
        let a = Person { vault: dir.path().join("a"), config: dir.path().join("config-a") };
        let remote = dir.path().join("remote.git");
        let installed = a.pv(&["gate", "install", remote.to_str().unwrap()], "", 0);
        assert_eq!(installed["branch"], "main", "{installed}");
        a.pv(&["init"], "", 0);
        a.pv(&["approver", "add", "alice"], &format!("{SECRET_A}\n"), 0);
        let root = a.pv(&["approver", "register", "alice"], &format!("{SECRET_A}\n"), 0);
        assert_eq!(root["seq"], 0, "the first key is the registry's root: {root}");
        a.write(".paravault/policy.yaml", HUMAN_RULE);
        a.pv(&["policy", "sign", "--approver", "alice"], &format!("{SECRET_A}\n"), 0);
        a.pv(&["remote", "add", "origin", remote.to_str().unwrap()], "", 0);
        a.pv(
            &["ingest", "03_Resources/alpha.md", "--title", "Alpha", "--description", "Alpha note", "--content", "Alpha line one."],
            "",
            0,
        );
        let pushed = a.pv(&["replicate"], "", 0);
        assert_eq!(pushed["pushed"], true, "{pushed}");
        let b = Person { vault: dir.path().join("b"), config: dir.path().join("config-b") };
        let out = run_with_input(
            {
                let mut c = Command::new(env!("CARGO_BIN_EXE_paravault"));
                c.args(["--json", "clone"])
                    .arg(&remote)
                    .arg(&b.vault)
                    .env("PARAVAULT_TODAY", "2026-06-01")
                    .env("PARAVAULT_CONFIG_DIR", &b.config);
                c
            },
            "",
        );
        assert!(out.status.success(), "clone: {}", said(&out));
        Team { dir, a, b }
    }

    fn remote(&self) -> PathBuf {
        self.dir.path().join("remote.git")
    }

    fn remote_head(&self) -> String {
        git_ok(&self.remote(), &["rev-parse", "refs/heads/main"])
    }

    /// A plain git clone of the remote (someone with push access and no paravault).
    fn plain(&self, name: &str) -> PathBuf {
        let dir = self.dir.path().join(name);
        git_ok(self.dir.path(), &["clone", "-q", self.remote().to_str().unwrap(), dir.to_str().unwrap()]);
        dir
    }

    /// Commits everything in `plain` and pushes it (with `extra` push flags); the push's output.
    fn push(&self, plain: &Path, message: &str, extra: &[&str]) -> Output {
        git_ok(plain, &["add", "-A"]);
        git_ok(plain, &["commit", "-q", "-m", message]);
        let mut args = vec!["push", "origin", "HEAD:main"];
        args.extend_from_slice(extra);
        git(plain, &args)
    }

    /// Asserts the push was refused naming `what` (and `path` when given) and the remote kept
    /// its head.
    fn assert_refused(&self, out: &Output, before: &str, what: &str, path: &str) {
        let said = said(out);
        assert!(!out.status.success(), "the push was accepted:\n{said}");
        assert!(said.contains("pre-receive hook declined"), "{said}");
        assert!(said.contains(what), "the refusal names {what:?}:\n{said}");
        assert!(said.contains(path), "the refusal names {path:?}:\n{said}");
        assert_eq!(self.remote_head(), before, "nothing changed on the remote");
    }
}

/// Everything a command printed (a `--json` error is on standard output).
fn said(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn file_in(dir: &Path, rel: &str) -> PathBuf {
    dir.join(rel)
}

#[test]
fn the_gate_refuses_every_push_an_engine_would_not_make_naming_what_and_where() {
    let team = Team::new();
    let before = team.remote_head();

    // A note the lint gate blocks (no frontmatter).
    let p = team.plain("p1");
    std::fs::write(file_in(&p, "03_Resources/bare.md"), "just words, no metadata\n").unwrap();
    let out = team.push(&p, "a bare note", &[]);
    team.assert_refused(&out, &before, "metadata-missing", "03_Resources/bare.md");

    // A forged decision: valid JSON, no signature.
    let p = team.plain("p2");
    let id = "ab".repeat(32);
    let forged = serde_json::json!({
        "schema": "paravault.approval.v1", "proposal_id": id, "proposal_sha256": "cd".repeat(32),
        "operation": "apply", "decision": "approved", "approver": "alice", "channel": "cli",
        "decided_at": "2026-06-01T00:00:00Z", "comment": ""
    });
    let rel = format!(".paravault/approvals/decisions/{id}.json");
    std::fs::create_dir_all(file_in(&p, ".paravault/approvals/decisions")).unwrap();
    std::fs::write(file_in(&p, &rel), forged.to_string()).unwrap();
    let out = team.push(&p, "a decision nobody made", &[]);
    team.assert_refused(&out, &before, "not signed", &rel);

    // The same record with a signature by a key the registry does not hold.
    let p = team.plain("p3");
    let mallory = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]);
    let mut signed = forged.clone();
    let bytes = serde_json::to_vec(&forged).unwrap();
    use ed25519_dalek::Signer as _;
    signed["signature"] = serde_json::json!({
        "public_key": paravault::hex::encode(mallory.verifying_key().as_bytes()),
        "signature": paravault::hex::encode(&mallory.sign(&bytes).to_bytes()),
    });
    std::fs::create_dir_all(file_in(&p, ".paravault/approvals/decisions")).unwrap();
    std::fs::write(file_in(&p, &rel), signed.to_string()).unwrap();
    let out = team.push(&p, "a decision signed by mallory", &[]);
    team.assert_refused(&out, &before, "not signed by an active key of 'alice'", &rel);

    // A receipt line already in the history, rewritten.
    let p = team.plain("p4");
    let mirror = git_ok(&p, &["ls-files", ".paravault/replicas"]);
    let mirror = mirror.lines().find(|l| l.ends_with(".jsonl")).unwrap().to_string();
    let text = std::fs::read_to_string(file_in(&p, &mirror)).unwrap();
    std::fs::write(file_in(&p, &mirror), text.replacen("cli.ingest", "cli.ingesT", 1)).unwrap();
    let out = team.push(&p, "history, improved", &[]);
    team.assert_refused(&out, &before, "receipts are append-only", &mirror);

    // A force-push that drops the remote's last commit.
    let p = team.plain("p5");
    git_ok(&p, &["reset", "-q", "--hard", "HEAD~1"]);
    std::fs::write(file_in(&p, "README-other.txt"), "another history\n").unwrap();
    let out = team.push(&p, "another history", &["--force"]);
    team.assert_refused(&out, &before, "not a fast-forward", "refs/heads/main");

    // An approver-key change nobody active signed: mallory adds herself, signed by herself.
    let p = team.plain("p6");
    let keys_path = file_in(&p, ".paravault/approver-keys.json");
    let mut registry = paravault::approvals::keys::Registry::parse(&std::fs::read(&keys_path).unwrap()).unwrap();
    let last = registry.entries.last().unwrap();
    let mut entry = paravault::approvals::keys::KeyEntry {
        seq: registry.entries.len() as u64,
        action: paravault::approvals::keys::KeyAction::Add,
        approver: "mallory".into(),
        public_key: paravault::hex::encode(mallory.verifying_key().as_bytes()),
        at: "2026-06-01T00:00:00Z".into(),
        signed_by: "mallory".into(),
        prev: paravault::hex::sha256_hex(&serde_json::to_vec(last).unwrap()),
        signature: None,
    };
    let sig = mallory.sign(&serde_json::to_vec(&entry).unwrap());
    entry.signature = Some(paravault::approvals::keys::SignatureBlock {
        public_key: entry.public_key.clone(),
        signature: paravault::hex::encode(&sig.to_bytes()),
    });
    registry.entries.push(entry);
    std::fs::write(&keys_path, serde_json::to_string_pretty(&registry).unwrap()).unwrap();
    let out = team.push(&p, "mallory joins", &[]);
    team.assert_refused(&out, &before, "not an active key of 'mallory'", ".paravault/approver-keys.json");

    // A policy change without a signature (the rule that hands apply to a person, dropped).
    let p = team.plain("p7");
    std::fs::write(file_in(&p, ".paravault/policy.yaml"), "approvals:\n  rules: []\n").unwrap();
    let out = team.push(&p, "no more rules", &[]);
    team.assert_refused(&out, &before, "policy.sig", ".paravault/policy.yaml");

    // Another branch.
    let p = team.plain("p8");
    git_ok(&p, &["checkout", "-q", "-b", "side"]);
    std::fs::write(file_in(&p, "side.txt"), "x\n").unwrap();
    git_ok(&p, &["add", "-A"]);
    git_ok(&p, &["commit", "-q", "-m", "side"]);
    let out = git(&p, &["push", "origin", "side"]);
    assert!(!out.status.success() && said(&out).contains("accepts only its branch 'main'"));

    // What an engine would push passes: a valid note by plain git, and the engine's own pushes.
    let p = team.plain("p9");
    let alpha = std::fs::read_to_string(file_in(&p, "03_Resources/alpha.md")).unwrap();
    std::fs::write(file_in(&p, "03_Resources/fine.md"), alpha.replace("Alpha line one.", "A note written with plain git.")).unwrap();
    let out = team.push(&p, "a fine note", &[]);
    assert!(out.status.success(), "a valid note is accepted: {}", said(&out));
    team.b.pv(&["ingest", "03_Resources/beta.md", "--title", "Beta", "--description", "Beta note", "--content", "Beta."], "", 0);
    assert_eq!(team.b.pv(&["replicate"], "", 0)["pushed"], true);
    assert_eq!(team.a.pv(&["replicate"], "", 0)["in_sync"], true);
    assert!(team.a.read("03_Resources/fine.md").contains("plain git"));
}

#[test]
fn an_approval_made_on_one_replica_is_honoured_on_another_and_a_forged_one_nowhere() {
    let team = Team::new();
    let (a, b) = (&team.a, &team.b);
    // Bob registers on his machine; Alice, already an approver of the vault, signs his key in.
    b.pv(&["approver", "add", "bob"], &format!("{SECRET_B}\n"), 0);
    let bob_key = b.pv(&["approver", "key", "bob"], "", 0)["public_key"].as_str().unwrap().to_string();
    a.pv(&["approver", "register", "bob", "--public-key", &bob_key, "--signed-by", "alice"], &format!("{SECRET_A}\n"), 0);
    a.pv(&["replicate"], "", 0);
    b.pv(&["replicate"], "", 0);

    // An agent's change on B, under the rule that gives it to a person.
    let original = b.read("03_Resources/alpha.md");
    let text = |body: &str| original.replace("Alpha line one.", body);
    let content = b.vault.join("new-alpha.txt");
    std::fs::write(&content, text("Alpha, revised on B.")).unwrap();
    let proposed = b.pv(&["propose", "03_Resources/alpha.md", "--content-file", content.to_str().unwrap()], "", 0);
    let id = proposed["proposal_id"].as_str().unwrap().to_string();
    let held = b.run(&["apply", &id, "--approve"], "");
    assert!(said(&held).contains("human_approval_required"), "{}", said(&held));
    b.pv(&["replicate"], "", 0);

    // Alice approves it on A; the signed decision travels through the gate.
    a.pv(&["replicate"], "", 0);
    let decided = a.pv(&["approve", &id, "--approver", "alice"], &format!("{SECRET_A}\n"), 0);
    assert!(decided["signature"]["signature"].is_string(), "the decision is signed: {decided}");
    assert_eq!(a.pv(&["replicate"], "", 0)["pushed"], true);
    b.pv(&["replicate"], "", 0);
    let receipt = b.pv(&["apply", &id, "--approve"], "", 0);
    assert_eq!(receipt["approval"]["approver"], "alice", "{receipt}");
    assert!(b.read("03_Resources/alpha.md").contains("revised on B"));
    b.pv(&["replicate"], "", 0);
    a.pv(&["replicate"], "", 0);

    // A second change on B, and a decision for it forged by hand on B: Alice's real record for
    // the first proposal, re-aimed (valid JSON, a signature that does not cover it).
    std::fs::write(&content, text("Alpha, changed again on B.")).unwrap();
    let second = b.pv(&["propose", "03_Resources/alpha.md", "--content-file", content.to_str().unwrap()], "", 0);
    let id2 = second["proposal_id"].as_str().unwrap().to_string();
    let real = b.read(&format!(".paravault/approvals/decisions/{id}.json"));
    let forged_path = format!(".paravault/approvals/decisions/{id2}.json");
    b.write(&forged_path, &real.replace(&id, &id2));
    let refused = b.run(&["apply", &id2, "--approve"], "");
    assert!(said(&refused).contains("human_approval_required"), "B does not honour it");
    assert!(b.read("03_Resources/alpha.md").contains("revised on B"), "nothing written on B");
    // B's engine never commits a decision it does not honour (the gate would refuse it, and
    // one refused push would hold back every later change): replicate goes on, without it.
    assert_eq!(b.pv(&["replicate"], "", 0)["in_sync"], true);
    let listed = git_ok(&team.remote(), &["ls-tree", "-r", "--name-only", "main"]);
    assert!(!listed.contains(&forged_path), "{listed}");
    // Nor does the gate: the same file pushed with plain git is refused, naming it.
    let p = team.plain("forger");
    std::fs::create_dir_all(file_in(&p, ".paravault/approvals/decisions")).unwrap();
    std::fs::write(file_in(&p, &forged_path), real.replace(&id, &id2)).unwrap();
    let before = team.remote_head();
    let out = team.push(&p, "a forged approval", &[]);
    team.assert_refused(&out, &before, "does not verify", &forged_path);
    // Nor does A, when the file reaches it (by a remote without a gate, or a person's copy).
    std::fs::create_dir_all(a.vault.join(".paravault/proposals")).unwrap();
    std::fs::copy(b.vault.join(format!(".paravault/proposals/{id2}.json")), a.vault.join(format!(".paravault/proposals/{id2}.json")))
        .unwrap();
    a.write(&forged_path, &real.replace(&id, &id2));
    let refused = a.run(&["apply", &id2, "--approve"], "");
    assert!(said(&refused).contains("human_approval_required"), "A does not honour it");
    assert!(!a.read("03_Resources/alpha.md").contains("changed again"));
    let status = a.pv(&["approvals", "show", &id2], "", 0);
    assert_eq!(status["state"], "pending", "{status}");

    // Bob decides on B: the forged record is moved aside (kept, byte for byte) and his signed
    // decision takes its place; then B applies and the team converges.
    let decided = b.pv(&["approve", &id2, "--approver", "bob"], &format!("{SECRET_B}\n"), 0);
    assert_eq!(decided["approver"], "bob");
    let aside = std::fs::read_dir(b.vault.join(".paravault/approvals/unverified")).unwrap().count();
    assert_eq!(aside, 1, "the forged record is kept aside");
    b.pv(&["apply", &id2, "--approve"], "", 0);
    assert_eq!(b.pv(&["replicate"], "", 0)["pushed"], true);
}

#[test]
fn a_revoked_key_no_longer_approves_and_the_last_key_cannot_be_revoked() {
    let team = Team::new();
    let a = &team.a;
    // Alice cannot revoke herself: the vault would have no approver.
    let out = a.run(&["approver", "revoke", "alice", "--signed-by", "alice"], &format!("{SECRET_A}\n"));
    assert!(!out.status.success() && said(&out).contains("last active key"), "{}", said(&out));
    // An approver with no key in the vault's registry cannot decide on a replica.
    a.pv(&["approver", "add", "carol"], "carol's long secret phrase\n", 0);
    let content = a.vault.join("x.txt");
    std::fs::write(&content, a.read("03_Resources/alpha.md").replace("Alpha line one.", "by carol")).unwrap();
    let id = a.pv(&["propose", "03_Resources/alpha.md", "--content-file", content.to_str().unwrap()], "", 0)["proposal_id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = a.run(&["approve", &id, "--approver", "carol"], "carol's long secret phrase\n");
    assert!(said(&out).contains("signature_invalid"), "{}", said(&out));
    // Registered, carol decides; once her key is revoked, her decision is no longer honoured.
    a.pv(&["approver", "register", "carol", "--signed-by", "alice"], &format!("{SECRET_A}\n"), 0);
    a.pv(&["approve", &id, "--approver", "carol"], "carol's long secret phrase\n", 0);
    assert_eq!(a.pv(&["approvals", "show", &id], "", 0)["state"], "approved");
    a.pv(&["approver", "revoke", "carol", "--signed-by", "alice"], &format!("{SECRET_A}\n"), 0);
    assert_eq!(a.pv(&["approvals", "show", &id], "", 0)["state"], "pending");
    // The registry's changes travel through the gate.
    assert_eq!(a.pv(&["replicate"], "", 0)["pushed"], true);
}
