//! A vault with a remote is a replica: its root is a git work tree and every transaction
//! becomes one git commit (docs/replication.md, "A transaction is a commit").
//!
//! - **Before** a transaction's plan, under the writer lock, the paths it will change are
//!   asked of git (`status` limited to them): a file a person changed in their editor since the
//!   last commit is committed first, as itself, with an `outside_edit` receipt, so it is never
//!   folded into the transaction's commit.
//! - **After** the transaction's receipt, its files (notes, catalog pages, log.md) and this
//!   replica's receipt mirror are staged and committed, author = the actor (or the approver),
//!   dated by the receipt (one clock), the message the operation, the path and the receipt's
//!   hash — never note content. A crash between the receipt and the commit leaves the files
//!   changed in the work tree; `replicate` commits them before it integrates anything.
//! - **Receipts travel per replica**: the local chain (`.paravault/receipts.jsonl`, never
//!   committed) is mirrored byte for byte into `.paravault/replicas/<replica>/receipts-NNNNNN.jsonl`,
//!   a thousand lines a file, so a commit stages at most a file or two of receipts (O(change)),
//!   two replicas never write the same file, and every chain verifies on every replica.
//!
//! Commits are built with plumbing from the branch's head tree, by path: the changed files'
//! blobs are written, and only the trees on their folder chains are read and rewritten
//! (`Git::tree_with`), so a commit costs O(change) at any vault size and never takes what a
//! person staged in git's own index. git's own index (what `git status` compares with) learns
//! the committed paths at once while it is small ([`EAGER_INDEX_MAX_BYTES`]); past that,
//! rewriting it is the whole of a commit's cost at 100,000 notes, so it learns them once per
//! `replicate` run (or `replicate status`): until then `git status` lists the engine's newest
//! commits as staged changes. The engine itself never reads git's index without first
//! bringing it up to the branch ([`catch_up_git_index`]). Git failures here never fail a write
//! that is already receipted: they are logged and the next `replicate` commits what is left.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::receipts::{NoteHashes, RECEIPT_SCHEMA, Receipt, ReceiptLog};
use super::writer::WriterGuard;
use crate::error::{Error, Result};
use crate::state::VaultState;
use crate::store::git::{Git, Person};
use crate::store::{durable, layout};

/// The receipt operation of an integration (`replicate`): its commit is the merge commit.
pub const MERGE_OPERATION: &str = "replicate.merge";
/// The receipt operation of files a person changed outside the engine, committed as such.
pub const OUTSIDE_EDIT_OPERATION: &str = "replicate.outside_edit";
/// Receipt lines per mirror file.
pub const MIRROR_LINES: u64 = 1000;
/// `replica.json`'s schema.
pub const CONFIG_SCHEMA: &str = "paravault.replica.v1";

/// This replica's identity and remote (`.paravault/replica.json`, per machine, never committed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaConfig {
    pub schema: String,
    /// 16 lower-case hex digits, random, minted once per replica.
    pub replica_id: String,
    /// The git remote's name (`origin`).
    pub remote: String,
    /// The branch the vault's history is on.
    pub branch: String,
}

impl ReplicaConfig {
    /// The vault's replica configuration; `None` when the vault has no remote.
    pub fn load(root: &Path) -> Result<Option<Self>> {
        let path = layout::join(root, layout::REPLICA_CONFIG);
        match durable::read_engine_file(root, &path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| Error::Replication {
                step: "replica.json",
                reason: format!("{} is not a replica configuration: {e}", layout::REPLICA_CONFIG),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("reading", layout::REPLICA_CONFIG, e)),
        }
    }

    /// `load`, remembered per vault by the file's stamp: `get_server_info` asks for it on every
    /// call, and it changes only when `replicate init` (or a person) rewrites it. The file is read
    /// again whenever its stamp (length, times, inode) moved, or was too recent to be trusted
    /// (`FileStamp::is_racy`); a link in its place or in place of the state folder is never
    /// taken for a remembered file (the stamps are taken without following links, and a state
    /// folder that is not a plain folder always goes through `load`, which refuses it).
    pub fn load_seen(root: &Path) -> Result<Option<Self>> {
        use crate::inventory::FileStamp;
        let lock = || SEEN_CONFIGS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let state_is_folder = std::fs::symlink_metadata(layout::join(root, layout::STATE_DIR)).is_ok_and(|m| m.file_type().is_dir());
        let seen_at = crate::inventory::now_ns();
        let stamp = match std::fs::symlink_metadata(layout::join(root, layout::REPLICA_CONFIG)) {
            // No file beneath a plain state folder: exactly what `load` finds (it opens the
            // folder without following a link and the file is not there).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && state_is_folder => {
                lock().remove(root);
                return Ok(None);
            }
            Ok(meta) if meta.file_type().is_file() && state_is_folder => Some(FileStamp::of(&meta)),
            _ => None,
        };
        if let Some(stamp) = stamp
            && let Some((known, config)) = lock().get(root)
            && *known == stamp
        {
            return Ok(Some(config.clone()));
        }
        let loaded = Self::load(root)?;
        match (stamp.filter(|s| !s.is_racy(seen_at)), &loaded) {
            (Some(stamp), Some(config)) => lock().insert(root.to_path_buf(), (stamp, config.clone())),
            _ => lock().remove(root),
        };
        Ok(loaded)
    }

    /// Writes the configuration durably.
    pub fn save(&self, root: &Path) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| Error::io("encoding", layout::REPLICA_CONFIG, std::io::Error::other(e)))?;
        durable::replace(root, &layout::join(root, layout::REPLICA_CONFIG), &bytes)
    }

    /// The folder of this replica's receipt mirror (vault-relative).
    pub fn mirror_dir(&self) -> String {
        mirror_dir(&self.replica_id)
    }
}

