//! The persisted inventory (`.paravault/inventory.redb`), read whole by a process that loads the
//! whole model (`read_known`), and the partial model a one-shot write process loads from it: the records, names, link targets and folder
//! aggregates that write consults, looked up by key, instead of the whole model decoded.
//!
//! Tables (values postcard): `meta` (format, engine, policy digest, vault-wide counters, root
//! notes, invalid notes, symbolic links, pages not settled), with one more value: the source
//! snapshot's top-level lines (one line per folder with valid notes: a write's partial snapshot
//! replaces the lines of the folders it loads and keeps the others as they are); `folders`
//! (every walked folder → its identity as of its last whole listing, its subtree's valid notes,
//! its direct valid notes), `records` and `files`, each keyed `folder \0 name` (a folder's
//! direct subfolders, or its direct entries, are one range; the root's row has the empty key);
//! `linkers` (link key → notes) and `names` (lower-cased file name → files). Everything
//! counted is counted over the settled records only, as the file it copies (`inventory_cache`)
//! keeps only those: a page not settled is read again at load and counted then, exactly as a
//! whole load does.
//!
//! A write's partial model holds the subtree counts only of the folders it loads, their
//! ancestors and their direct subfolders: what its catalog pages and the fold consult.
//!
//! Every value is sealed with its key (`seal`). A partial load's trust is the same as a whole
//! load's under folder checks (`Inventory::load_checking_folders`):
//! every folder's identity is compared with the disk; a folder that moved is listed again
//! and its changed entries read. What the write consults besides (the notes linking to the
//! touched names, the root notes) is stat'ed; one that changed, a folder that vanished, or
//! anything the model turns out not to hold (`inventory::Overrun`) sends the write to the
//! whole load instead. Never trusted when foreign (format, engine, policy) or unreadable.
//!
//! With a folder journal that can answer since the position the copy records, the journal's
//! account replaces the folders' identities: a folder it does not name is as the copy holds it,
//! one it names as a whole is listed again, and one it names by entries has each of those
//! entries looked at alone (`inventory::look_at_entry`), as a listing would classify it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{
    MultimapTableDefinition, ReadOnlyMultimapTable, ReadOnlyTable, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition,
};
use serde::{Deserialize, Serialize};

use super::{PersistedRecord, persisted_record, record_of, settled};
pub use crate::inventory::changes::FolderChange;
use crate::inventory::changes::{ChangeSet, Changes};
use crate::inventory::snapshot::SourceSnapshot;
use crate::inventory::{
    self, Counts, FileStamp, FolderEntry, Inventory, JournalToken, KnownVault, LoadCounts, NoteRecord, Partial, PartialModel, Unlistable,
    dir_stamp, link_key, lower_name, now_ns, stamp_now,
};
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::scan::{self, PageKind, UnusableName};

/// Bumped whenever a table's shape changes.
pub const FORMAT_VERSION: u32 = 10;

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// Every folder's row (`FolderRow`), keyed by `folder_key`: a write reads the few it consults.
const FOLDERS: TableDefinition<&str, &[u8]> = TableDefinition::new("folders");
const RECORDS: TableDefinition<&str, &[u8]> = TableDefinition::new("records");
/// Every file (pages and attachments), for a folder's listing as persisted; the value seals
/// the key alone (`seal`).
const FILES: TableDefinition<&str, &[u8]> = TableDefinition::new("files");
/// Link key → each note linking under it, and lower-cased file name → each file of that name:
/// every value is the path sealed with its key (`seal_pair`).
const LINKERS: MultimapTableDefinition<&str, &[u8]> = MultimapTableDefinition::new("linkers");
const NAMES: MultimapTableDefinition<&str, &[u8]> = MultimapTableDefinition::new("names");

const HEADER_KEY: &str = "header";
/// The source snapshot's top-level lines (`SourceSnapshot::lines`), one value in `meta`: a
/// write's partial snapshot starts from them.
const SNAPSHOT_KEY: &str = "snapshot lines";

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Header {
    format: u32,
    engine_version: String,
    policy_digest: [u8; 32],
    notes: usize,
    valid: usize,
    root_notes: Vec<String>,
    invalid: Vec<String>,
    symlinked_notes: Vec<String>,
    unusable_names: Vec<UnusableName>,
    unread_pages: Vec<(String, PageKind)>,
    /// The folders whose identity is not settled (none recorded, or taken within the racy
    /// window): a write checks them at once, and lists them again.
    unsettled_folders: Vec<String>,
    ignore_files: bool,
    /// The folder journal's position at which every folder row was last proven
    /// (`folder_journal`): a row of a folder the journal reports unchanged since then is the
    /// disk without a stat. `None` (written by `fill`): not proven against any journal.
    journal_token: Option<JournalToken>,
}

/// A folder journal's answer to "what changed since this token": its position now (taken
/// after every event of an edit finished before the question was delivered to it), and what
/// changed since the token, as the model's `ChangeSet` (`Unknown` when the journal cannot say,
/// e.g. the token is from another run; `Known` names the folders that had an entry created,
/// removed or renamed, or their own attributes changed, each with what changed in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalAnswer {
    pub now: JournalToken,
    pub changes: ChangeSet,
}

impl JournalAnswer {
    /// The answer at position `now`: `changed` per folder, or `None` when the journal cannot say.
    pub fn new(now: JournalToken, changed: Option<BTreeMap<String, FolderChange>>) -> JournalAnswer {
        let changes = match changed {
            Some(folders) => ChangeSet::Known(Changes { folders, position: Some(now) }),
            None => ChangeSet::unknown("the folder journal cannot say what changed since that position"),
        };
        JournalAnswer { now, changes }
    }

    /// The folders changed since the token, each with what changed in it; `None` when the
    /// journal cannot say.
    pub fn changed(&self) -> Option<&BTreeMap<String, FolderChange>> {
        match &self.changes {
            ChangeSet::Known(changes) => Some(&changes.folders),
            ChangeSet::Unknown(_) => None,
        }
    }
}

/// How a keyed load asks the vault's folder journal, if one runs (`None` from the call: no
/// journal answered).
pub type AskJournal<'a> = &'a dyn Fn(Option<JournalToken>) -> Option<JournalAnswer>;

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct FolderRow {
    /// Identity as of its last whole listing, and when it was taken.
    seen: Option<(FileStamp, i128)>,
    /// Valid notes in its subtree.
    valid_subtree: usize,
    /// Valid notes directly in it (its line of the snapshot's top-level lines counts them).
    direct_valid: usize,
}

impl FolderRow {
    /// Whether its identity is settled: recorded, and not taken within the racy window.
    fn settled(&self) -> bool {
        self.seen.is_some_and(|(stamp, at)| !stamp.is_racy(at))
    }
}

/// The key of folder `dir`'s row in `folders`: `parent \0 name`, as `entry_key`, so a folder's
/// direct subfolders are one range (`direct_range`); the root's is the empty key, outside
/// every range.
fn folder_key(dir: &str) -> String {
    if dir.is_empty() { String::new() } else { entry_key(dir) }
}

fn decode_row(key: &str, bytes: &[u8]) -> Result<FolderRow, String> {
    unseal(key, bytes)
}

/// Folder `dir`'s row (`None`: no such folder was walked).
fn folder_row(table: &impl ReadableTable<&'static str, &'static [u8]>, dir: &str) -> Result<Option<FolderRow>, String> {
    let key = folder_key(dir);
    let value = table.get(key.as_str()).map_err(|e| format!("folder rows: {e}"))?;
    value.map(|v| decode_row(&key, v.value())).transpose()
}

/// The rows whose keys lie in `keys`, each with its folder, in key order.
fn rows_in<'k>(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    keys: impl std::ops::RangeBounds<&'k str> + 'k,
) -> Result<Vec<(String, FolderRow)>, String> {
    let mut out = Vec::new();
    for entry in table.range(keys).map_err(|e| format!("folder rows: {e}"))? {
        let (key, value) = entry.map_err(|e| format!("folder rows: {e}"))?;
        out.push((path_of_key(key.value()), decode_row(key.value(), value.value())?));
    }
    Ok(out)
}

/// The rows of folder `dir`'s direct subfolders, in name order: one range.
fn child_rows(table: &impl ReadableTable<&'static str, &'static [u8]>, dir: &str) -> Result<Vec<(String, FolderRow)>, String> {
    let (from, to) = direct_range(dir);
    rows_in(table, from.as_str()..to.as_str())
}

/// Every folder's row (the root's first, then by parent and name).
fn every_row(table: &impl ReadableTable<&'static str, &'static [u8]>) -> Result<Vec<(String, FolderRow)>, String> {
    rows_in(table, ..)
}

