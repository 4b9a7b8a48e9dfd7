//! One vault on several devices, over git (docs/replication.md).
//!
//! `remote add` makes the vault a replica (a git work tree with paravault's own ignore rules
//! and a receipt mirror); from then on every transaction is a commit (`write::replica`).
//! `replicate` is fetch → integrate → push:
//!
//! 1. **commit** what is left: files changed outside the engine (as an `outside_edit` commit
//!    with its receipt) and receipts not yet in the mirror;
//! 2. **fetch** the remote's branch into a scratch ref, refusing (`remote_history_rewritten`)
//!    a branch that no longer contains what this replica last saw of it;
//! 3. **merge off the work tree** (`git merge-tree --write-tree`): nothing half-merged is ever
//!    visible. Notes that merged cleanly, or that the other side changed alone, are put in place
//!    by **one write transaction** (`replicate.merge`: lint gate, catalogs, receipt, search
//!    generation, O(change)); notes that do not merge (overlapping edits, edit against removal,
//!    a merge the lint gate refuses) keep this replica's text and the other side's is held whole
//!    as a `replication_conflict` proposal for a person (`paravault approvals`, the web UI).
//!    Other replicas' receipt mirrors and files that are not notes are copied in; log.md is
//!    merged as the union of both sides' appends; catalog pages are rendered here, never
//!    merged as text;
//! 4. **commit** the integration (two parents; a plain fast-forward when nothing here
//!    differs from the remote) and **push** it, fetching and integrating again when the remote
//!    moved meanwhile (bounded, with jitter).
//!
//! One `replicate` runs at a time per vault (`.paravault/replicate.lock`); the writer lock is
//! taken only for each commit and for the transaction, never across the network.

mod evidence;
pub mod gate;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::approvals::ConflictOrigin;
use crate::error::{Error, Result};
use crate::note::path::VaultPath;
use crate::store::git::Git;
use crate::store::{durable, layout};
use crate::vault::{Vault, VaultOptions};
use crate::write::replica::{self, MERGE_OPERATION, ReplicaConfig, ReplicaState};
use crate::write::{Mutation, NoteChange};

/// How many times `replicate` fetches and integrates again when its push is refused because
/// the remote moved meanwhile.
pub const PUSH_ATTEMPTS: usize = 5;
/// The bound of the first pause before a retried push (ms); it doubles each round.
const PUSH_BACKOFF_MS: u64 = 400;
/// The default branch of a vault that `remote add` makes a repository.
pub const DEFAULT_BRANCH: &str = "main";
/// The lock one `replicate` (or `clone`'s first integration) holds.
const REPLICATE_LOCK: &str = ".paravault/replicate.lock";

/// The engine files and folders that travel (the ignore rules below let them through).
const TRAVELLING_STATE: [&str; 8] = [
    layout::GIT_IGNORE,
    layout::REPLICAS_DIR,
    layout::CONFLICTS_DIR,
    layout::PROPOSALS_DIR,
    layout::APPROVALS_DIR,
    layout::APPROVER_KEYS,
    layout::POLICY_OVERRIDE,
    layout::POLICY_SIGNATURE,
];

/// [`TRAVELLING_STATE`] as pathspecs that match exactly those files and folders.
fn travelling_pathspecs() -> Vec<String> {
    TRAVELLING_STATE.iter().map(|p| format!(":(literal){p}")).collect()
}