/// The replica configurations `ReplicaConfig::load_seen` remembers: per vault root, the file's
/// stamp when it was read and what it held.
static SEEN_CONFIGS: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, (crate::inventory::FileStamp, ReplicaConfig)>>,
> = std::sync::LazyLock::new(Default::default);

/// `replica-state.json`'s schema.
const STATE_SCHEMA: &str = "paravault.replica-state.v1";

/// `.paravault/replica-state.json` (per machine, never committed): when `replicate` last ran,
/// succeeded and failed, and what this replica last saw of the remote and integrated from it —
/// what answers say about their freshness ([`freshness`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplicaState {
    pub schema: String,
    pub last_attempt_at: Option<String>,
    pub last_success_at: Option<String>,
    pub last_error: Option<String>,
    /// When this replica last reached the remote.
    #[serde(default)]
    pub looked_at: Option<String>,
    /// The remote's head then.
    #[serde(default)]
    pub remote_head_seen: Option<String>,
    /// The remote's commits not integrated here then.
    #[serde(default)]
    pub behind_when_looked: usize,
    /// The remote's head this replica last integrated (or pushed: then the remote is at it).
    #[serde(default)]
    pub team_commit: Option<String>,
    /// The folder journal's position when `replicate` last committed every outside edit: the
    /// next run asks the journal what changed since, instead of git about the whole work tree.
    #[serde(default)]
    pub edits_checked_at: Option<crate::inventory::JournalToken>,
}

impl ReplicaState {
    /// The recorded state; the default when there is none or it cannot be read (it is a record
    /// of what happened, never a precondition).
    pub fn load(root: &Path) -> ReplicaState {
        durable::read_engine_file(root, &layout::join(root, layout::REPLICA_STATE))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Records the state (not synced: losing it to a crash loses a record, never data).
    pub fn save(&self, root: &Path) {
        let state = ReplicaState { schema: STATE_SCHEMA.into(), ..self.clone() };
        if let Ok(bytes) = serde_json::to_vec_pretty(&state)
            && let Err(error) = durable::replace_unsynced(root, &layout::join(root, layout::REPLICA_STATE), &bytes)
        {
            tracing::warn!(%error, "could not record the replication state");
        }
    }

    /// The replica reached the remote at `at` and saw its head at `remote_head`, `behind`
    /// commits past what it had integrated.
    pub fn looked(&mut self, at: String, remote_head: Option<String>, behind: usize) {
        self.looked_at = Some(at);
        self.remote_head_seen = remote_head;
        self.behind_when_looked = behind;
    }

    /// The replica integrated the remote's history up to `commit`.
    pub fn integrated(&mut self, commit: &str) {
        self.team_commit = Some(commit.to_string());
        if self.remote_head_seen.as_deref() == Some(commit) {
            self.behind_when_looked = 0;
        }
    }

    /// The replica pushed `head` at `at`: the remote is at it.
    pub fn pushed(&mut self, at: String, head: &str) {
        self.looked(at, Some(head.to_string()), 0);
        self.team_commit = Some(head.to_string());
    }
}

/// How fresh this vault's answers are when it is a replica (None when it is not): two small
/// file reads, no git process.
pub fn freshness(root: &Path) -> Option<crate::search::ReplicaFreshness> {
    let config = ReplicaConfig::load_seen(root).ok()??;
    let state = ReplicaState::load(root);
    Some(crate::search::ReplicaFreshness {
        remote: config.remote,
        team_commit: state.team_commit,
        looked_at: state.looked_at,
        remote_head_seen: state.remote_head_seen,
        behind_when_looked: state.behind_when_looked,
        last_error: state.last_error,
    })
}

/// The folder of a replica's receipt mirror (vault-relative).
pub fn mirror_dir(replica_id: &str) -> String {
    format!("{}/{replica_id}", layout::REPLICAS_DIR)
}

/// The mirror file that holds receipt `seq` of `replica_id`'s chain.
pub fn mirror_file(replica_id: &str, seq: u64) -> String {
    format!("{}/receipts-{:06}.jsonl", mirror_dir(replica_id), seq.saturating_sub(1) / MIRROR_LINES + 1)
}

/// The newest receipt `seq` in this replica's mirror (0: none), and where the newest file's
/// whole lines end (a torn tail past it is cut by the next append).
fn mirror_tip(root: &Path, config: &ReplicaConfig) -> Result<(u64, Option<(String, u64)>)> {
    let dir = config.mirror_dir();
    let entries = match crate::store::beneath::Folder::open(root, &dir, false).and_then(|f| f.entries()) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, None)),
        Err(e) => return Err(Error::io("listing", dir, e)),
    };
    let Some(newest) = entries.into_iter().map(|(name, _)| name).filter(|n| n.starts_with("receipts-") && n.ends_with(".jsonl")).max()
    else {
        return Ok((0, None));
    };
    let path = format!("{dir}/{newest}");
    let bytes = durable::read_engine_file(root, &layout::join(root, &path)).map_err(|e| Error::io("reading", path.clone(), e))?;
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let seq = bytes[..whole]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok()?.get("seq")?.as_u64())
        .next_back()
        .unwrap_or(0);
    Ok((seq, Some((path, whole as u64))))
}