/// The key of `path` in `records` and `files`: its folder, NUL, its name.
fn entry_key(path: &str) -> String {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    format!("{dir}\0{name}")
}

/// The keys of `dir`'s direct entries in `records` and `files`: one range.
fn direct_range(dir: &str) -> (String, String) {
    (format!("{dir}\0"), format!("{dir}\u{1}"))
}

fn path_of_key(key: &str) -> String {
    match key.split_once('\0') {
        Some(("", name)) => name.to_string(),
        Some((dir, name)) => format!("{dir}/{name}"),
        None => key.to_string(),
    }
}

/// How many bytes of the seal's blake3 a value starts with.
const SEAL_LEN: usize = 16;

/// The bytes of `body` stored under `key`, sealed: the first `SEAL_LEN` bytes of the blake3 of
/// the key and the body, then the body. `redb` verifies its page checksums only when it repairs
/// a file, never on a read, so a byte damaged at rest (a value's or its key's) would otherwise
/// be trusted as the vault's model; every value is sealed with its key instead, as the whole
/// file the keyed copy replaced was sealed (`store::checksummed`).
fn seal_bytes(key: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SEAL_LEN + body.len());
    out.extend_from_slice(&seal_of(key, body));
    out.extend_from_slice(body);
    out
}

/// The seal of `body` under `key`: the first `SEAL_LEN` bytes of the blake3 of the key's
/// length, the key and the body.
fn seal_of(key: &str, body: &[u8]) -> [u8; SEAL_LEN] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&(key.len() as u64).to_le_bytes());
    hasher.update(key.as_bytes());
    hasher.update(body);
    let mut seal = [0u8; SEAL_LEN];
    seal.copy_from_slice(&hasher.finalize().as_bytes()[..SEAL_LEN]);
    seal
}

/// The body `seal_bytes` sealed under `key`; the error says why it cannot be trusted.
fn unseal_bytes<'b>(key: &str, bytes: &'b [u8]) -> Result<&'b [u8], String> {
    let body = bytes.get(SEAL_LEN..).ok_or_else(|| format!("checksum mismatch: {:?} is shorter than its seal", path_of_key(key)))?;
    if seal_of(key, body) != bytes[..SEAL_LEN] {
        return Err(format!("checksum mismatch: {:?} (torn or corrupt)", path_of_key(key)));
    }
    Ok(body)
}

/// A multimap value (`linkers`, `names`): `path`, then its seal under `key` (`seal_of`). The
/// seal follows the path so that a key's values keep the paths' order (a fill inserts them in
/// order, and redb packs them as it would the bare paths); the same pair always seals to the
/// same bytes, so a pair is removed by its value.
fn seal_pair(key: &str, path: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len() + SEAL_LEN);
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(&seal_of(key, path.as_bytes()));
    out
}

/// The path `seal_pair` sealed under `key`, parsed; the error says why it cannot be trusted.
fn unseal_pair(key: &str, bytes: &[u8]) -> Result<VaultPath, String> {
    let cut = bytes.len().checked_sub(SEAL_LEN).ok_or_else(|| format!("checksum mismatch: a value of {key:?} is shorter than its seal"))?;
    let (path, seal) = bytes.split_at(cut);
    if seal_of(key, path) != *seal {
        return Err(format!("checksum mismatch: a value of {key:?} (torn or corrupt)"));
    }
    parse(std::str::from_utf8(path).map_err(|_| format!("checksum mismatch: a value of {key:?} is not text"))?)
}

/// `value` in postcard, sealed under `key` (`seal_bytes`).
fn seal<T: Serialize>(key: &str, value: &T) -> Vec<u8> {
    seal_bytes(key, &postcard::to_stdvec(value).unwrap_or_default())
}

/// The value `seal` sealed under `key`.
fn unseal<T: serde::de::DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T, String> {
    postcard::from_bytes(unseal_bytes(key, bytes)?).map_err(|e| format!("undecodable value of {:?}: {e}", path_of_key(key)))
}

/// Fills a fresh database with `inventory` (see the module doc) for `policy_digest`.
pub fn fill(inventory: &Inventory, policy_digest: &[u8; 32], transaction: &redb::WriteTransaction) -> Result<(), redb::Error> {
    let settled_records: Vec<&NoteRecord> = inventory.records.values().filter(|r| settled(r)).collect();
    let mut counts = Counts::default();
    for record in &settled_records {
        counts.add(record, 1);
    }
    let snapshot = SourceSnapshot::of(settled_records.iter().copied());
    let mut header = Header {
        format: FORMAT_VERSION,
        engine_version: env!("CARGO_PKG_VERSION").to_string(),
        policy_digest: *policy_digest,
        notes: counts.notes,
        valid: counts.valid,
        root_notes: counts.root_notes.iter().map(ToString::to_string).collect(),
        invalid: counts.invalid.iter().map(ToString::to_string).collect(),
        symlinked_notes: inventory.symlinked_notes.iter().map(ToString::to_string).collect(),
        unusable_names: inventory.unusable_names.clone(),
        unread_pages: inventory.records.values().filter(|r| !settled(r)).map(|r| (r.path.to_string(), r.kind)).collect(),
        unsettled_folders: Vec::new(),
        ignore_files: inventory.ignore_files,
        journal_token: inventory.journal_token,
    };
    {
        let mut meta = transaction.open_table(META)?;
        let direct: BTreeMap<&str, usize> = snapshot.directory_digests().map(|(dir, _, n)| (dir, n)).collect();
        let names: BTreeSet<&str> = inventory.dirs.keys().map(String::as_str).chain(direct.keys().copied()).collect();
        let rows: Vec<(&str, FolderRow)> = names
            .into_iter()
            .map(|dir| {
                let row = FolderRow {
                    seen: inventory.dirs.get(dir).copied().flatten(),
                    valid_subtree: counts.valid_per_dir.get(dir).copied().unwrap_or(0),
                    direct_valid: direct.get(dir).copied().unwrap_or(0),
                };
                (dir, row)
            })
            .collect();
        header.unsettled_folders = rows.iter().filter(|(_, row)| !row.settled()).map(|(dir, _)| dir.to_string()).collect();
        meta.insert(HEADER_KEY, seal(HEADER_KEY, &header).as_slice())?;
        meta.insert(SNAPSHOT_KEY, seal_bytes(SNAPSHOT_KEY, &snapshot.lines()).as_slice())?;
        let mut keyed: Vec<(String, Vec<u8>)> = rows
            .iter()
            .map(|(dir, row)| {
                let key = folder_key(dir);
                let value = seal(&key, row);
                (key, value)
            })
            .collect();
        keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut folders = transaction.open_table(FOLDERS)?;
        for (key, value) in &keyed {
            folders.insert(key.as_str(), value.as_slice())?;
        }
    }
    // Each table is filled in key order: pages are then written full, not split half empty.
    {
        let mut rows: Vec<(String, Vec<u8>)> = settled_records
            .iter()
            .filter_map(|r| {
                let key = entry_key(r.path.as_str());
                let value = seal(&key, &persisted_record(r)?);
                Some((key, value))
            })
            .collect();
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut records = transaction.open_table(RECORDS)?;
        for (key, value) in &rows {
            records.insert(key.as_str(), value.as_slice())?;
        }
    }
    {
        let mut pairs: Vec<(String, &str)> =
            settled_records.iter().flat_map(|r| r.links.iter().map(|l| (link_key(&l.target), r.path.as_str()))).collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut linkers = transaction.open_multimap_table(LINKERS)?;
        for (key, path) in &pairs {
            linkers.insert(key.as_str(), seal_pair(key, path).as_slice())?;
        }
    }
    {
        let mut keys: Vec<String> = inventory.files.iter().map(|path| entry_key(path.as_str())).collect();
        keys.sort_unstable();
        let mut files = transaction.open_table(FILES)?;
        for key in &keys {
            files.insert(key.as_str(), seal_bytes(key, &[]).as_slice())?;
        }
    }
    {
        let mut pairs: Vec<(String, &str)> = inventory.files.iter().map(|path| (lower_name(path), path.as_str())).collect();
        pairs.sort_unstable();
        let mut names = transaction.open_multimap_table(NAMES)?;
        for (name, path) in &pairs {
            names.insert(name.as_str(), seal_pair(name, path).as_slice())?;
        }
    }
    Ok(())
}

