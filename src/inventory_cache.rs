//! The persisted inventory: the analysed records of the vault's pages with the stat identity
//! each was read at, the walk itself (attachments, symbolic links, names no vault path may
//! hold) and every folder's stat identity as of its last whole listing, so a process that
//! starts re-reads and re-parses only the files whose identity moved, and a write can prove
//! the file set unchanged by a stat of each folder (`Inventory::load_checking_folders`)
//! instead of a walk and a stat per file.
//!
//! There is one persisted copy, `.paravault/inventory.redb` (`keyed`): a whole load reads it
//! all (`keyed::read_known`), a one-shot write looks up by key only what it consults
//! (`keyed::load_for_write`) and folds what it learned back in place (`keyed::fold`). Each
//! value is sealed with its key against damage at rest, and the copy names the engine version
//! and the policy digest it was computed under: a copy that is torn, corrupt, of another
//! format or engine version, or computed under another policy is ignored (and rebuilt by the
//! caller), never trusted. Only records whose stamp is settled (not racy, git's rule) are
//! kept: a record the engine built from bytes it was writing, or one read within a timestamp
//! tick of its last change, is read again next time (its path is kept, so a process that
//! trusts its folder's listing still reads it).

use serde::{Deserialize, Serialize};

use crate::inventory::{FileProblem, FileStamp, NoteRecord};
use crate::note::body::Link;
use crate::note::metadata::NoteMeta;
use crate::note::path::VaultPath;
use crate::scan::PageKind;

pub mod keyed;

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
