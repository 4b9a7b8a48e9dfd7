//! Replication across a real network (issue 48): three replicas, each in its own network
//! namespace joined to the remote's namespace by a veth pair, the bare remote served there by
//! `git daemon --enable=receive-pack`, under a seeded random workload with faults from the same
//! seed: agents writing through MCP (ingest, propose + apply, `archive_notes`), people appending
//! to and renaming notes (into the archive too), links cut between runs and in the middle of one, `tc netem`
//! loss and delay, `replicate` killed by SIGKILL, one replica's clock days ahead. At quiescence:
//! 0 silent losses (every acknowledged word on disk or in a conflict a person sees), identical
//! trees and receipt mirrors, clean `git status`, every chain verified, every agent's note found
//! by search on every replica.
//!
//! Needs root (or CAP_NET_ADMIN), `ip` and `tc` (iproute2) and `git`: without them the test
//! fails saying so (CI installs iproute2 and runs as root). `PARAVAULT_NETNS_SEED` replays a
//! seed, `PARAVAULT_NETNS_STEPS` lengthens the run.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::netns::{Net, must};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_paravault");
const REPLICAS: usize = 3;

/// A replica: its folder, its namespace index and its clock.
struct Replica {
    index: usize,
    root: PathBuf,
    now: Option<&'static str>,
}

impl Replica {
    fn command(&self, net: &Net, args: &[&str]) -> Command {
        let mut command = net.exec(self.index, BIN);
        command.arg("--vault").arg(&self.root).args(args).env("PARAVAULT_TODAY", "2026-06-01").env_remove("PARAVAULT_VAULT_DIR");
        if let Some(now) = self.now {
            command.env("PARAVAULT_NOW", now);
        }
        command
    }

    fn json(&self, net: &Net, args: &[&str], codes: &[i32]) -> Value {
        let out = self.command(net, &[&["--json"][..], args].concat()).output().unwrap();
        let code = out.status.code().unwrap_or(-1);
        assert!(
            codes.contains(&code),
            "`paravault {}` on replica {} exited {code}: {}",
            args.join(" "),
            self.index,
            String::from_utf8_lossy(&out.stdout)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// `replicate`: in sync (0), conflicts waiting (1), or the remote unreachable (4).
    fn replicate(&self, net: &Net) -> i32 {
        self.replicate_report(net).0
    }

    /// `replicate` and what it printed.
    fn replicate_report(&self, net: &Net) -> (i32, String) {
        let out = self.command(net, &["--json", "replicate"]).output().unwrap();
        let code = out.status.code().unwrap_or(-1);
        assert!(matches!(code, 0 | 1 | 4), "replicate on replica {} exited {code}: {}", self.index, String::from_utf8_lossy(&out.stdout));
        (code, String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// One MCP tool call through a fresh `paravault mcp` (an agent's session): the result's
    /// structuredContent, which must not be an error.
    fn mcp(&self, tool: &str, args: Value) -> Value {
        let mut command = Command::new(BIN);
        command.arg("--vault").arg(&self.root).arg("mcp").env("PARAVAULT_TODAY", "2026-06-01").env("PARAVAULT_LOG", "warn");
        if let Some(now) = self.now {
            command.env("PARAVAULT_NOW", now);
        }
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "netns-sim", "version": "1"}}});
        writeln!(stdin, "{init}").unwrap();
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": args}}))
            .unwrap();
        stdin.flush().unwrap();
        let mut response = Value::Null;
        for line in BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok) {
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == 2 {
                response = message;
                break;
            }
        }
        drop(stdin);
        let _ = child.wait();
        let result = &response["result"];
        assert_eq!(result["isError"], false, "{tool} on replica {}: {response}", self.index);
        result["structuredContent"].clone()
    }

    /// An agent marks the note at `path` archived with `word` in its text (propose + apply),
    /// then runs `archive_notes`, which moves it under 04_Archive/ in one transaction. What it
    /// did, for the run's record.
    fn archive(&self, path: &str, word: &str) -> String {
        let text = std::fs::read_to_string(self.root.join(path)).unwrap();
        let content = format!("{}\nAn agent adds {word}.\n", marked_archived(&text));
        let proposal = self.mcp("propose_memory_change", json!({"path": path, "content": content}));
        self.mcp("apply_memory_change", json!({"proposal": proposal, "approved": true}));
        let report = self.mcp("archive_notes", json!({"dry_run": false, "approved": true}));
        let moved: Vec<String> = report["moves"].as_array().unwrap().iter().map(|m| m["to"].to_string()).collect();
        assert!(!moved.is_empty(), "archive_notes on replica {} moved nothing: {report}", self.index);
        format!("agent archives {path} with {word}: {}", moved.join(", "))
    }

    /// The notes on this replica (vault-relative path → text), engine pages left out.
    fn notes(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for entry in walk(&self.root) {
            let rel = entry.strip_prefix(&self.root).unwrap().to_string_lossy().into_owned();
            let name = rel.rsplit('/').next().unwrap_or("");
            if rel.starts_with(".paravault") || rel.starts_with(".git") || !rel.ends_with(".md") || name.starts_with("_index") {
                continue;
            }
            out.push((rel, std::fs::read_to_string(&entry).unwrap_or_default()));
        }
        out.sort();
        out
    }
}