/// Folds a write's partial model back into the keyed copy it was loaded from, in place: the
/// loaded folders' records, files, names and link pairs replaced by the model's, their rows
/// (and their ancestors' subtree counts) and the header recomputed, exactly as `fill` would
/// write them for the whole vault — settled records only, the others listed as not settled.
/// Everything outside the loaded folders is as persisted (the load proved it and the write
/// changed nothing there). Returns how many records the folded folders hold.
pub fn fold(model: &PartialModel, transaction: &redb::WriteTransaction) -> Result<usize, redb::Error> {
    let folded = &model.view.folders;
    let in_folded = |path: &VaultPath| folded.contains(path.parent());
    let records: Vec<&NoteRecord> = model.records.values().filter(|r| in_folded(&r.path)).collect();
    // The model counts every record it holds; the copy counts settled ones only.
    let mut counts = model.counts.clone();
    for record in records.iter().filter(|r| !settled(r)) {
        counts.add(record, -1);
    }
    let mut meta = transaction.open_table(META)?;
    let header = meta.get(HEADER_KEY)?.map(|v| unseal::<Header>(HEADER_KEY, v.value()));
    let Some(Ok(mut header)) = header else {
        return Err(redb::StorageError::Corrupted("keyed inventory without a readable header".into()).into());
    };
    header.notes = counts.notes;
    header.valid = counts.valid;
    header.root_notes = counts.root_notes.iter().map(ToString::to_string).collect();
    header.invalid = counts.invalid.iter().map(ToString::to_string).collect();
    header.symlinked_notes = model.symlinked_notes.iter().map(ToString::to_string).collect();
    header.unusable_names.clone_from(&model.unusable_names);
    header.unread_pages = records.iter().filter(|r| !settled(r)).map(|r| (r.path.to_string(), r.kind)).collect();
    // Every row the fold leaves was proven at the load's journal token: stat'ed and equal, or
    // unchanged by the journal's account, or listed again and written here.
    if let Some(token) = model.journal_token {
        header.journal_token = Some(token);
    }
    let settled_records: Vec<&NoteRecord> = records.iter().copied().filter(|r| settled(r)).collect();
    let snapshot = SourceSnapshot::of(settled_records.iter().copied());
    let direct: BTreeMap<&str, usize> = snapshot.directory_digests().map(|(dir, _, n)| (dir, n)).collect();
    {
        // The folded folders' lines replaced by their settled notes' (a folder left without
        // one has none).
        let lines = meta.get(SNAPSHOT_KEY)?.map(|v| v.value().to_vec());
        let lines = lines.as_deref().map(|bytes| unseal_bytes(SNAPSHOT_KEY, bytes).and_then(inventory::snapshot::check_lines));
        let Some(Ok(lines)) = lines else {
            return Err(redb::StorageError::Corrupted("keyed inventory without readable snapshot lines".into()).into());
        };
        let merged =
            inventory::snapshot::merge_lines(lines, |dir| folded.contains(dir), snapshot.directory_digests().map(|(dir, d, _)| (dir, d)));
        meta.insert(SNAPSHOT_KEY, seal_bytes(SNAPSHOT_KEY, &merged).as_slice())?;
    }
    {
        // The folded folders' rows written, and their ancestors' subtree counts; the list of
        // folders not settled changes only for the folded ones (an ancestor keeps its identity).
        let mut folders = transaction.open_table(FOLDERS)?;
        let corrupt = |reason: String| redb::Error::from(redb::StorageError::Corrupted(reason));
        let mut unsettled: BTreeSet<String> =
            std::mem::take(&mut header.unsettled_folders).into_iter().filter(|dir| !folded.contains(dir)).collect();
        for dir in folded {
            let row = FolderRow {
                seen: model.dirs.get(dir).copied().flatten(),
                valid_subtree: counts.valid_per_dir.get(dir).copied().unwrap_or(0),
                direct_valid: direct.get(dir.as_str()).copied().unwrap_or(0),
            };
            if !row.settled() {
                unsettled.insert(dir.clone());
            }
            let key = folder_key(dir);
            folders.insert(key.as_str(), seal(&key, &row).as_slice())?;
        }
        let ancestors: BTreeSet<&str> = folded
            .iter()
            .flat_map(|dir| crate::note::path::folder_and_ancestors(dir).skip(1))
            .filter(|dir| !folded.contains(*dir))
            .collect();
        for dir in ancestors {
            if let Some(mut row) = folder_row(&folders, dir).map_err(corrupt)? {
                row.valid_subtree = counts.valid_per_dir.get(dir).copied().unwrap_or(0);
                let key = folder_key(dir);
                folders.insert(key.as_str(), seal(&key, &row).as_slice())?;
            }
        }
        header.unsettled_folders = unsettled.into_iter().collect();
    }
    meta.insert(HEADER_KEY, seal(HEADER_KEY, &header).as_slice())?;
    {
        // Each folded folder's records replaced, and the link pairs of the old and new ones.
        let mut table = transaction.open_table(RECORDS)?;
        let mut old_pairs: BTreeSet<(String, String)> = BTreeSet::new();
        for dir in folded {
            let (from, to) = direct_range(dir);
            let mut keys = Vec::new();
            for entry in table.range(from.as_str()..to.as_str())? {
                let (key, value) = entry?;
                if let Ok(record) = decode_record(key.value(), value.value()) {
                    old_pairs.extend(record.links.iter().map(|l| (link_key(&l.target), record.path.to_string())));
                }
                keys.push(key.value().to_string());
            }
            for key in &keys {
                table.remove(key.as_str())?;
            }
        }
        for record in &settled_records {
            if let Some(persisted) = persisted_record(record) {
                let key = entry_key(record.path.as_str());
                table.insert(key.as_str(), seal(&key, &persisted).as_slice())?;
            }
        }
        let new_pairs: BTreeSet<(String, String)> =
            settled_records.iter().flat_map(|r| r.links.iter().map(|l| (link_key(&l.target), r.path.to_string()))).collect();
        let mut linkers = transaction.open_multimap_table(LINKERS)?;
        for (key, path) in old_pairs.difference(&new_pairs) {
            linkers.remove(key.as_str(), seal_pair(key, path).as_slice())?;
        }
        for (key, path) in new_pairs.difference(&old_pairs) {
            linkers.insert(key.as_str(), seal_pair(key, path).as_slice())?;
        }
    }
    {
        // Each folded folder's files replaced, and their names.
        let mut table = transaction.open_table(FILES)?;
        let mut old_files: BTreeSet<VaultPath> = BTreeSet::new();
        let mut unparsable: Vec<String> = Vec::new();
        for dir in folded {
            let (from, to) = direct_range(dir);
            for entry in table.range(from.as_str()..to.as_str())? {
                let key = entry?.0.value().to_string();
                match parse(&path_of_key(&key)) {
                    Ok(path) => {
                        old_files.insert(path);
                    }
                    Err(_) => unparsable.push(key),
                }
            }
        }
        for key in &unparsable {
            table.remove(key.as_str())?;
        }
        let new_files: BTreeSet<&VaultPath> = model.files.iter().filter(|p| in_folded(p)).collect();
        let mut names = transaction.open_multimap_table(NAMES)?;
        for path in old_files.iter().filter(|p| !new_files.contains(p)) {
            table.remove(entry_key(path.as_str()).as_str())?;
            let name = lower_name(path);
            names.remove(name.as_str(), seal_pair(&name, path.as_str()).as_slice())?;
        }
        for path in new_files.into_iter().filter(|p| !old_files.contains(*p)) {
            let key = entry_key(path.as_str());
            table.insert(key.as_str(), seal_bytes(&key, &[]).as_slice())?;
            let name = lower_name(path);
            names.insert(name.as_str(), seal_pair(&name, path.as_str()).as_slice())?;
        }
    }
    Ok(settled_records.len())
}

/// What `load_for_write` gives: the partial model, the temporary files found, what it did,
/// and the folder checks still running (deferred checks).
pub struct WriteLoad {
    pub inventory: PartialModel,
    pub leftover_temps: Vec<PathBuf>,
    pub counts: LoadCounts,
    pub pending: Option<PendingFolderChecks>,
    /// A folder journal answered, but not since the copy's token: fold, so the copy
    /// records the journal's position.
    pub journal_behind: bool,
}

/// Why the keyed copy cannot serve this write (the caller loads the model whole), and whether
/// rewriting it would help (not when the vault itself rules it out).
#[derive(Debug)]
pub struct NotKeyed {
    pub reason: String,
    pub rebuild: bool,
}

impl From<String> for NotKeyed {
    fn from(reason: String) -> Self {
        NotKeyed { reason, rebuild: true }
    }
}

