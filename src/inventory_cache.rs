//! The persisted inventory (`.paravault/inventory.bin`): the analysed records of the vault's
//! pages with the stat identity each was read at, so a process that starts re-reads and
//! re-parses only the files whose identity moved (a stat walk), not the whole vault.
//!
//! Format: `MAGIC` · format version (u32 LE) · blake3 of the payload (32 bytes) · payload
//! (postcard). The payload names the engine version and the policy digest it was computed
//! under. A file that is torn, corrupt, of another format or engine version, or computed under
//! another policy is ignored (and rebuilt by the caller), never trusted. Only records whose
//! stamp is settled (not racy, git's rule) are kept: a record the engine built from bytes it
//! was writing, or one read within a timestamp tick of its last change, is read again next
//! time (its path is kept, so a process that trusts its folder's listing still reads it).
//!
//! Format 2 adds the walk itself: the attachments, the symbolic links, and every folder's stat
//! identity as of its last whole listing, so a write can prove the file set unchanged by a stat
//! of each folder (`Inventory::load_checking_folders`) instead of a walk and a stat per file.

use serde::{Deserialize, Serialize};

use crate::inventory::{FileProblem, FileStamp, Inventory, KnownVault, NoteRecord};
use crate::note::body::Link;
use crate::note::metadata::NoteMeta;
use crate::note::path::VaultPath;
use crate::scan::{PageKind, UnusableName};
use crate::store::checksummed;

pub mod keyed;

const MAGIC: &[u8; 8] = b"PVINVENT";
/// Bumped whenever a persisted type changes shape.
pub const FORMAT_VERSION: u32 = 3;
/// `MAGIC` and the format version, before the checksummed payload (`store::checksummed`).
const PREFIX: usize = 8 + 4;
const HEADER: usize = PREFIX + checksummed::CHECKSUM_LEN;

#[derive(Serialize, Deserialize)]
struct Persisted {
    engine_version: String,
    policy_digest: [u8; 32],
    records: Vec<PersistedRecord>,
    /// Pages whose record was not settled: (path, kind).
    unread_pages: Vec<(String, PageKind)>,
    attachments: Vec<String>,
    symlinked_notes: Vec<String>,
    unusable_names: Vec<UnusableName>,
    /// Folder → (stat identity, when it was taken) of its last whole listing.
    dirs: Vec<(String, Option<(FileStamp, i128)>)>,
    ignore_files: bool,
}

#[derive(Serialize, Deserialize)]
struct PersistedRecord {
    path: String,
    kind: PageKind,
    stamp: FileStamp,
    read_at_ns: i128,
    size_bytes: u64,
    content_hash: [u8; 32],
    meta: NoteMeta,
    valid: bool,
    generated: bool,
    /// (rule, line, message); rules map back to the engine's names (an unknown one rejects
    /// the file: another engine wrote it).
    problems: Vec<(String, Option<usize>, String)>,
    links: Vec<Link>,
    body_first_line: usize,
    body_chars: usize,
}

/// Every rule a `FileProblem` can carry (`inventory::read_record`, `analyse_bytes`).
const FILE_PROBLEM_RULES: &[&str] = &["note-too-large", "note-unreadable", "utf8-bom", "metadata-missing", "metadata-invalid"];

/// Whether a record's stamp is settled (not racy): only those are persisted.
fn settled(record: &NoteRecord) -> bool {
    record.stamp.is_some_and(|(stamp, read_at_ns)| !stamp.is_racy(read_at_ns))
}

/// A settled record as persisted (`None`: not settled).
fn persisted_record(r: &NoteRecord) -> Option<PersistedRecord> {
    let (stamp, read_at_ns) = r.stamp.filter(|_| settled(r))?;
    Some(PersistedRecord {
        path: r.path.to_string(),
        kind: r.kind,
        stamp,
        read_at_ns,
        size_bytes: r.size_bytes,
        content_hash: r.content_hash,
        meta: r.meta.clone(),
        valid: r.valid,
        generated: r.generated,
        problems: r.problems.iter().map(|p| (p.rule.to_string(), p.line, p.message.clone())).collect(),
        links: r.links.clone(),
        body_first_line: r.body_first_line,
        body_chars: r.body_chars,
    })
}