/// Appends to this replica's mirror every local receipt line it lacks; returns the mirror
/// files it wrote (vault-relative).
pub(crate) fn update_mirror(root: &Path, config: &ReplicaConfig) -> Result<Vec<String>> {
    let (tip, newest) = mirror_tip(root, config)?;
    let lines = ReceiptLog::lines_after(root, tip)?;
    let mut by_file: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (seq, line) in lines {
        let bytes = by_file.entry(mirror_file(&config.replica_id, seq)).or_default();
        bytes.extend_from_slice(&line);
        bytes.push(b'\n');
    }
    if by_file.is_empty() {
        return Ok(Vec::new());
    }
    durable::create_dir_all(root, &layout::join(root, &config.mirror_dir()))?;
    for (file, bytes) in &by_file {
        let before = match &newest {
            Some((path, whole)) if path == file => *whole,
            _ => 0,
        };
        durable::truncate_and_append_unsynced(root, &layout::join(root, file), before, bytes)?;
    }
    let files: Vec<_> = by_file.keys().map(|f| layout::join(root, f)).collect();
    durable::sync_all_paths(root, &files, &[layout::join(root, &config.mirror_dir())])?;
    Ok(by_file.into_keys().collect())
}

/// Who a commit names: the approver when a person approved, else the receipt's actor.
fn author_of(receipt: &Receipt, replica_id: &str) -> Person {
    let approver = receipt.approval.as_ref().and_then(|a| a.get("approver")).and_then(Value::as_str);
    let name = approver.or(receipt.actor.as_deref()).unwrap_or("paravault").to_string();
    Person { email: format!("{}@{replica_id}.paravault.invalid", email_local(&name)), name, date: receipt.at.clone() }
}

fn email_local(name: &str) -> String {
    let local: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '-' }).collect();
    if local.is_empty() { "paravault".into() } else { local }
}

/// The engine as committer, on this replica, at `date`.
pub fn committer(replica_id: &str, date: &str) -> Person {
    Person { name: "paravault".into(), email: format!("engine@{replica_id}.paravault.invalid"), date: date.to_string() }
}

/// A commit message: the operation and path, then the receipt's trailer. No note content.
pub fn message(subject: &str, replica_id: &str, receipt: &Receipt, hash: &str) -> String {
    format!("{subject}\n\nParavault-Receipt: {replica_id}:{} blake3:{hash}\n", receipt.seq)
}

/// The size of git's own index up to which an engine commit updates it at once (about 8,000
/// files); a larger one learns engine commits once per `replicate` run. The environment
/// variable `PARAVAULT_GIT_INDEX_EAGER_MAX_BYTES` overrides it (tests, benches).
pub const EAGER_INDEX_MAX_BYTES: u64 = 1 << 20;

/// The tree of `head` (none: the empty tree) with `paths` as the work tree holds them.
fn tree_with_paths(git: &Git, root: &Path, head: Option<&str>, paths: &[String]) -> Result<String> {
    let changes = git.work_tree_entries(root, paths)?;
    git.tree_with(head, &changes)
}