fn fail(what: &str) -> impl Fn(redb::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn decode_record(key: &str, bytes: &[u8]) -> Result<NoteRecord, String> {
    record_of(unseal::<PersistedRecord>(key, bytes)?)
}

fn parse(path: &str) -> Result<VaultPath, String> {
    VaultPath::parse_walked(path).map_err(|_| format!("invalid path {path:?}"))
}

/// When a keyed load proves that the folders it does not load are as persisted.
#[derive(Debug, Clone, Copy)]
pub enum FolderChecks<'h> {
    /// Every folder is stat'ed before the load returns.
    Now,
    /// The folders the write loads, `expected_moved` (those the engine's own recent writes
    /// changed: the journal's) and those whose identity is not settled (the header lists
    /// them, so each is looked up by key) are stat'ed now; the others, when there are at
    /// least `from` of them, on a helper thread (given every row) while the write
    /// plans, and `WriteLoad::pending` must confirm them before the commit point. A folder
    /// that moved there voids the load (the caller loads again with `Now`).
    Deferred { expected_moved: &'h BTreeSet<String>, from: usize },
}

/// The folder checks a `FolderChecks::Deferred` load left running: the folders not loaded,
/// stat'ed on a helper thread and compared with their persisted identity.
#[must_use = "a deferred load is trusted only once its folder checks are confirmed"]
pub struct PendingFolderChecks {
    helper: std::thread::JoinHandle<Result<(), String>>,
}

impl PendingFolderChecks {
    /// Waits for the helper; the error names a folder that moved (or says why none could be
    /// checked): the load that left these checks must not be trusted.
    pub fn confirm(self) -> Result<(), String> {
        self.helper.join().unwrap_or_else(|_| Err("the deferred folder checks failed".into()))
    }
}

/// What the entries a folder journal named in one folder turned out to be.
#[derive(Default)]
struct EntriesFound {
    gone: Vec<VaultPath>,
    new_files: Vec<VaultPath>,
    to_read: Vec<(VaultPath, PageKind)>,
    new_folders: Vec<String>,
    temps: Vec<PathBuf>,
}

/// Whether `files` (a folder's files as persisted) holds the file at vault-relative `rel`.
fn held_file_named(files: Option<&BTreeSet<VaultPath>>, rel: &str) -> bool {
    VaultPath::parse_walked(rel).is_ok_and(|path| files.is_some_and(|files| files.contains(&path)))
}

/// Stats every folder of `rows` (every stored row, read off the write's thread) not checked
/// `at_once` (those the write loads, those the journal names and those the header lists as not
/// settled), and compares it with the identity its row holds. A row not settled among them
/// (the header's list was not the rows') fails the checks as well: the write then checks every
/// folder first.
fn check_folders_later(root: &Path, rows: Vec<(String, FolderRow)>, at_once: &BTreeSet<String>) -> Result<(), String> {
    let mut deferred: Vec<(String, Option<FileStamp>)> = Vec::new();
    for (dir, row) in rows {
        if at_once.contains(&dir) {
            continue;
        }
        if !row.settled() {
            return Err(format!("folder {dir:?} is not settled, yet was not checked at once"));
        }
        deferred.push((dir, row.seen.map(|(stamp, _)| stamp)));
    }
    let names: Vec<&str> = deferred.iter().map(|(dir, _)| dir.as_str()).collect();
    for ((dir, seen), now) in deferred.iter().zip(inventory::dir_stamps_alone(root, &names)) {
        if now.is_none() || now != *seen {
            return Err(format!("folder {dir:?} moved while its check was deferred"));
        }
    }
    Ok(())
}

fn storage(e: redb::StorageError) -> String {
    fail("storage")(e.into())
}

/// The vault has an ignore file: scope follows its rules, which only a whole walk applies.
fn ignore_file() -> NotKeyed {
    NotKeyed { reason: "the vault has an ignore file".into(), rebuild: false }
}

/// When each phase of a keyed load ended (traced at its end).
struct Phases {
    started: std::time::Instant,
    ended: Vec<(&'static str, std::time::Duration)>,
}

impl Phases {
    fn start() -> Phases {
        Phases { started: std::time::Instant::now(), ended: Vec::new() }
    }

    fn mark(&mut self, phase: &'static str) {
        self.ended.push((phase, self.started.elapsed()));
    }
}

/// The folders a write loads whole whatever the disk says, and the pages not settled.
type FoldersWritten = (BTreeSet<String>, Vec<(VaultPath, PageKind)>);

/// The whole model as the keyed copy holds it, for a process that loads the model whole
/// (`Inventory::load_checking_folders`, `Inventory::load_reusing`): every settled record, the
/// pages not settled, the attachments, the symbolic links, the names no vault path may hold
/// and every folder's identity as of its last whole listing. The error says why the copy
/// cannot be trusted (another format, engine or policy, or a damaged value): the caller then
/// loads the model by a walk and rewrites the copy.
pub fn read_known(database: &redb::ReadOnlyDatabase, policy: &LoadedPolicy) -> Result<KnownVault, String> {
    let copy = Copy::open_trusted(database, policy).map_err(|refused| refused.reason)?;
    let header = &copy.header;
    let unread_pages: Vec<(VaultPath, PageKind)> =
        header.unread_pages.iter().map(|(p, kind)| Ok((parse(p)?, *kind))).collect::<Result<_, String>>()?;
    let unread: HashSet<&str> = unread_pages.iter().map(|(p, _)| p.as_str()).collect();
    // `records` and `files` share one key order: one pass over both, in step. A file whose
    // key is the next record's is that page (the record's seal covers the key); any other is
    // an attachment or a page not settled.
    let mut records = Vec::with_capacity(usize::try_from(copy.records.len().map_err(storage)?).unwrap_or(0));
    let mut attachments = Vec::new();
    let mut rows = copy.records.iter().map_err(storage)?;
    let mut next_record = rows.next().transpose().map_err(storage)?;
    for entry in copy.files.iter().map_err(storage)? {
        let (key, seal) = entry.map_err(storage)?;
        let mut page = false;
        while next_record.as_ref().is_some_and(|(record_key, _)| record_key.value() <= key.value()) {
            let Some((record_key, value)) = next_record.take() else { break };
            page |= record_key.value() == key.value();
            records.push(decode_record(record_key.value(), value.value())?);
            next_record = rows.next().transpose().map_err(storage)?;
        }
        if page {
            continue;
        }
        unseal_bytes(key.value(), seal.value())?;
        let path = path_of_key(key.value());
        if !unread.contains(path.as_str()) {
            attachments.push(parse(&path)?);
        }
    }
    // A record without a file (never written so) is still read, and trusted no less.
    while let Some((record_key, value)) = next_record.take() {
        records.push(decode_record(record_key.value(), value.value())?);
        next_record = rows.next().transpose().map_err(storage)?;
    }
    drop(unread);
    let dirs = every_row(&copy.folders)?.into_iter().map(|(dir, row)| (dir, row.seen)).collect();
    Ok(KnownVault {
        unread_pages,
        attachments,
        symlinked_notes: header.symlinked_notes.iter().map(|p| parse(p)).collect::<Result<_, String>>()?,
        unusable_names: header.unusable_names.clone(),
        dirs,
        ignore_files: header.ignore_files,
        records,
    })
}

/// The keyed copy as one read transaction sees it: a header this engine may trust, and the
/// tables a write's load reads.
struct Copy {
    header: Header,
    meta: ReadOnlyTable<&'static str, &'static [u8]>,
    folders: ReadOnlyTable<&'static str, &'static [u8]>,
    records: ReadOnlyTable<&'static str, &'static [u8]>,
    files: ReadOnlyTable<&'static str, &'static [u8]>,
    linkers: ReadOnlyMultimapTable<&'static str, &'static [u8]>,
    names: ReadOnlyMultimapTable<&'static str, &'static [u8]>,
}

impl Copy {
    /// Opens the copy's tables in one read transaction for a write's partial load, refusing
    /// what `open_trusted` refuses and a copy of a vault with an ignore file (scope then
    /// depends on its rules, which a partial load does not read).
    fn open(database: &redb::ReadOnlyDatabase, policy: &LoadedPolicy) -> Result<Copy, NotKeyed> {
        let copy = Copy::open_trusted(database, policy)?;
        if copy.header.ignore_files {
            return Err(ignore_file());
        }
        Ok(copy)
    }

    /// Opens the copy's tables in one read transaction, refusing a copy of another format,
    /// engine or policy, or whose header is damaged.
    fn open_trusted(database: &redb::ReadOnlyDatabase, policy: &LoadedPolicy) -> Result<Copy, NotKeyed> {
        let transaction = database.begin_read().map_err(|e| format!("read transaction: {e}"))?;
        let meta = transaction.open_table(META).map_err(|e| fail("meta")(e.into()))?;
        let header: Header = {
            let bytes = meta.get(HEADER_KEY).map_err(|e| fail("meta")(e.into()))?.ok_or_else(|| "no header".to_string())?;
            unseal(HEADER_KEY, bytes.value())?
        };
        if header.format != FORMAT_VERSION {
            return Err(NotKeyed::from(format!("format version {}, this engine reads {FORMAT_VERSION}", header.format)));
        }
        if header.engine_version != env!("CARGO_PKG_VERSION") {
            return Err(NotKeyed::from(format!("written by engine {}", header.engine_version)));
        }
        if header.policy_digest != policy.digest {
            return Err(NotKeyed::from("computed under another policy".to_string()));
        }
        let table = |e: redb::TableError| fail("table")(e.into());
        Ok(Copy {
            records: transaction.open_table(RECORDS).map_err(table)?,
            files: transaction.open_table(FILES).map_err(table)?,
            linkers: transaction.open_multimap_table(LINKERS).map_err(table)?,
            names: transaction.open_multimap_table(NAMES).map_err(table)?,
            folders: transaction.open_table(FOLDERS).map_err(table)?,
            header,
            meta,
        })
    }

    /// The record of `path` as persisted (`None`: the copy holds none).
    fn record(&self, path: &VaultPath) -> Result<Option<NoteRecord>, String> {
        let key = entry_key(path.as_str());
        self.records.get(key.as_str()).map_err(storage)?.map(|value| decode_record(&key, value.value())).transpose()
    }

    /// The folders a write loads whole whatever the disk says: the root, each touched note's
    /// folder and every ancestor (whose catalogs it regenerates, `catalog::affected_dirs`),
    /// and those holding pages not settled; with those pages (read again at load).
    fn folders_written(&self, changes: &[(VaultPath, Option<&str>)]) -> Result<FoldersWritten, String> {
        let mut loaded: BTreeSet<String> = BTreeSet::from([String::new()]);
        for (path, _) in changes {
            loaded.extend(path.folders().map(str::to_string));
        }
        let unread: Vec<(VaultPath, PageKind)> =
            self.header.unread_pages.iter().map(|(p, kind)| Ok((parse(p)?, *kind))).collect::<Result<_, String>>()?;
        loaded.extend(unread.iter().map(|(p, _)| p.parent().to_string()));
        Ok((loaded, unread))
    }

    /// The rows stat'ed on this thread: every one, or (`at_once`) those it names, each by key.
    fn rows_checked_now(&self, at_once: Option<&BTreeSet<String>>) -> Result<Vec<(String, FolderRow)>, String> {
        let Some(at_once) = at_once else { return every_row(&self.folders) };
        let mut rows = Vec::with_capacity(at_once.len());
        for dir in at_once {
            rows.extend(folder_row(&self.folders, dir)?.map(|row| (dir.clone(), row)));
        }
        Ok(rows)
    }

    /// Stats each checked row's folder (`names`) while this thread sets up the counters and the
    /// snapshot as persisted: every folder not loaded is known by its top-level line, the
    /// loaded ones are filled from their records later. Returns them with each folder's stamp.
    fn stat_checked(
        &self,
        root: &Path,
        names: &[&str],
        checked: &HashMap<&str, &FolderRow>,
        loaded: BTreeSet<String>,
    ) -> Result<(Loading, Vec<Option<FileStamp>>), NotKeyed> {
        let lines = self.meta.get(SNAPSHOT_KEY).map_err(storage)?.ok_or_else(|| "no snapshot lines".to_string())?;
        // The root is always checked (every write loads it): without its row the copy is not one.
        if !checked.contains_key("") {
            return Err(NotKeyed::from("no root folder".to_string()));
        }
        let header = &self.header;
        let (stamps, counted) = inventory::dir_stamps_while(root, names, || -> Result<(Counts, SourceSnapshot), NotKeyed> {
            // The subtree counts are filled once the loaded folders are known.
            let counts = Counts::of_totals(
                header.notes,
                header.valid,
                header.root_notes.iter().map(|p| parse(p)).collect::<Result<_, _>>()?,
                header.invalid.iter().map(|p| parse(p)).collect::<Result<_, _>>()?,
            );
            let lines = unseal_bytes(SNAPSHOT_KEY, lines.value())?;
            let lines = inventory::snapshot::check_lines(lines).map_err(|e| format!("snapshot lines: {e}"))?;
            // The persisted lines count the settled valid notes, as the header does.
            let mut snapshot = SourceSnapshot::partial(lines.to_string(), header.valid);
            for dir in &loaded {
                // Every loaded folder is checked at once, its row at hand.
                snapshot.hold(dir, checked.get(dir.as_str()).map_or(0, |row| row.direct_valid));
            }
            Ok((counts, snapshot))
        });
        let (counts, snapshot) = counted?;
        Ok((Loading { loaded, dirs: BTreeMap::new(), counts, snapshot }, stamps))
    }

    /// The loaded folders' records (each put into the snapshot) and files, as persisted.
    fn read_loaded(&self, loading: &mut Loading) -> Result<Held, String> {
        let mut held = Held::default();
        for dir in &loading.loaded {
            let (from, to) = direct_range(dir);
            for entry in self.records.range(from.as_str()..to.as_str()).map_err(storage)? {
                let (key, value) = entry.map_err(storage)?;
                let record = decode_record(key.value(), value.value())?;
                loading.snapshot.insert(&record);
                held.records.push(record);
            }
            let files = held.files.entry(dir.clone()).or_default();
            for entry in self.files.range(from.as_str()..to.as_str()).map_err(storage)? {
                let (key, seal) = entry.map_err(storage)?;
                unseal_bytes(key.value(), seal.value())?;
                files.insert(parse(&path_of_key(key.value()))?);
            }
        }
        Ok(held)
    }

    /// The notes linking under each of `keys` outside the loaded folders (a loaded folder's
    /// records speak for themselves: they may have changed), per key.
    fn linkers_outside(&self, keys: &HashSet<String>, loaded: &BTreeSet<String>) -> Result<Vec<(String, Vec<VaultPath>)>, String> {
        let mut by_key = Vec::with_capacity(keys.len());
        for key in keys {
            let mut paths = Vec::new();
            for value in self.linkers.get(key.as_str()).map_err(storage)? {
                let path = unseal_pair(key, value.map_err(storage)?.value())?;
                if !loaded.contains(path.parent()) {
                    paths.push(path);
                }
            }
            by_key.push((key.clone(), paths));
        }
        Ok(by_key)
    }

    /// The subtree counts the plan and the fold consult: each loaded folder's, its ancestors'
    /// and its direct subfolders' (a catalog page's child rows, the root's category rows).
    /// `checked` and `children_read`: rows read already.
    fn subtree_counts(
        &self,
        loaded: &BTreeSet<String>,
        checked: &HashMap<&str, &FolderRow>,
        mut children_read: HashMap<String, Vec<(String, FolderRow)>>,
    ) -> Result<BTreeMap<String, usize>, String> {
        let mut counted: BTreeMap<String, usize> = BTreeMap::new();
        for dir in loaded {
            for ancestor in crate::note::path::folder_and_ancestors(dir).filter(|dir| !dir.is_empty()) {
                if !counted.contains_key(ancestor) {
                    let row = match checked.get(ancestor) {
                        Some(row) => Some(row.valid_subtree),
                        None => folder_row(&self.folders, ancestor)?.map(|row| row.valid_subtree),
                    };
                    counted.insert(ancestor.to_string(), row.unwrap_or(0));
                }
            }
            let children = match children_read.remove(dir) {
                Some(children) => children,
                None => child_rows(&self.folders, dir)?,
            };
            counted.extend(children.into_iter().map(|(child, row)| (child, row.valid_subtree)));
        }
        Ok(counted)
    }

    /// Every file named each of `names`: as persisted outside the loaded folders, as listed
    /// (or persisted and not gone) inside.
    fn files_named(
        &self,
        names: &HashSet<String>,
        loaded: &BTreeSet<String>,
        held: &Held,
        found: &DiskChanges,
    ) -> Result<Vec<(String, Vec<VaultPath>)>, String> {
        let mut loaded_by_name: HashMap<String, Vec<&VaultPath>> = HashMap::new();
        for path in held.files.values().flatten().filter(|p| !found.gone.contains(*p)).chain(found.new_files.iter()) {
            loaded_by_name.entry(lower_name(path)).or_default().push(path);
        }
        let mut by_name: Vec<(String, Vec<VaultPath>)> = Vec::with_capacity(names.len());
        for name in names {
            let mut paths: BTreeSet<VaultPath> = BTreeSet::new();
            for value in self.names.get(name.as_str()).map_err(storage)? {
                let path = unseal_pair(name, value.map_err(storage)?.value())?;
                if !loaded.contains(path.parent()) {
                    paths.insert(path);
                }
            }
            paths.extend(loaded_by_name.get(name).into_iter().flatten().map(|p| (*p).clone()));
            by_name.push((name.clone(), paths.into_iter().collect()));
        }
        Ok(by_name)
    }
}

/// Which folders a keyed load stats on this thread before it returns, and how the others are
/// proven.
struct CheckPlan {
    /// `None`: every folder. Otherwise those the write loads, those the engine's recent writes
    /// moved, those whose identity is not settled and those the journal names.
    at_once: Option<BTreeSet<String>>,
    /// The folder journal's account proves every folder it does not name (no stat, no helper).
    by_journal: bool,
    /// How many folder rows the copy holds.
    stored_rows: usize,
}

impl CheckPlan {
    /// Every folder's identity is compared as a whole load by folder checks compares it: all
    /// stat'ed before the load returns, or (deferred checks, many folders, or a journal that
    /// answered since the copy's position) only those `at_once` names.
    fn new(
        copy: &Copy,
        checks: FolderChecks<'_>,
        changed: Option<&BTreeMap<String, FolderChange>>,
        loaded: &BTreeSet<String>,
    ) -> Result<CheckPlan, String> {
        let stored_rows = copy.folders.len().map_err(storage)? as usize;
        let at_once: Option<BTreeSet<String>> = match checks {
            FolderChecks::Deferred { expected_moved, from } if changed.is_some() || stored_rows >= from => Some(
                loaded
                    .iter()
                    .chain(expected_moved)
                    .chain(&copy.header.unsettled_folders)
                    .chain(changed.into_iter().flat_map(BTreeMap::keys))
                    .cloned()
                    .collect(),
            ),
            _ => None,
        };
        let by_journal = at_once.is_some() && changed.is_some();
        Ok(CheckPlan { at_once, by_journal, stored_rows })
    }

    /// Deferred checks without the journal's account: the folders not stat'ed now are, on a
    /// helper thread begun at once with every stored row, and taken as persisted until
    /// `pending` confirms them.
    fn defer(&self, root: &Path, database: &Arc<redb::ReadOnlyDatabase>) -> Option<PendingFolderChecks> {
        let at_once = self.at_once.as_ref().filter(|_| !self.by_journal)?;
        // The helper reads every row in a read transaction of its own: no commit can come
        // between it and this one (a fold commits only under the writer lock this write
        // holds, a rewrite replaces the file this handle keeps open).
        let (root, database, at_once) = (root.to_path_buf(), Arc::clone(database), at_once.clone());
        Some(PendingFolderChecks {
            helper: std::thread::spawn(move || {
                let transaction = database.begin_read().map_err(|e| format!("read transaction: {e}"))?;
                let rows = every_row(&transaction.open_table(FOLDERS).map_err(|e| format!("folder rows: {e}"))?)?;
                check_folders_later(&root, rows, &at_once)
            }),
        })
    }
}

/// The partial model as a keyed load builds it up: the folders it loads whole, their
/// identities (the fold writes them back; no other folder's is consulted), the counters and
/// the snapshot.
struct Loading {
    loaded: BTreeSet<String>,
    dirs: BTreeMap<String, Option<(FileStamp, i128)>>,
    counts: Counts,
    snapshot: SourceSnapshot,
}

impl Loading {
    /// Loads folder `dir` whole from here on: its notes, not its persisted line (which counted
    /// `direct_valid` notes), make its line of the snapshot.
    fn load(&mut self, dir: &str, direct_valid: usize) {
        self.snapshot.hold(dir, direct_valid);
        self.loaded.insert(dir.to_string());
    }

    /// A folder the copy does not know: listed whole, all of it new.
    fn new_folder(&mut self, dir: &str) {
        self.dirs.insert(dir.to_string(), None);
        self.load(dir, 0);
    }
}

/// The folders to list again, and those the journal named by entries (each with them).
type Judged<'a> = (Vec<String>, Vec<(String, &'a BTreeSet<String>)>);

