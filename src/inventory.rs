//! The in-memory model of a vault: one `NoteRecord` per in-scope page plus the file set that
//! links resolve against. Built by one parallel read of the vault, then kept current one note
//! at a time, so writes cost O(change), not O(vault).
//!
//! Reading never rewrites a file. Every problem a file has is recorded on its record as a named
//! finding; nothing is dropped silently.
//!
//! Two types share the model's data and the code that keeps it (`Model<V>`): the whole model,
//! `Inventory`, and a write's partial model, `PartialModel` (`inventory_cache::keyed`). A
//! whole-model reader takes an `Inventory`; a write's plan asks either through `ModelView`,
//! which a partial model answers with `Err(Overrun)` past what it holds.

mod apply;
pub mod changes;
pub mod snapshot;
#[cfg(test)]
pub(crate) mod testing;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::note::body::{self, Link, LinkKind};
use crate::note::frontmatter::{self, FrontmatterProblem};
use crate::note::metadata::{self, NoteMeta};
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::scan::{self, PageKind};
pub use apply::{Applied, ListingChanges, compare_listing};
use changes::ChangeSet;
use snapshot::SourceSnapshot;

/// A problem that belongs to one file (as opposed to a link between files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProblem {
    pub rule: &'static str,
    pub line: Option<usize>,
    pub message: String,
}

/// A file's stat identity: what changes whenever its content may have changed (git's index
/// entry, less the fields that cannot move without these moving too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct FileStamp {
    pub len: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub inode: u64,
}

/// Nanoseconds since the epoch, now.
pub fn now_ns() -> i128 {
    crate::clock::machine_nanos() as i128
}

impl FileStamp {
    pub fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            len: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            inode: meta.ino(),
        }
    }

    /// The identity of a raw stat (one taken relative to a folder handle).
    pub fn of_stat(stat: &rustix::fs::Stat) -> Self {
        FileStamp {
            len: stat.st_size as u64,
            mtime_ns: i128::from(stat.st_mtime) * 1_000_000_000 + i128::from(stat.st_mtime_nsec),
            ctime_ns: i128::from(stat.st_ctime) * 1_000_000_000 + i128::from(stat.st_ctime_nsec),
            inode: stat.st_ino,
        }
    }

    /// Whether a later write could have kept this stamp (git's racy-clean rule): the file was
    /// modified within one timestamp tick of `seen_at_ns`, when it was read. Kernels stamp
    /// files with a coarse clock (a scheduler tick, up to 10 ms); a stamp without sub-second
    /// digits comes from a file system that keeps whole (or two) seconds.
    pub fn is_racy(&self, seen_at_ns: i128) -> bool {
        let tick: i128 = if self.mtime_ns % 1_000_000_000 == 0 { 2_000_000_000 } else { 20_000_000 };
        self.mtime_ns.max(self.ctime_ns) + tick >= seen_at_ns
    }
}

/// What a report was computed from: the search generation active when it was computed, and
/// the model of the disk it read (so a stale answer is recognisable, never silent).
#[derive(Debug, Clone, Default, serde::Serialize, schemars::JsonSchema)]
pub struct ComputedFrom {
    /// The active search generation (`None`: the vault has none yet).
    pub generation: Option<String>,
    /// The source snapshot digest of the valid notes the report saw.
    pub source_snapshot_hash: String,
    /// The valid notes the report saw.
    pub notes: usize,
    /// When the model was last brought up to the disk (RFC 3339).
    pub observed_at: Option<String>,
    /// How the process keeps the model equal to the disk (`loaded`, `watch`, `stat_walk`).
    pub disk_watch: &'static str,
}

/// Everything the engine knows about one in-scope Markdown file.
#[derive(Debug, Clone)]
pub struct NoteRecord {
    pub path: VaultPath,
    pub kind: PageKind,
    /// The file's stat identity when it was read, and when (`None`: the record was built from
    /// bytes the engine is writing; the next look at the disk reads the file again).
    pub stamp: Option<(FileStamp, i128)>,
    pub size_bytes: u64,
    /// blake3 of the file bytes.
    pub content_hash: [u8; 32],
    pub meta: NoteMeta,
    /// True when the frontmatter parsed and the metadata validated.
    pub valid: bool,
    /// Whether a generated catalog page carries the ownership marker.
    pub generated: bool,
    pub problems: Vec<FileProblem>,
    pub links: Vec<Link>,
    /// 1-based line of the first body line (for findings in the body).
    pub body_first_line: usize,
    /// Length of the body in characters (for trivial-note checks).
    pub body_chars: usize,
}

impl NoteRecord {
    /// A record with nothing known yet.
    pub fn empty(path: VaultPath, kind: PageKind) -> Self {
        NoteRecord {
            path,
            kind,
            stamp: None,
            size_bytes: 0,
            content_hash: [0; 32],
            meta: NoteMeta::default(),
            valid: false,
            generated: false,
            problems: Vec::new(),
            links: Vec::new(),
            body_first_line: 1,
            body_chars: 0,
        }
    }

    /// Whether this record was analysed from bytes of this length and blake3 hash, as a page
    /// of `kind` (a record of a file that could not be read holds no hash of its bytes).
    pub(crate) fn analysed_from(&self, kind: PageKind, size_bytes: u64, content_hash: &[u8; 32]) -> bool {
        self.kind == kind && self.size_bytes == size_bytes && self.content_hash == *content_hash && self.content_hash != [0; 32]
    }

    pub fn is_note(&self) -> bool {
        self.kind == PageKind::Note
    }

    /// Whether this record still describes the file: same role, a settled (not racy) stamp,
    /// and the file's stat identity `now` unchanged. Otherwise the file must be read again.
    pub fn is_current(&self, kind: PageKind, now: Option<FileStamp>) -> bool {
        self.kind == kind && self.stamp.is_some_and(|(old, at)| !old.is_racy(at) && now == Some(old))
    }
}

/// Markers that make a catalog page ours to overwrite: paravault's and P.O.W.E.R.'s.
pub const OWNERSHIP_MARKERS: [&str; 2] = ["paravault", "power"];

/// Reads and analyses one file. Never fails: unreadable files become records with problems.
pub fn read_record(root: &Path, path: &VaultPath, kind: PageKind, policy: &LoadedPolicy) -> NoteRecord {
    read_opened_record(path, kind, policy, || crate::store::beneath::open_read(root, path.as_str()))
}

/// What reading a file again found, against the record the model held of it.
pub(crate) enum Reread {
    /// Its bytes are the ones the held record was analysed from: only its stat identity (and
    /// when it was taken) is new; nothing was parsed.
    Same((FileStamp, i128)),
    /// Anything else: the file read and analysed whole, as `read_record` does.
    Read(Box<NoteRecord>),
}

/// [`read_record`] of a file the model holds `held` of: when the file's bytes hash (blake3,
/// and length) equal to those `held` was analysed from, the analysis is not repeated — it is a
/// function of the bytes, the kind and the policy alone, so it would give `held` again. The
/// engine's own pages come back this way after a write (`VaultState::hold_written_pages`):
/// their stamps are racy, so only their bytes can tell. Any differing byte is read and parsed.
pub(crate) fn reread_record(root: &Path, path: &VaultPath, kind: PageKind, policy: &LoadedPolicy, held: Option<&NoteRecord>) -> Reread {
    let (mut record, bytes) = read_opened_bytes(path, kind, policy, || crate::store::beneath::open_read(root, path.as_str()));
    let Some(bytes) = bytes else { return Reread::Read(Box::new(record)) };
    if let Some(stamp) = record.stamp
        && held.is_some_and(|held| held.analysed_from(kind, record.size_bytes, &record.content_hash))
    {
        return Reread::Same(stamp);
    }
    analyse_bytes(&mut record, &bytes, policy);
    Reread::Read(Box::new(record))
}

/// [`read_record`] with the file opened by `open` (beneath the root, never through a link).
fn read_opened_record(
    path: &VaultPath,
    kind: PageKind,
    policy: &LoadedPolicy,
    open: impl FnOnce() -> std::io::Result<std::fs::File>,
) -> NoteRecord {
    let (mut record, bytes) = read_opened_bytes(path, kind, policy, open);
    if let Some(bytes) = bytes {
        analyse_bytes(&mut record, &bytes, policy);
    }
    record
}

