//! Every on-disk name the engine owns inside a vault, in one place.

use std::path::{Path, PathBuf};

/// The engine's state directory inside a vault.
pub const STATE_DIR: &str = ".paravault";
/// A vault's policy override.
pub const POLICY_OVERRIDE: &str = ".paravault/policy.yaml";
/// The policy as last parsed (`policy::LoadedPolicy::load`, postcard): a cache, trusted only for
/// the same engine and the same policy texts.
pub const POLICY_CACHE: &str = ".paravault/policy.parsed.bin";
/// Where earlier engines kept the parsed policy (as JSON): never read, removed when the
/// postcard copy is first kept.
pub const RETIRED_POLICY_CACHE: &str = ".paravault/policy.parsed.json";
/// The write transaction's intent journal.
pub const JOURNAL: &str = ".paravault/journal.log";
/// The journal's frame index as its last writer left it (`store::journal`): each record's head
/// and where its bytes lie, so a writer that opens an unchanged journal reads no record. A
/// cache, checksummed, trusted only for the journal file exactly as it describes it.
pub const JOURNAL_HEADS: &str = ".paravault/journal.heads";
/// Append-only, hash-chained receipts.
pub const RECEIPTS: &str = ".paravault/receipts.jsonl";
/// This replica's identity and remote (`write::replica`): per machine, never committed.
pub const REPLICA_CONFIG: &str = ".paravault/replica.json";
/// What `replicate` last did (when it last succeeded, its last error): per machine.
pub const REPLICA_STATE: &str = ".paravault/replica-state.json";
/// Every replica's receipt mirror, `<replica>/receipts-NNNNNN.jsonl`: the one part of the
/// engine's folder that is committed (with `policy.yaml`).
pub const REPLICAS_DIR: &str = ".paravault/replicas";
/// Replication conflict proposals as they travel between replicas (committed; each replica
/// takes them into its own proposals, `approvals::import_conflict`).
pub const CONFLICTS_DIR: &str = ".paravault/conflicts";
/// The vault's registry of approvers' public keys (issue 49; travels with the vault).
pub const APPROVER_KEYS: &str = ".paravault/approver-keys.json";
/// This replica's pin of the registry's root entry (never committed).
pub const APPROVER_KEYS_PIN: &str = ".paravault/approver-keys.pin";
/// The signature of the policy override (travels with it).
pub const POLICY_SIGNATURE: &str = ".paravault/policy.sig";
/// Decision records that did not verify, moved aside when a person decides (kept, never deleted).
pub const UNVERIFIED_DECISIONS_DIR: &str = ".paravault/approvals/unverified";
/// git's own folder at the root of a replica's work tree.
pub const GIT_DIR: &str = ".git";
/// The ignore rules paravault owns: everything in `.paravault/` but the receipt mirrors and
/// the policy override stays out of git.
pub const GIT_IGNORE: &str = ".paravault/.gitignore";
/// The private index an older engine built its commits in; `replicate` removes it (commits are
/// now built from the branch's tree by path, `store::git::Git::tree_with`).
pub const GIT_PRIVATE_INDEX: &str = ".paravault/git.index";
/// The commit whose tree git's own index was last told about (`write::replica::sync_git_index`).
pub const GIT_INDEX_SYNCED: &str = ".paravault/git.index.synced";
/// The commit whose tree `GIT_PRIVATE_INDEX` held (an older engine's; removed with it).
pub const GIT_PRIVATE_INDEX_HEAD: &str = ".paravault/git.index.head";
/// A small git index of the engine files that travel, as the branch's head holds them, so
/// finding the ones left uncommitted never reads git's own index (`write::replica::travelling_changes`).
pub const GIT_TRAVELLING_INDEX: &str = ".paravault/git-travelling.index";
/// The commit `GIT_TRAVELLING_INDEX` was last brought up to.
pub const GIT_TRAVELLING_INDEX_HEAD: &str = ".paravault/git-travelling.index.head";
/// Cross-process writer lock file.
pub const WRITER_LOCK: &str = ".paravault/writer.lock";
/// Serialises the read-modify-write of the goals worklist across processes (`goals::mutate`).
pub const GOALS_LOCK: &str = ".paravault/goals.lock";
/// Durable proposals.
pub const PROPOSALS_DIR: &str = ".paravault/proposals";
/// P.O.W.E.R.'s durable proposals (`<proposal_id>.json`, reference §5) in a vault it served:
/// read where they lie, never written.
pub const POWER_PROPOSALS_DIR: &str = ".power/proposals";
/// P.O.W.E.R.'s content-free receipts (`power.receipt.v1`, one JSON object a line, reference
/// §4.4) in a vault it served: read where they lie, never written.
pub const POWER_HISTORY: &str = ".power/memory-history.jsonl";
/// Human approval state (src/approvals): never a note, so no write transaction or MCP tool can
/// create or change anything in it.
pub const APPROVALS_DIR: &str = ".paravault/approvals";
/// Immutable decision records, one `<proposal_id>.json` each, created once and never replaced.
pub const APPROVAL_DECISIONS_DIR: &str = ".paravault/approvals/decisions";
/// Multi-note proposals (archive, heal, Markdown fix) held for a person's decision.
pub const BATCH_PROPOSALS_DIR: &str = ".paravault/approvals/batches";
/// Proposals of governed actions that write no note (link-rot egress, infra replicate): exactly
/// the request a person decides on.
pub const ACTION_PROPOSALS_DIR: &str = ".paravault/approvals/actions";
/// `handoff_work` task snapshots (`<task_id>.json`).
pub const TASKS_DIR: &str = ".paravault/tasks";
/// `handoff_work` per-task append-only, hash-chained event journals (`<task_id>.jsonl`).
pub const TASK_EVENTS_DIR: &str = ".paravault/tasks/events";
/// Name prefix of the empty files a long-lived process's watcher created (and removed) in the
/// state folder before it read its inotify queue itself (`watch.rs`), to prove every earlier
/// change was delivered: one a killed server of those builds left is removed like a temporary
/// file.
pub const WATCH_BARRIER_PREFIX: &str = "watch-barrier-";
/// Name prefix of the temporary files an atomic replace writes beside its target; one left by
/// a killed write is removed under the writer lock at the next open.
pub const TEMP_PREFIX: &str = ".pv-tmp-";
/// The whole-file persisted inventory engines before the keyed copy's format 9 kept beside it:
/// removed when the persisted inventory is next written.
pub const LEGACY_INVENTORY_FILE: &str = ".paravault/inventory.bin";
/// The persisted inventory (`inventory_cache`, a `redb` database): the one persisted copy of
/// the model, read whole by a whole load and by key by a write process. A cache, sealed
/// value by value, rebuilt when untrusted.
pub const INVENTORY_INDEX: &str = ".paravault/inventory.redb";
/// The folder journal's socket (`paravault watch`, `folder_journal`): a one-shot write asks it
/// which folders changed instead of a stat of each.
pub const FOLDER_JOURNAL_SOCKET: &str = ".paravault/folders.sock";
/// The lock a running folder journal holds (one journal per vault).
pub const FOLDER_JOURNAL_LOCK: &str = ".paravault/folders.lock";
/// The INFRA-1 broker's configuration (`paravault broker`, `infra::broker`): the targets a
/// person allows. Engine state: per machine, never committed.
pub const BROKER_CONFIG: &str = ".paravault/broker.yaml";
/// The INFRA-1 broker's default socket.
pub const BROKER_SOCKET: &str = ".paravault/broker.sock";
/// The INFRA-1 broker's records: idempotency keys, runs, claimed approvals, dry runs.
pub const BROKER_DIR: &str = ".paravault/broker";
/// Incremental catalog renderer state.
pub const CATALOG_STATE: &str = ".paravault/catalog-state.json";
/// Root catalog.
pub const ROOT_INDEX: &str = "index.md";
/// Human change log (appended only when it exists).
pub const LOG: &str = "log.md";
/// Directory catalog landing page name.
pub const SUB_INDEX: &str = "_index.md";
/// Ignore files read with gitignore semantics (P.O.W.E.R.'s name kept for drop-in use).
pub const IGNORE_FILES: [&str; 2] = [".paravaultignore", ".powerignore"];