/// What each checked folder's stamp now, and the journal's `account` (when it proves the
/// folders it does not name), say of it: the loaded folders' identities are recorded; a
/// folder named by entries is loaded, its entries to be looked at; one that moved (or was
/// named whole) is loaded, to be listed again. A folder gone voids the load.
fn judge_folders<'a>(
    checked: &[(String, FolderRow)],
    stamps: Vec<Option<FileStamp>>,
    account: Option<&'a BTreeMap<String, FolderChange>>,
    loading: &mut Loading,
) -> Result<Judged<'a>, NotKeyed> {
    let mut relist: Vec<String> = Vec::new();
    let mut by_entries: Vec<(String, &BTreeSet<String>)> = Vec::new();
    let mut proven: Vec<(String, Option<(FileStamp, i128)>)> = Vec::with_capacity(loading.loaded.len());
    for ((dir, row), stamp) in checked.iter().zip(stamps) {
        let named = account.and_then(|changed| changed.get(dir));
        match (stamp, row.seen) {
            (None, _) => return Err(NotKeyed::from(format!("folder {dir:?} vanished"))),
            // The journal's account since the copy's position, whatever the row's identity: a
            // folder it does not name is as the copy holds it (the copy was the disk at that
            // position, and every change since is in the account), one it names by entries is
            // that plus those entries, looked at even when the folder's stat matches its row (an
            // entry's attributes change without moving the folder). The row keeps the identity
            // of its last whole listing (or none, its entries changed since), which only a later
            // write without a journal compares: the folder having moved since, that write lists
            // it again.
            (Some(_), seen) if account.is_some() && named != Some(&FolderChange::Whole) => {
                if let Some(FolderChange::Entries(names)) = named {
                    by_entries.push((dir.to_string(), names));
                    loading.load(dir, row.direct_valid);
                }
                if loading.loaded.contains(dir) {
                    proven.push((dir.to_string(), seen));
                }
            }
            (Some(now), Some(seen)) if row.settled() && now == seen.0 => {
                if loading.loaded.contains(dir) {
                    proven.push((dir.to_string(), Some(seen)));
                }
            }
            _ => {
                relist.push(dir.to_string());
                proven.push((dir.to_string(), None));
                // Listed again, so loaded: its notes, not its persisted line, make its line.
                loading.load(dir, row.direct_valid);
            }
        }
    }
    // In key order, so the map is built in one pass.
    loading.dirs = proven.into_iter().collect();
    Ok((relist, by_entries))
}