/// A persisted record back as a record; the error says why it cannot be trusted.
fn record_of(r: PersistedRecord) -> Result<NoteRecord, String> {
    let path = VaultPath::parse_walked(&r.path).map_err(|_| format!("invalid path {:?}", r.path))?;
    let problems = r
        .problems
        .into_iter()
        .map(|(rule, line, message)| {
            let rule = FILE_PROBLEM_RULES.iter().find(|known| **known == rule).ok_or_else(|| format!("unknown rule {rule:?}"))?;
            Ok(FileProblem { rule, line, message })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(NoteRecord {
        path,
        kind: r.kind,
        stamp: Some((r.stamp, r.read_at_ns)),
        size_bytes: r.size_bytes,
        content_hash: r.content_hash,
        meta: r.meta,
        valid: r.valid,
        generated: r.generated,
        problems,
        links: r.links,
        body_first_line: r.body_first_line,
        body_chars: r.body_chars,
    })
}

/// Encodes the model (settled records, see the module doc) for `policy_digest`.
pub fn encode(inventory: &Inventory, policy_digest: &[u8; 32]) -> Vec<u8> {
    let unread_pages = inventory.records.values().filter(|r| !settled(r)).map(|r| (r.path.to_string(), r.kind)).collect();
    let records = inventory.records.values().filter_map(persisted_record).collect();
    let persisted = Persisted {
        engine_version: env!("CARGO_PKG_VERSION").to_string(),
        policy_digest: *policy_digest,
        records,
        unread_pages,
        attachments: inventory.files.iter().filter(|p| !inventory.records.contains_key(*p)).map(ToString::to_string).collect(),
        symlinked_notes: inventory.symlinked_notes.iter().map(ToString::to_string).collect(),
        unusable_names: inventory.unusable_names.clone(),
        dirs: inventory.dirs.iter().map(|(dir, seen)| (dir.clone(), *seen)).collect(),
        ignore_files: inventory.ignore_files,
    };
    let sealed = checksummed::encode(&persisted).unwrap_or_default();
    let mut out = Vec::with_capacity(PREFIX + sealed.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&sealed);
    out
}

/// Decodes a persisted inventory computed under `policy_digest`; the error says why it cannot
/// be trusted.
pub fn decode(bytes: &[u8], policy_digest: &[u8; 32]) -> Result<KnownVault, String> {
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        return Err("not a persisted inventory".into());
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or_default());
    if version != FORMAT_VERSION {
        return Err(format!("format version {version}, this engine reads {FORMAT_VERSION}"));
    }
    let persisted: Persisted = checksummed::decode(&bytes[PREFIX..])?;
    if persisted.engine_version != env!("CARGO_PKG_VERSION") {
        return Err(format!("written by engine {}", persisted.engine_version));
    }
    if &persisted.policy_digest != policy_digest {
        return Err("computed under another policy".into());
    }
    let path = |p: &str| VaultPath::parse_walked(p).map_err(|_| format!("invalid path {p:?}"));
    let unread_pages = persisted.unread_pages.iter().map(|(p, kind)| Ok((path(p)?, *kind))).collect::<Result<Vec<_>, String>>()?;
    let attachments = persisted.attachments.iter().map(|p| path(p)).collect::<Result<Vec<_>, String>>()?;
    let symlinked_notes = persisted.symlinked_notes.iter().map(|p| path(p)).collect::<Result<Vec<_>, String>>()?;
    let records = persisted.records.into_iter().map(record_of).collect::<Result<Vec<_>, String>>()?;
    Ok(KnownVault {
        records,
        unread_pages,
        attachments,
        symlinked_notes,
        unusable_names: persisted.unusable_names,
        dirs: persisted.dirs,
        ignore_files: persisted.ignore_files,
    })
}