/// Opens, stats and reads a file: its record with the stamp, size and content hash filled and
/// its bytes (to analyse), or, with no bytes, the finished record of a file that could not be
/// read (or is over the policy's size limit).
fn read_opened_bytes(
    path: &VaultPath,
    kind: PageKind,
    policy: &LoadedPolicy,
    open: impl FnOnce() -> std::io::Result<std::fs::File>,
) -> (NoteRecord, Option<Vec<u8>>) {
    let mut record = NoteRecord::empty(path.clone(), kind);
    let limit = policy.policy.limits.note_bytes_max;
    let read_at = now_ns();
    let mut file = match open() {
        Ok(file) => file,
        Err(e) => {
            record.problems.push(FileProblem { rule: "note-unreadable", line: None, message: format!("cannot open: {}", e.kind()) });
            return (record, None);
        }
    };
    match file.metadata() {
        Ok(m) if m.len() > limit => {
            record.stamp = Some((FileStamp::of(&m), read_at));
            record.size_bytes = m.len();
            record.problems.push(FileProblem {
                rule: "note-too-large",
                line: None,
                message: format!("{} bytes, over the policy limit of {limit} bytes; not read", m.len()),
            });
            return (record, None);
        }
        Ok(m) => record.stamp = Some((FileStamp::of(&m), read_at)),
        Err(e) => {
            record.problems.push(FileProblem { rule: "note-unreadable", line: None, message: format!("cannot stat: {}", e.kind()) });
            return (record, None);
        }
    }
    let mut bytes = Vec::new();
    let bytes = match std::io::Read::read_to_end(&mut file, &mut bytes) {
        Ok(_) => bytes,
        Err(e) => {
            record.problems.push(FileProblem { rule: "note-unreadable", line: None, message: format!("cannot read: {}", e.kind()) });
            return (record, None);
        }
    };
    record.size_bytes = bytes.len() as u64;
    record.content_hash = *blake3::hash(&bytes).as_bytes();
    (record, Some(bytes))
}

/// Fills a record from file bytes (shared by disk reads and in-memory writes).
pub fn analyse_bytes(record: &mut NoteRecord, bytes: &[u8], policy: &LoadedPolicy) {
    if bytes.contains(&0) {
        record.problems.push(FileProblem {
            rule: "note-unreadable",
            line: None,
            message: "binary content (NUL bytes) in a .md file".into(),
        });
        return;
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            record.problems.push(FileProblem {
                rule: "note-unreadable",
                line: None,
                message: format!("not valid UTF-8 (first bad byte at offset {})", e.valid_up_to()),
            });
            return;
        }
    };
    if text.starts_with('\u{feff}') && record.kind == PageKind::Note {
        record.problems.push(FileProblem { rule: "utf8-bom", line: Some(1), message: "file starts with a UTF-8 byte-order mark".into() });
    }
    let body_text = match frontmatter::split(text) {
        Ok(split) => {
            record.body_first_line = split.body_first_line;
            match frontmatter::parse(&split) {
                Ok(fm) => {
                    record.generated = fm.get("x-generated-by").and_then(|v| v.as_str()).is_some_and(|m| OWNERSHIP_MARKERS.contains(&m));
                    if record.kind == PageKind::Note {
                        let (meta, problems) = metadata::validate(&fm, policy);
                        record.valid = problems.is_empty();
                        record.meta = meta;
                        let rule = if fm.get("type").is_none() { "metadata-missing" } else { "metadata-invalid" };
                        for p in problems {
                            record.problems.push(FileProblem { rule, line: Some(1), message: format!("{}: {}", p.field, p.message) });
                        }
                    }
                }
                Err(problem) => {
                    let line = match &problem {
                        FrontmatterProblem::Yaml { line, .. } => Some(*line),
                        _ => Some(1),
                    };
                    if record.kind == PageKind::Note {
                        record.problems.push(FileProblem { rule: "metadata-invalid", line, message: problem.to_string() });
                    }
                }
            }
            split.body
        }
        Err(problem) => {
            if record.kind == PageKind::Note {
                record.problems.push(FileProblem { rule: "metadata-missing", line: Some(1), message: problem.to_string() });
            }
            text
        }
    };
    record.body_chars = body_text.trim().chars().count();
    record.links = body::links(body_text, record.body_first_line);
}

/// How one link resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Resolved(VaultPath),
    Broken,
    Ambiguous(Vec<VaultPath>),
}

/// A map keyed by names from the vault (file names, link keys, folders): foldhash, seeded per
/// process, instead of SipHash, which was a measured share of building the model at load.
pub type NameMap<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// The vault model, in one of two types that share this data and the code that keeps it:
/// [`Inventory`], the whole model, and [`PartialModel`], what a one-shot write loads by key
/// (`inventory_cache::keyed`). `V` says how far it reaches ([`Whole`] or [`Partial`]): a
/// lookup past a partial model is `Err(Overrun)`, and the whole model's lookups cannot fail
/// (`V::Miss` is `Infallible`). A write's plan asks either through [`ModelView`]; a
/// whole-model reader takes an `Inventory`, which a partial model can never be.
#[derive(Debug, Default)]
pub struct Model<V: Reach> {
    pub records: BTreeMap<VaultPath, NoteRecord>,
    /// Every regular file (notes and attachments), for link resolution.
    pub files: BTreeSet<VaultPath>,
    /// Folder → the files of `files` directly in it, kept with `files`: a folder's own entries
    /// without a seek past each of its subfolders (a write's re-check of `03_Resources`, whose
    /// 2,500 subfolders were 13% of a write's profile at 100,000 notes, issue 52).
    by_folder: NameMap<BTreeSet<VaultPath>>,
    /// Lower-cased file name → paths with that name.
    pub by_name: NameMap<Vec<VaultPath>>,
    pub symlinked_notes: Vec<VaultPath>,
    /// Markdown files and folders in scope whose names no vault path may hold (lint names
    /// them), sorted.
    pub unusable_names: Vec<scan::UnusableName>,
    /// Link key (lower-cased last component, `.md` stripped) → notes holding such a link.
    pub linkers: NameMap<BTreeSet<VaultPath>>,
    /// Counters kept current by `upsert`/`remove`, so writes never count the whole vault.
    pub counts: Counts,
    /// The valid notes' (path, content hash) pairs with cached digests, kept current by
    /// `upsert`/`remove`, so publishing one change never re-hashes the whole vault.
    pub snapshot: SourceSnapshot,
    /// Bumped by every `upsert` and `remove` (whether the persisted copy may be out of date).
    pub revision: u64,
    /// Every walked folder (`""`: the vault root) → its stat identity just before its listing
    /// was last read whole, and when (`None`: the model added or removed a file in it since,
    /// or never listed it: list it again before trusting its entries). A folder's identity
    /// moves whenever an entry is created, removed or renamed in it, so an unchanged, settled
    /// one proves its listing — the file set links resolve against — still holds.
    pub dirs: BTreeMap<String, Option<(FileStamp, i128)>>,
    /// Whether every record's stat identity was compared with the disk when the model was last
    /// brought up to it (false: only the folders' identities were, `load_checking_folders`;
    /// a whole-vault reader then walks the vault first).
    pub files_checked: bool,
    /// Whether the vault holds an ignore file (`layout::IGNORE_FILES`): scope then follows its
    /// rules, which only a full walk applies, so folder checks are not used.
    pub ignore_files: bool,
    /// This inventory's identity (`changes::next_origin`): revisions of two inventories (a
    /// reload builds a new one) are never compared.
    pub origin: u64,
    /// The paths the latest revisions changed, for readers that catch up in O(change).
    pub changes: changes::ChangeLog,
    /// The vault's folder journal's position (`folder_journal`) taken before this model's load
    /// proved its folders against the disk (a walk, folder checks, or a keyed load trusting
    /// the journal): every folder the journal reports unchanged since then is as the model
    /// found it. The keyed copy records it, so the next write asks the journal what changed
    /// since instead of a stat of every folder. `None`: no journal answered.
    pub journal_token: Option<JournalToken>,
    /// How far the model reaches: nothing for the whole model; for a partial one, what it
    /// holds.
    pub view: V,
}

/// The whole vault model: every lookup answered; what whole-model readers (lint's health
/// report, search, catalogs of the whole vault, persistence) take.
pub type Inventory = Model<Whole>;

/// A write's partial model (`inventory_cache::keyed`), holding only what that write consults:
/// planned on through [`ModelView`], never persisted, never given to any other caller.
pub type PartialModel = Model<Partial>;

/// The whole model's reach: everything.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Whole;