/// Commits exactly `paths` (their work-tree state) on the replica's branch with one parent,
/// the branch's head (none for the first commit); returns the new commit.
/// Commits engine records that travel (a proposal, a decision, an approver-key change, a
/// policy signature) as soon as they are written on a replica, so `git status` stays clean
/// and the next `replicate` pushes them, stamped by `vault`'s clock. The caller holds the writer
/// lock. Best effort, as a transaction's own commit: a git failure is logged, and `replicate`
/// commits what is left.
pub(crate) fn commit_records_locked(vault: &VaultState, paths: &[String], subject: &str) {
    let root = vault.root();
    let at = vault.clock().stamp(chrono::SecondsFormat::Secs);
    let config = match ReplicaConfig::load(root) {
        Ok(Some(config)) => config,
        Ok(None) => return,
        Err(error) => {
            tracing::warn!(%error, "the replica configuration is unreadable; the records are committed by the next replicate");
            return;
        }
    };
    match commit_paths(root, &config, paths, &format!("{subject}\n"), &committer(&config.replica_id, &at)) {
        Ok(_) if !git_index_is_small(root) => vault.set_git_index_owed(true),
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "could not commit {subject}; the next replicate commits it"),
    }
}

/// [`commit_records_locked`], taking the writer lock.
pub(crate) fn commit_records(vault: &VaultState, writer: &super::Writer, paths: &[String], subject: &str) {
    if std::fs::symlink_metadata(layout::join(vault.root(), layout::REPLICA_CONFIG)).is_err() {
        return;
    }
    match writer.lock(vault) {
        Ok(_writer) => commit_records_locked(vault, paths, subject),
        Err(error) => tracing::warn!(%error, "could not commit {subject}; the next replicate commits it"),
    }
}

pub(crate) fn commit_paths(root: &Path, config: &ReplicaConfig, paths: &[String], message: &str, author: &Person) -> Result<String> {
    let git = Git::at(root);
    let head = git.resolve(&format!("refs/heads/{}", config.branch))?;
    let tree = tree_with_paths(&git, root, head.as_deref(), paths)?;
    let parents: Vec<&str> = head.iter().map(String::as_str).collect();
    let commit = git.commit_tree(&tree, &parents, message, author, &committer(&config.replica_id, &author.date))?;
    note_index_base(root, head.as_deref())?;
    git.move_branch(&config.branch, &commit, head.as_deref(), "paravault: commit")?;
    // git's own index learns the committed paths (now while it is small), so `git status`
    // shows nothing for them.
    if git_index_is_small(root) {
        let marker = layout::join(root, layout::GIT_INDEX_SYNCED);
        let known = durable::read_engine_file(root, &marker).ok().map(|b| String::from_utf8_lossy(&b).trim().to_string());
        if head.is_some() && known == head {
            // It knew the parent: the commit's own paths are all it lacks.
            git.stage(None, paths)?;
            record_git_index(root, &commit)?;
        } else {
            sync_git_index(&git, root, Some(&commit))?;
        }
    }
    Ok(commit)
}

