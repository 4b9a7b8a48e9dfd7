//! Many writers, one order (issue 49 scope 3): N replicas, each in its own network namespace
//! and each its own processes, write notes and `replicate` them to one bare remote that carries
//! the gate (`paravault gate install`), served by `git daemon` in the remote's namespace. The
//! remote's ref compare-and-swap is the team's commit point: a refused push fetches, integrates
//! and retries (bounded, with jitter). Shared by `replication_netns` (a short run in CI that
//! checks every acknowledged write lands exactly once) and `benches/contention.rs` (rising rates,
//! the figures in docs/replication.md).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::netns::{Net, must};

/// One replica of the team.
pub struct Member {
    pub index: usize,
    pub root: PathBuf,
    pub replica_id: String,
}

/// The team: the namespaces, the gated remote and the replicas (cloned from it).
pub struct Team {
    pub net: Net,
    pub remote: PathBuf,
    pub members: Vec<Member>,
    bin: PathBuf,
    _dir: tempfile::TempDir,
}

/// One acknowledged write: `ingest` exited 0 at `acked` with receipt `seq` on `replica`.
#[derive(Debug, Clone)]
pub struct Write {
    pub replica: usize,
    pub seq: u64,
    pub path: String,
    pub token: String,
    pub acked: Instant,
    /// When a `replicate` that started after the ack returned in sync (the write is in the
    /// remote's history); None when the phase ended first (`Team::converge` integrates it).
    pub integrated: Option<Instant>,
}

/// One `replicate` run.
#[derive(Debug, Clone)]
pub struct Run {
    pub replica: usize,
    /// Its fetch-integrate-push rounds (0 when it failed without saying).
    pub attempts: u64,
    pub exit: i32,
    pub took: Duration,
    /// The error it printed, when it failed.
    pub error: Option<String>,
}

/// What one phase at one offered rate did.
#[derive(Debug, Default)]
pub struct Phase {
    pub writes: Vec<Write>,
    pub runs: Vec<Run>,
    pub failed_writes: usize,
    /// What the first failed write said.
    pub first_failure: Option<String>,
    /// What each failed `replicate` run said (its error code and message).
    pub run_failures: Vec<String>,
    pub elapsed: Duration,
}

/// A phase in figures.
#[derive(Debug, Clone)]
#[allow(dead_code)] // the test prints it; benches/contention.rs reads every field
pub struct Summary {
    pub writes: usize,
    pub failed_writes: usize,
    /// Writes integrated per second of the phase.
    pub integrated_per_s: f64,
    /// Local commit (ingest acknowledged) → in the remote's history, ms.
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Writes the phase ended before integrating (converge integrates them).
    pub not_integrated: usize,
    pub runs: usize,
    /// Fetch-integrate-push rounds per `replicate` run.
    pub mean_attempts: f64,
    /// Share of runs that needed more than one round.
    pub retried_share: f64,
    /// Runs that gave up (the remote moved during all five rounds) or failed.
    pub failed_runs: usize,
    pub run_p50_ms: f64,
    pub replicas_busy: usize,
}

impl Phase {
    pub fn summary(&self) -> Summary {
        let mut latencies: Vec<f64> =
            self.writes.iter().filter_map(|w| w.integrated.map(|at| (at - w.acked).as_secs_f64() * 1e3)).collect();
        let mut took: Vec<f64> = self.runs.iter().map(|r| r.took.as_secs_f64() * 1e3).collect();
        let runs = self.runs.len().max(1) as f64;
        Summary {
            writes: self.writes.len(),
            failed_writes: self.failed_writes,
            integrated_per_s: latencies.len() as f64 / self.elapsed.as_secs_f64(),
            p50_ms: quantile(&mut latencies, 0.5).unwrap_or(f64::NAN),
            p99_ms: quantile(&mut latencies, 0.99).unwrap_or(f64::NAN),
            not_integrated: self.writes.iter().filter(|w| w.integrated.is_none()).count(),
            runs: self.runs.len(),
            mean_attempts: self.runs.iter().map(|r| r.attempts as f64).sum::<f64>() / runs,
            retried_share: self.runs.iter().filter(|r| r.attempts > 1).count() as f64 / runs,
            failed_runs: self.runs.iter().filter(|r| r.exit != 0).count(),
            run_p50_ms: quantile(&mut took, 0.5).unwrap_or(f64::NAN),
            replicas_busy: self.runs.iter().map(|r| r.replica).collect::<std::collections::BTreeSet<_>>().len(),
        }
    }
}