/// What a lookup asks a model to hold (`Reach::answers`).
#[derive(Debug, Clone, Copy)]
pub enum Ask<'a> {
    /// Folder `dir`'s direct records.
    Folder(&'a str),
    /// Every note linking under `key`.
    LinkKey(&'a str),
    /// Every file link `target` from `source` may resolve to.
    Link { source: &'a VaultPath, target: &'a str },
}

/// How far a model reaches: the one difference between the whole model and a partial one,
/// asked by the code both share.
pub trait Reach: Default + std::fmt::Debug {
    /// A lookup past the model: none for the whole model (`Infallible`), `Overrun` for a
    /// partial one.
    type Miss: std::fmt::Debug;
    /// `Ok` when the model holds what `ask` names.
    fn answers(&self, ask: Ask<'_>) -> std::result::Result<(), Self::Miss>;
    /// Whether the model holds folder `dir`'s files and records.
    fn holds_folder(&self, dir: &str) -> bool;
    /// Whether the model holds every file named `name` (lower-cased).
    fn holds_name(&self, name: &str) -> bool;
    /// Keeps the first change asked past what the model holds (only after `holds_folder`
    /// said no, which the whole model never says).
    fn went_past(&mut self, asked: impl FnOnce() -> String);
    /// The first change asked past what the model holds.
    fn past_view(&self) -> Option<&Overrun>;
}

impl Reach for Whole {
    type Miss = std::convert::Infallible;
    fn answers(&self, _: Ask<'_>) -> std::result::Result<(), Self::Miss> {
        Ok(())
    }
    fn holds_folder(&self, _: &str) -> bool {
        true
    }
    fn holds_name(&self, _: &str) -> bool {
        true
    }
    fn went_past(&mut self, _: impl FnOnce() -> String) {}
    fn past_view(&self) -> Option<&Overrun> {
        None
    }
}

impl Reach for Partial {
    type Miss = Overrun;
    fn answers(&self, ask: Ask<'_>) -> std::result::Result<(), Overrun> {
        let missing = match ask {
            Ask::Folder(dir) => (!self.folders.contains(dir)).then(|| format!("the records of folder {dir:?}")),
            Ask::LinkKey(key) => (!self.link_keys.contains(key)).then(|| format!("the notes linking under {key:?}")),
            Ask::Link { source, target } => {
                // Exact paths are answered from `files`, complete for every loaded name.
                let exact = [join_lexical(source.parent(), target), VaultPath::parse_walked(target).ok()];
                let mut names = exact.iter().flatten().map(lower_name).chain([resolved_name(target)]);
                names.find(|name| !self.names.contains(name)).map(|name| format!("every file named {name:?}"))
            }
        };
        missing.map_or(Ok(()), |asked| Err(Overrun { asked }))
    }
    fn holds_folder(&self, dir: &str) -> bool {
        self.folders.contains(dir)
    }
    fn holds_name(&self, name: &str) -> bool {
        self.names.contains(name)
    }
    fn went_past(&mut self, asked: impl FnOnce() -> String) {
        self.past_view.get_or_insert_with(|| Overrun { asked: asked() });
    }
    fn past_view(&self) -> Option<&Overrun> {
        self.past_view.as_ref()
    }
}

/// What a write's partial model holds (`inventory_cache::keyed`); nothing else is loaded.
/// A lookup past it is `Err(Overrun)`; a change past it is kept in `past_view` (`in_view`
/// answers it): either way the write plans again on the whole model
/// (`VaultState::with_write_model`).
#[derive(Debug, Default)]
pub struct Partial {
    /// Folders whose direct files and records are all in the model.
    pub folders: BTreeSet<String>,
    /// Lower-cased file names whose every file is in `files` and `by_name`.
    pub names: std::collections::HashSet<String>,
    /// Link keys whose every linker is in `linkers`.
    pub link_keys: std::collections::HashSet<String>,
    /// The first change the model was asked to make past what it holds (a file added to or
    /// removed from a folder it does not hold, a folder to list, a walk): its answers since
    /// are not the disk's.
    pub past_view: Option<Overrun>,
    /// Set by the keyed load when the folder journal's account proved every folder at that
    /// instant (`keyed::load_for_write`), and cleared as soon as the write's first use of the
    /// model returns (`Vault::with_write_model`): until then every record it holds is the
    /// disk as of an instant after the write began, and a consulted file needs no stat of
    /// its own (`write::recheck_consulted`).
    pub proven_by_journal: bool,
}

/// How a derivative of the model catches up with it (`Inventory::catch_up_from`).
#[derive(Debug, PartialEq, Eq)]
pub enum CatchUp<'a> {
    /// Nothing changed since.
    Current,
    /// These paths changed (sorted, once each): refresh them.
    Changed(Vec<&'a VaultPath>),
    /// Only a whole rebuild can tell (never built, another model, or the change log no longer
    /// reaches back).
    Whole,
}

/// What a write's partial model cannot answer: a lookup (or a change) past what it holds. The
/// one place that meets it (`VaultState::with_write_model`) loads the whole model and plans
/// the write again on it; a whole model never gives one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overrun {
    /// What was asked, for the log.
    pub asked: String,
}

impl std::fmt::Display for Overrun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the partial model does not hold {}", self.asked)
    }
}

/// The answer of a write-plan step (over [`ModelView`]) run on the whole model, which answers
/// every lookup: `Inventory`'s `ModelView` answers are all `Ok`.
pub fn of_whole<T>(answer: std::result::Result<T, Overrun>) -> T {
    answer.unwrap_or_else(|overrun| panic!("BUG: the whole model answered a lookup with an overrun: {overrun}"))
}

/// What lint's write gate, catalog planning and a write's plan ask of the model they plan on,
/// and the changes a write makes to it: answered by the whole model ([`Inventory`], every
/// lookup `Ok`) and by a write's partial one ([`PartialModel`], `Err(Overrun)` past what it
/// holds), so `VaultState::with_write_model` runs one plan over either.
pub trait ModelView {
    /// The pages the model holds.
    fn records(&self) -> &BTreeMap<VaultPath, NoteRecord>;
    /// The whole vault's counters (a partial model's come from the keyed copy).
    fn counts(&self) -> &Counts;
    /// The whole vault's source snapshot (a partial model's from the keyed copy's lines).
    fn snapshot(&self) -> &SourceSnapshot;
    /// `Inventory::try_resolve`.
    fn try_resolve(&self, source: &VaultPath, link: &Link, policy: &LoadedPolicy) -> std::result::Result<Resolution, Overrun>;
    /// `Inventory::try_linkers_of`.
    fn try_linkers_of(&self, path: &VaultPath) -> std::result::Result<Vec<VaultPath>, Overrun>;
    /// `Inventory::direct_records`.
    fn direct_records(&self, dir: &str) -> std::result::Result<Vec<VaultPath>, Overrun>;
    /// `Err` once the model was asked to change something past what it holds.
    fn in_view(&self) -> std::result::Result<(), Overrun>;
    /// Whether the folder journal proved every record the model holds when it was loaded for
    /// this write (`Partial::proven_by_journal`; never the whole model).
    fn proven_by_journal(&self) -> bool;
    /// The whole model, when this is it: for a step that needs every note.
    fn as_whole(&self) -> Option<&Inventory>;
    /// Puts a fresh record in place (`Inventory::upsert`). Returns the previous record.
    fn upsert(&mut self, record: NoteRecord) -> Option<NoteRecord>;
    /// Forgets a file (`Inventory::remove`).
    fn remove(&mut self, path: &VaultPath) -> Option<NoteRecord>;
    /// Brings the model up to `changes`; `Err` when that went past what a partial model holds
    /// (the disk's errors are the inner result's).
    fn apply_in_view(&mut self, root: &Path, policy: &LoadedPolicy, changes: &ChangeSet) -> std::result::Result<Result<Applied>, Overrun>;
}

impl ModelView for Inventory {
    fn records(&self) -> &BTreeMap<VaultPath, NoteRecord> {
        &self.records
    }
    fn counts(&self) -> &Counts {
        &self.counts
    }
    fn snapshot(&self) -> &SourceSnapshot {
        &self.snapshot
    }
    fn try_resolve(&self, source: &VaultPath, link: &Link, policy: &LoadedPolicy) -> std::result::Result<Resolution, Overrun> {
        Ok(self.resolve(source, link, policy))
    }
    fn try_linkers_of(&self, path: &VaultPath) -> std::result::Result<Vec<VaultPath>, Overrun> {
        Ok(self.linkers_of(path))
    }
    fn direct_records(&self, dir: &str) -> std::result::Result<Vec<VaultPath>, Overrun> {
        let Ok(paths) = Model::direct_records(self, dir);
        Ok(paths)
    }
    fn in_view(&self) -> std::result::Result<(), Overrun> {
        Model::in_view(self)
    }
    fn proven_by_journal(&self) -> bool {
        false
    }
    fn as_whole(&self) -> Option<&Inventory> {
        Some(self)
    }
    fn upsert(&mut self, record: NoteRecord) -> Option<NoteRecord> {
        Model::upsert(self, record)
    }
    fn remove(&mut self, path: &VaultPath) -> Option<NoteRecord> {
        Model::remove(self, path)
    }
    fn apply_in_view(&mut self, root: &Path, policy: &LoadedPolicy, changes: &ChangeSet) -> std::result::Result<Result<Applied>, Overrun> {
        let applied = self.apply(root, policy, changes);
        Model::in_view(self)?;
        Ok(applied)
    }
}