/// The loaded folders as persisted: their records and, per folder, their files.
#[derive(Default)]
struct Held {
    records: Vec<NoteRecord>,
    files: BTreeMap<String, BTreeSet<VaultPath>>,
}

/// What a write consults outside the loaded folders, looked up one by one.
struct Outside {
    /// The link keys of the touched names (whose every linker the model holds).
    link_keys: HashSet<String>,
    /// The notes outside the loaded folders linking under each key.
    linkers_by_key: Vec<(String, Vec<VaultPath>)>,
    /// Those notes and the root notes (the plan reads them), each as the disk holds it.
    consulted: Vec<NoteRecord>,
    /// The invalid notes the publish reads.
    invalid: Vec<NoteRecord>,
}

/// Looks up what the write consults outside the loaded folders (see `Outside`); a consulted
/// record whose file changed since it was persisted voids the load.
fn consulted_outside(
    root: &Path,
    policy: &LoadedPolicy,
    copy: &Copy,
    changes: &[(VaultPath, Option<&str>)],
    loading: &Loading,
    held: &Held,
) -> Result<Outside, NotKeyed> {
    let loaded = &loading.loaded;
    let mut link_keys: HashSet<String> = HashSet::new();
    for (path, _) in changes {
        link_keys.insert(link_key(path.as_str()));
        link_keys.insert(path.file_name().to_lowercase());
    }
    let linkers_by_key = copy.linkers_outside(&link_keys, loaded)?;
    let mut outside: BTreeSet<&VaultPath> = linkers_by_key.iter().flat_map(|(_, paths)| paths).collect();
    outside.extend(loading.counts.root_notes.iter().filter(|p| !loaded.contains(p.parent())));
    let mut consulted = Vec::with_capacity(outside.len());
    for path in outside {
        let Some(record) = copy.record(path)? else { return Err(NotKeyed::from(format!("no record of {path}"))) };
        // What the plan consults outside the loaded folders must still be what was persisted.
        let kind = scan::classify(policy, path);
        if !kind.is_some_and(|kind| record.is_current(kind, stamp_now(root, path))) {
            return Err(NotKeyed::from(format!("{path} changed on disk")));
        }
        consulted.push(record);
    }
    let held_paths: HashSet<&VaultPath> = held.records.iter().map(|r| &r.path).collect();
    let mut invalid = Vec::new();
    for path in loading.counts.invalid.iter().filter(|p| !loaded.contains(p.parent()) && !held_paths.contains(p)) {
        invalid.extend(copy.record(path)?);
    }
    Ok(Outside { link_keys, linkers_by_key, consulted, invalid })
}