/// A small seeded generator (xorshift64*): arrivals and jitter repeat with the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// An exponential gap with the given mean (Poisson arrivals).
    fn exp(&mut self, mean: f64) -> Duration {
        let u = ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        Duration::from_secs_f64(-mean * u.ln())
    }
}

impl Team {
    /// A bare remote with the gate, served in its namespace; replica 0 creates the vault and
    /// pushes it, the others clone it across their own links.
    pub fn start(bin: &Path, replicas: usize) -> Team {
        assert!(replicas >= 1);
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("served");
        std::fs::create_dir_all(&base).unwrap();
        let remote = base.join("remote.git");
        must("git", &["init", "-q", "--bare", "-b", "main", remote.to_str().unwrap()]);
        let gate = Command::new(bin).args(["--json", "gate", "install"]).arg(&remote).env_remove("PARAVAULT_VAULT_DIR").output().unwrap();
        assert!(gate.status.success(), "gate install: {}", String::from_utf8_lossy(&gate.stderr));
        let net = Net::start(&base, replicas);
        let mut team = Team { net, remote, members: Vec::new(), bin: bin.to_path_buf(), _dir: dir };
        let first = team.folder(0);
        team.must(0, &first, &["init"]);
        std::fs::write(first.join(".paravault/policy.yaml"), "replication:\n  network_timeout_s: 30\n").unwrap();
        team.must(0, &first, &["remote", "add", "origin", &team.net.url(0)]);
        team.must(0, &first, &["replicate"]);
        team.members.push(Member { index: 0, replica_id: replica_id(&first), root: first });
        for i in 1..replicas {
            let folder = team.folder(i);
            let out = team.net.exec(i, bin.to_str().unwrap()).args(["--json", "clone", &team.net.url(i)]).arg(&folder).output().unwrap();
            assert!(out.status.success(), "clone on replica {i}: {}", String::from_utf8_lossy(&out.stderr));
            team.members.push(Member { index: i, replica_id: replica_id(&folder), root: folder });
        }
        team
    }

    fn folder(&self, i: usize) -> PathBuf {
        self._dir.path().join(format!("r{i}"))
    }

    /// `paravault --json --vault ROOT ARGS` in replica `i`'s namespace.
    fn pv(&self, i: usize, root: &Path, args: &[&str]) -> Output {
        self.net
            .exec(i, self.bin.to_str().unwrap())
            .arg("--json")
            .arg("--vault")
            .arg(root)
            .args(args)
            .env_remove("PARAVAULT_VAULT_DIR")
            .env("PARAVAULT_LOG", "error")
            .output()
            .unwrap()
    }

