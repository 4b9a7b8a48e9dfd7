//! What replication costs (issue 48): per transaction at 2,000 and 100,000 notes, repository
//! growth per 1,000 transactions, and the time replicas take to converge after a partition.
//!
//! 1. **Cost per transaction**, for each size: a generated vault made a replica of a bare remote
//!    (`remote add`, pushed), and a second replica cloned from it. On the first, `k` ingests
//!    (each one a transaction and one commit): the ingest's wall time against the receipt's own
//!    duration (the transaction without its commit) gives the commit's share; then one
//!    `replicate` pushes the `k` commits and one `replicate` on the clone integrates them. Paired
//!    in the same run with the floors: one durable 4 KiB replace before each ingest, and a
//!    `git ls-remote` (one round trip to the remote, nothing moved) before each `replicate`;
//!    and a `replicate` with nothing to do (the fixed cost of a run at that size); last, the
//!    same and a `replicate` after 10 outside edits by where it looks for outside edits (git
//!    over the whole work tree, the folder journal, a long-lived process's watcher).
//! 2. **Growth per 1,000 transactions** (the first size): `git count-objects` of the replica
//!    before and after `g` ingests and a `replicate` (loose objects), after `git gc` (packed),
//!    and the bare remote's pack; against the bytes of note text written.
//! 3. **Convergence after a partition** (root, iproute2, git): `PARAVAULT_REPL_REPLICAS`
//!    replicas in their own network namespaces and a gated remote served by `git daemon`
//!    (tests/it/contention.rs); one replica's link is cut for `PARAVAULT_REPL_PARTITION_S`
//!    seconds while every replica writes a note every 2 s and replicates after each; then the
//!    link returns and every replica replicates until all hold the remote's head. Prints the
//!    time from the link's return to convergence, and checks every acknowledged write is in the
//!    remote's history exactly once and every chain verifies.
//!
//! Run: `cargo bench --locked --profile dev --bench replication` (as root for part 3).
//! Environment: `PARAVAULT_REPL_SIZES` (default `2000,100000`), `PARAVAULT_REPL_TX` (k, default
//! 50), `PARAVAULT_REPL_GROWTH_TX` (g, default 1000), `PARAVAULT_REPL_PARTITION_S` (default 60;
//! `0` leaves part 3 out, saying so), `PARAVAULT_REPL_REPLICAS` (default 4).

// Bench fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

#[path = "support/mod.rs"]
mod support;

#[path = "../tests/it/netns.rs"]
#[allow(dead_code)]
mod netns;