impl ModelView for PartialModel {
    fn records(&self) -> &BTreeMap<VaultPath, NoteRecord> {
        &self.records
    }
    fn counts(&self) -> &Counts {
        &self.counts
    }
    fn snapshot(&self) -> &SourceSnapshot {
        &self.snapshot
    }
    fn try_resolve(&self, source: &VaultPath, link: &Link, policy: &LoadedPolicy) -> std::result::Result<Resolution, Overrun> {
        Model::try_resolve(self, source, link, policy)
    }
    fn try_linkers_of(&self, path: &VaultPath) -> std::result::Result<Vec<VaultPath>, Overrun> {
        Model::try_linkers_of(self, path)
    }
    fn direct_records(&self, dir: &str) -> std::result::Result<Vec<VaultPath>, Overrun> {
        Model::direct_records(self, dir)
    }
    fn in_view(&self) -> std::result::Result<(), Overrun> {
        Model::in_view(self)
    }
    fn proven_by_journal(&self) -> bool {
        self.view.proven_by_journal
    }
    fn as_whole(&self) -> Option<&Inventory> {
        None
    }
    fn upsert(&mut self, record: NoteRecord) -> Option<NoteRecord> {
        Model::upsert(self, record)
    }
    fn remove(&mut self, path: &VaultPath) -> Option<NoteRecord> {
        Model::remove(self, path)
    }
    fn apply_in_view(&mut self, root: &Path, policy: &LoadedPolicy, changes: &ChangeSet) -> std::result::Result<Result<Applied>, Overrun> {
        let applied = self.apply(root, policy, changes);
        Model::in_view(self)?;
        Ok(Ok(applied))
    }
}

/// A position in a folder journal (`paravault watch`, `folder_journal`): the journal's run
/// (a new random epoch whenever it starts or cannot vouch for what it missed) and how many
/// events it had taken in by then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JournalToken {
    pub epoch: u64,
    pub seq: u64,
}

/// What `Inventory::load_checking_folders` gives: the model, the temporary files found, and
/// what it reused, read and listed again; or, when the persisted model
/// cannot be checked by folders, its records for a walk to reuse.
pub type FolderCheckedLoad = std::result::Result<(Inventory, Vec<PathBuf>, LoadCounts), Vec<NoteRecord>>;

/// A persisted model of the vault (`inventory_cache`) that a process starting may reuse once
/// it has checked it against the disk.
#[derive(Debug, Default)]
pub struct KnownVault {
    /// Records whose stat identity was settled when they were persisted.
    pub records: Vec<NoteRecord>,
    /// Pages whose record was not settled (built from bytes the engine wrote, or racy): read
    /// again at load.
    pub unread_pages: Vec<(VaultPath, PageKind)>,
    /// Files that are not pages (link targets).
    pub attachments: Vec<VaultPath>,
    pub symlinked_notes: Vec<VaultPath>,
    pub unusable_names: Vec<scan::UnusableName>,
    /// `Inventory::dirs` as persisted.
    pub dirs: Vec<(String, Option<(FileStamp, i128)>)>,
    pub ignore_files: bool,
}

/// Note counts maintained incrementally.
#[derive(Debug, Default, Clone)]
pub struct Counts {
    pub notes: usize,
    pub valid: usize,
    /// Valid notes in each directory's subtree, for every directory holding one (the root
    /// catalog's rows, sub-catalog child rows).
    pub valid_per_dir: NameMap<usize>,
    /// Folder → its subfolders that are keys of `valid_per_dir` (top-level folders, the root's,
    /// are not indexed), kept with it by `add` and `extend_valid`: a catalog's folder rows
    /// without a pass over every folder's counter (2,500 of them under one folder, issue 52).
    /// Never written elsewhere, so it cannot drift from `valid_per_dir`.
    valid_children: NameMap<BTreeSet<String>>,
    /// Valid notes at the vault root (root daily logs).
    pub root_notes: BTreeSet<VaultPath>,
    /// Notes that are not valid (excluded from search, each named with its reason).
    pub invalid: BTreeSet<VaultPath>,
}

impl Counts {
    pub(crate) fn add(&mut self, record: &NoteRecord, sign: isize) {
        if !record.is_note() {
            return;
        }
        let bump = |n: &mut usize| *n = n.saturating_add_signed(sign);
        bump(&mut self.notes);
        if !record.valid {
            if sign > 0 {
                self.invalid.insert(record.path.clone());
            } else {
                self.invalid.remove(&record.path);
            }
        }
        if record.valid {
            bump(&mut self.valid);
            if record.path.as_str().contains('/') {
                let mut dir = record.path.parent();
                while !dir.is_empty() {
                    // Looked up before inserting: an owned key per note and folder was a
                    // measured share of a bulk load.
                    match self.valid_per_dir.get_mut(dir) {
                        Some(count) => {
                            bump(count);
                            if *count == 0 {
                                self.valid_per_dir.remove(dir);
                                self.unindex_child(dir);
                            }
                        }
                        None => {
                            let mut count = 0;
                            bump(&mut count);
                            if count > 0 {
                                self.valid_per_dir.insert(dir.to_string(), count);
                                self.index_child(dir);
                            }
                        }
                    }
                    dir = dir.rsplit_once('/').map_or("", |(parent, _)| parent);
                }
            } else if sign > 0 {
                self.root_notes.insert(record.path.clone());
            } else {
                self.root_notes.remove(&record.path);
            }
        }
    }
}

impl Counts {
    /// Counters with these totals and no subtree count yet (`extend_valid` fills them).
    pub(crate) fn of_totals(notes: usize, valid: usize, root_notes: BTreeSet<VaultPath>, invalid: BTreeSet<VaultPath>) -> Counts {
        Counts { notes, valid, root_notes, invalid, ..Default::default() }
    }

    /// Takes in subtree counts found elsewhere (a partial model's, from the keyed copy): only
    /// folders holding a valid note are kept, as `add` keeps them.
    pub(crate) fn extend_valid(&mut self, counted: impl IntoIterator<Item = (String, usize)>) {
        for (dir, valid) in counted {
            if valid == 0 {
                continue;
            }
            if self.valid_per_dir.insert(dir.clone(), valid).is_none() {
                self.index_child(&dir);
            }
        }
    }

    /// The subfolders of `dir` holding a valid note, in name order, with their subtree counts.
    pub fn valid_children<'a>(&'a self, dir: &str) -> impl Iterator<Item = (&'a str, usize)> + 'a {
        self.valid_children
            .get(dir)
            .into_iter()
            .flatten()
            .map(|child| (child.as_str(), self.valid_per_dir.get(child.as_str()).copied().unwrap_or(0)))
    }

    fn index_child(&mut self, dir: &str) {
        if let Some((parent, _)) = dir.rsplit_once('/') {
            match self.valid_children.get_mut(parent) {
                Some(children) => {
                    children.insert(dir.to_string());
                }
                None => {
                    self.valid_children.insert(parent.to_string(), BTreeSet::from([dir.to_string()]));
                }
            }
        }
    }

    fn unindex_child(&mut self, dir: &str) {
        if let Some((parent, _)) = dir.rsplit_once('/')
            && let Some(children) = self.valid_children.get_mut(parent)
        {
            children.remove(dir);
            if children.is_empty() {
                self.valid_children.remove(parent);
            }
        }
    }
}

/// The key under which a link or a file is found by name: lower-cased last component without `.md`.
pub fn link_key(target: &str) -> String {
    let mut name = target.rsplit('/').next().unwrap_or(target).to_lowercase();
    if name.ends_with(".md") {
        name.truncate(name.len() - ".md".len());
    }
    name
}

/// The key under which `by_name` holds a file: its lower-cased file name.
pub fn lower_name(path: &VaultPath) -> String {
    path.file_name().to_lowercase()
}

/// What `Inventory::load_reusing` did with a persisted inventory's records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LoadCounts {
    /// Records reused without reading their file (stat identity unchanged).
    pub reused: usize,
    /// Pages read and analysed (new, changed, racy or unknown).
    pub read: usize,
    /// Persisted records whose file is gone or out of scope.
    pub forgotten: usize,
    /// Whether the load checked folders only (`Inventory::load_checking_folders`): records in
    /// unchanged folders were reused without a stat of their file.
    pub by_folders: bool,
    /// Folders listed again because their identity moved (folder checks only).
    pub folders_relisted: usize,
    /// Folders proven by the folder journal without a stat (a keyed load while `paravault
    /// watch` runs: the journal reported no change in them since the copy was proven).
    pub folders_by_journal: usize,
    /// Folders brought up to the disk by a look at each entry the folder journal named in
    /// them, instead of a listing (a keyed load while `paravault watch` runs).
    pub folders_by_entries: usize,
}

/// A folder's stat identity now (`None`: gone, unreadable, or not a real folder).
pub fn dir_stamp(root: &Path, dir: &str) -> Option<FileStamp> {
    std::fs::symlink_metadata(crate::store::layout::join(root, dir)).ok().filter(std::fs::Metadata::is_dir).map(|m| FileStamp::of(&m))
}

/// The folder holding a vault-relative path (`""`: the root).
/// One folder's entries as a load by folder checks reads them (`list_folder`).
#[derive(Debug, Default)]
pub struct FolderListing {
    /// Subfolders (vault-relative), the policy's excluded folders left out.
    pub subfolders: Vec<String>,
    /// Every other entry that is not a link or an engine temporary file, with its page kind
    /// when it is a page.
    pub files: Vec<(VaultPath, Option<PageKind>)>,
    /// In-scope Markdown names that are symbolic links (never followed, never read).
    pub symlinked_pages: Vec<VaultPath>,
    /// Markdown files and subfolders whose names no vault path may hold (left out above).
    pub unusable: Vec<scan::UnusableName>,
    /// Temporary files of killed writes (`layout::TEMP_PREFIX`).
    pub temps: Vec<PathBuf>,
}