    fn must(&self, i: usize, root: &Path, args: &[&str]) -> serde_json::Value {
        let out = self.pv(i, root, args);
        assert!(
            out.status.success(),
            "paravault {args:?} on replica {i}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
    }

    /// Writes arrive on each replica at `rate / replicas` per second (Poisson) for `seconds`;
    /// each replica's replicator runs `replicate` whenever writes wait, so up to every replica
    /// pushes at once. After the writers stop the replicators drain what waits (bounded by
    /// `drain`).
    pub fn phase(&self, rate: f64, seconds: f64, drain: Duration, seed: u64) -> Phase {
        let n = self.members.len();
        let mean_gap = n as f64 / rate;
        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(seconds);
        let writes: Mutex<Vec<Write>> = Mutex::new(Vec::new());
        let runs: Mutex<Vec<Run>> = Mutex::new(Vec::new());
        let failed: Mutex<(usize, Option<String>)> = Mutex::new((0, None));
        let writers_done: Vec<Mutex<bool>> = (0..n).map(|_| Mutex::new(false)).collect();
        let (all_writes, all_runs) = (&writes, &runs);
        std::thread::scope(|scope| {
            for member in &self.members {
                let (writes, failed, done) = (all_writes, &failed, &writers_done[member.index]);
                scope.spawn(move || {
                    let mut rng = Rng((seed ^ (member.index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1);
                    let mut next = Instant::now() + rng.exp(mean_gap);
                    let mut k = 0u64;
                    while next < deadline {
                        std::thread::sleep(next.saturating_duration_since(Instant::now()));
                        k += 1;
                        let token = format!("tok{:x}r{}k{k}end", seed & 0xffff_ffff, member.index);
                        let path = format!("03_Resources/c{}-{}-{k}.md", seed & 0xffff, member.index);
                        let body = format!("Written by replica {} as write {k}: {token}.", member.index);
                        let out = self.pv(
                            member.index,
                            &member.root,
                            &[
                                "ingest",
                                &path,
                                "--title",
                                &format!("C {} {k}", member.index),
                                "--description",
                                "contention write",
                                "--content",
                                &body,
                            ],
                        );
                        let receipt: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
                        match receipt["seq"].as_u64().filter(|_| out.status.success()) {
                            Some(seq) => writes.lock().unwrap().push(Write {
                                replica: member.index,
                                seq,
                                path,
                                token,
                                acked: Instant::now(),
                                integrated: None,
                            }),
                            None => {
                                let mut failed = failed.lock().unwrap();
                                failed.0 += 1;
                                failed.1.get_or_insert_with(|| {
                                    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
                                });
                            }
                        }
                        next += rng.exp(mean_gap);
                    }
                    *done.lock().unwrap() = true;
                });
                let (writes, runs, done) = (all_writes, all_runs, &writers_done[member.index]);
                scope.spawn(move || {
                    let mut rng = Rng(seed.rotate_left(17) ^ member.index as u64 | 1);
                    loop {
                        let finished = *done.lock().unwrap();
                        let waiting: Vec<usize> = writes
                            .lock()
                            .unwrap()
                            .iter()
                            .enumerate()
                            .filter(|(_, w)| w.replica == member.index && w.integrated.is_none())
                            .map(|(i, _)| i)
                            .collect();
                        if waiting.is_empty() {
                            if finished {
                                break;
                            }
                            std::thread::sleep(Duration::from_millis(20));
                            continue;
                        }
                        if finished && Instant::now() > deadline + drain {
                            break;
                        }
                        let began = Instant::now();
                        let out = self.pv(member.index, &member.root, &["replicate"]);
                        let took = began.elapsed();
                        let exit = out.status.code().unwrap_or(-1);
                        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
                        let mut attempts = report["attempts"].as_u64().unwrap_or(0);
                        let error = (exit != 0).then(|| {
                            let said: serde_json::Value =
                                serde_json::from_slice(&out.stderr).or_else(|_| serde_json::from_slice(&out.stdout)).unwrap_or_default();
                            match said["error"]["code"].as_str() {
                                Some(code) => format!("{code}: {}", said["error"]["message"].as_str().unwrap_or_default()),
                                None => format!("exit {exit}: {}", String::from_utf8_lossy(&out.stderr).trim()),
                            }
                        });
                        if let Some(rounds) = error.as_deref().and_then(exhausted_rounds) {
                            attempts = rounds; // the run gave up after this many rounds
                        }
                        runs.lock().unwrap().push(Run { replica: member.index, attempts, exit, took, error });
                        if exit == 0 && report["in_sync"] == true {
                            let now = Instant::now();
                            let mut all = writes.lock().unwrap();
                            for i in waiting {
                                all[i].integrated = Some(now);
                            }
                        } else {
                            // Refused five times over (or the network failed): back off and try again.
                            std::thread::sleep(Duration::from_millis(100 + rng.next() % 400));
                        }
                    }
                });
            }
        });
        let (failed_writes, first_failure) = failed.into_inner().unwrap();
        let runs = runs.into_inner().unwrap();
        Phase {
            run_failures: runs.iter().filter_map(|r| r.error.clone()).collect(),
            writes: writes.into_inner().unwrap(),
            runs,
            failed_writes,
            first_failure,
            elapsed: started.elapsed(),
        }
    }

    /// The floor of one write's trip with nobody else pushing: `count` times, replica `i`
    /// ingests a note and replicates it at once; the time from the ingest's acknowledgement to
    /// the end of that `replicate` (ms), and the same for a plain `git push` of a one-file commit
    /// over the same link to an ungated repository (no engine, no hook).
    #[allow(dead_code)] // benches/contention.rs
    pub fn floors(&self, i: usize, count: usize) -> (Vec<f64>, Vec<f64>) {
        let member = &self.members[i];
        let mut trip = Vec::new();
        for k in 0..count {
            let path = format!("03_Resources/floor-{i}-{k}.md");
            self.must(i, &member.root, &["ingest", &path, "--title", "Floor", "--description", "floor write", "--content", "floor"]);
            let acked = Instant::now();
            let report = self.must(i, &member.root, &["replicate"]);
            assert_eq!(report["in_sync"], true, "{report}");
            trip.push(acked.elapsed().as_secs_f64() * 1e3);
        }
        let plain = self._dir.path().join("plain");
        let served = self._dir.path().join("served/plain.git");
        must("git", &["init", "-q", "--bare", "-b", "main", served.to_str().unwrap()]);
        must("git", &["init", "-q", "-b", "main", plain.to_str().unwrap()]);
        let url = self.net.url(i).replace("remote.git", "plain.git");
        let mut push = Vec::new();
        for k in 0..count {
            std::fs::write(plain.join(format!("f{k}.md")), format!("plain {k}\n")).unwrap();
            for args in [&["add", "-A"][..], &["-c", "user.name=f", "-c", "user.email=f@f", "commit", "-q", "-m", "floor"][..]] {
                must("git", &[&["-C", plain.to_str().unwrap()][..], args].concat());
            }
            let began = Instant::now();
            let out = self.net.exec(i, "git").arg("-C").arg(&plain).args(["push", "-q", &url, "main"]).output().unwrap();
            assert!(out.status.success(), "plain push: {}", String::from_utf8_lossy(&out.stderr));
            push.push(began.elapsed().as_secs_f64() * 1e3);
        }
        (trip, push)
    }

    /// A partition and its healing (benches/replication.rs): replica `cut`'s link is down for
    /// `seconds` while every replica writes a note every `gap` and replicates after each one
    /// (the cut replica's runs fail; its writes stay committed here). Then the link comes back
    /// and every replica replicates again and again; the time from the link's return until
    /// every replica holds the remote's head is the convergence time.
    #[allow(dead_code)] // benches/replication.rs
    pub fn partition(&mut self, cut: usize, seconds: f64, gap: Duration) -> Partitioned {
        self.net.set_link(cut, false);
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        let writes: Mutex<Vec<Write>> = Mutex::new(Vec::new());
        let failed_runs = Mutex::new(0usize);
        let team = &*self;
        std::thread::scope(|scope| {
            for member in &team.members {
                let (writes, failed_runs) = (&writes, &failed_runs);
                scope.spawn(move || {
                    let mut k = 0u64;
                    while Instant::now() < deadline {
                        k += 1;
                        let token = format!("part{cut}r{}k{k}end", member.index);
                        let path = format!("03_Resources/p{cut}-{}-{k}.md", member.index);
                        let body = format!("Written by replica {} during the partition: {token}.", member.index);
                        let title = format!("P {} {k}", member.index);
                        let out = team.pv(
                            member.index,
                            &member.root,
                            &["ingest", &path, "--title", &title, "--description", "partition write", "--content", &body],
                        );
                        let receipt: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
                        let seq = receipt["seq"].as_u64().filter(|_| out.status.success());
                        let seq = seq.unwrap_or_else(|| {
                            panic!("a write on replica {} failed: {}", member.index, String::from_utf8_lossy(&out.stderr))
                        });
                        writes.lock().unwrap().push(Write {
                            replica: member.index,
                            seq,
                            path,
                            token,
                            acked: Instant::now(),
                            integrated: None,
                        });
                        if !team.pv(member.index, &member.root, &["replicate"]).status.success() {
                            *failed_runs.lock().unwrap() += 1;
                        }
                        std::thread::sleep(gap);
                    }
                });
            }
        });
        self.net.set_link(cut, true);
        let healed = Instant::now();
        let converged: Mutex<Option<Instant>> = Mutex::new(None);
        let runs = Mutex::new(0usize);
        let team = &*self;
        std::thread::scope(|scope| {
            for member in &team.members {
                let (converged, runs) = (&converged, &runs);
                scope.spawn(move || {
                    while converged.lock().unwrap().is_none() && healed.elapsed() < Duration::from_secs(600) {
                        let _ = team.pv(member.index, &member.root, &["replicate"]);
                        *runs.lock().unwrap() += 1;
                    }
                });
            }
            scope.spawn(|| {
                while healed.elapsed() < Duration::from_secs(600) {
                    let remote = git(&team.remote, &["rev-parse", "refs/heads/main"]);
                    if team.members.iter().all(|m| git(&m.root, &["rev-parse", "HEAD"]) == remote) {
                        *converged.lock().unwrap() = Some(Instant::now());
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                *converged.lock().unwrap() = Some(Instant::now());
            });
        });
        let writes = writes.into_inner().unwrap();
        let at = converged.into_inner().unwrap().expect("the monitor always ends");
        let remote = git(&self.remote, &["rev-parse", "refs/heads/main"]);
        let all_equal = self.members.iter().all(|m| git(&m.root, &["rev-parse", "HEAD"]) == remote);
        Partitioned {
            writes_on_cut: writes.iter().filter(|w| w.replica == cut).count(),
            writes,
            failed_runs: failed_runs.into_inner().unwrap(),
            converged_after: all_equal.then(|| at.duration_since(healed)),
            runs_to_converge: runs.into_inner().unwrap(),
        }
    }

    /// Replicates every replica in turn until each holds the remote's head (at most 6 rounds).
    pub fn converge(&self) {
        for _ in 0..6 {
            for member in &self.members {
                let out = self.pv(member.index, &member.root, &["replicate"]);
                assert!(
                    matches!(out.status.code(), Some(0)),
                    "replicate on replica {} while converging: {}{}",
                    member.index,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let remote = git(&self.remote, &["rev-parse", "refs/heads/main"]);
            if self.members.iter().all(|m| git(&m.root, &["rev-parse", "HEAD"]) == remote) {
                return;
            }
        }
        panic!("the replicas did not converge in 6 rounds");
    }

    /// Every acknowledged write is in the remote's history exactly once: its receipt's commit
    /// (the `Paravault-Receipt` trailer) once, its text in exactly one note at its path; every
    /// replica holds the remote's tree and every chain verifies.
    pub fn check_exactly_once(&self, writes: &[Write]) -> Result<(), String> {
        let log = git(&self.remote, &["log", "--format=%B", "refs/heads/main"]);
        let mut problems = Vec::new();
        for w in writes {
            let id = &self.members[w.replica].replica_id;
            let trailer = format!("Paravault-Receipt: {id}:{} ", w.seq);
            let commits = log.lines().filter(|l| l.starts_with(&trailer)).count();
            if commits != 1 {
                problems.push(format!("{} (replica {} receipt {}): {commits} commits", w.path, w.replica, w.seq));
            }
            let found =
                Command::new("git").arg("-C").arg(&self.remote).args(["grep", "-l", "-F", &w.token, "refs/heads/main"]).output().unwrap();
            let files: Vec<String> =
                String::from_utf8_lossy(&found.stdout).lines().map(|l| l.trim_start_matches("refs/heads/main:").to_string()).collect();
            if files != [w.path.clone()] {
                problems.push(format!("{}: its text is in {files:?}", w.path));
            }
        }
        let tree = git(&self.remote, &["ls-tree", "-r", "refs/heads/main"]);
        for member in &self.members {
            if git(&member.root, &["ls-tree", "-r", "HEAD"]) != tree {
                problems.push(format!("replica {} does not hold the remote's tree", member.index));
            }
        }
        let history = self.must(0, &self.members[0].root, &["history", "--verify"]);
        if history["ok"] != true {
            problems.push(format!("history --verify: {history}"));
        }
        if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
    }
}

/// What a partition and its healing did (`Team::partition`).
#[allow(dead_code)] // benches/replication.rs
pub struct Partitioned {
    /// Every acknowledged write, on every replica, during the partition.
    pub writes: Vec<Write>,
    /// Of them, the cut replica's (committed there, pushed only after the link returned).
    pub writes_on_cut: usize,
    /// `replicate` runs that failed during the partition (the cut replica's, and any other).
    pub failed_runs: usize,
    /// From the link's return until every replica held the remote's head (None: not within
    /// 10 minutes).
    pub converged_after: Option<Duration>,
    /// `replicate` runs (all replicas) until then.
    pub runs_to_converge: usize,
}

/// The rounds a `replicate` made before giving up ("the remote moved during each of N attempts").
fn exhausted_rounds(error: &str) -> Option<u64> {
    error.split("during each of ").nth(1)?.split_whitespace().next()?.parse().ok()
}

fn replica_id(root: &Path) -> String {
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(root.join(".paravault/replica.json")).unwrap()).unwrap();
    config["replica_id"].as_str().unwrap().to_string()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?} in {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// The `q` quantile (0..=1) of `values`, sorted in place; None when empty.
pub fn quantile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((values.len() - 1) as f64 * q).round() as usize;
    Some(values[rank])
}