#[path = "../tests/it/contention.rs"]
#[allow(dead_code)]
mod contention;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use paravault::Vault;
use paravault::vault::VaultOptions;
use paravault::write::operations::IngestRequest;
use support::stats::{floor_sample, ms, p50};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?} in {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// One ingest on `vault`: (wall time, the receipt's own duration).
fn ingest(vault: &Vault, notes: usize, tag: &str, i: usize) -> (Duration, Duration, usize) {
    let content = format!(
        "Replication bench note {tag}-{i}: the cost of one transaction as one commit. See [[{}]].",
        support::note_basename(i % notes)
    );
    let request = IngestRequest {
        name: format!("01_Projects/repl-{tag}-{i}"),
        note_type: "Project".into(),
        title: format!("Replication {tag} {i}"),
        description: "A note written by the replication bench".into(),
        content: content.clone(),
        ..Default::default()
    };
    let start = Instant::now();
    let receipt = vault.ingest_note(&request).expect("ingest").to_value();
    let wall = start.elapsed();
    // P.O.W.E.R.'s receipt shape carries the duration as a decimal string.
    let own = receipt.get("duration_ms").and_then(|d| d.as_f64().or_else(|| d.as_str()?.parse().ok())).expect("the receipt's duration_ms");
    (wall, Duration::from_secs_f64(own / 1e3), content.len())
}

/// `git count-objects -v`: (loose KiB, packed KiB).
fn objects(repo: &Path) -> (u64, u64) {
    let text = git(repo, &["count-objects", "-v"]);
    let field = |name: &str| {
        text.lines().find_map(|l| l.strip_prefix(&format!("{name}: "))).and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    (field("size"), field("size-pack"))
}

fn cost_per_transaction(notes: usize, k: usize, growth: Option<usize>) {
    let dir = tempfile::Builder::new().prefix("pv-repl-").tempdir_in(support::bench_data_dir()).unwrap();
    let (a_root, b_root, remote) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("remote.git"));
    git(dir.path(), &["init", "-q", "--bare", "-b", "main", remote.to_str().unwrap()]);
    let started = Instant::now();
    support::generate_vault(&a_root, notes);
    let a = Vault::open(&a_root, VaultOptions::default()).unwrap();
    a.generate_index().unwrap();
    a.sync_vault(&paravault::retrieval::SyncParams::default()).unwrap();
    let indexed = started.elapsed();
    let began = Instant::now();
    a.remote_add("origin", remote.to_str().unwrap()).unwrap();
    let adopted = began.elapsed();
    let began = Instant::now();
    assert!(a.replicate().unwrap().pushed);
    let first_push = began.elapsed();
    let began = Instant::now();
    paravault::replicate::clone_vault(remote.to_str().unwrap(), &b_root, VaultOptions::default()).unwrap();
    let cloned = began.elapsed();
    let b = Vault::open(&b_root, VaultOptions::default()).unwrap();
    println!(
        "-- {notes} notes: generated and indexed {:.1} s; remote add (one commit of every file) {:.1} s; first push {:.1} s; clone (fetch, check out, index) {:.1} s",
        indexed.as_secs_f64(),
        adopted.as_secs_f64(),
        first_push.as_secs_f64(),
        cloned.as_secs_f64()
    );

    let floor_dir = tempfile::Builder::new().prefix("pv-floor-").tempdir_in(dir.path()).unwrap();
    // The fixed cost of a run at this size: nothing to move, against one round trip.
    let (mut noop, mut trip) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let began = Instant::now();
        git(&a_root, &["ls-remote", "origin", "refs/heads/main"]);
        trip.push(began.elapsed());
        let began = Instant::now();
        assert!(a.replicate().unwrap().in_sync);
        noop.push(began.elapsed());
    }
    let trip_p50 = p50(&trip);
    let (mut floors, mut walls, mut owns) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..k {
        floors.push(floor_sample(floor_dir.path(), i));
        let (wall, own, _) = ingest(&a, notes, "tx", i);
        walls.push(wall);
        owns.push(own);
    }
    let commit_share: Vec<Duration> = walls.iter().zip(&owns).map(|(w, o)| w.saturating_sub(*o)).collect();
    let floor_p50 = p50(&floors);
    let began = Instant::now();
    let pushed = a.replicate().unwrap();
    let push_all = began.elapsed();
    assert!(pushed.pushed && pushed.in_sync, "the push of {k} transactions did not land");
    let began = Instant::now();
    let pulled = b.replicate().unwrap();
    let pull_all = began.elapsed();
    assert!(pulled.in_sync && pulled.notes_changed.len() >= k, "the clone integrated {} notes, not {k}", pulled.notes_changed.len());
    println!(
        "   floors (same run): durable 4 KiB replace p50 {:.2} ms; git ls-remote (one round trip) p50 {:.1} ms",
        ms(floor_p50),
        ms(trip_p50)
    );
    println!(
        "   ingest on a replica p50 {:.2} ms ({:.1}x floor), of which the transaction {:.2} ms and its commit {:.2} ms",
        ms(p50(&walls)),
        p50(&walls).as_secs_f64() / floor_p50.as_secs_f64(),
        ms(p50(&owns)),
        ms(p50(&commit_share))
    );
    println!(
        "   replicate with nothing to do p50 {:.1} ms ({:.1}x the round trip); pushing {k} transactions {:.1} ms ({:.2} ms per transaction); integrating them on the clone {:.1} ms ({:.2} ms per transaction)",
        ms(p50(&noop)),
        p50(&noop).as_secs_f64() / trip_p50.as_secs_f64(),
        ms(push_all),
        ms(push_all) / k as f64,
        ms(pull_all),
        ms(pull_all) / k as f64
    );

    if let Some(g) = growth {
        growth_per_transactions(&a, &a_root, &remote, notes, g);
    }
    outside_edit_evidence(&a_root, notes, trip_p50);
}