/// Why a folder cannot be listed for a load by folder checks (the caller walks the vault).
#[derive(Debug)]
pub enum Unlistable {
    /// The folder or one of its entries could not be read.
    Unreadable(std::io::Error),
    /// It holds an ignore file (`layout::IGNORE_FILES`): scope follows its rules, which only a
    /// whole walk applies.
    IgnoreFile,
}

/// What one entry of a folder is to a load by folder checks (`list_folder`, `look_at_entry`).
#[derive(Debug)]
pub enum FolderEntry {
    /// A subfolder (vault-relative), not one of the policy's excluded folders.
    Subfolder(String),
    /// An excluded subfolder: out of scope.
    Excluded,
    /// A temporary file of a killed write.
    Temp(PathBuf),
    /// An in-scope Markdown name that is a symbolic link (never followed, never read).
    SymlinkedPage(VaultPath),
    /// Any other link, or anything neither file, folder nor link: out of scope.
    Ignored,
    /// A file, with its page kind when it is a page.
    File(VaultPath, Option<PageKind>),
    /// A Markdown file or subfolder whose name no vault path may hold.
    Unusable(Option<scan::UnusableName>),
}

/// Classifies entry `entry_name` of folder `dir` (vault-relative) by its name and type, as a
/// listing does; an ignore file is `Unlistable::IgnoreFile`.
fn classify_entry(
    root: &Path,
    policy: &LoadedPolicy,
    dir: &str,
    entry_name: &std::ffi::OsStr,
    file_type: std::fs::FileType,
) -> std::result::Result<FolderEntry, Unlistable> {
    let usable =
        entry_name.to_str().and_then(|name| VaultPath::parse_walked(&crate::note::path::child(dir, name)).ok().map(|path| (name, path)));
    let Some((name, path)) = usable else {
        return Ok(FolderEntry::Unusable(scan::UnusableName::judge(policy, dir, entry_name, file_type.is_dir())));
    };
    if file_type.is_dir() {
        let excluded = policy.policy.layout.excluded_dirs.iter().any(|e| e == name);
        return Ok(if excluded { FolderEntry::Excluded } else { FolderEntry::Subfolder(path.as_str().to_string()) });
    }
    if name.starts_with(crate::store::layout::TEMP_PREFIX) {
        let temp = file_type.is_file().then(|| crate::store::layout::join(root, path.as_str()));
        return Ok(temp.map_or(FolderEntry::Ignored, FolderEntry::Temp));
    }
    if crate::store::layout::IGNORE_FILES.contains(&name) {
        return Err(Unlistable::IgnoreFile);
    }
    let kind = scan::classify(policy, &path);
    if file_type.is_symlink() {
        return Ok(if kind.is_some() { FolderEntry::SymlinkedPage(path) } else { FolderEntry::Ignored });
    }
    Ok(FolderEntry::File(path, kind))
}

/// Lists folder `dir` (vault-relative) once, classifying each entry.
pub fn list_folder(root: &Path, policy: &LoadedPolicy, dir: &str) -> std::result::Result<FolderListing, Unlistable> {
    let mut listing = FolderListing::default();
    for entry in std::fs::read_dir(crate::store::layout::join(root, dir)).map_err(Unlistable::Unreadable)? {
        let entry = entry.map_err(Unlistable::Unreadable)?;
        let file_type = entry.file_type().map_err(Unlistable::Unreadable)?;
        match classify_entry(root, policy, dir, &entry.file_name(), file_type)? {
            FolderEntry::Subfolder(path) => listing.subfolders.push(path),
            FolderEntry::Excluded | FolderEntry::Ignored => {}
            FolderEntry::Temp(path) => listing.temps.push(path),
            FolderEntry::SymlinkedPage(path) => listing.symlinked_pages.push(path),
            FolderEntry::File(path, kind) => listing.files.push((path, kind)),
            FolderEntry::Unusable(unusable) => listing.unusable.extend(unusable),
        }
    }
    Ok(listing)
}

/// Entry `name` of folder `dir` (vault-relative) as a listing would classify it, found by a
/// stat of its own (`None`: there is no such entry).
pub fn look_at_entry(root: &Path, policy: &LoadedPolicy, dir: &str, name: &str) -> std::result::Result<Option<FolderEntry>, Unlistable> {
    let path = crate::store::layout::join(root, &crate::note::path::child(dir, name));
    match std::fs::symlink_metadata(&path) {
        Ok(meta) => classify_entry(root, policy, dir, std::ffi::OsStr::new(name), meta.file_type()).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Unlistable::Unreadable(e)),
    }
}

/// How many threads this process may run at once, asked once (the standard library reads the
/// cgroup's quota files at each call: about 0.1 ms a time on a VM).
pub(crate) fn parallelism() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// Each folder's stat identity (as `dir_stamp`; `None`: gone, not a folder, unreadable), in
/// `dirs`' order, looked up relative to one handle on the vault root, so each lookup walks only
/// the folder's own components (at 100,000 notes the walk through the root's path was most of
/// a write's 2,400 folder checks). Many folders are split over a few threads: each check is a
/// system call that waits on nothing but the CPU.
pub fn dir_stamps(root: &Path, dirs: &[&str]) -> Vec<Option<FileStamp>> {
    dir_stamps_while(root, dirs, || ()).0
}

/// `dir_stamps`, with `meanwhile` run on this thread while a helper thread (one per spare
/// core, for many folders) has begun the stats; this thread then takes its share. The stats
/// are claimed in chunks from one counter, so whichever thread is free takes the next.
pub fn dir_stamps_while<T>(root: &Path, dirs: &[&str], meanwhile: impl FnOnce() -> T) -> (Vec<Option<FileStamp>>, T) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    /// Below this many folders a helper thread costs more than it saves.
    const PER_THREAD: usize = 512;
    /// Folders a thread claims at a time.
    const CHUNK: usize = 64;
    let stamp = folder_stamper(root);
    let next = AtomicUsize::new(0);
    let claim = || {
        let mut done: Vec<(usize, Vec<Option<FileStamp>>)> = Vec::new();
        loop {
            let at = next.fetch_add(1, Ordering::Relaxed) * CHUNK;
            if at >= dirs.len() {
                return done;
            }
            done.push((at, dirs[at..(at + CHUNK).min(dirs.len())].iter().map(|dir| stamp(dir)).collect()));
        }
    };
    let helpers = parallelism().saturating_sub(1).min(dirs.len() / PER_THREAD);
    let (mut chunks, out) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..helpers).map(|_| scope.spawn(claim)).collect();
        let out = meanwhile();
        let mut chunks = claim();
        for worker in workers {
            // A helper only stats; should one panic, its chunks are missing and its folders
            // count as vanished (refused) below.
            chunks.extend(worker.join().unwrap_or_default());
        }
        (chunks, out)
    });
    chunks.sort_unstable_by_key(|(at, _)| *at);
    let mut stamps: Vec<Option<FileStamp>> = Vec::with_capacity(dirs.len());
    for (at, part) in chunks {
        stamps.resize(at, None);
        stamps.extend(part);
    }
    stamps.resize(dirs.len(), None);
    (stamps, out)
}

/// `dir_stamps` on this thread alone (a helper's share while the caller's thread is busy).
pub fn dir_stamps_alone(root: &Path, dirs: &[&str]) -> Vec<Option<FileStamp>> {
    let stamp = folder_stamper(root);
    dirs.iter().map(|dir| stamp(dir)).collect()
}

/// A folder's stat identity (as `dir_stamp`), looked up relative to one handle on `root`.
fn folder_stamper(root: &Path) -> impl Fn(&str) -> Option<FileStamp> + Sync + '_ {
    use rustix::fs::{Mode, OFlags};
    let handle = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok();
    move |dir: &str| match &handle {
        Some(handle) if !dir.is_empty() => stamp_at(handle, dir),
        _ => dir_stamp(root, dir),
    }
}