/// The ignore rules paravault owns (`.paravault/.gitignore`).
const GIT_IGNORE_RULES: &str = "\
# Written by paravault (docs/replication.md). Engine state that is derived or kept per machine
# (caches, search generations, the journal, locks, this replica's identity) is never
# committed; the receipt mirrors of every replica, the conflicts waiting for a person, the
# proposals and the signed decisions on them, the approvers' public keys and the policy
# override with its signature travel.
/*
!/.gitignore
!/replicas/
!/conflicts/
!/proposals/
!/approvals/
/approvals/unverified/
!/approver-keys.json
!/policy.yaml
!/policy.sig
";

/// What `remote add` did.
#[derive(Debug, Clone, Serialize)]
pub struct RemoteAddReport {
    pub vault: String,
    pub remote: String,
    pub url: String,
    pub branch: String,
    pub replica_id: String,
    /// Whether the vault was not a git repository and `remote add` made it one.
    pub initialised_repository: bool,
    /// The commit that took in the vault's files as they were (none when nothing was left to commit).
    pub adopted_commit: Option<String>,
    pub files_committed: usize,
}

/// One note that did not merge.
#[derive(Debug, Clone, Serialize)]
pub struct ConflictReport {
    pub path: String,
    /// Why: `overlapping edits`, `edit against removal`, `added on both sides`, `lint gate: …`.
    pub reason: String,
    /// The `replication_conflict` proposal a person decides (none for a file that is not a note:
    /// both versions stay in the history, this replica's in place).
    pub proposal_id: Option<String>,
}

/// What `replicate` did.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicateReport {
    pub vault: String,
    pub remote: String,
    pub branch: String,
    pub replica_id: String,
    /// Commits made before integrating: outside edits and receipts left uncommitted.
    pub committed_before: usize,
    /// Where this run looked for outside edits: `watcher` or `folder journal` (the files they
    /// saw change since the last check, O(change)), or `work tree` (git compared every file).
    pub outside_edits_from: &'static str,
    /// The remote's head that was integrated (none: the remote branch did not exist).
    pub remote_head: Option<String>,
    /// Notes the integration put in place (written or removed).
    pub notes_changed: Vec<String>,
    /// Other files it put in place (receipt mirrors, attachments, log.md).
    pub files_changed: usize,
    /// The integration transaction's receipt sequence number (none when no note changed).
    pub merge_receipt_seq: Option<u64>,
    /// Notes and files that did not merge in this run.
    pub conflicts: Vec<ConflictReport>,
    /// Conflict proposals waiting for a person, this run's included.
    pub conflicts_waiting: usize,
    /// Whether the push succeeded (false when there was nothing to push).
    pub pushed: bool,
    /// The branch's head after the run; equal to the remote's when in sync.
    pub head: Option<String>,
    /// Fetch-integrate-push rounds (more than one when the remote moved meanwhile).
    pub attempts: usize,
    /// Whether both sides hold the same history now.
    pub in_sync: bool,
}

impl ReplicateReport {
    /// 0 in sync, 1 when conflicts wait for a person (errors exit ≥ 2).
    pub fn exit_code(&self) -> u8 {
        if self.conflicts_waiting > 0 { 1 } else { 0 }
    }
}

/// Where a replica stands (`replicate --status`).
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaStatus {
    pub vault: String,
    pub replica_id: String,
    pub remote: String,
    pub url: String,
    pub branch: String,
    pub head: Option<String>,
    /// The remote's head as fetched now (or last seen, when it cannot be reached).
    pub remote_head: Option<String>,
    /// Whether the remote answered this time.
    pub remote_reachable: bool,
    /// Commits here the remote lacks (`committed-local`, not yet `pushed`).
    pub ahead: usize,
    /// Commits on the remote not integrated here.
    pub behind: usize,
    /// Files changed outside the engine and not yet committed.
    pub uncommitted: usize,
    pub conflicts_waiting: usize,
    pub last_success_at: Option<String>,
    pub last_error: Option<String>,
}

/// What `replicate` would do now (the INFRA-1 broker's dry run, `Vault::replicate_plan`): the
/// remote's branch fetched, nothing integrated, committed, pushed or written in the work tree.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicatePlan {
    pub remote: String,
    pub branch: String,
    /// This replica's branch head.
    pub head: Option<String>,
    /// The remote's head as fetched now (none: the remote has no such branch yet).
    pub remote_head: Option<String>,
    /// Commits here the remote lacks: a replicate pushes them.
    pub commits_to_push: usize,
    /// Commits there not integrated here: a replicate pulls them.
    pub commits_to_pull: usize,
    /// Files the commits to push change (since the common ancestor).
    pub paths_to_push: usize,
    /// Files the commits to pull change (since the common ancestor).
    pub paths_to_pull: usize,
    /// Files both sides changed that do not merge as text (a replicate holds notes among them
    /// for a person; log.md and catalog pages always merge).
    pub conflicts_expected: usize,
    /// Files changed outside the engine, which a replicate commits first.
    pub uncommitted: usize,
}

/// Whether the remote answers (`Vault::probe_remote`: one `git ls-remote`, nothing fetched).
#[derive(Debug, Clone, Serialize)]
pub struct RemoteProbe {
    pub remote: String,
    pub branch: String,
    /// The remote answered within `replication.network_timeout_s`.
    pub reachable: bool,
    /// The remote's head of this replica's branch (none: unreachable, or no such branch yet).
    pub remote_head: Option<String>,
}

/// Whether the remote's branch holds a commit (`Vault::remote_holds`).
#[derive(Debug, Clone, Serialize)]
pub struct RemoteHolds {
    /// The remote's head as fetched now.
    pub remote_head: Option<String>,
    /// The commit is the remote's head or one of its ancestors.
    pub holds: bool,
}

/// This replica's branch head and the remote's head as last fetched (no network).
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaHeads {
    pub remote: String,
    pub branch: String,
    pub head: Option<String>,
    pub remote_head: Option<String>,
}

/// What a clone did.
#[derive(Debug, Clone, Serialize)]
pub struct CloneReport {
    pub vault: String,
    pub url: String,
    pub branch: String,
    pub replica_id: String,
    pub head: Option<String>,
    /// Notes the first search generation holds.
    pub notes_indexed: usize,
    pub search_generation: String,
}

fn tracking_ref(config: &ReplicaConfig) -> String {
    format!("refs/remotes/{}/{}", config.remote, config.branch)
}

fn now_text(vault: &Vault) -> String {
    vault.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn config_of(vault: &Vault) -> Result<ReplicaConfig> {
    ReplicaConfig::load(vault.root())?.ok_or_else(|| Error::NotConfigured {
        capability: "replication",
        remediation: "this vault has no remote yet: run `paravault remote add origin <url>` (any git URL), or `paravault clone <url> <folder>` on a new device".into(),
    })
}

/// `.paravault/replicate.lock` when no `replicate` holds it (None when one does).
fn try_replicate_lock(root: &Path) -> Option<std::fs::File> {
    let file = durable::open_engine_file(root, &layout::join(root, REPLICATE_LOCK), true).ok()?;
    file.try_lock().ok()?;
    Some(file)
}

/// The remote's commits that `head` (this replica's branch) lacks.
fn behind(git: &Git, config: &ReplicaConfig, theirs: Option<&str>) -> Result<usize> {
    let Some(theirs) = theirs else { return Ok(0) };
    let range = match git.resolve(&format!("refs/heads/{}", config.branch))? {
        Some(head) => format!("{head}..{theirs}"),
        None => theirs.to_string(),
    };
    Ok(git.run("rev-list", ["rev-list", "--count", &range])?.text().trim().parse().unwrap_or(0))
}

/// Logs what one round of replication on the interval did.
fn log_round(round: &Result<Option<ReplicateReport>>) {
    match round {
        Ok(Some(report)) => tracing::info!(
            notes_changed = report.notes_changed.len(),
            pushed = report.pushed,
            conflicts_waiting = report.conflicts_waiting,
            "replicated on the policy's interval"
        ),
        Ok(None) => tracing::debug!("another replicate of this vault is running; this round is skipped"),
        Err(error) => tracing::warn!(code = error.code(), %error, "replication round failed; the next round goes on"),
    }
}

/// Packs the replica's loose objects once there are many (`git gc --auto`, in the foreground,
/// after the run's push). The engine commits through plumbing, which never triggers git's own
/// automatic gc, and fetches with `--no-auto-maintenance` (git's detached gc would race the
/// engine's own ref updates): without this every transaction's blobs (the receipt mirror's
/// growing shard above all) stay loose and zlib-only, tens of KiB per transaction
/// (docs/replication.md, "What it costs"). A failure is logged, never fails the run: the
/// objects are safe loose.
fn pack_loose_objects(git: &Git) {
    if let Err(error) = git.run("gc", ["-c", "gc.autoDetach=false", "gc", "--auto", "--quiet"]) {
        tracing::warn!(%error, "git gc --auto failed; the replica's objects stay loose until the next run");
    }
}

/// Holds `.paravault/replicate.lock` (one `replicate` per vault at a time).
fn replicate_lock(root: &Path) -> Result<std::fs::File> {
    let path = layout::join(root, REPLICATE_LOCK);
    let file = durable::open_engine_file(root, &path, true).map_err(|e| Error::io("opening", REPLICATE_LOCK, e))?;
    file.lock().map_err(|e| Error::io("locking", REPLICATE_LOCK, e))?;
    Ok(file)
}

impl Vault {
    /// `paravault remote add <name> <url>`: makes the vault a replica whose history goes to
    /// `url`. A vault that is not a git repository becomes one (branch `main`); one that is
    /// (obsidian-git keeps vaults in one) is used as it is, on its checked-out branch. The files
    /// as they are become one commit (nothing the vault's ignore rules or paravault's leave
    /// out); nothing is pushed until `replicate`.
    pub fn remote_add(&self, name: &str, url: &str) -> Result<RemoteAddReport> {
        Git::version()?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) || name.starts_with('-') {
            return Err(Error::InvalidArgument {
                name: "name",
                reason: format!("'{name}' is not a remote name (letters, digits, '.', '_', '-')"),
            });
        }
        if url.trim().is_empty() || url.starts_with('-') {
            return Err(Error::InvalidArgument {
                name: "url",
                reason: "give a git URL: a path, file://, ssh://, git:// or https://".into(),
            });
        }
        let root = self.root();
        if let Some(existing) = ReplicaConfig::load(root)? {
            return Err(Error::InvalidArgument {
                name: "name",
                reason: format!(
                    "this vault is already a replica (remote '{}', branch '{}'); `git remote set-url` changes its URL",
                    existing.remote, existing.branch
                ),
            });
        }
        let git = Git::at(root);
        let initialised = !git.is_repository();
        if initialised {
            git.run("init", ["init", "-q", "-b", DEFAULT_BRANCH])?;
        }
        let branch = git.branch()?;
        let remotes = git.run("remote", ["remote"])?.text();
        if remotes.lines().any(|r| r == name) {
            let current = git.run("remote", ["remote", "get-url", name])?.text();
            if current != url {
                return Err(Error::InvalidArgument { name: "url", reason: format!("remote '{name}' already points at {current}") });
            }
        } else {
            git.run("remote", ["remote", "add", name, url])?;
        }
        // A vault made by hand (an Obsidian folder the engine never wrote to) has no state
        // folder yet.
        durable::create_dir_all(root, &layout::join(root, layout::STATE_DIR))?;
        durable::replace(root, &layout::join(root, layout::GIT_IGNORE), GIT_IGNORE_RULES.as_bytes())?;
        let config = ReplicaConfig {
            schema: replica::CONFIG_SCHEMA.into(),
            replica_id: replica::new_replica_id(),
            remote: name.to_string(),
            branch: branch.clone(),
        };
        config.save(root)?;
        let writer = self.lock_writer()?;
        // Decisions made before the vault was a replica are unsigned: they stop counting now,
        // and are kept aside rather than pushed (docs/governance.md, "A shared vault").
        crate::approvals::set_aside_unhonoured_decisions(root, |rel| committed(&git, rel))?;
        // The folder journal's position before the whole work tree is compared: the first
        // `replicate` asks it what changed since (`evidence`).
        let journal_at = crate::folder_journal::ask(root, None).map(|answer| answer.now);
        replica::catch_up_git_index(root, &config)?;
        let mut paths = git.dirty_paths(&[])?;
        paths.extend(replica::update_mirror(root, &config)?);
        paths.retain(|p| !is_scratch(p));
        paths.sort();
        paths.dedup();
        let adopted = if paths.is_empty() {
            None
        } else {
            let at = now_text(self);
            let author = replica::committer(&config.replica_id, &at);
            let message = format!("adopt the vault as replica {} ({} files)\n", config.replica_id, paths.len());
            Some(replica::commit_paths(root, &config, &paths, &message, &author)?)
        };
        drop(writer);
        if let Some(at) = journal_at {
            let mut state = ReplicaState::load(root);
            state.edits_checked_at = Some(at);
            state.save(root);
        }
        Ok(RemoteAddReport {
            vault: root.display().to_string(),
            remote: name.to_string(),
            url: url.to_string(),
            branch,
            replica_id: config.replica_id,
            initialised_repository: initialised,
            adopted_commit: adopted,
            files_committed: paths.len(),
        })
    }

    /// `paravault replicate`: fetch → integrate → push (module docs).
    pub fn replicate(&self) -> Result<ReplicateReport> {
        self.replicate_with_progress(&|_, _, _| {})
    }

    /// [`Vault::replicate`], reporting `fetching`, `integrating` (the changed paths) and
    /// `pushing` to `progress`.
    pub fn replicate_with_progress(&self, progress: crate::search::Progress<'_>) -> Result<ReplicateReport> {
        Git::version()?;
        let config = config_of(self)?;
        let lock = replicate_lock(self.root())?;
        self.replicate_holding(&config, lock, progress)
    }

    /// How often this process replicates by itself: the policy's `replication.interval_s`,
    /// when it is set and the vault is a replica (None otherwise).
    pub fn replication_interval(&self) -> Option<std::time::Duration> {
        let seconds = self.policy().policy.replication.interval_s?;
        ReplicaConfig::load(self.root()).ok().flatten()?;
        Some(std::time::Duration::from_secs(seconds))
    }

    /// One round of replication on the policy's interval (`paravault mcp`, `paravault watch`):
    /// `replicate`, unless another `replicate` of this vault is running (then the round is
    /// skipped: `Ok(None)`). The outcome is recorded in the replica state like any run's
    /// (`replicate --status`, `doctor`), logged and returned; a failed round is the next
    /// round's to retry.
    pub fn replicate_round(&self) -> Result<Option<ReplicateReport>> {
        let round = self.replicate_if_idle();
        log_round(&round);
        round
    }

    /// Replicates every `every` until `stop` is set (`paravault watch`; the MCP server runs
    /// [`Vault::replicate_round`] on its own runtime): a round right away, then one per interval.
    /// Each round's outcome is logged; a failure never ends the loop. Wake the calling thread
    /// (`Thread::unpark`) after setting `stop` to end it without waiting out the interval.
    pub fn replicate_every(&self, every: std::time::Duration, stop: &std::sync::atomic::AtomicBool) {
        use std::sync::atomic::Ordering;
        while !stop.load(Ordering::Acquire) {
            let _ = self.replicate_round();
            let until = std::time::Instant::now() + every;
            while !stop.load(Ordering::Acquire) {
                let Some(left) = until.checked_duration_since(std::time::Instant::now()) else { break };
                std::thread::park_timeout(left);
            }
        }
    }

    /// Runs `replicate` holding `.paravault/replicate.lock` (`_lock`), recording the attempt
    /// and its outcome in the replica state.
    fn replicate_holding(
        &self,
        config: &ReplicaConfig,
        _lock: std::fs::File,
        progress: crate::search::Progress<'_>,
    ) -> Result<ReplicateReport> {
        let root = self.root();
        let mut state = ReplicaState::load(root);
        state.last_attempt_at = Some(now_text(self));
        let result = self.replicate_locked(config, &mut state, progress);
        match &result {
            Ok(_) => {
                state.last_success_at = state.last_attempt_at.clone();
                state.last_error = None;
            }
            Err(error) => state.last_error = Some(format!("{}: {error}", error.code())),
        }
        state.save(root);
        result
    }

    fn replicate_locked(
        &self,
        config: &ReplicaConfig,
        state: &mut ReplicaState,
        progress: crate::search::Progress<'_>,
    ) -> Result<ReplicateReport> {
        let root = self.root();
        let git = Git::at(root);
        let (committed_before, outside_edits_from) = self.commit_leftovers(config, state)?;
        let mut report = ReplicateReport {
            vault: root.display().to_string(),
            remote: config.remote.clone(),
            branch: config.branch.clone(),
            replica_id: config.replica_id.clone(),
            committed_before,
            outside_edits_from,
            remote_head: None,
            notes_changed: Vec::new(),
            files_changed: 0,
            merge_receipt_seq: None,
            conflicts: Vec::new(),
            conflicts_waiting: 0,
            pushed: false,
            head: None,
            attempts: 0,
            in_sync: false,
        };
        for attempt in 1..=PUSH_ATTEMPTS {
            report.attempts = attempt;
            progress("fetching", 0, 1);
            let theirs = fetch(&git, config, network_timeout(self))?;
            progress("fetching", 1, 1);
            report.remote_head = theirs.clone();
            state.looked(now_text(self), theirs.clone(), behind(&git, config, theirs.as_deref())?);
            if let Some(theirs) = &theirs {
                self.integrate(config, theirs, &mut report, progress)?;
                state.integrated(theirs);
            }
            let head = git.resolve(&format!("refs/heads/{}", config.branch))?;
            report.head = head.clone();
            let Some(head) = head else {
                report.in_sync = theirs.is_none();
                break; // nothing here and nothing there
            };
            if theirs.as_deref() == Some(head.as_str()) {
                report.in_sync = true;
                break;
            }
            progress("pushing", 0, 1);
            let pushed = push(&git, config, &head, network_timeout(self))?;
            progress("pushing", 1, 1);
            match pushed {
                Pushed::Done => {
                    state.pushed(now_text(self), &head);
                    report.pushed = true;
                    report.in_sync = true;
                    break;
                }
                Pushed::RemoteMoved if attempt < PUSH_ATTEMPTS => {
                    // Someone pushed meanwhile: fetch, integrate and try again after a pause drawn
                    // at random below a bound that doubles each round ("full jitter"), so replicas
                    // that collided spread apart instead of colliding again in step.
                    let bound = PUSH_BACKOFF_MS << (attempt - 1).min(4);
                    let pause = u64::from(getrandom::u32().unwrap_or(0)) % bound;
                    std::thread::sleep(std::time::Duration::from_millis(pause));
                }
                Pushed::RemoteMoved => {
                    return Err(Error::Replication {
                        step: "push",
                        reason: format!("the remote moved during each of {PUSH_ATTEMPTS} attempts; run `paravault replicate` again"),
                    });
                }
            }
        }
        report.conflicts_waiting = conflicts_waiting(self)?;
        pack_loose_objects(&git);
        Ok(report)
    }

    /// Step 1: commits files changed outside the engine (as an outside edit, with its receipt)
    /// and receipts the mirror lacks (an aborted write's, a sync's). Returns the commits made.
    /// Outside edits are looked for where the evidence of this process says files changed
    /// since the last check (`evidence`), or in the whole work tree when it cannot say.
    fn commit_leftovers(&self, config: &ReplicaConfig, state: &mut ReplicaState) -> Result<(usize, &'static str)> {
        let root = self.root();
        let evidence = evidence::Evidence::take(self, state)?;
        let mut writer = self.lock_writer()?;
        let mut commits = 0;
        let git = Git::at(root);
        let outside = (|| {
            let head = git.resolve(&format!("refs/heads/{}", config.branch))?;
            let suspects = evidence.suspects(self, &git, head.as_deref())?;
            let from = if suspects.is_some() { evidence.source() } else { "work tree" };
            let suspects = suspects.as_deref().map_or(replica::Suspects::All, replica::Suspects::Only);
            Ok((replica::commit_outside_edits(self, &mut writer, config, suspects)?, from))
        })();
        let from = match outside {
            Ok((found, from)) => {
                evidence.checked(state);
                if found > 0 {
                    commits += 1;
                }
                from
            }
            Err(error) => {
                evidence.give_back(self);
                return Err(error);
            }
        };
        // The engine files that travel and a killed run left uncommitted (other replicas'
        // mirrors, conflicts held), with the receipts the mirror lacks.
        // An engine that learnt to carry more (issue 49: proposals, decisions, keys) says so
        // in the ignore rules it owns, committed with the rest.
        let ignore = layout::join(root, layout::GIT_IGNORE);
        if durable::read_engine_file(root, &ignore).ok().as_deref() != Some(GIT_IGNORE_RULES.as_bytes()) {
            durable::replace(root, &ignore, GIT_IGNORE_RULES.as_bytes())?;
        }
        crate::approvals::set_aside_unhonoured_decisions(root, |rel| committed(&git, rel))?;
        let head = git.resolve(&format!("refs/heads/{}", config.branch))?;
        let mut paths = replica::travelling_changes(root, head.as_deref(), &travelling_pathspecs())?;
        // A record the branch holds that stopped counting (its key revoked) is not committed
        // again; one a person changed by hand is not either (decisions are immutable).
        paths.retain(|p| crate::approvals::decision_travels(root, p));
        paths.extend(replica::update_mirror(root, config)?);
        paths.sort();
        paths.dedup();
        if !paths.is_empty() {
            let at = now_text(self);
            let author = replica::committer(&config.replica_id, &at);
            replica::commit_paths(root, config, &paths, &format!("receipts and conflicts of replica {}\n", config.replica_id), &author)?;
            commits += 1;
        }
        // git's own index learns this run's commits (a large one is not told per commit), and
        // the private index an older engine kept is removed.
        replica::catch_up_git_index(root, config)?;
        for leftover in [layout::GIT_PRIVATE_INDEX, layout::GIT_PRIVATE_INDEX_HEAD] {
            durable::remove_unsynced(root, &layout::join(root, leftover))?;
        }
        Ok((commits, from))
    }

    /// Step 3: integrates `theirs` into the branch (module docs).
    fn integrate(
        &self,
        config: &ReplicaConfig,
        theirs: &str,
        report: &mut ReplicateReport,
        progress: crate::search::Progress<'_>,
    ) -> Result<()> {
        let root = self.root();
        let git = Git::at(root);
        let ours = git.resolve(&format!("refs/heads/{}", config.branch))?;
        let Some(ours) = ours else {
            // An unborn branch (a vault with nothing committed): the remote's history is ours.
            return self.integrate_into_empty(config, theirs, report, progress);
        };
        if git.is_ancestor(theirs, &ours)? {
            return Ok(()); // nothing new there
        }
        let fast_forward = git.is_ancestor(&ours, theirs)?;
        let (target, conflicted) = if fast_forward {
            (git.run("rev-parse", ["rev-parse", &format!("{theirs}^{{tree}}")])?.text(), BTreeMap::new())
        } else {
            merge_tree(&git, &ours, theirs)?
        };
        let base = if fast_forward { Some(ours.clone()) } else { merge_base(&git, &ours, theirs)? };
        let changed = git.changed_paths(&ours, &target)?;
        let own_mirror = format!("{}/", config.mirror_dir());
        let mut notes: Vec<NoteChange> = Vec::new();
        let mut files: Vec<(String, Option<Vec<u8>>)> = Vec::new();
        let mut staged: BTreeSet<String> = BTreeSet::new();
        let mut conflicts: Vec<(String, String)> = Vec::new();
        for (done, (status, path)) in changed.iter().enumerate() {
            if done.is_multiple_of(64) {
                progress("integrating", done, changed.len());
            }
            if path.starts_with(&own_mirror) || is_scratch(path) {
                continue;
            }
            let name = path.rsplit('/').next().unwrap_or(path);
            let catalog = layout::is_sub_index_name(name) || path == layout::ROOT_INDEX;
            if conflicted.contains_key(path) {
                if path == layout::LOG {
                    let merged = union_log(&git, base.as_deref(), &ours, theirs)?;
                    files.push((path.clone(), Some(merged)));
                    staged.insert(path.clone());
                } else if !catalog {
                    conflicts.push((path.clone(), conflict_reason(&git, base.as_deref(), &ours, theirs, path)?));
                }
                continue;
            }
            if catalog {
                // Pages are a function of the notes. Where this integration changes notes, the
                // transaction renders their folders' pages here. A page only the other side
                // changed since the merge base (their render of a folder this replica has not
                // rendered since, e.g. after a person's rename committed as an outside edit) is
                // taken as it is there: keeping the stale local page would undo theirs in the
                // merge commit, and the two replicas would undo each other forever.
                let ours_page = git.blob_at(&ours, path)?;
                let base_page = match &base {
                    Some(base) => git.blob_at(base, path)?,
                    None => None,
                };
                if ours_page == base_page {
                    let after = if *status == 'D' { None } else { git.blob_at(&target, path)? };
                    files.push((path.clone(), after));
                    staged.insert(path.clone());
                }
                continue;
            }
            let after = if *status == 'D' { None } else { git.blob_at(&target, path)? };
            if *status == 'D' {
                // A deletion is applied only where the other side deleted (or renamed away) a
                // file the merge base had and this side left as the base had it. Otherwise it
                // would drop what this side holds (git expresses a rename on one side and an
                // edit on the other as a conflict at the new name, and the old name as deleted):
                // the file stays, and a person decides.
                let base_blob = match &base {
                    Some(base) => git.blob_at(base, path)?,
                    None => None,
                };
                let theirs_deleted = base_blob.is_some() && git.blob_at(theirs, path)?.is_none();
                if !theirs_deleted || git.blob_at(&ours, path)? != base_blob {
                    if note_path(self, path).is_some() {
                        let reason = if theirs_deleted {
                            "the other side deleted or renamed this note, and this side changed it"
                        } else {
                            "the merge would drop this note although the other side did not delete it"
                        };
                        conflicts.push((path.clone(), reason.into()));
                    }
                    continue;
                }
            }
            match note_path(self, path) {
                Some(note) => {
                    let before = git.blob_at(&ours, path)?;
                    let content = match after {
                        Some(bytes) => match String::from_utf8(bytes) {
                            Ok(text) => Some(text),
                            Err(_) => {
                                conflicts.push((path.clone(), "the other side's text is not UTF-8".into()));
                                continue;
                            }
                        },
                        None => None,
                    };
                    notes.push(NoteChange {
                        path: note,
                        content,
                        require_absent: before.is_none(),
                        expected_sha256: before.map(|b| crate::hex::sha256_hex(&b)),
                    });
                }
                None => {
                    if let Some(reason) = governance_refusal(&git, root, &target, path, after.as_deref())? {
                        conflicts.push((path.clone(), reason));
                        continue;
                    }
                    files.push((path.clone(), after));
                    staged.insert(path.clone());
                }
            }
        }
        progress("integrating", changed.len(), changed.len());
        // Files that are not notes (other replicas' receipt mirrors, attachments, log.md)
        // are copied in first; a crash here leaves them for the next run to commit.
        for (path, bytes) in &files {
            write_file(root, path, bytes.as_deref())?;
            if let (Some(bytes), true) = (bytes, path.starts_with(&format!("{}/", layout::CONFLICTS_DIR))) {
                crate::approvals::import_conflict(self, bytes)?;
            }
        }
        report.files_changed += files.len();
        // The notes: one transaction; what its lint gate refuses is held as a conflict instead.
        let mut receipt_seq = None;
        let mut written: Vec<String> = Vec::new();
        loop {
            if notes.is_empty() {
                break;
            }
            let mutation = Mutation {
                operation: MERGE_OPERATION.into(),
                notes: notes.clone(),
                idempotency_key: None,
                proposal_id: None,
                log_entry: None,
                create_folders: true,
            };
            match crate::approvals::execute_integration(self, mutation) {
                Ok(receipt) => {
                    receipt_seq = Some(receipt.seq);
                    written = notes.iter().map(|n| n.path.to_string()).collect();
                    break;
                }
                Err(Error::GateRejected { findings, .. }) => {
                    let named: BTreeSet<String> = findings.iter().map(|f| f.path.clone()).collect();
                    let (mut refused, mut kept): (Vec<NoteChange>, Vec<NoteChange>) =
                        notes.into_iter().partition(|n| named.contains(n.path.as_str()));
                    if refused.is_empty() {
                        // The gate named notes elsewhere (a link the merge breaks): hold all.
                        refused = std::mem::take(&mut kept);
                    }
                    for note in &refused {
                        let finding = findings.iter().find(|f| f.path == note.path.as_str()).or(findings.first());
                        let why = finding.map_or_else(
                            || "the lint gate refused the merge".to_string(),
                            |f| format!("lint gate: {} ({})", f.message, f.rule),
                        );
                        conflicts.push((note.path.to_string(), why));
                    }
                    notes = kept;
                }
                Err(Error::InvalidContent { path, reason }) if notes.iter().any(|n| n.path.as_str() == path) => {
                    conflicts.push((path.clone(), format!("the merged text is refused: {reason}")));
                    notes.retain(|n| n.path.as_str() != path);
                }
                Err(other) => return Err(other),
            }
        }
        report.notes_changed.extend(written.iter().cloned());
        report.merge_receipt_seq = receipt_seq.or(report.merge_receipt_seq);
        // The conflicts: this replica's text stays; the other side's is held for a person.
        let mut conflict_files: Vec<String> = Vec::new();
        for (path, reason) in conflicts {
            let proposal_id = match note_path(self, &path) {
                Some(note) => {
                    // Their text where they hold it: at this path, else the blob the merge
                    // matched to it (a note this side renamed and they edited).
                    let theirs_bytes = match git.blob_at(theirs, &path)? {
                        Some(bytes) => Some(bytes),
                        None => match conflicted.get(&path).cloned().flatten() {
                            Some(object) => git.blob(&object)?,
                            None => None,
                        },
                    };
                    let theirs_text = theirs_bytes.map(|b| String::from_utf8_lossy(&b).into_owned());
                    let base_text = match &base {
                        Some(b) => git.blob_at(b, &path)?.map(|b| String::from_utf8_lossy(&b).into_owned()),
                        None => None,
                    };
                    let ours_now = crate::store::beneath::read(root, &path)?;
                    let origin = ConflictOrigin {
                        ours_commit: ours.clone(),
                        theirs_commit: theirs.to_string(),
                        base_commit: base.clone(),
                        base_content: base_text,
                        ours_sha256: ours_now.map(|b| crate::hex::sha256_hex(&b)),
                        reason: reason.clone(),
                    };
                    Some(crate::approvals::hold_conflict(self, note, theirs_text, origin)?)
                }
                None => None,
            };
            if let Some(id) = &proposal_id {
                conflict_files.push(crate::approvals::conflict_file(id));
                conflict_files.push(crate::approvals::conflict_batch_file(id));
            }
            report.conflicts.push(ConflictReport { path, reason, proposal_id });
        }
        // The integration's commit, under the writer lock (serialised with every engine commit).
        let writer = self.lock_writer()?;
        let mut paths: BTreeSet<String> = staged;
        paths.extend(written);
        paths.extend(conflict_files);
        for (_, path) in &changed {
            let name = path.rsplit('/').next().unwrap_or(path);
            if layout::is_sub_index_name(name) || path == layout::ROOT_INDEX {
                paths.insert(path.clone());
            }
        }
        // The catalog pages the transaction rendered, in the written notes' folders and above:
        // those folders' pages, on disk or in the branch, compared with the branch (O(folders),
        // git's own index never read).
        let head = git.resolve(&format!("refs/heads/{}", config.branch))?;
        let pages = catalog_pages_of(root, &git, head.as_deref(), &paths)?;
        paths.extend(git.changed_against(root, head.as_deref(), &pages)?);
        paths.extend(replica::update_mirror(root, config)?);
        let paths: Vec<String> = paths.into_iter().collect();
        let at = now_text(self);
        let subject = format!(
            "{MERGE_OPERATION} from {}: {} note(s), {} conflict(s)",
            config.remote,
            report.notes_changed.len(),
            report.conflicts.len()
        );
        let trailer = receipt_seq.map(|s| format!("\nParavault-Receipt: {}:{s}\n", config.replica_id)).unwrap_or_default();
        let author = replica::committer(&config.replica_id, &at);
        replica::commit_integration(root, config, &paths, &format!("{subject}\n{trailer}"), &author, theirs, fast_forward)?;
        drop(writer);
        Ok(())
    }

    /// A replica with nothing committed takes the remote's history as it is: its files are
    /// put in place (notes through one transaction), then the branch is the remote's.
    fn integrate_into_empty(
        &self,
        config: &ReplicaConfig,
        theirs: &str,
        report: &mut ReplicateReport,
        progress: crate::search::Progress<'_>,
    ) -> Result<()> {
        let git = Git::at(self.root());
        let empty_tree = git.run_with("mktree", ["mktree"], &[], Some(b""))?.text();
        let author = replica::committer(&config.replica_id, &now_text(self));
        let empty = git.commit_tree(&empty_tree, &[], "an empty replica\n", &author, &author)?;
        git.move_branch(&config.branch, &empty, None, "paravault: empty replica")?;
        self.integrate(config, theirs, report, progress)
    }

    /// `paravault replicate --status`: where this replica stands; fetches the remote's head
    /// (never changes the work tree) and says when it cannot.
    pub fn replica_status(&self) -> Result<ReplicaStatus> {
        Git::version()?;
        let config = config_of(self)?;
        let root = self.root();
        let git = Git::at(root);
        let url = git.run("remote", ["remote", "get-url", &config.remote])?.text();
        let mut state = ReplicaState::load(root);
        let (remote_head, reachable) = match fetch(&git, &config, network_timeout(self)) {
            Ok(head) => (head, true),
            Err(_) => (git.resolve(&tracking_ref(&config))?, false),
        };
        let head = git.resolve(&format!("refs/heads/{}", config.branch))?;
        let (ahead, behind) = left_right(&git, head.as_deref(), remote_head.as_deref())?;
        let uncommitted = uncommitted_count(self, &config, &git)?;
        // What it saw is recorded for answers' freshness, unless a `replicate` is running (it
        // records its own look when it ends).
        if reachable && let Some(_running) = try_replicate_lock(root) {
            state.looked(now_text(self), remote_head.clone(), behind);
            state.save(root);
        }
        Ok(ReplicaStatus {
            vault: root.display().to_string(),
            replica_id: config.replica_id.clone(),
            remote: config.remote.clone(),
            url,
            branch: config.branch.clone(),
            head,
            remote_head,
            remote_reachable: reachable,
            ahead,
            behind,
            uncommitted,
            conflicts_waiting: conflicts_waiting(self)?,
            last_success_at: state.last_success_at,
            last_error: state.last_error,
        })
    }
}

impl Vault {
    /// `replicate` unless one is running (`.paravault/replicate.lock` held by a person's
    /// `paravault replicate` or another broker run): `Ok(None)` then, and nothing is done.
    pub fn replicate_if_idle(&self) -> Result<Option<ReplicateReport>> {
        Git::version()?;
        let config = config_of(self)?;
        let Some(lock) = try_replicate_lock(self.root()) else { return Ok(None) };
        self.replicate_holding(&config, lock, &|_, _, _| {}).map(Some)
    }

    /// What `replicate` would do now: fetches the remote's branch (as `replicate --status`
    /// does) and compares, integrating, committing and pushing nothing. An unreachable remote
    /// is the fetch's `replication_failed`; a rewritten one `remote_history_rewritten`.
    pub fn replicate_plan(&self) -> Result<ReplicatePlan> {
        Git::version()?;
        let config = config_of(self)?;
        let root = self.root();
        let git = Git::at(root);
        let remote_head = fetch(&git, &config, network_timeout(self))?;
        let head = git.resolve(&format!("refs/heads/{}", config.branch))?;
        let (commits_to_push, commits_to_pull) = left_right(&git, head.as_deref(), remote_head.as_deref())?;
        let files = |revision: &str| -> Result<usize> {
            Ok(git.run("ls-tree", ["ls-tree", "-r", "--name-only", revision])?.text().lines().filter(|l| !l.is_empty()).count())
        };
        let (mut paths_to_push, mut paths_to_pull, mut conflicts_expected) = (0, 0, 0);
        match (&head, &remote_head) {
            (Some(h), Some(r)) => match merge_base(&git, h, r)? {
                Some(base) => {
                    paths_to_push = git.changed_paths(&base, h)?.len();
                    paths_to_pull = git.changed_paths(&base, r)?.len();
                    if base != *h && base != *r {
                        let (_, conflicted) = merge_tree(&git, h, r)?;
                        conflicts_expected = conflicted
                            .keys()
                            .filter(|p| {
                                let name = p.rsplit('/').next().unwrap_or(p);
                                p.as_str() != layout::LOG && p.as_str() != layout::ROOT_INDEX && !layout::is_sub_index_name(name)
                            })
                            .count();
                    }
                }
                None => {
                    paths_to_push = files(h)?;
                    paths_to_pull = files(r)?;
                }
            },
            (Some(h), None) => paths_to_push = files(h)?,
            (None, Some(r)) => paths_to_pull = files(r)?,
            (None, None) => {}
        }
        let uncommitted = uncommitted_count(self, &config, &git)?;
        Ok(ReplicatePlan {
            remote: config.remote.clone(),
            branch: config.branch.clone(),
            head,
            remote_head,
            commits_to_push,
            commits_to_pull,
            paths_to_push,
            paths_to_pull,
            conflicts_expected,
            uncommitted,
        })
    }

    /// Whether the remote answers: one `git ls-remote` of this replica's branch, bounded by
    /// `replication.network_timeout_s`; nothing is fetched or changed.
    pub fn probe_remote(&self) -> Result<RemoteProbe> {
        Git::version()?;
        let config = config_of(self)?;
        let git = Git::at(self.root());
        let listed = git.network_output(
            "probe",
            ["ls-remote", "--heads", &config.remote, &format!("refs/heads/{}", config.branch)],
            network_timeout(self),
        );
        let (reachable, remote_head) = match listed {
            Ok(output) if output.status.success() => {
                (true, output.text().split_whitespace().next().filter(|h| !h.is_empty()).map(str::to_string))
            }
            Ok(_) | Err(Error::Replication { .. }) => (false, None),
            Err(other) => return Err(other),
        };
        Ok(RemoteProbe { remote: config.remote.clone(), branch: config.branch.clone(), reachable, remote_head })
    }

    /// Whether the remote's branch still holds `commit` (its head or an ancestor of it):
    /// fetches the branch as `replicate` does (an unreachable remote is `replication_failed`).
    pub fn remote_holds(&self, commit: &str) -> Result<RemoteHolds> {
        Git::version()?;
        let config = config_of(self)?;
        let git = Git::at(self.root());
        let remote_head = fetch(&git, &config, network_timeout(self))?;
        let holds = match &remote_head {
            Some(head) if head == commit => true,
            Some(head) => git.resolve(&format!("{commit}^{{commit}}"))?.is_some() && git.is_ancestor(commit, head)?,
            None => false,
        };
        Ok(RemoteHolds { remote_head, holds })
    }

    /// This replica's branch head and the remote's head as last fetched; no network.
    pub fn replica_heads(&self) -> Result<ReplicaHeads> {
        Git::version()?;
        let config = config_of(self)?;
        let git = Git::at(self.root());
        Ok(ReplicaHeads {
            head: git.resolve(&format!("refs/heads/{}", config.branch))?,
            remote_head: git.resolve(&tracking_ref(&config))?,
            remote: config.remote,
            branch: config.branch,
        })
    }

    /// The commits reachable from `to` and not from `from` (all of `to`'s history when `from`
    /// is none).
    pub fn commits_between(&self, from: Option<&str>, to: &str) -> Result<usize> {
        let range = match from {
            Some(from) => format!("{from}..{to}"),
            None => to.to_string(),
        };
        Ok(Git::at(self.root()).run("rev-list", ["rev-list", "--count", &range])?.text().trim().parse().unwrap_or(0))
    }
}

/// (commits on `head` the remote lacks, commits on `remote` that `head` lacks).
fn left_right(git: &Git, head: Option<&str>, remote: Option<&str>) -> Result<(usize, usize)> {
    Ok(match (head, remote) {
        (Some(h), Some(r)) => {
            let counts = git.run("rev-list", ["rev-list", "--left-right", "--count", &format!("{h}...{r}")])?.text();
            let mut parts = counts.split_whitespace().map(|n| n.parse::<usize>().unwrap_or(0));
            (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
        }
        (Some(h), None) => (git.run("rev-list", ["rev-list", "--count", h])?.text().parse().unwrap_or(0), 0),
        (None, Some(r)) => (0, git.run("rev-list", ["rev-list", "--count", r])?.text().parse().unwrap_or(0)),
        (None, None) => (0, 0),
    })
}

/// `paravault clone <url> <folder>`: a working replica of the vault at `url` — the files, a new
/// replica id, and the first search generation. The folder must not exist or be empty. A
/// remote with no history yet gives a new vault (the P.A.R.A. layout), adopted as its first
/// commit; `replicate` pushes it.
pub fn clone_vault(url: &str, folder: &Path, options: VaultOptions) -> Result<CloneReport> {
    Git::version()?;
    if url.trim().is_empty() || url.starts_with('-') {
        return Err(Error::InvalidArgument { name: "url", reason: "give a git URL: a path, file://, ssh://, git:// or https://".into() });
    }
    if folder.exists() && std::fs::read_dir(folder).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(Error::InvalidArgument {
            name: "folder",
            reason: format!("{} exists and is not empty; clone into a new folder", folder.display()),
        });
    }
    let parent: PathBuf = match folder.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // A whole history comes over: bounded generously, but bounded (no policy exists yet).
    let cloned = Git::at(&parent).network_output(
        "clone",
        [
            std::ffi::OsStr::new("clone"),
            "-q".as_ref(),
            "--no-tags".as_ref(),
            "--origin".as_ref(),
            "origin".as_ref(),
            "--".as_ref(),
            url.as_ref(),
            folder.as_os_str(),
        ],
        CLONE_TIMEOUT,
    )?;
    if !cloned.status.success() {
        return Err(Error::Replication { step: "clone", reason: crate::store::git::first_lines(&cloned.stderr) });
    }
    let git = Git::at(folder);
    let mut head = git.resolve("HEAD")?;
    if head.is_none() {
        // The remote's HEAD names a branch it does not have (a bare repository made with
        // another default branch): take its `main`, else its only branch.
        let listed = git.run("for-each-ref", ["for-each-ref", "--format=%(refname:strip=3)", "refs/remotes/origin/"])?.text();
        let branches: Vec<&str> = listed.lines().filter(|b| !b.is_empty() && *b != "HEAD").collect();
        let chosen = branches.iter().find(|b| **b == DEFAULT_BRANCH).or(if branches.len() == 1 { branches.first() } else { None });
        match chosen {
            Some(branch) => {
                git.run("checkout", ["checkout", "-q", "-B", branch, &format!("refs/remotes/origin/{branch}")])?;
                head = git.resolve("HEAD")?;
            }
            None if !branches.is_empty() => {
                return Err(Error::InvalidArgument {
                    name: "url",
                    reason: format!(
                        "the remote has several branches and none is checked out ({}); clone with git and run `paravault remote add` instead",
                        branches.join(", ")
                    ),
                });
            }
            None => {}
        }
    }
    let Some(head) = head else {
        // An empty remote: a new vault here, adopted; `replicate` pushes it.
        let (vault, _) = Vault::init(folder, options)?;
        git.run("remote", ["remote", "remove", "origin"])?;
        let added = vault.remote_add("origin", url)?;
        let sync = vault.sync_vault(&crate::retrieval::SyncParams::default())?;
        return Ok(CloneReport {
            vault: folder.display().to_string(),
            url: url.to_string(),
            branch: added.branch,
            replica_id: added.replica_id,
            head: added.adopted_commit,
            notes_indexed: sync.counts.indexed,
            search_generation: sync.generation_id,
        });
    };
    let branch = git.branch()?;
    let config = ReplicaConfig {
        schema: replica::CONFIG_SCHEMA.into(),
        replica_id: replica::new_replica_id(),
        remote: "origin".into(),
        branch: branch.clone(),
    };
    let vault = Vault::open(folder, options)?;
    vault.create_layout_folders()?;
    config.save(folder)?;
    git.run("update-ref", ["update-ref", &tracking_ref(&config), &head])?;
    let sync = vault.sync_vault(&crate::retrieval::SyncParams { allow_partial: true, ..Default::default() })?;
    Ok(CloneReport {
        vault: folder.display().to_string(),
        url: url.to_string(),
        branch,
        replica_id: config.replica_id,
        head: Some(head),
        notes_indexed: sync.counts.indexed,
        search_generation: sync.generation_id,
    })
}

/// How long `clone` may take to bring a whole history over.
const CLONE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// How long one git call to the remote may take (policy `replication.network_timeout_s`).
fn network_timeout(vault: &Vault) -> std::time::Duration {
    std::time::Duration::from_secs(vault.policy().policy.replication.network_timeout_s.max(1))
}

/// Step 2: the remote's head, fetched into the tracking ref; `None` when the remote has no
/// such branch yet. Refuses a branch that no longer contains what this replica last saw.
fn fetch(git: &Git, config: &ReplicaConfig, timeout: std::time::Duration) -> Result<Option<String>> {
    let tracking = tracking_ref(config);
    let scratch = format!("refs/paravault/fetched/{}", config.branch);
    let listed =
        git.network_output("fetch", ["ls-remote", "--heads", &config.remote, &format!("refs/heads/{}", config.branch)], timeout)?;
    if !listed.status.success() {
        return Err(Error::Replication { step: "fetch", reason: crate::store::git::first_lines(&listed.stderr) });
    }
    let last_seen = git.resolve(&tracking)?;
    if listed.text().trim().is_empty() {
        if let Some(seen) = last_seen {
            return Err(Error::RemoteRewritten {
                reason: format!(
                    "branch '{}' is gone from remote '{}' (it was at {})",
                    config.branch,
                    config.remote,
                    &seen[..12.min(seen.len())]
                ),
            });
        }
        return Ok(None);
    }
    // The remote's branch where this replica last fetched it: nothing to fetch (its objects
    // are here, and a head equal to the one seen contains it), so no second round trip.
    let listed_head = listed.text().split_whitespace().next().map(str::to_string);
    if let (Some(listed_head), Some(seen)) = (&listed_head, &last_seen)
        && listed_head == seen
    {
        return Ok(Some(seen.clone()));
    }
    let fetched = git.network_output(
        "fetch",
        [
            "fetch",
            "-q",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-auto-maintenance",
            &config.remote,
            &format!("+refs/heads/{}:{scratch}", config.branch),
        ],
        timeout,
    )?;
    if !fetched.status.success() {
        return Err(Error::Replication { step: "fetch", reason: crate::store::git::first_lines(&fetched.stderr) });
    }
    let fetched =
        git.resolve(&scratch)?.ok_or_else(|| Error::Replication { step: "fetch", reason: "the fetched branch cannot be read".into() })?;
    if let Some(seen) = &last_seen
        && !git.is_ancestor(seen, &fetched)?
    {
        return Err(Error::RemoteRewritten {
            reason: format!(
                "remote '{}' branch '{}' is at {}, which does not contain {} that this replica saw there",
                config.remote,
                config.branch,
                &fetched[..12],
                &seen[..12.min(seen.len())]
            ),
        });
    }
    git.run("update-ref", ["update-ref", &tracking, &fetched])?;
    Ok(Some(fetched))
}

enum Pushed {
    Done,
    RemoteMoved,
}

/// Step 4: pushes `head` to the remote's branch; a refusal because the remote moved is
/// `RemoteMoved` (the caller integrates again), any other failure an error.
fn push(git: &Git, config: &ReplicaConfig, head: &str, timeout: std::time::Duration) -> Result<Pushed> {
    let output = git.network_output(
        "push",
        ["push", "--porcelain", "-q", &config.remote, &format!("{head}:refs/heads/{}", config.branch)],
        timeout,
    )?;
    if output.status.success() {
        git.run("update-ref", ["update-ref", &tracking_ref(config), head])?;
        return Ok(Pushed::Done);
    }
    let said = format!("{}\n{}", String::from_utf8_lossy(&output.stdout), output.stderr);
    if said.contains("pre-receive hook declined") {
        // The remote's gate (`paravault gate install`) refused: what it said, never retried.
        let told: Vec<&str> = output.stderr.lines().filter_map(|l| l.strip_prefix("remote: ")).filter(|l| !l.trim().is_empty()).collect();
        return Err(Error::PushRefused { summary: if told.is_empty() { "pre-receive hook declined".into() } else { told.join("; ") } });
    }
    if said.contains("[rejected]") || said.contains("non-fast-forward") || said.contains("fetch first") || said.contains("cannot lock ref")
    {
        return Ok(Pushed::RemoteMoved);
    }
    Err(Error::Replication { step: "push", reason: crate::store::git::first_lines(&said) })
}

/// `git merge-tree --write-tree`: the merged tree and the paths that conflict, each with the
/// other side's blob where it has one (stage 3: its text even when it lives under another name
/// there, as when this side renamed the note and the other side edited it).
fn merge_tree(git: &Git, ours: &str, theirs: &str) -> Result<(String, BTreeMap<String, Option<String>>)> {
    // No directory-rename detection: a vault's folders are not renamed as wholes, and with it
    // git moved a note one side had just put in a folder the other side emptied, and dropped it
    // from the merged tree without a conflict (found by the network simulation).
    let output = git.output(
        [
            "-c",
            "merge.directoryRenames=false",
            "merge-tree",
            "--write-tree",
            "-z",
            "--no-messages",
            "--allow-unrelated-histories",
            ours,
            theirs,
        ],
        &[],
        None,
    )?;
    // Exit 0: clean; 1: conflicts; anything else: the merge itself failed.
    if !matches!(output.status.code(), Some(0 | 1)) {
        return Err(Error::Replication { step: "merge-tree", reason: crate::store::git::first_lines(&output.stderr) });
    }
    let mut fields = output.stdout.split(|&b| b == 0);
    let tree = String::from_utf8_lossy(fields.next().unwrap_or_default()).trim().to_string();
    let mut conflicted: BTreeMap<String, Option<String>> = BTreeMap::new();
    for field in fields {
        if field.is_empty() {
            break; // the empty field ends the conflicted file info
        }
        // `<mode> <object> <stage>\t<path>`
        let entry = String::from_utf8_lossy(field);
        let Some((meta, path)) = entry.split_once('\t') else { continue };
        let mut parts = meta.split(' ');
        let (object, stage) = (parts.nth(1).unwrap_or_default(), parts.next().unwrap_or_default());
        let theirs_blob = conflicted.entry(path.to_string()).or_default();
        if stage == "3" {
            *theirs_blob = Some(object.to_string());
        }
    }
    Ok((tree, conflicted))
}

fn merge_base(git: &Git, ours: &str, theirs: &str) -> Result<Option<String>> {
    let output = git.output(["merge-base", ours, theirs], &[], None)?;
    Ok(output.status.success().then(|| output.text()))
}

/// Why a path conflicted, in a person's words.
fn conflict_reason(git: &Git, base: Option<&str>, ours: &str, theirs: &str, path: &str) -> Result<String> {
    let in_base = match base {
        Some(b) => git.blob_at(b, path)?.is_some(),
        None => false,
    };
    let (o, t) = (git.blob_at(ours, path)?.is_some(), git.blob_at(theirs, path)?.is_some());
    Ok(match (in_base, o, t) {
        (false, true, true) => "added on both sides with different texts".into(),
        (true, false, true) => "removed here, edited there".into(),
        (true, true, false) => "edited here, removed there".into(),
        _ => "overlapping edits".into(),
    })
}

/// log.md is append-only: both sides' appends, ours first, then theirs (never a conflict).
fn union_log(git: &Git, base: Option<&str>, ours: &str, theirs: &str) -> Result<Vec<u8>> {
    let base = match base {
        Some(b) => git.blob_at(b, layout::LOG)?.unwrap_or_default(),
        None => Vec::new(),
    };
    let mut merged = git.blob_at(ours, layout::LOG)?.unwrap_or_default();
    let theirs = git.blob_at(theirs, layout::LOG)?.unwrap_or_default();
    let added = theirs.strip_prefix(base.as_slice()).unwrap_or(&theirs);
    if !merged.is_empty() && !merged.ends_with(b"\n") {
        merged.push(b'\n');
    }
    merged.extend_from_slice(added);
    Ok(merged)
}

/// The note a tree path names, when it is one the write path takes (P.A.R.A. folder, `.md`,
/// no engine-owned or hidden name).
/// Why a governance file the other side changed is not taken (`None`: it is): an approver-key
/// registry that is not a signed append to this replica's, or a policy override whose
/// signature does not verify against the merged registry. The gate on the remote refuses the
/// same pushes (`crate::gate`); this holds for a remote without one. Such a file stays as it
/// is here and is reported as a conflict.
fn governance_refusal(git: &Git, root: &Path, target: &str, path: &str, after: Option<&[u8]>) -> Result<Option<String>> {
    let refusal = |e: Error| Ok(Some(format!("not taken: {e}")));
    if path == layout::APPROVER_KEYS {
        let Some(after) = after else { return Ok(Some("not taken: the other side removed the approver-key registry".into())) };
        let theirs = match crate::approvals::keys::Registry::parse(after) {
            Ok(r) => r,
            Err(e) => return refusal(e),
        };
        let checked = match crate::approvals::keys::read_registry(root)? {
            Some(ours) => ours.check_append(&theirs),
            None => theirs.verify(),
        };
        return match checked {
            Ok(_) => Ok(None),
            Err(e) => refusal(e),
        };
    }
    if path == layout::POLICY_OVERRIDE || path == layout::POLICY_SIGNATURE {
        let Some(registry) = git.blob_at(target, layout::APPROVER_KEYS)? else { return Ok(None) };
        let active = match crate::approvals::keys::Registry::parse(&registry).and_then(|r| r.verify()) {
            Ok(active) => active,
            Err(e) => return refusal(e),
        };
        let policy = git.blob_at(target, layout::POLICY_OVERRIDE)?.unwrap_or_default();
        let Some(signature) = git.blob_at(target, layout::POLICY_SIGNATURE)? else {
            return Ok(Some(format!("not taken: the policy changed without a signature ({})", layout::POLICY_SIGNATURE)));
        };
        return match crate::approvals::keys::PolicySignature::verify(&signature, &policy, &active) {
            Ok(_) => Ok(None),
            Err(e) => refusal(e),
        };
    }
    Ok(None)
}

/// Whether the branch's head holds `rel`.
fn committed(git: &Git, rel: &str) -> bool {
    matches!(git.blob_at("HEAD", rel), Ok(Some(_)))
}

fn note_path(vault: &Vault, path: &str) -> Option<VaultPath> {
    let note = VaultPath::parse(path).ok()?;
    crate::note::path::refuse_reserved(&note, &vault.policy().policy.layout.excluded_dirs).ok()?;
    crate::vault::resolve_note_path(vault.root(), note.as_str(), &vault.policy().policy.layout).ok().map(|(n, _)| n)
}

/// A file that is not a note, put in place (or removed) as the remote has it.
fn write_file(root: &Path, path: &str, bytes: Option<&[u8]>) -> Result<()> {
    if path.split('/').any(|c| c == ".git" || c == ".." || c.is_empty()) {
        return Err(Error::Replication { step: "integrate", reason: format!("the remote names a path paravault never writes: {path}") });
    }
    match bytes {
        Some(bytes) => crate::store::beneath::replace_unsynced(root, path, bytes, true),
        None => match crate::store::beneath::remove_unsynced(root, path) {
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        },
    }
}

/// Files changed outside the engine and not yet committed, engine state left out: among what
/// this process's evidence names since the last check (`evidence`, O(change)); else `git
/// status` of the whole work tree, git's own index first learning the engine's commits when no
/// writer is busy (a large index is not told per commit, docs/replication.md "What it costs").
fn uncommitted_count(vault: &Vault, config: &ReplicaConfig, git: &Git) -> Result<usize> {
    let evidence = evidence::Evidence::peek(vault, &ReplicaState::load(vault.root()))?;
    let head = git.resolve(&format!("refs/heads/{}", config.branch))?;
    if let Some(suspects) = evidence.suspects(vault, git, head.as_deref())? {
        let changed = git.changed_against(vault.root(), head.as_deref(), &suspects)?;
        return Ok(changed.iter().filter(|p| !p.starts_with(".paravault/") && !is_scratch(p)).count());
    }
    if let Some(_writer) = vault.try_lock_writer()?
        && let Err(error) = replica::catch_up_git_index(vault.root(), config)
    {
        tracing::warn!(%error, "git's index could not learn the engine's commits; the count may include them");
    }
    Ok(git.dirty_paths(&[])?.iter().filter(|p| !p.starts_with(".paravault/") && !is_scratch(p)).count())
}

/// Temporary files of an atomic replace (never committed).
fn is_scratch(path: &str) -> bool {
    path.rsplit('/').next().is_some_and(|name| name.starts_with(layout::TEMP_PREFIX))
}

/// The catalog pages of the folders of `paths` and their ancestors (the root's `index.md`
/// among them), as the work tree or `head`'s tree holds them.
fn catalog_pages_of(root: &Path, git: &Git, head: Option<&str>, paths: &BTreeSet<String>) -> Result<Vec<String>> {
    let mut folders: BTreeSet<String> = BTreeSet::new();
    for path in paths {
        let mut folder = path.as_str();
        while let Some((parent, _)) = folder.rsplit_once('/') {
            folders.insert(parent.to_string());
            folder = parent;
        }
    }
    folders.retain(|f| !f.starts_with('.'));
    let folders: Vec<String> = folders.into_iter().collect();
    let is_page = |path: &str| layout::is_sub_index_name(path.rsplit('/').next().unwrap_or(path));
    let mut pages: BTreeSet<String> = BTreeSet::from([layout::ROOT_INDEX.to_string()]);
    for folder in &folders {
        let Ok(listing) = std::fs::read_dir(root.join(folder)) else { continue };
        for entry in listing.flatten() {
            if let Some(name) = entry.file_name().to_str()
                && layout::is_sub_index_name(name)
            {
                pages.insert(format!("{folder}/{name}"));
            }
        }
    }
    if let Some(head) = head {
        pages.extend(git.tree_listing(head, &folders, false)?.into_iter().filter(|(p, folder)| !folder && is_page(p)).map(|(p, _)| p));
    }
    Ok(pages.into_iter().collect())
}

/// `replication_conflict` proposals still pending.
fn conflicts_waiting(vault: &Vault) -> Result<usize> {
    use crate::approvals::{Operation, ProposalState};
    Ok(vault.proposals()?.iter().filter(|p| p.operation == Operation::ReplicationConflict && p.state == ProposalState::Pending).count())
}