/// A `replicate` with nothing to do and one after 10 outside edits, by where it looks for
/// outside edits: `git status` of the whole work tree (no evidence), the folder journal
/// (`paravault watch`, here on a thread of this process) since the last check, and a
/// long-lived process's own file watcher. Last in the run: the journal, once running, also
/// serves the writes of everything after it.
fn outside_edit_evidence(root: &Path, notes: usize, trip: Duration) {
    let edit = |round: usize| {
        for i in 0..10 {
            let path = root.join(format!("01_Projects/repl-tx-{i}.md"));
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, format!("{text}\nEdited by a person, round {round}.\n")).unwrap();
        }
    };
    let measure = |vault: &Vault, from: &str| {
        let (mut idle, mut edited) = (Vec::new(), Vec::new());
        for round in 0..5 {
            let began = Instant::now();
            let report = vault.replicate().unwrap();
            idle.push(began.elapsed());
            assert!(report.in_sync && report.committed_before == 0, "{report:?}");
            assert_eq!(report.outside_edits_from, from, "{report:?}");
            edit(round);
            let began = Instant::now();
            let report = vault.replicate().unwrap();
            edited.push(began.elapsed());
            assert_eq!((report.committed_before, report.outside_edits_from), (1, from), "{report:?}");
        }
        (p50(&idle), p50(&edited))
    };
    let plain = Vault::open(root, VaultOptions::default()).unwrap();
    let whole = measure(&plain, "work tree");
    let watched = Vault::open(root, VaultOptions::default()).unwrap();
    watched.watch_disk();
    assert_eq!(watched.replicate().unwrap().outside_edits_from, "work tree", "a first check has no evidence");
    let watcher = measure(&watched, "watcher");
    drop(watched);
    let (started, ready) = std::sync::mpsc::channel();
    let journal_root = root.to_path_buf();
    std::thread::spawn(move || {
        let mut journal = paravault::folder_journal::FolderJournal::start(&journal_root).unwrap();
        started.send(()).unwrap();
        journal.run(None)
    });
    ready.recv().unwrap();
    assert_eq!(plain.replicate().unwrap().outside_edits_from, "work tree", "a first check has no recorded position");
    let journal = measure(&plain, "folder journal");
    for (name, (idle, edited)) in
        [("git status of the work tree", whole), ("the folder journal", journal), ("the process's watcher", watcher)]
    {
        println!(
            "   outside edits from {name}: replicate with nothing to do p50 {:.1} ms ({:.1}x the round trip); after 10 outside edits p50 {:.1} ms ({notes} notes)",
            ms(idle),
            idle.as_secs_f64() / trip.as_secs_f64(),
            ms(edited)
        );
    }
}

/// Repository growth per `g` transactions, from a packed start.
fn growth_per_transactions(a: &Vault, a_root: &Path, remote: &Path, notes: usize, g: usize) {
    {
        // From a packed start, so the growth is the transactions' alone.
        git(a_root, &["gc", "-q"]);
        let (loose0, packed0) = objects(a_root);
        let (rloose0, rpacked0) = objects(remote);
        let mut text = 0usize;
        let began = Instant::now();
        for i in 0..g {
            text += ingest(a, notes, "growth", i).2;
        }
        let wrote = began.elapsed();
        assert!(a.replicate().unwrap().pushed);
        let (loose1, packed1) = objects(a_root);
        let (rloose1, rpacked1) = objects(remote);
        git(a_root, &["gc", "-q"]);
        let (loose2, packed2) = objects(a_root);
        let per = |kib: u64| kib as f64 * 1000.0 / g as f64;
        println!(
            "   growth per 1,000 transactions ({g} ingests in {:.1} s, {:.0} KiB of note text): the replica after its replicate (git gc --auto) {:.0} KiB; after a full git gc {:.0} KiB; the remote {:.0} KiB",
            wrote.as_secs_f64(),
            text as f64 / 1024.0 * 1000.0 / g as f64,
            per((loose1 + packed1).saturating_sub(loose0 + packed0)),
            per((loose2 + packed2).saturating_sub(loose0 + packed0)),
            per((rloose1 + rpacked1).saturating_sub(rloose0 + rpacked0)),
        );
    }
}

fn main() {
    let sizes: Vec<usize> = std::env::var("PARAVAULT_REPL_SIZES")
        .unwrap_or_else(|_| "2000,100000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("PARAVAULT_REPL_SIZES: note counts separated by commas"))
        .collect();
    let k: usize = env("PARAVAULT_REPL_TX", 50);
    let growth: usize = env("PARAVAULT_REPL_GROWTH_TX", 1000);
    let partition_s: f64 = env("PARAVAULT_REPL_PARTITION_S", 60.0);
    let replicas: usize = env("PARAVAULT_REPL_REPLICAS", 4);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("replication: {cores} cores, git {}", git(Path::new("."), &["--version"]));
    for (i, notes) in sizes.iter().enumerate() {
        cost_per_transaction(*notes, k, (i == 0 && growth > 0).then_some(growth));
    }
    if partition_s <= 0.0 {
        println!("-- partition: left out (PARAVAULT_REPL_PARTITION_S=0)");
        return;
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_paravault"));
    let mut team = contention::Team::start(bin, replicas);
    println!(
        "-- partition: {replicas} replicas in their own network namespaces, one gated remote over git://; replica 0 cut for {partition_s:.0} s"
    );
    let outcome = team.partition(0, partition_s, Duration::from_secs(2));
    let after = outcome.converged_after.expect("the replicas did not converge within 10 minutes of the link's return");
    println!(
        "   {} writes acknowledged during the partition ({} on the cut replica, committed there); {} replicate runs failed meanwhile",
        outcome.writes.len(),
        outcome.writes_on_cut,
        outcome.failed_runs
    );
    println!(
        "   converged {:.1} s after the link returned ({} replicate runs across the team)",
        after.as_secs_f64(),
        outcome.runs_to_converge
    );
    team.check_exactly_once(&outcome.writes).expect("every acknowledged write in the remote's history exactly once");
    println!("   every acknowledged write is in the remote's history exactly once; every replica holds its tree; history --verify ok");
}