/// Whether git's own index is small enough to be rewritten with every engine commit.
fn git_index_is_small(root: &Path) -> bool {
    let limit = std::env::var("PARAVAULT_GIT_INDEX_EAGER_MAX_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(EAGER_INDEX_MAX_BYTES);
    // A `.git` file (a linked work tree) names its index elsewhere: treated as small.
    std::fs::symlink_metadata(root.join(".git").join("index")).map_or(true, |m| m.len() <= limit)
}

/// Before the first engine commit moves the branch, notes what git's own index knows: the
/// branch's head as it is (a clone's, or a person's repository's index is at it), or the
/// empty tree on an unborn branch. Later engine commits leave the note as it is until git's
/// index learns them ([`sync_git_index`]).
fn note_index_base(root: &Path, head: Option<&str>) -> Result<()> {
    let marker = layout::join(root, layout::GIT_INDEX_SYNCED);
    if durable::read_engine_file(root, &marker).is_ok() {
        return Ok(());
    }
    record_git_index(root, head.unwrap_or(""))
}

/// Brings git's own index up to the branch's head before anything reads it (`git status`),
/// under the writer lock: the engine commits it has not learnt are staged (O(their paths);
/// git rewrites its index file once).
pub(crate) fn catch_up_git_index(root: &Path, config: &ReplicaConfig) -> Result<()> {
    let git = Git::at(root);
    let head = git.resolve(&format!("refs/heads/{}", config.branch))?;
    sync_git_index(&git, root, head.as_deref())
}

/// Brings git's own index up to the branch's head when engine commits moved the branch
/// without telling it (a large index learns them once per `replicate`; or a kill came between
/// the commit and the index): the paths between the commit the index last learnt (`""`: the
/// empty tree) and the head are staged from the work tree, which holds them. O(those paths).
fn sync_git_index(git: &Git, root: &Path, head: Option<&str>) -> Result<()> {
    let Some(head) = head else { return Ok(()) };
    let marker = layout::join(root, layout::GIT_INDEX_SYNCED);
    let known = durable::read_engine_file(root, &marker).ok().map(|b| String::from_utf8_lossy(&b).trim().to_string());
    match known {
        Some(known) if known == head => return Ok(()),
        Some(known) if known.is_empty() => {
            let empty = git.empty_tree()?;
            let changed: Vec<String> = git.changed_paths(&empty, head)?.into_iter().map(|(_, p)| p).collect();
            git.stage(None, &changed)?;
        }
        Some(known) if git.resolve(&known)?.is_some() => {
            let changed: Vec<String> = git.changed_paths(&known, head)?.into_iter().map(|(_, p)| p).collect();
            git.stage(None, &changed)?;
        }
        _ => {}
    }
    record_git_index(root, head)
}

/// Notes that git's own index knows the tree of `commit`.
fn record_git_index(root: &Path, commit: &str) -> Result<()> {
    durable::replace_unsynced(root, &layout::join(root, layout::GIT_INDEX_SYNCED), commit.as_bytes())
}

/// Step 2b, under the writer lock before the plan: files among `paths` that changed outside
/// the engine since the last commit are committed as an outside edit first (with their own
/// receipt). A git failure is logged, never refuses the write.
pub(crate) fn commit_outside_edits_before(vault: &VaultState, writer: &mut WriterGuard<'_>, paths: &[String]) {
    let root = vault.root();
    let Ok(Some(config)) = ReplicaConfig::load(root) else { return };
    if let Err(error) = commit_outside_edits(vault, writer, &config, Suspects::Only(paths)) {
        tracing::warn!(%error, "could not commit outside edits before the write; `paravault replicate` commits them");
    }
}

/// The work-tree files a check for outside edits compares with the branch.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Suspects<'p> {
    /// Every file: git's own `status`, which reads git's index and stats the whole work tree
    /// (O(vault)); for when no evidence says what changed.
    All,
    /// Only these vault-relative paths (none: nothing to compare): the branch's trees along
    /// them and a hash of each file, O(paths) at any vault size.
    Only(&'p [String]),
}

/// Commits the files among the `suspects` that differ from the branch (changed outside the
/// engine since the last commit), as one `outside_edit` commit with its receipt. Returns how
/// many.
pub(crate) fn commit_outside_edits(
    vault: &VaultState,
    writer: &mut WriterGuard<'_>,
    config: &ReplicaConfig,
    suspects: Suspects<'_>,
) -> Result<usize> {
    let root = vault.root();
    let git = Git::at(root);
    // The branch does not move under the writer lock the caller holds: resolved once.
    let head = git.resolve(&format!("refs/heads/{}", config.branch))?;
    // Engine state never travels as an outside edit; the vault's policy override does.
    let found = match suspects {
        Suspects::Only([]) => return Ok(0),
        Suspects::Only(paths) => git.changed_against(root, head.as_deref(), paths)?,
        Suspects::All => {
            // `git status` reads git's own index: it learns the engine's commits first.
            sync_git_index(&git, root, head.as_deref())?;
            git.dirty_paths(&[])?
        }
    };
    let dirty: Vec<String> =
        found.into_iter().filter(|p| !p.starts_with(&format!("{}/", layout::STATE_DIR)) || p == layout::POLICY_OVERRIDE).collect();
    if dirty.is_empty() {
        return Ok(0);
    }
    let notes = dirty
        .iter()
        .map(|path| {
            let before = head.as_deref().map(|h| git.blob_at(h, path)).transpose()?.flatten();
            let after = crate::store::beneath::read(root, path).ok().flatten();
            Ok(NoteHashes {
                path: path.clone(),
                before_sha256: crate::hex::sha256_hex(before.as_deref().unwrap_or_default()),
                after_sha256: after.map(|b| crate::hex::sha256_hex(&b)).unwrap_or_else(|| crate::hex::sha256_hex(b"")),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let receipt = Receipt {
        receipt_schema: RECEIPT_SCHEMA.to_string(),
        seq: writer.receipts.last_seq + 1,
        operation: OUTSIDE_EDIT_OPERATION.to_string(),
        path: dirty[0].clone(),
        at: vault.now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        status: "ok".to_string(),
        actor: Some("outside editor".to_string()),
        notes: Some(notes),
        ..Receipt::default()
    };
    let receipt = writer.receipts.append(root, receipt, true)?;
    let hash = writer.receipts.last_hash.clone();
    let mut staged = dirty.clone();
    staged.extend(update_mirror(root, config)?);
    let subject = format!("outside edit: {} file(s), {}", dirty.len(), dirty[0]);
    let author = Person {
        name: "outside editor".into(),
        email: format!("outside@{}.paravault.invalid", config.replica_id),
        date: receipt.at.clone(),
    };
    commit_paths(root, config, &staged, &message(&subject, &config.replica_id, &receipt, &hash), &author)?;
    Ok(dirty.len())
}

/// The work-tree files that may differ from `head`'s tree after the changes a `Known`
/// change set names (the watcher's or the folder journal's evidence): each named file; every
/// file of a folder named whole, on disk or in the tree; all of a folder only one side holds,
/// or that was named as an entry (created, removed or replaced whole); the policy override
/// (engine state, which no evidence source watches). `None` when only git can say: an ignore
/// file changed, so what git leaves out may have too. O(what the evidence names).
pub(crate) fn suspects_of(
    root: &Path,
    git: &Git,
    head: Option<&str>,
    changes: &crate::inventory::changes::Changes,
) -> Result<Option<Vec<String>>> {
    use crate::inventory::changes::FolderChange;
    use crate::note::path::child;
    let mut files: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let mut whole: Vec<String> = Vec::new();
    let mut entries: Vec<String> = Vec::new();
    for (folder, change) in &changes.folders {
        if !in_work_tree(folder) {
            continue;
        }
        match change {
            FolderChange::Whole => whole.push(folder.clone()),
            FolderChange::Entries(names) => {
                for name in names {
                    if name == GITIGNORE {
                        return Ok(None);
                    }
                    let path = child(folder, name);
                    if in_work_tree(&path) {
                        entries.push(path);
                    }
                }
            }
        }
    }
    // Folders whose whole content, at any depth, is suspect.
    let mut expand: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    if !whole.is_empty() {
        let committed = match head {
            Some(head) => git.tree_listing(head, &whole, false)?,
            None => BTreeMap::new(),
        };
        for folder in &whole {
            let Ok(listing) = std::fs::read_dir(root.join(folder)) else { continue };
            for entry in listing.flatten() {
                let Some(name) = entry.file_name().to_str().map(str::to_string) else { return Ok(None) };
                if name == GITIGNORE {
                    return Ok(None);
                }
                let path = child(folder, &name);
                if !in_work_tree(&path) {
                    continue;
                }
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    if committed.get(&path) != Some(&true) {
                        expand.insert(path);
                    }
                } else {
                    files.insert(path);
                }
            }
        }
        for (path, is_folder) in committed {
            if !is_folder {
                files.insert(path);
            } else if !is_plain_dir(root, &path) {
                expand.insert(path);
            }
        }
    }
    if !entries.is_empty() {
        let committed = match head {
            Some(head) => git.tree_entries(head, &entries)?,
            None => BTreeMap::new(),
        };
        for path in entries {
            let folder_in_tree = committed.get(&path).is_some_and(|(mode, _)| mode == "040000");
            if folder_in_tree || is_plain_dir(root, &path) {
                expand.insert(path.clone());
            }
            files.insert(path);
        }
    }
    if !expand.is_empty() {
        let expand: Vec<String> = expand.into_iter().collect();
        for folder in &expand {
            if !walk_files(root, folder, &mut files) {
                return Ok(None);
            }
        }
        if let Some(head) = head {
            files.extend(git.tree_listing(head, &expand, true)?.into_keys());
        }
        // The folders themselves are not files.
        for folder in &expand {
            if is_plain_dir(root, folder) {
                files.remove(folder);
            }
        }
    }
    files.insert(layout::POLICY_OVERRIDE.to_string());
    Ok(Some(files.into_iter().collect()))
}

/// An ignore file's name: a change to one may change what git leaves out anywhere below it.
const GITIGNORE: &str = ".gitignore";

/// Whether a vault-relative path is in git's work tree as the engine commits it: not git's
/// own folder, not the engine's (which no evidence source watches; what of it travels is
/// checked by [`travelling_changes`]).
fn in_work_tree(path: &str) -> bool {
    let first = path.split('/').next().unwrap_or(path);
    first != layout::GIT_DIR && first != layout::STATE_DIR
}

fn is_plain_dir(root: &Path, path: &str) -> bool {
    std::fs::symlink_metadata(root.join(path)).is_ok_and(|m| m.is_dir())
}

/// Adds every file below `folder` (at any depth; links as files, never followed) to `files`;
/// false when a name is not UTF-8 (only git can compare it).
fn walk_files(root: &Path, folder: &str, files: &mut std::collections::BTreeSet<String>) -> bool {
    let Ok(listing) = std::fs::read_dir(root.join(folder)) else { return true };
    for entry in listing.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { return false };
        let path = crate::note::path::child(folder, &name);
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            if !walk_files(root, &path, files) {
                return false;
            }
        } else {
            files.insert(path);
        }
    }
    true
}

/// The engine files that travel (`pathspecs`, under `.paravault/`) whose work-tree state
/// differs from the branch's head: left uncommitted by a killed or failed run. git answers
/// from a small index of those files alone (`layout::GIT_TRAVELLING_INDEX`), kept equal to the
/// head's tree of the engine's folder by setting only the entries that changed since the
/// commit it last learnt: `diff-files` (its entries against the work tree) and `ls-files
/// --others` (untracked files below the pathspecs, git's ignore rules applied) never read git's
/// own index or walk the vault, so the answer costs O(the engine files that travel).
pub(crate) fn travelling_changes(root: &Path, head: Option<&str>, pathspecs: &[String]) -> Result<Vec<String>> {
    let git = Git::at(root);
    // git runs in the vault's root: the index is named from there.
    let env = [("GIT_INDEX_FILE", layout::GIT_TRAVELLING_INDEX)];
    let marker = layout::join(root, layout::GIT_TRAVELLING_INDEX_HEAD);
    let known = durable::read_engine_file(root, &marker).ok().map(|b| String::from_utf8_lossy(&b).trim().to_string());
    let head_text = head.unwrap_or("");
    if known.as_deref() != Some(head_text) {
        let in_engine_folder = |p: &String| p.starts_with(&format!("{}/", layout::STATE_DIR));
        let index_kept = layout::join(root, layout::GIT_TRAVELLING_INDEX).exists();
        let changed: Option<Vec<String>> = match (&known, head) {
            (Some(known), Some(head)) if !known.is_empty() && index_kept && git.resolve(known)?.is_some() => {
                Some(git.changed_paths(known, head)?.into_iter().map(|(_, p)| p).filter(in_engine_folder).collect())
            }
            _ => None,
        };
        match changed {
            Some(changed) => {
                // The head's entries for the paths that changed (a removal where it holds none).
                let entries = match head {
                    Some(head) => git.tree_entries(head, &changed)?,
                    None => BTreeMap::new(),
                };
                let mut info = Vec::new();
                for path in &changed {
                    match entries.get(path) {
                        Some((mode, id)) => info.extend_from_slice(format!("{mode} {id}\t{path}").as_bytes()),
                        None => info.extend_from_slice(format!("0 {}\t{path}", "0".repeat(40)).as_bytes()),
                    }
                    info.push(0);
                }
                if !info.is_empty() {
                    git.run_with("update-index", ["update-index", "-z", "--index-info"], &env, Some(&info))?;
                }
            }
            None => {
                // Built again from the head's tree of the engine's folder.
                durable::remove_unsynced(root, &layout::join(root, layout::GIT_TRAVELLING_INDEX))?;
                let folder = match head {
                    Some(head) => git.tree_entries(head, &[layout::STATE_DIR.to_string()])?.remove(layout::STATE_DIR),
                    None => None,
                };
                if let Some((_, tree)) = folder {
                    let prefix = format!("--prefix={}/", layout::STATE_DIR);
                    git.run_with("read-tree", ["read-tree", prefix.as_str(), tree.as_str()], &env, None)?;
                }
            }
        }
        durable::replace_unsynced(root, &marker, head_text.as_bytes())?;
    }
    // Entries whose file was touched but holds the same bytes, or that were just set, get the
    // file's stat data (a hash of those files only), so `diff-files` names only real changes
    // (exit 1: some file differs, which it then names).
    git.output(["update-index", "-q", "--refresh"], &env, None)?;
    let mut out = Vec::new();
    let mut differ = vec!["diff-files".to_string(), "--name-only".into(), "-z".into(), "--".into()];
    differ.extend(pathspecs.iter().cloned());
    let mut untracked = vec!["ls-files".to_string(), "--others".into(), "--exclude-standard".into(), "-z".into(), "--".into()];
    untracked.extend(pathspecs.iter().cloned());
    for args in [differ, untracked] {
        let output = git.run_with("status", &args, &env, None)?;
        out.extend(output.stdout.split(|&b| b == 0).filter(|r| !r.is_empty()).map(|r| String::from_utf8_lossy(r).into_owned()));
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The integration's commit (`replicate`): `paths` as the work tree holds them now, on the
/// branch's head, with `theirs` as second parent — or, when `fast_forward` and the result is
/// exactly `theirs`' tree, the branch simply moves to `theirs`.
pub(crate) fn commit_integration(
    root: &Path,
    config: &ReplicaConfig,
    paths: &[String],
    message: &str,
    author: &Person,
    theirs: &str,
    fast_forward: bool,
) -> Result<String> {
    let git = Git::at(root);
    let head = git.resolve(&format!("refs/heads/{}", config.branch))?;
    let tree = tree_with_paths(&git, root, head.as_deref(), paths)?;
    let their_tree = git.run("rev-parse", ["rev-parse", &format!("{theirs}^{{tree}}")])?.text();
    let head_is_ancestor = match &head {
        Some(h) => git.is_ancestor(h, theirs)?,
        None => true,
    };
    let commit = if fast_forward && head_is_ancestor && tree == their_tree {
        theirs.to_string()
    } else {
        let mut parents: Vec<&str> = head.iter().map(String::as_str).collect();
        if !(fast_forward && head_is_ancestor) || head.is_none() {
            parents.push(theirs);
        } else {
            // A fast-forward that adds this replica's own files (its receipt, the catalogs it
            // rendered): one commit on top of theirs.
            parents = vec![theirs];
        }
        git.commit_tree(&tree, &parents, message, author, &committer(&config.replica_id, &author.date))?
    };
    note_index_base(root, head.as_deref())?;
    git.move_branch(&config.branch, &commit, head.as_deref(), "paravault: replicate")?;
    // git's own index learns every path that changed (once per run, whatever its size).
    sync_git_index(&git, root, Some(&commit))?;
    Ok(commit)
}

/// Step 10, after the receipt: the transaction's files and the receipt mirror become one
/// commit. A git failure is logged (the write is done and receipted); `replicate` commits
/// what is left.
pub(crate) fn commit_transaction_after(vault: &VaultState, writer: &WriterGuard<'_>, receipt: &Receipt, paths: &[String]) {
    if receipt.operation == MERGE_OPERATION {
        return; // `replicate` makes the merge commit itself.
    }
    let root = vault.root();
    let Ok(Some(config)) = ReplicaConfig::load(root) else { return };
    let hash = writer.receipts.last_hash.clone();
    let result = (|| {
        let mut staged: Vec<String> = paths.to_vec();
        staged.extend(update_mirror(root, &config)?);
        let subject = format!("{} {}", receipt.operation, receipt.path);
        commit_paths(
            root,
            &config,
            &staged,
            &message(&subject, &config.replica_id, receipt, &hash),
            &author_of(receipt, &config.replica_id),
        )
    })();
    match result {
        Ok(_) if !git_index_is_small(root) => vault.set_git_index_owed(true),
        Ok(_) => {}
        Err(error) => {
            tracing::warn!(seq = receipt.seq, %error, "the write is done but its git commit failed; `paravault replicate` commits it")
        }
    }
}

/// Teaches git's own index the engine commits this process made since it last did (a large
/// index is not told per commit), so `git status` stops listing them as staged changes:
/// long-lived processes call it when idle (`vault::Vault::settle_git_index`). Skipped, and
/// owed still, while another writer holds the lock.
pub(crate) fn settle_git_index(vault: &VaultState, writer: &super::Writer) -> Result<()> {
    if !vault.git_index_owed() {
        return Ok(());
    }
    let Some(_writer) = writer.try_lock(vault)? else { return Ok(()) };
    if let Some(config) = ReplicaConfig::load(vault.root())? {
        catch_up_git_index(vault.root(), &config)?;
    }
    vault.set_git_index_owed(false);
    Ok(())
}

/// A fresh replica id: 16 hex digits.
pub fn new_replica_id() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the OS random source");
    crate::hex::encode(&bytes)
}

/// Every replica's travelled receipt chain (`.paravault/replicas/<id>/`), each verified as
/// one chain: its files in order, every line parsing, `seq` +1, `prev` the hash of the line
/// before. Two receipts claiming one (replica, seq) break the chain there and are reported,
/// never merged.
pub(crate) fn verify_mirrors(root: &Path) -> Result<Vec<super::receipts::ReplicaChain>> {
    let folder = match crate::store::beneath::Folder::open(root, layout::REPLICAS_DIR, false).and_then(|f| f.entries()) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("listing", layout::REPLICAS_DIR, e)),
    };
    let mut out = Vec::new();
    let mut ids: Vec<String> = folder.into_iter().map(|(name, _)| name).filter(|n| !n.starts_with('.')).collect();
    ids.sort();
    for id in ids {
        let dir = mirror_dir(&id);
        let mut files: Vec<String> = match crate::store::beneath::Folder::open(root, &dir, false).and_then(|f| f.entries()) {
            Ok(entries) => {
                entries.into_iter().map(|(name, _)| name).filter(|n| n.starts_with("receipts-") && n.ends_with(".jsonl")).collect()
            }
            Err(e) => return Err(Error::io("listing", dir, e)),
        };
        files.sort();
        let mut bytes = Vec::new();
        let mut problems = Vec::new();
        for (i, name) in files.iter().enumerate() {
            let path = format!("{dir}/{name}");
            let chunk = durable::read_engine_file(root, &layout::join(root, &path)).map_err(|e| Error::io("reading", path.clone(), e))?;
            if name != &format!("receipts-{:06}.jsonl", i + 1) {
                problems
                    .push(super::receipts::ChainProblem { line: 0, message: format!("{name}: a file of the chain is missing before it") });
            }
            bytes.extend_from_slice(&chunk);
        }
        let report = super::receipts::verify_chain(&bytes);
        problems.extend(report.problems);
        out.push(super::receipts::ReplicaChain { replica_id: id, receipts: report.receipts, ok: problems.is_empty(), problems });
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