/// What the disk holds now in the loaded folders the journal named or that moved, against
/// those folders as persisted.
#[derive(Default)]
struct DiskChanges {
    /// Pages new, or whose stat identity moved (or is racy): read again.
    to_read: Vec<(VaultPath, PageKind)>,
    gone: BTreeSet<VaultPath>,
    new_files: Vec<VaultPath>,
    temps: Vec<PathBuf>,
    /// Each folder listed again's links to pages and unusable names.
    symlinks: BTreeMap<String, Vec<VaultPath>>,
    unusable: BTreeMap<String, Vec<UnusableName>>,
    listed: BTreeSet<String>,
    /// Folders brought up to the disk by their named entries alone.
    folders_by_entries: usize,
    /// The persisted subfolders' rows of each folder listed again.
    children_read: HashMap<String, Vec<(String, FolderRow)>>,
}

impl DiskChanges {
    /// The pages the copy lists as not settled are read again too (unless read already, or gone).
    fn read_unsettled(&mut self, unread: Vec<(VaultPath, PageKind)>) {
        let reading: HashSet<VaultPath> = self.to_read.iter().map(|(path, _)| path.clone()).collect();
        self.to_read.extend(unread.into_iter().filter(|(path, _)| !reading.contains(path) && !self.gone.contains(path)));
    }
}

/// What a keyed load brings up to the disk: the journal's `ChangeSet`, by entries and whole
/// folders, and the folders whose identity moved, against the held rows.
struct Disk<'a> {
    root: &'a Path,
    policy: &'a LoadedPolicy,
    copy: &'a Copy,
    held: &'a Held,
    held_by_path: BTreeMap<&'a VaultPath, &'a NoteRecord>,
    symlinked: HashSet<&'a str>,
}

impl<'a> Disk<'a> {
    fn new(root: &'a Path, policy: &'a LoadedPolicy, copy: &'a Copy, held: &'a Held) -> Disk<'a> {
        let held_by_path = held.records.iter().map(|r| (&r.path, r)).collect();
        let symlinked = copy.header.symlinked_notes.iter().map(String::as_str).collect();
        Disk { root, policy, copy, held, held_by_path, symlinked }
    }

    /// Whether `rel` is a folder of the copy's, or one this load already knows.
    fn known_folder(&self, dirs: &BTreeMap<String, Option<(FileStamp, i128)>>, rel: &str) -> Result<bool, String> {
        Ok(dirs.contains_key(rel) || folder_row(&self.copy.folders, rel)?.is_some())
    }

    /// Brings each folder the journal named by entries up to the disk by a look at each entry
    /// (`look_at_entries`); returns those that must be listed again instead, and the new
    /// subfolders found (to be listed whole).
    fn apply_entries(
        &self,
        by_entries: Vec<(String, &BTreeSet<String>)>,
        loading: &mut Loading,
        out: &mut DiskChanges,
    ) -> Result<Vec<String>, NotKeyed> {
        let mut queue = Vec::new();
        for (dir, names) in by_entries {
            let Some(found) = self.look_at_entries(&dir, names, &loading.dirs)? else {
                queue.push(dir);
                continue;
            };
            out.folders_by_entries += 1;
            for sub in found.new_folders {
                loading.new_folder(&sub);
                queue.push(sub);
            }
            out.gone.extend(found.gone);
            out.new_files.extend(found.new_files);
            out.to_read.extend(found.to_read);
            out.temps.extend(found.temps);
        }
        Ok(queue)
    }

    /// Looks at each entry `names` of folder `dir` alone, as a listing would see it
    /// (`inventory::look_at_entry`). `None` when one of them needs the folder listed again: its
    /// folder's bookkeeping only a listing redoes (a link, a name no vault path may hold, a
    /// subfolder gone or turned into a file).
    fn look_at_entries(
        &self,
        dir: &str,
        names: &BTreeSet<String>,
        dirs: &BTreeMap<String, Option<(FileStamp, i128)>>,
    ) -> Result<Option<EntriesFound>, NotKeyed> {
        let persisted_files = self.held.files.get(dir);
        let held_file = |path: &VaultPath| persisted_files.is_some_and(|files| files.contains(path));
        let mut found = EntriesFound::default();
        for name in names {
            let entry = match inventory::look_at_entry(self.root, self.policy, dir, name) {
                Ok(entry) => entry,
                Err(Unlistable::IgnoreFile) => return Err(ignore_file()),
                Err(Unlistable::Unreadable(e)) => return Err(NotKeyed::from(format!("looking at {name:?} in {dir:?}: {e}"))),
            };
            let rel = crate::note::path::child(dir, name);
            let was_symlinked = self.symlinked.contains(rel.as_str());
            match entry {
                None => match VaultPath::parse_walked(&rel) {
                    Ok(path) if held_file(&path) => found.gone.push(path),
                    // Never a file of the copy's, nor a link or a subfolder of it: a temporary
                    // file that came and went, or an entry made and removed since.
                    Ok(_) if !was_symlinked && !self.known_folder(dirs, &rel)? => {}
                    _ => return Ok(None),
                },
                Some(FolderEntry::File(path, kind)) if !was_symlinked => {
                    if held_file(&path) {
                        if let Some(kind) = kind
                            && !self.held_by_path.get(&path).is_some_and(|r| r.is_current(kind, stamp_now(self.root, &path)))
                        {
                            found.to_read.push((path, kind));
                        }
                    } else if self.known_folder(dirs, &rel)? {
                        // A subfolder of the copy's, now a file.
                        return Ok(None);
                    } else {
                        found.new_files.push(path.clone());
                        found.to_read.extend(kind.map(|kind| (path, kind)));
                    }
                }
                Some(FolderEntry::Subfolder(sub)) if !held_file_named(persisted_files, &sub) => {
                    if !self.known_folder(dirs, &sub)? {
                        found.new_folders.push(sub);
                    }
                }
                Some(FolderEntry::Temp(path)) if !was_symlinked => found.temps.push(path),
                Some(FolderEntry::Excluded | FolderEntry::Ignored) if !was_symlinked && !held_file_named(persisted_files, &rel) => {}
                _ => return Ok(None),
            }
        }
        Ok(Some(found))
    }

    /// Lists each queued folder again, and each new subfolder found (whole): its files against
    /// those held (`inventory::compare_listing`, the listing step `Inventory::apply` takes),
    /// its temporary files, links to pages and unusable names. A folder or a persisted
    /// subfolder gone voids the load.
    fn relist(&self, mut queue: VecDeque<String>, loading: &mut Loading, out: &mut DiskChanges) -> Result<(), NotKeyed> {
        let no_files = BTreeSet::new();
        while let Some(dir) = queue.pop_front() {
            if !out.listed.insert(dir.clone()) {
                continue;
            }
            let seen_at = now_ns();
            let Some(stamp) = dir_stamp(self.root, &dir) else { return Err(NotKeyed::from(format!("folder {dir:?} vanished"))) };
            let listing = match inventory::list_folder(self.root, self.policy, &dir) {
                Ok(listing) => listing,
                Err(Unlistable::IgnoreFile) => return Err(ignore_file()),
                Err(Unlistable::Unreadable(e)) => return Err(NotKeyed::from(format!("listing {dir:?}: {e}"))),
            };
            // Its subfolders as persisted (kept for the subtree counts).
            let persisted = child_rows(&self.copy.folders, &dir)?;
            for sub in &listing.subfolders {
                if !persisted.iter().any(|(known, _)| known == sub) && !loading.dirs.contains_key(sub) {
                    loading.new_folder(sub);
                    queue.push_back(sub.clone());
                }
            }
            out.temps.extend(listing.temps);
            let held = self.held.files.get(&dir).unwrap_or(&no_files);
            let found = inventory::compare_listing(self.root, &listing.files, held, |path| self.held_by_path.get(path).copied());
            out.to_read.extend(found.to_read);
            out.gone.extend(found.gone);
            out.new_files.extend(found.new);
            if let Some((sub, _)) = persisted.iter().find(|(sub, _)| !listing.subfolders.contains(sub)) {
                return Err(NotKeyed::from(format!("folder {sub:?} vanished")));
            }
            out.children_read.insert(dir.clone(), persisted);
            out.symlinks.insert(dir.clone(), listing.symlinked_pages);
            out.unusable.insert(dir.clone(), listing.unusable);
            loading.dirs.insert(dir, Some((stamp, seen_at)));
        }
        Ok(())
    }
}

/// The write's notes as it will write them (their after-images), analysed.
fn after_images(policy: &LoadedPolicy, changes: &[(VaultPath, Option<&str>)]) -> Vec<NoteRecord> {
    let mut judged = Vec::new();
    for (path, text) in changes {
        if let Some(text) = text {
            let mut record = NoteRecord::empty(path.clone(), PageKind::Note);
            inventory::analyse_bytes(&mut record, text.as_bytes(), policy);
            judged.push(record);
        }
    }
    judged
}