/// The note's text with `status: archived` in its frontmatter (set, or added), so
/// `archive_notes` moves it.
fn marked_archived(text: &str) -> String {
    let Some(rest) = text.strip_prefix("---\n") else { return text.to_string() };
    let Some(end) = rest.find("\n---\n") else { return text.to_string() };
    let mut lines: Vec<String> = rest[..end].lines().filter(|l| !l.starts_with("status:")).map(str::to_string).collect();
    lines.push("status: archived".to_string());
    format!("---\n{}{}", lines.join("\n"), &rest[end..])
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").current_dir(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The tracked tree at HEAD, mirrors included: identical on every converged replica.
fn tree(root: &Path) -> String {
    git(root, &["ls-tree", "-r", "HEAD"])
}

#[test]
fn three_replicas_in_network_namespaces_converge_through_partitions_and_kills() {
    let seed: u64 = std::env::var("PARAVAULT_NETNS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x2026_1205);
    let steps: u64 = std::env::var("PARAVAULT_NETNS_STEPS").ok().and_then(|s| s.parse().ok()).unwrap_or(40);
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("served");
    std::fs::create_dir_all(&base).unwrap();
    must("git", &["init", "-q", "--bare", base.join("remote.git").to_str().unwrap()]);
    let mut net = Net::start(&base, REPLICAS);
    let mut rng = crate::support::Rng(seed | 1);

    // Replica 0 starts the vault; a short network timeout so a partition mid-run ends quickly.
    let first = Replica { index: 0, root: dir.path().join("r0"), now: None };
    first.json(&net, &["init"], &[0]);
    std::fs::write(first.root.join(".paravault/policy.yaml"), "replication:\n  network_timeout_s: 3\n").unwrap();
    first.json(&net, &["remote", "add", "origin", &net.url(0)], &[0]);
    first.mcp("ingest_note", json!({"name": "03_Resources/alpha", "note_type": "Resource", "title": "Alpha", "description": "The first note", "content": "Alpha, first written."}));
    assert_eq!(first.replicate(&net), 0);
    let mut replicas = vec![first];
    for i in 1..REPLICAS {
        let root = dir.path().join(format!("r{i}"));
        let out = net.exec(i, BIN).args(["--json", "clone", &net.url(i)]).arg(&root).env("PARAVAULT_TODAY", "2026-06-01").output().unwrap();
        assert!(out.status.success(), "clone on replica {i}: {}", String::from_utf8_lossy(&out.stderr));
        // Replica 2's clock runs days ahead of the others.
        replicas.push(Replica { index: i, root, now: (i == 2).then_some("2026-12-09T03:00:00Z") });
    }

    let mut written: Vec<String> = Vec::new(); // every acknowledged word
    let mut ingested: Vec<String> = Vec::new(); // the words agents' new notes hold
    let mut faults: Vec<String> = Vec::new();
    let mut actions: Vec<String> = Vec::new(); // what each step did, for a failure's report
    let mut archived = 0; // archive_notes runs
    for step in 0..steps {
        let r = rng.below(REPLICAS as u64) as usize;
        let replica = &replicas[r];
        let word = format!("zn{seed:x}w{step}");
        let existing: Vec<String> = replica.notes().into_iter().map(|(p, _)| p).filter(|p| p.starts_with("03_Resources/")).collect();
        match rng.below(12) {
            0..=1 => {
                replica.mcp(
                    "ingest_note",
                    json!({"name": format!("03_Resources/n{step}"), "note_type": "Resource", "title": format!("Note {step}"), "description": "An agent's note", "content": format!("Written by an agent: {word}.")}),
                );
                actions.push(format!("step {step}: replica {r}: agent ingests 03_Resources/n{step}.md with {word}"));
                written.push(word.clone());
                ingested.push(word);
            }
            2 if !existing.is_empty() => {
                // An agent proposes an edit and applies it (policy: the caller approves); now
                // and then the edit marks the note archived and the agent archives it with
                // `archive_notes`, which moves it under 04_Archive/ in one transaction.
                let path = &existing[rng.below(existing.len() as u64) as usize];
                if rng.below(3) == 0 {
                    actions.push(format!("step {step}: replica {r}: {}", replica.archive(path, &word)));
                    archived += 1;
                } else {
                    let text = std::fs::read_to_string(replica.root.join(path)).unwrap();
                    let proposal =
                        replica.mcp("propose_memory_change", json!({"path": path, "content": format!("{text}\nAn agent adds {word}.\n")}));
                    replica.mcp("apply_memory_change", json!({"proposal": proposal, "approved": true}));
                    actions.push(format!("step {step}: replica {r}: agent edits {path} with {word}"));
                }
                written.push(word);
            }
            3..=4 if !existing.is_empty() => {
                let path = &existing[rng.below(existing.len() as u64) as usize];
                let mut file = std::fs::OpenOptions::new().append(true).open(replica.root.join(path)).unwrap();
                writeln!(file, "\nA person adds {word}.").unwrap();
                actions.push(format!("step {step}: replica {r}: person appends {word} to {path}"));
                written.push(word);
            }
            5 if !existing.is_empty() => {
                // A person renames a note, now and then into the archive.
                let path = &existing[rng.below(existing.len() as u64) as usize];
                let stem = path.trim_end_matches(".md").rsplit('/').next().unwrap().to_string();
                let to = if rng.below(3) == 0 { format!("04_Archive/{stem}.md") } else { format!("03_Resources/{stem}-r{step}.md") };
                std::fs::create_dir_all(replica.root.join(&to).parent().unwrap()).unwrap();
                std::fs::rename(replica.root.join(path), replica.root.join(&to)).unwrap();
                actions.push(format!("step {step}: replica {r}: person renames {path} to {to}"));
            }
            6..=8 => {
                let code = replica.replicate(&net);
                actions.push(format!("step {step}: replica {r}: replicate → {code}"));
            }
            9 => {
                let cut = !net.cut[r];
                net.set_link(r, !cut);
                faults.push(format!("step {step}: link of replica {r} {}", if cut { "cut" } else { "restored" }));
            }
            10 => {
                let on = rng.below(2) == 0;
                let what = net.netem(r, on);
                faults.push(format!("step {step}: replica {r}'s link degraded: {what}"));
            }
            _ => {
                // A `replicate` killed at a random instant, or partitioned in the middle of its run.
                let mut child =
                    replica.command(&net, &["--json", "replicate"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
                std::thread::sleep(Duration::from_millis(rng.below(400)));
                if rng.below(2) == 0 {
                    let _ = child.kill();
                    let _ = child.wait();
                    faults.push(format!("step {step}: replicate on replica {r} killed"));
                } else {
                    net.set_remote_side(r, false);
                    let status = child.wait().unwrap();
                    net.set_remote_side(r, true);
                    assert!(matches!(status.code(), Some(0 | 1 | 4)), "a partitioned replicate exited {status}");
                    faults.push(format!("step {step}: replica {r} partitioned mid-replicate ({status})"));
                }
            }
        }
    }
    // Quiescence: every link restored, then replicate everywhere until a round changes nothing.
    for i in 0..REPLICAS {
        net.set_link(i, true);
        let _ = net.netem(i, false);
    }
    if archived == 0 {
        // Every seed archives at least once: the first replica's agent archives a note now.
        let path = replicas[0].notes().into_iter().map(|(p, _)| p).find(|p| p.starts_with("03_Resources/")).expect("a note to archive");
        let word = format!("zn{seed:x}archive");
        actions.push(format!("after the steps: replica 0: {}", replicas[0].archive(&path, &word)));
        written.push(word);
    }
    let mut settled = false;
    let mut last = Vec::new();
    for _ in 0..8 {
        let before: Vec<String> = replicas.iter().map(|r| git(&r.root, &["rev-parse", "HEAD"])).collect();
        last.clear();
        for replica in &replicas {
            let (code, report) = replica.replicate_report(&net);
            assert_ne!(
                code, 4,
                "seed {seed}: replica {} cannot reach the remote with every link up: {report}; faults: {faults:#?}",
                replica.index
            );
            last.push(report);
        }
        let after: Vec<String> = replicas.iter().map(|r| git(&r.root, &["rev-parse", "HEAD"])).collect();
        if before == after && after.windows(2).all(|w| w[0] == w[1]) {
            settled = true;
            break;
        }
    }
    if !settled {
        let logs: Vec<String> = replicas.iter().map(|r| git(&r.root, &["log", "--format=%h %an %s", "--stat", "-3"])).collect();
        panic!("seed {seed}: the replicas did not converge; the last round: {last:#?}\nlogs: {logs:#?}\nfaults: {faults:#?}");
    }
    let first_tree = tree(&replicas[0].root);
    for replica in &replicas {
        let context = format!("seed {seed}, replica {}; faults: {faults:#?}", replica.index);
        assert_eq!(tree(&replica.root), first_tree, "{context}: trees differ");
        assert_eq!(git(&replica.root, &["status", "--porcelain"]), "", "{context}: uncommitted files");
        let history = replica.json(&net, &["history", "--verify"], &[0]);
        assert_eq!(history["ok"], true, "{context}: {history}");
        assert_eq!(history["replicas"].as_array().map(Vec::len), Some(REPLICAS), "{context}: every replica's chain travelled: {history}");
        // 0 silent losses: every acknowledged word is in a note or in a conflict held here.
        let notes: String = replica.notes().into_iter().map(|(_, text)| text).collect();
        let held: String = std::fs::read_dir(replica.root.join(".paravault/approvals/batches"))
            .map(|d| d.filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok()).collect())
            .unwrap_or_default();
        for word in &written {
            if !notes.contains(word.as_str()) && !held.contains(word.as_str()) {
                let trail: Vec<&String> = actions.iter().filter(|a| a.contains(word.as_str())).collect();
                let anywhere = Command::new("grep").args(["-rl", "--exclude-dir=.git", word]).arg(&replica.root).output().unwrap();
                if let Some(keep) = std::env::var_os("PARAVAULT_NETNS_KEEP") {
                    let _ = Command::new("cp").arg("-a").arg(dir.path()).arg(&keep).status();
                }
                panic!(
                    "{context}: {word} was lost; its steps: {trail:#?}; files holding it: {}\nall steps: {actions:#?}",
                    String::from_utf8_lossy(&anywhere.stdout)
                );
            }
        }
        for word in &ingested {
            let found = replica.json(&net, &["search", word], &[0]);
            assert!(found["result_count"].as_u64().unwrap_or(0) >= 1, "{context}: search does not find {word}: {found}");
        }
    }
    eprintln!(
        "seed {seed}: {steps} steps, {} acknowledged writes ({archived} archive_notes runs), {} faults, converged and checked in {:.1} s\n{}",
        written.len(),
        faults.len(),
        started.elapsed().as_secs_f64(),
        faults.join("\n")
    );
}

/// Issue 49 scope 3: eight replicas, each in its own namespace, write and push at once to one
/// gated remote; the remote's compare-and-swap orders them, refused pushes fetch, integrate and
/// retry. Every acknowledged write lands exactly once (one commit, its text in one note), every
/// replica ends with the remote's tree and the chains verify. The rates and latencies are
/// `benches/contention.rs`'s (docs/replication.md "Many writers").
#[test]
fn eight_replicas_pushing_at_once_through_a_gated_remote_land_every_write_exactly_once() {
    let team = crate::contention::Team::start(Path::new(BIN), 8);
    // 4 writes per second across the team for 6 s: every replica has writes waiting at once.
    let phase = team.phase(4.0, 6.0, Duration::from_secs(90), 0x49);
    assert_eq!(phase.failed_writes, 0, "a write failed: {:?}", phase.first_failure);
    assert!(phase.writes.len() >= 8, "too few writes to contend: {}", phase.writes.len());
    eprintln!("{:?}\nfailed replicate runs: {:#?}", phase.summary(), phase.run_failures);
    team.converge();
    team.check_exactly_once(&phase.writes).unwrap();
}