/// Name of page `page` (1-based) of a directory catalog.
pub fn sub_index_page_name(page: usize) -> String {
    if page <= 1 { SUB_INDEX.to_string() } else { format!("_index-{page}.md") }
}

/// Whether a file name is a catalog page name (`_index.md`, `_index-N.md`).
pub fn is_sub_index_name(name: &str) -> bool {
    if name == SUB_INDEX {
        return true;
    }
    name.strip_prefix("_index-")
        .and_then(|rest| rest.strip_suffix(".md"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Joins a vault-relative '/'-separated path onto the root.
pub fn join(root: &Path, rel: &str) -> PathBuf {
    let mut path = root.to_path_buf();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        path.push(part);
    }
    path
}

/// Search state: one tantivy index plus generation manifests and the ACTIVE pointer.
pub const SEARCH_DIR: &str = ".paravault/search";
/// The single tantivy index directory (immutable segments).
pub const SEARCH_INDEX_DIR: &str = ".paravault/search/index";
/// Generation manifests, one `<generation_id>.json` each.
pub const SEARCH_GENERATIONS_DIR: &str = ".paravault/search/generations";
/// Dense vector arenas shared by the generations of one model.
pub const SEARCH_DENSE_DIR: &str = ".paravault/search/dense";
/// The pointer to the published generation (content: its id).
pub const SEARCH_ACTIVE: &str = ".paravault/search/ACTIVE";