/// A folder's stat identity relative to `handle` (`None`: gone, not a folder, unreadable).
fn stamp_at(handle: &rustix::fd::OwnedFd, dir: &str) -> Option<FileStamp> {
    use rustix::fs::{AtFlags, FileType};
    rustix::fs::statat(handle, dir, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .filter(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Directory)
        .map(|stat| FileStamp::of_stat(&stat))
}

fn parent_dir(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

/// A file's stat identity now (`None`: gone or unreadable).
pub fn stamp_now(root: &Path, path: &VaultPath) -> Option<FileStamp> {
    std::fs::symlink_metadata(path.under(root)).ok().map(|m| FileStamp::of(&m))
}

/// Reads `items` in order through one `beneath::FolderCursor`, which opens each folder once for
/// the run of paths it holds (walked listings are sorted, so a folder's notes are consecutive);
/// a folder that cannot be opened leaves each of its notes a record of why.
fn read_by_folder(root: &Path, policy: &LoadedPolicy, items: &[(VaultPath, PageKind)]) -> Vec<NoteRecord> {
    let mut cursor = crate::store::beneath::FolderCursor::new(root);
    items.iter().map(|(path, kind)| read_opened_record(path, *kind, policy, || cursor.open_read(path.as_str()))).collect()
}

/// Reads `items` in parallel on up to `threads` threads.
pub(crate) fn read_all(root: &Path, policy: &LoadedPolicy, items: &[(VaultPath, PageKind)]) -> Vec<NoteRecord> {
    if items.len() < 64 || parallelism() == 1 {
        return read_by_folder(root, policy, items);
    }
    let threads = parallelism().min(8);
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = items.chunks(chunk).map(|part| s.spawn(move || read_by_folder(root, policy, part))).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    })
}

/// The folder-stamp evidence source: each known folder's identity now (one stat each, in
/// parallel) against the one its listing was taken with. Returns the folders whose listing
/// still holds (their identity kept; the others `None`, to be listed again) and the
/// `ChangeSet` naming, whole, each folder that moved, is racy or vanished.
pub fn folder_stamp_changes(
    root: &Path,
    dirs: Vec<(String, Option<(FileStamp, i128)>)>,
) -> (BTreeMap<String, Option<(FileStamp, i128)>>, ChangeSet) {
    let stamps = dir_stamps(root, &dirs.iter().map(|(dir, _)| dir.as_str()).collect::<Vec<_>>());
    let mut proven = BTreeMap::new();
    let mut moved = Vec::new();
    for ((dir, seen), stamp) in dirs.into_iter().zip(stamps) {
        match (stamp, seen) {
            (Some(now), Some((old, at))) if now == old && !old.is_racy(at) => {
                proven.insert(dir, Some((old, at)));
            }
            (None, _) if !dir.is_empty() => moved.push(dir),
            _ => {
                proven.insert(dir.clone(), None);
                moved.push(dir);
            }
        }
    }
    (proven, ChangeSet::of_folders(moved.iter().map(String::as_str)))
}

impl<V: Reach> Model<V> {
    /// This model's identity and version, `(origin, revision)`: what a kept derivative (an
    /// index, a summary) records to catch up later with [`Inventory::changed_since`].
    pub fn key(&self) -> (u64, u64) {
        (self.origin, self.revision)
    }

    /// The paths changed since a derivative was brought up to `seen` (an earlier `key()`),
    /// sorted and once each (empty when nothing changed); `None` when only a whole rebuild
    /// can tell: `seen` is of another model (a reload), or the change log no longer reaches
    /// back to it.
    pub fn changed_since(&self, seen: (u64, u64)) -> Option<Vec<&VaultPath>> {
        if seen.0 != self.origin {
            return None;
        }
        self.changes.since(seen.1)
    }