/// The names whose resolution the write asks about: every link of the notes it judges (the
/// touched notes before and after, their linkers) and the touched names themselves.
fn names_asked(
    policy: &LoadedPolicy,
    changes: &[(VaultPath, Option<&str>)],
    judged: &[NoteRecord],
    held: &[NoteRecord],
    fresh: &[NoteRecord],
    outside: &Outside,
) -> HashSet<String> {
    let mut names: HashSet<String> = changes.iter().map(|(path, _)| lower_name(path)).collect();
    let touched: HashSet<&VaultPath> = changes.iter().map(|(p, _)| p).collect();
    let linker_paths: HashSet<&VaultPath> = outside.linkers_by_key.iter().flat_map(|(_, paths)| paths.iter()).collect();
    let consulted = |r: &&NoteRecord| touched.contains(&r.path) || r.links.iter().any(|l| outside.link_keys.contains(&link_key(&l.target)));
    let judged_records = judged
        .iter()
        .chain(held.iter().filter(consulted))
        .chain(fresh.iter().filter(consulted))
        .chain(outside.consulted.iter().filter(|r| linker_paths.contains(&r.path)));
    for record in judged_records {
        for link in &record.links {
            names.extend(inventory::candidate_names(link, policy));
        }
    }
    names
}

/// The symbolic links to pages: as persisted, but for the folders listed again (their
/// listings say what they hold now).
fn symlinked_notes(header: &Header, found: BTreeMap<String, Vec<VaultPath>>) -> Result<Vec<VaultPath>, String> {
    let mut all: Vec<VaultPath> = Vec::with_capacity(header.symlinked_notes.len());
    for path in &header.symlinked_notes {
        let path = parse(path)?;
        if !found.contains_key(path.parent()) {
            all.push(path);
        }
    }
    all.extend(found.into_values().flatten());
    all.sort();
    Ok(all)
}

/// The names no vault path may hold: as persisted, but for the folders listed again.
fn unusable_names(header: &Header, found: BTreeMap<String, Vec<UnusableName>>) -> Vec<UnusableName> {
    let mut unusable: Vec<UnusableName> = header.unusable_names.iter().filter(|u| !found.contains_key(&u.folder)).cloned().collect();
    unusable.extend(found.into_values().flatten());
    unusable.sort();
    unusable
}

/// The partial model: the counters, snapshot and identities the load built, the rows it read
/// held as persisted, then the disk's changes through the model's own bookkeeping.
fn assemble(
    policy: &LoadedPolicy,
    loading: Loading,
    partial: Partial,
    (symlinked, unusable): (Vec<VaultPath>, Vec<UnusableName>),
    (held, outside, by_name): (Held, Outside, Vec<(String, Vec<VaultPath>)>),
    found: &DiskChanges,
    fresh: Vec<NoteRecord>,
) -> PartialModel {
    let mut model = PartialModel::partial_from(partial, loading.counts, loading.snapshot, loading.dirs, symlinked, unusable);
    for record in held.records.into_iter().chain(outside.consulted).chain(outside.invalid) {
        model.hold_record(record);
    }
    for path in held.files.into_values().flatten() {
        model.hold_file(path);
    }
    for (name, paths) in by_name {
        model.hold_name(name, paths);
    }
    for (key, paths) in outside.linkers_by_key {
        model.hold_linkers(key, paths);
    }
    for path in &found.gone {
        model.remove(path);
    }
    for path in found.new_files.iter().filter(|p| scan::classify(policy, p).is_none()) {
        model.add_attachment(path.clone());
    }
    for record in fresh {
        model.upsert(record);
    }
    model
}

/// Loads the partial model one write consults (see the module doc): `changes` are the
/// write's notes (path, new text or removal). `stale_limit`: past this many pages read or
/// folders listed again, the keyed copy is too stale to be worth it (the whole load rewrites
/// it). `checks`: when the folders it does not load are proven.
pub fn load_for_write(
    root: &Path,
    policy: &LoadedPolicy,
    database: &Arc<redb::ReadOnlyDatabase>,
    changes: &[(VaultPath, Option<&str>)],
    stale_limit: usize,
    checks: FolderChecks<'_>,
    journal: Option<AskJournal<'_>>,
) -> Result<WriteLoad, NotKeyed> {
    let mut phases = Phases::start();
    let copy = Copy::open(database, policy)?;
    phases.mark("header");
    let (loaded, unread) = copy.folders_written(changes)?;
    // With a folder journal that can say what changed since the copy's rows were proven, only
    // the folders it names are stat'ed besides those checked at once: the others are the disk
    // without a stat (and without a helper). Its position now is what the fold records.
    let answer = journal.and_then(|ask| ask(copy.header.journal_token));
    phases.mark("folder journal");
    let changed = answer.as_ref().and_then(JournalAnswer::changed);
    let plan = CheckPlan::new(&copy, checks, changed, &loaded)?;
    let checked = copy.rows_checked_now(plan.at_once.as_ref())?;
    let pending = plan.defer(root, database);
    phases.mark("folder rows");
    let names: Vec<&str> = checked.iter().map(|(dir, _)| dir.as_str()).collect();
    let checked_rows: HashMap<&str, &FolderRow> = checked.iter().map(|(dir, row)| (dir.as_str(), row)).collect();
    let (mut loading, stamps) = copy.stat_checked(root, &names, &checked_rows, loaded)?;
    phases.mark("folder stats");
    let (relist, by_entries) = judge_folders(&checked, stamps, changed.filter(|_| plan.by_journal), &mut loading)?;
    let held = copy.read_loaded(&mut loading)?;
    phases.mark("loaded folders");
    let mut outside = consulted_outside(root, policy, &copy, changes, &loading, &held)?;
    phases.mark("consulted outside");
    // The journal's ChangeSet and the folders that moved, applied to the rows held.
    let mut found = DiskChanges::default();
    {
        let disk = Disk::new(root, policy, &copy, &held);
        let queue = disk.apply_entries(by_entries, &mut loading, &mut found)?;
        disk.relist(relist.into_iter().chain(queue).collect(), &mut loading, &mut found)?;
    }
    let read_or_forgotten = found.to_read.len() + found.gone.len();
    if read_or_forgotten + found.listed.len() > stale_limit {
        return Err(NotKeyed::from(format!(
            "{} pages changed and {} folders moved since it was written",
            read_or_forgotten,
            found.listed.len()
        )));
    }
    let counted = copy.subtree_counts(&loading.loaded, &checked_rows, std::mem::take(&mut found.children_read))?;
    loading.counts.extend_valid(counted);
    found.read_unsettled(unread);
    let judged = after_images(policy, changes);
    phases.mark("relisted");
    let fresh = inventory::read_all(root, policy, &found.to_read);
    let names = names_asked(policy, changes, &judged, &held.records, &fresh, &outside);
    phases.mark("pages read");
    let by_name = copy.files_named(&names, &loading.loaded, &held, &found)?;
    let counts = LoadCounts {
        reused: (held.records.len() + outside.consulted.len() + outside.invalid.len()).saturating_sub(read_or_forgotten),
        read: found.to_read.len(),
        forgotten: found.gone.len(),
        by_folders: true,
        folders_relisted: found.listed.len(),
        folders_by_journal: if plan.by_journal { plan.stored_rows.saturating_sub(checked.len()) } else { 0 },
        folders_by_entries: found.folders_by_entries,
    };
    let shape = (
        symlinked_notes(&copy.header, std::mem::take(&mut found.symlinks))?,
        unusable_names(&copy.header, std::mem::take(&mut found.unusable)),
    );
    let link_keys = std::mem::take(&mut outside.link_keys);
    let partial = Partial { folders: std::mem::take(&mut loading.loaded), names, link_keys, ..Default::default() };
    let mut model = assemble(policy, loading, partial, shape, (held, outside, by_name), &found, fresh);
    model.journal_token = answer.as_ref().map(|a| a.now);
    model.view.proven_by_journal = plan.by_journal;
    phases.mark("names, model");
    tracing::trace!(phases = ?phases.ended, "keyed load phases");
    if model.in_view().is_err() {
        return Err(NotKeyed::from("the changes on disk reach beyond the loaded folders".to_string()));
    }
    let mut leftover_temps = found.temps;
    leftover_temps.extend(scan::engine_temps(root));
    // A journal that could not say what changed since the copy's token (a new run): the
    // copy's rows are proven at its position now once the checks are confirmed, and the fold
    // records it, so the next write asks it.
    let journal_behind = answer.is_some_and(|a| a.changed().is_none());
    Ok(WriteLoad { inventory: model, leftover_temps, counts, pending, journal_behind })
}

#[cfg(test)]
mod tests;