    /// How a derivative of this model (an index kept beside it) that was last brought up to
    /// `seen` (an earlier `key()`; `None`: never built) reaches it now.
    pub fn catch_up_from(&self, seen: Option<(u64, u64)>) -> CatchUp<'_> {
        match seen {
            Some(seen) if seen == self.key() => CatchUp::Current,
            Some(seen) => self.changed_since(seen).map_or(CatchUp::Whole, CatchUp::Changed),
            None => CatchUp::Whole,
        }
    }

    /// Replaces what folder `dir` holds of `unusable_names` with `found` (its new listing's).
    pub fn set_unusable_names_of(&mut self, dir: &str, found: Vec<scan::UnusableName>) {
        self.unusable_names.retain(|u| u.folder != dir);
        self.unusable_names.extend(found);
        self.unusable_names.sort();
    }

    /// Files directly in folder `dir` (not in its subfolders), in path order: range scans that
    /// skip each subfolder's files with one seek.
    pub fn direct_files(&self, dir: &str) -> Vec<VaultPath> {
        self.by_folder.get(dir).map(|files| files.iter().cloned().collect()).unwrap_or_default()
    }

    /// Records directly in folder `dir`, in path order (as `direct_files`); `Err` from a
    /// partial model that does not hold the folder.
    pub fn direct_records(&self, dir: &str) -> std::result::Result<Vec<VaultPath>, V::Miss> {
        self.view.answers(Ask::Folder(dir))?;
        // Every record's path is among `files` (`upsert` adds it) in a folder the model holds.
        let files = self.by_folder.get(dir).into_iter().flatten();
        Ok(files.filter(|path| self.records.contains_key(*path)).cloned().collect())
    }

    /// `Err` when this partial model was asked to change something past what it holds (never
    /// for a whole model): its answers since are not the disk's, and the write plans again on
    /// the whole model.
    pub fn in_view(&self) -> std::result::Result<(), Overrun> {
        if let Some(overrun) = self.view.past_view() {
            return Err(overrun.clone());
        }
        if self.snapshot.overrun() {
            return Err(Overrun { asked: "a snapshot line of a folder it does not hold".into() });
        }
        Ok(())
    }

    /// Records a file that is not a page (an attachment links may point at).
    pub fn add_attachment(&mut self, path: VaultPath) {
        self.add_file(path);
    }

    /// Whether any known file lies under folder `rel` (a folder that moved or vanished).
    pub fn has_under(&self, rel: &str) -> bool {
        let start = VaultPath::bound(format!("{rel}/"));
        let end = VaultPath::bound(format!("{rel}0"));
        self.files.range(start..end).next().is_some() || self.subtree(rel).next().is_some()
    }

    /// Notes or forgets that an in-scope Markdown name is a symbolic link.
    pub fn set_symlinked(&mut self, path: &VaultPath, symlinked: bool) {
        if self.symlinked_notes.contains(path) != symlinked {
            self.listing_changed(path.parent());
        }
        self.symlinked_notes.retain(|p| p != path);
        if symlinked {
            self.symlinked_notes.push(path.clone());
            self.symlinked_notes.sort();
        }
    }

    fn add_file(&mut self, path: VaultPath) {
        if !self.view.holds_folder(path.parent()) {
            // A file set this partial model does not hold cannot change in it.
            if !self.files.contains(&path) {
                self.view.went_past(|| format!("the files of folder {:?}, to add {path}", path.parent()));
            }
            return;
        }
        if self.insert_file(path.clone()) {
            self.listing_changed(path.parent());
            let name = lower_name(&path);
            if self.view.holds_name(&name) {
                self.by_name.entry(name).or_default().push(path);
            }
        }
    }

    /// Adds `path` to `files` and to its folder's entries; whether it was new.
    fn insert_file(&mut self, path: VaultPath) -> bool {
        if !self.files.insert(path.clone()) {
            return false;
        }
        self.by_folder.entry(path.parent().to_string()).or_default().insert(path);
        true
    }

    fn remove_file(&mut self, path: &VaultPath) {
        if !self.view.holds_folder(path.parent()) {
            self.view.went_past(|| format!("the files of folder {:?}, to remove {path}", path.parent()));
            return;
        }
        if self.files.remove(path) {
            if let Some(files) = self.by_folder.get_mut(path.parent()) {
                files.remove(path);
                if files.is_empty() {
                    self.by_folder.remove(path.parent());
                }
            }
            self.listing_changed(path.parent());
            if let Some(list) = self.by_name.get_mut(&lower_name(path)) {
                list.retain(|p| p != path);
            }
        }
    }

    /// The model's entries of folder `dir` changed without a listing of it: its remembered
    /// identity no longer proves them (and folders above it the model never listed are listed
    /// next time too).
    fn listing_changed(&mut self, dir: &str) {
        match self.dirs.get_mut(dir) {
            Some(slot) => *slot = None,
            None => {
                self.dirs.insert(dir.to_string(), None);
            }
        }
        let mut current = dir;
        while !current.is_empty() {
            current = parent_dir(current);
            if self.dirs.contains_key(current) {
                break;
            }
            self.dirs.insert(current.to_string(), None);
        }
    }

    /// Puts a fresh record in place (a note was written). Returns the previous record.
    pub fn upsert(&mut self, record: NoteRecord) -> Option<NoteRecord> {
        self.revision += 1;
        self.changes.record(self.revision, &record.path);
        self.add_file(record.path.clone());
        for link in &record.links {
            self.linkers.entry(link_key(&link.target)).or_default().insert(record.path.clone());
        }
        let previous = self.records.remove(&record.path);
        if let Some(old) = &previous {
            self.counts.add(old, -1);
            self.snapshot.remove(old);
        }
        self.counts.add(&record, 1);
        self.snapshot.insert(&record);
        self.records.insert(record.path.clone(), record);
        if let Some(old) = &previous {
            self.forget_links(old);
            // Re-add the current record's keys that the old record shared.
            let current = &self.records[&old.path];
            for link in &current.links {
                self.linkers.entry(link_key(&link.target)).or_default().insert(current.path.clone());
            }
        }
        previous
    }

    fn forget_links(&mut self, record: &NoteRecord) {
        for link in &record.links {
            if let Some(set) = self.linkers.get_mut(&link_key(&link.target)) {
                set.remove(&record.path);
            }
        }
    }

    /// Forgets a file (a note was removed or moved away).
    pub fn remove(&mut self, path: &VaultPath) -> Option<NoteRecord> {
        self.revision += 1;
        self.changes.record(self.revision, path);
        self.remove_file(path);
        let old = self.records.remove(path);
        if let Some(old) = &old {
            self.counts.add(old, -1);
            self.snapshot.remove(old);
            self.forget_links(old);
        }
        old
    }

    /// Notes holding a link that may resolve by name to `path` (candidates for re-resolution
    /// when `path` appears or disappears); `Err` from a partial model that does not hold every
    /// such note.
    pub fn try_linkers_of(&self, path: &VaultPath) -> std::result::Result<Vec<VaultPath>, V::Miss> {
        let mut keys = vec![link_key(path.as_str())];
        keys.push(path.file_name().to_lowercase());
        let mut out: BTreeSet<VaultPath> = BTreeSet::new();
        for key in keys {
            self.view.answers(Ask::LinkKey(&key))?;
            if let Some(set) = self.linkers.get(&key) {
                out.extend(set.iter().cloned());
            }
        }
        Ok(out.into_iter().collect())
    }

    /// Records under directory `dir` (its whole subtree), in path order: one range of the map.
    pub fn subtree(&self, dir: &str) -> impl Iterator<Item = &NoteRecord> {
        let start = VaultPath::bound(format!("{dir}/"));
        let end = VaultPath::bound(format!("{dir}0"));
        self.records.range(start..end).map(|(_, r)| r)
    }

    /// Ordinary notes (not system pages).
    pub fn notes(&self) -> impl Iterator<Item = &NoteRecord> {
        self.records.values().filter(|r| r.is_note())
    }

    /// Resolves a link from `source`; `Err` from a partial model that does not hold every
    /// file the link may resolve to.
    pub fn try_resolve(&self, source: &VaultPath, link: &Link, policy: &LoadedPolicy) -> std::result::Result<Resolution, V::Miss> {
        for candidate in candidates(link, policy) {
            if let Some(found) = self.resolve_one(source, &candidate, link.kind)? {
                return Ok(found);
            }
        }
        Ok(Resolution::Broken)
    }

    fn resolve_one(&self, source: &VaultPath, target: &str, kind: LinkKind) -> std::result::Result<Option<Resolution>, V::Miss> {
        let target = target.trim_start_matches('/');
        self.view.answers(Ask::Link { source, target })?;
        if let Some(path) = join_lexical(source.parent(), target)
            && self.files.contains(&path)
        {
            return Ok(Some(Resolution::Resolved(path)));
        }
        if let Ok(path) = VaultPath::parse_walked(target)
            && self.files.contains(&path)
        {
            return Ok(Some(Resolution::Resolved(path)));
        }
        if kind == LinkKind::Markdown {
            return Ok(None);
        }
        let name = resolved_name(target);
        let suffix = format!("/{}", target.to_lowercase());
        let matches: Vec<VaultPath> = self
            .by_name
            .get(&name)
            .map(|list| {
                list.iter()
                    .filter(|p| !target.contains('/') || format!("/{}", p.as_str().to_lowercase()).ends_with(&suffix))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        Ok(match matches.len() {
            0 => None,
            1 => matches.into_iter().next().map(Resolution::Resolved),
            _ => Some(Resolution::Ambiguous(matches)),
        })
    }
}

impl Inventory {
    /// Scans and reads the whole vault.
    pub fn load(root: &Path, policy: &LoadedPolicy) -> Result<Self> {
        Ok(Self::load_finding_temps(root, policy)?.0)
    }

    /// Scans and reads the whole vault; also returns the temporary files the walk found.
    pub fn load_finding_temps(root: &Path, policy: &LoadedPolicy) -> Result<(Self, Vec<PathBuf>)> {
        let (inventory, temps, _) = Self::load_reusing(root, policy, Vec::new())?;
        Ok((inventory, temps))
    }

    /// Walks the vault and reads every page, except those of `known` (a persisted inventory)
    /// whose stat identity is unchanged and settled: those records are reused as they are.
    /// Returns the inventory, the temporary files the walk found, and what it reused and read.
    pub fn load_reusing(root: &Path, policy: &LoadedPolicy, known: Vec<NoteRecord>) -> Result<(Self, Vec<PathBuf>, LoadCounts)> {
        let started = std::time::Instant::now();
        let walk_started = now_ns();
        let scan = scan::scan(root, policy)?;
        tracing::debug!(walk = ?started.elapsed(), pages = scan.pages.len(), "vault walked");
        let mut known: HashMap<VaultPath, NoteRecord> = known.into_iter().map(|r| (r.path.clone(), r)).collect();
        let mut reused = Vec::with_capacity(known.len());
        let mut to_read = Vec::new();
        for (path, kind) in &scan.pages {
            match known.remove(path) {
                Some(record) if record.is_current(*kind, stamp_now(root, path)) => {
                    reused.push(record);
                }
                _ => to_read.push((path.clone(), *kind)),
            }
        }
        let counts = LoadCounts { reused: reused.len(), read: to_read.len(), forgotten: known.len(), ..Default::default() };
        let mut records = reused;
        records.extend(read_all(root, policy, &to_read));
        tracing::debug!(stat_and_read = ?started.elapsed(), "pages checked");
        let mut inventory = Inventory {
            symlinked_notes: scan.symlinked_notes,
            unusable_names: scan.unusable_names,
            files_checked: true,
            ignore_files: scan.ignore_files,
            origin: changes::next_origin(),
            ..Default::default()
        }
        .assemble(records, scan.files);
        inventory.set_listed_dirs(root, &scan.dirs, walk_started);
        tracing::debug!(built = ?started.elapsed(), "inventory built");
        Ok((inventory, scan.leftover_temps, counts))
    }

    /// Records the folders a whole walk started at `walk_started` listed. Their identities are
    /// taken after the walk but judged as of its start, so a folder changed while it was
    /// walked is racy (listed again next time), never trusted with a listing that missed it.
    pub fn set_listed_dirs(&mut self, root: &Path, dirs: &[String], walk_started: i128) {
        self.dirs = dirs.iter().map(|dir| (dir.clone(), dir_stamp(root, dir).map(|stamp| (stamp, walk_started)))).collect();
    }

    /// Builds the model from a persisted one, trusting each record only as far as its folder's
    /// listing is proven unchanged: every known folder is stat'ed (O(folders)); a folder whose
    /// identity moved (or is racy) is listed again, its new, changed or vanished entries read
    /// or forgotten, and a new folder is listed whole. Records in unchanged folders are reused
    /// without a stat of their file: the caller re-checks the files it consults
    /// (`recheck`), and a whole-vault reader walks the vault first (`files_checked` is false).
    /// `Err(records)`: the persisted model cannot be checked this way (no folder identities,
    /// an ignore file, an unlistable folder): the caller walks the vault, reusing `records`.
    /// Returns the model, the temporary files found, and what was reused, read and listed.
    pub fn load_checking_folders(root: &Path, policy: &LoadedPolicy, known: KnownVault) -> Result<FolderCheckedLoad> {
        if known.ignore_files || !known.dirs.iter().any(|(dir, _)| dir.is_empty()) {
            return Ok(Err(known.records));
        }
        let started = std::time::Instant::now();
        let mut to_read = Vec::new();
        let unread: Vec<(VaultPath, PageKind)> = known.unread_pages;
        let mut counts = LoadCounts { reused: known.records.len(), by_folders: true, ..Default::default() };
        let mut files = known.attachments;
        files.extend(unread.iter().map(|(path, _)| path.clone()));
        // Every folder's listing is judged below (`dirs` is set from the disk's identities).
        let mut inventory = Inventory {
            symlinked_notes: known.symlinked_notes,
            unusable_names: known.unusable_names,
            origin: changes::next_origin(),
            ..Default::default()
        }
        .assemble(known.records, files);
        tracing::debug!(built = ?started.elapsed(), "persisted inventory built");
        // The evidence: each folder's identity now against the one its listing was taken with.
        let (proven, changes) = folder_stamp_changes(root, known.dirs);
        inventory.dirs = proven;
        tracing::debug!(checked = ?started.elapsed(), folders = inventory.dirs.len(), ?changes, "folders checked");
        for (path, kind) in unread {
            if inventory.dirs.get(path.parent()).is_some_and(Option::is_some) {
                to_read.push((path, kind));
            }
        }
        let ChangeSet::Known(changes) = changes else { return Ok(Err(inventory.into_records())) };
        let mut relisting = apply::Relisting::default();
        if inventory.relist(root, policy, changes.whole_folders().map(str::to_string).collect(), &mut relisting).is_err() {
            return Ok(Err(inventory.into_records()));
        }
        to_read.extend(relisting.to_read);
        counts.forgotten += relisting.forgotten;
        let relisted = relisting.listed;
        let mut leftover_temps = relisting.temps;
        if inventory.dirs.values().any(Option::is_none) {
            return Ok(Err(inventory.into_records()));
        }
        counts.read = to_read.len();
        counts.folders_relisted = relisted;
        counts.reused = counts.reused.saturating_sub(counts.read + counts.forgotten);
        // Re-reading pages changes no listing: their files are in the model already.
        for record in read_all(root, policy, &to_read) {
            inventory.upsert(record);
        }
        leftover_temps.extend(scan::engine_temps(root));
        tracing::debug!(loaded = ?started.elapsed(), relisted, ?counts, "inventory loaded by folder checks");
        Ok(Ok((inventory, leftover_temps, counts)))
    }

    /// Fills this empty model with `records` and the other `files` (attachments, pages not
    /// read yet) in one pass: the model that an `add_file` of every file and an `upsert` of
    /// every record (the last of a repeated path winning) would give, less what a load throws
    /// away — a change-log entry per path (the log starts at the final revision: a reader
    /// keyed to an older one recomputes) and each folder marked changed (the caller sets
    /// `dirs` next) — with the ordered maps built from sorted input. Those upserts were 46%
    /// of a one-note CLI write's profile at 20,000 notes.
    fn assemble(mut self, mut records: Vec<NoteRecord>, mut files: Vec<VaultPath>) -> Inventory {
        debug_assert!(self.records.is_empty() && self.files.is_empty());
        records.sort_by(|a, b| a.path.cmp(&b.path));
        records.dedup_by(|next, kept| {
            let same = next.path == kept.path;
            if same {
                std::mem::swap(next, kept);
            }
            same
        });
        files.reserve(records.len());
        files.extend(records.iter().map(|record| record.path.clone()));
        files.sort_unstable();
        files.dedup();
        self.by_name.reserve(files.len());
        for path in &files {
            self.by_name.entry(lower_name(path)).or_default().push(path.clone());
        }
        for record in &records {
            for link in &record.links {
                self.linkers.entry(link_key(&link.target)).or_default().insert(record.path.clone());
            }
            self.counts.add(record, 1);
            self.snapshot.insert(record);
        }
        self.revision = records.len() as u64;
        self.changes.start_at(self.revision);
        for path in &files {
            self.by_folder.entry(path.parent().to_string()).or_default().insert(path.clone());
        }
        self.files = files.into_iter().collect();
        self.records = records.into_iter().map(|record| (record.path.clone(), record)).collect();
        self
    }

    fn into_records(self) -> Vec<NoteRecord> {
        self.records.into_values().collect()
    }

    /// Forgets everything under folder `dir` and the folder itself (it vanished). Returns how
    /// many pages it forgot.
    fn forget_subtree(&mut self, dir: &str) -> usize {
        let start = VaultPath::bound(format!("{dir}/"));
        let end = VaultPath::bound(format!("{dir}0"));
        let paths: Vec<VaultPath> = self.files.range(start.clone()..end.clone()).cloned().collect();
        let pages = self.records.range(start..end).count();
        for path in paths {
            self.remove(&path);
        }
        let prefix = format!("{dir}/");
        self.dirs.retain(|d, _| d != dir && !d.starts_with(&prefix));
        self.symlinked_notes.retain(|p| !p.as_str().starts_with(&prefix));
        self.unusable_names.retain(|u| u.folder != dir && !u.folder.starts_with(&prefix));
        pages
    }

    /// Notes holding a link that may resolve by name to `path` (`try_linkers_of`, which the
    /// whole model always answers).
    pub fn linkers_of(&self, path: &VaultPath) -> Vec<VaultPath> {
        let Ok(linkers) = self.try_linkers_of(path);
        linkers
    }

    /// Resolves a link from `source` (`try_resolve`, which the whole model always answers).
    pub fn resolve(&self, source: &VaultPath, link: &Link, policy: &LoadedPolicy) -> Resolution {
        let Ok(resolution) = self.try_resolve(source, link, policy);
        resolution
    }
}

impl PartialModel {
    /// A write's partial model (`inventory_cache::keyed`), before any record is held: the
    /// counters, the folders' identities and the snapshot (full for `partial.folders`, digests
    /// elsewhere) come from the keyed copy of the persisted inventory.
    pub fn partial_from(
        partial: Partial,
        counts: Counts,
        snapshot: SourceSnapshot,
        dirs: BTreeMap<String, Option<(FileStamp, i128)>>,
        symlinked_notes: Vec<VaultPath>,
        unusable_names: Vec<scan::UnusableName>,
    ) -> PartialModel {
        PartialModel {
            counts,
            snapshot,
            dirs,
            symlinked_notes,
            unusable_names,
            origin: changes::next_origin(),
            view: partial,
            ..Default::default()
        }
    }

    /// Holds a record of a partial model as loaded (already in its counters and snapshot).
    pub fn hold_record(&mut self, record: NoteRecord) {
        for link in &record.links {
            self.linkers.entry(link_key(&link.target)).or_default().insert(record.path.clone());
        }
        self.insert_file(record.path.clone());
        self.records.insert(record.path.clone(), record);
    }

    /// Holds a file of a partial model (a page or an attachment it knows exists).
    pub fn hold_file(&mut self, path: VaultPath) {
        self.insert_file(path);
    }

    /// Holds every file named `name` (lower-cased): the partial model can resolve it.
    pub fn hold_name(&mut self, name: String, paths: Vec<VaultPath>) {
        for path in &paths {
            self.insert_file(path.clone());
        }
        self.by_name.insert(name, paths);
    }

    /// Holds the notes linking under `key` that are not among the held records.
    pub fn hold_linkers(&mut self, key: String, paths: impl IntoIterator<Item = VaultPath>) {
        self.linkers.entry(key).or_default().extend(paths);
    }
}

#[cfg(test)]
type PathRange = (std::ops::Bound<VaultPath>, std::ops::Bound<VaultPath>);

/// Paths directly in folder `dir` of an ordered set, given its first entry in a range: what
/// `Inventory::by_folder` answers, computed from the ordered sets (its tests' reference).
#[cfg(test)]
fn direct_in<'a>(first_in: impl Fn(PathRange) -> Option<&'a VaultPath>, dir: &str) -> Vec<VaultPath> {
    use std::ops::Bound;
    let prefix_len = if dir.is_empty() { 0 } else { dir.len() + 1 };
    let mut from = if dir.is_empty() { Bound::Unbounded } else { Bound::Included(VaultPath::bound(format!("{dir}/"))) };
    let end = if dir.is_empty() { Bound::Unbounded } else { Bound::Excluded(VaultPath::bound(format!("{dir}0"))) };
    let mut out = Vec::new();
    while let Some(path) = first_in((from.clone(), end.clone())) {
        match path.as_str()[prefix_len..].split_once('/') {
            None => {
                out.push(path.clone());
                from = Bound::Excluded(path.clone());
            }
            // Skip the subfolder's whole range: its next sibling starts after `child/…`.
            Some((child, _)) => from = Bound::Included(VaultPath::bound(format!("{}0", &path.as_str()[..prefix_len + child.len()]))),
        }
    }
    out
}

/// The lower-cased file names a link may resolve to: what a partial model must hold
/// (`Partial::names`) to resolve it.
pub fn candidate_names(link: &Link, policy: &LoadedPolicy) -> Vec<String> {
    candidates(link, policy).iter().map(|c| resolved_name(c.trim_start_matches('/'))).collect()
}

/// The lower-cased last component of a link target.
fn resolved_name(target: &str) -> String {
    target.rsplit('/').next().unwrap_or(target).to_lowercase()
}

/// File names a link may mean, in order: `t.md` for a bare wikilink; `t` itself when it names
/// an attachment (so `![[img.png]]` resolves to `img.png`, not `img.png.md`).
fn candidates(link: &Link, policy: &LoadedPolicy) -> Vec<String> {
    let target = link.target.as_str();
    if link.kind == LinkKind::Markdown || target.to_lowercase().ends_with(".md") {
        return vec![target.to_string()];
    }
    let extension = target.rsplit('/').next().and_then(|name| name.rsplit_once('.')).map(|(_, ext)| ext.to_lowercase());
    match extension {
        Some(ext) if policy.policy.lint.attachment_extensions.contains(&ext) => vec![target.to_string()],
        Some(_) => vec![format!("{target}.md"), target.to_string()],
        None => vec![format!("{target}.md")],
    }
}

/// Joins `target` onto directory `base` resolving `.` and `..` lexically; `None` if it escapes.
pub fn join_lexical(base: &str, target: &str) -> Option<VaultPath> {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    if parts.is_empty() {
        return None;
    }
    VaultPath::parse_walked(&parts.join("/")).ok()
}

/// The absolute path of a vault-relative path (for callers outside `store`).
pub fn absolute(root: &Path, path: &VaultPath) -> PathBuf {
    path.under(root)
}

#[cfg(test)]
mod tests;
