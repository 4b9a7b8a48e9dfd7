//! The generation tail: committed write intents newer than the active generation, served as
//! one in-memory segment on top of it, and folded into an on-disk generation every
//! `search.tail_writes_max` writes.
//!
//! Why: an intent record (`store::journal`) holds every note a write puts in place and is
//! durable before the write returns, so the search generation that includes the write is
//! *derivable* from (active generation, intents after its `covers_seq`). A write therefore
//! publishes generation `<active>+<seq>` by committing its intent, and pays no tantivy segment
//! serialisation and no extra fsync; the first reader to search it builds the tail's documents
//! as one segment in memory (an overlay on the base's `RetainingDirectory`, through the same
//! `segment_commit` an on-disk publish uses), with the active generation's segments read from
//! disk. The generation is immutable: a later write is a later id. A fold publishes the same
//! documents as an ordinary generation (`covers_seq` = the last intent it includes), and only
//! then may the writer empty the journal.
//!
//! A resident process (the MCP server) keeps what its last tail generation was built from (a
//! `Memo`: the intents' sequence numbers and every touched note's analysed documents): a
//! journal that changed without a new intent (a checkpoint's `Done` records) serves the same
//! generation again, and a tail that grew decodes and analyses only the new intents. The
//! segment is still built whole from the same documents in the same order, so the generation
//! is the one a from-scratch build gives (same segment layout, scores and order); the base's
//! segment files are read through the base's own mappings, the temporal table is derived from
//! the base's, and the journal is read from where the last read ended. What stays per new
//! generation is tantivy's fixed cost of building and opening a segment.
//!
//! Dense vaults keep publishing on every write (their chunks need embedding vectors, which a
//! reader does not compute), so a dense base is never served with a tail.
//!
//! This is the reading half; the fold is `search::build::fold`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use tantivy::directory::Directory;
use tantivy::{Index, ReloadPolicy};

use super::generation::{Counts, Exclusion, Manifest, OpenGeneration, TailOf, exclusion_of, tantivy_err};
use crate::error::{Error, Result};
use crate::inventory::{self, NoteRecord};
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::scan::PageKind;
use crate::search::schema::{self, Fields, NoteDocuments};
use crate::search::segment_commit;
use crate::store::journal::{Intent, SearchSnapshot, StoredRecord};

/// Whether a reader may serve `base` with the journal's tail on top: an FTS-only generation of
/// the current index format (anything else is republished by every write).
pub(crate) fn servable(base: &Manifest) -> bool {
    base.dense.is_none() && base.index_schema_version == schema::INDEX_SCHEMA_VERSION && base.chunker == schema::CHUNKER
}

/// The intents of `records` after `covers_seq`, in sequence order, each decoded whole.
/// Abandoned intents (refused after the commit point; nothing of them is in place) are skipped.
pub(crate) fn intents_after(records: &[StoredRecord], covers_seq: u64) -> Result<Vec<&Intent>> {
    let mut out = Vec::new();
    for record in tail_records(records, covers_seq) {
        out.extend(record.intent()?);
    }
    out.sort_by_key(|i| i.seq);
    Ok(out)
}

/// The sequence numbers of the intents `intents_after` gives, in order, none of them decoded.
fn seqs_after(records: &[StoredRecord], covers_seq: u64) -> Vec<u64> {
    let mut seqs: Vec<u64> = tail_records(records, covers_seq).map(StoredRecord::seq).collect();
    seqs.sort_unstable();
    seqs
}

/// How many intents `intents_after` gives, none of them decoded.
pub(crate) fn count_after(records: &[StoredRecord], covers_seq: u64) -> usize {
    tail_records(records, covers_seq).count()
}

fn tail_records(records: &[StoredRecord], covers_seq: u64) -> impl Iterator<Item = &StoredRecord> {
    let abandoned = crate::store::journal::abandoned_seqs(records);
    records.iter().filter(move |r| r.is_intent() && r.seq() > covers_seq && !abandoned.contains(&r.seq()))
}

/// The id of the generation `base` + intents up to `seq`.
pub(crate) fn generation_id(base: &str, seq: u64) -> String {
    format!("{base}+{seq}")
}

/// What the tail changes in the search index: the final state of every note it touches.
pub(crate) struct Delta {
    pub(crate) upserts: Vec<NoteDocuments>,
    pub(crate) removes: Vec<String>,
    /// Touched notes that are not valid (removed from search, named as exclusions).
    invalid: Vec<Exclusion>,
    touched: BTreeSet<String>,
}

/// A touched note as the tail leaves it, analysed.
#[derive(Clone)]
enum Analysed {
    Documents(NoteDocuments),
    /// Not valid: removed from search, named as an exclusion.
    Invalid(Exclusion),
    Removed,
}

/// The last text each intent of `tail` gives each note it touches (`None`: removed).
fn last_texts<'a>(tail: &[&'a Intent]) -> BTreeMap<&'a str, Option<&'a str>> {
    let mut last: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for intent in tail {
        for path in &intent.search_changed {
            let text = intent.changes.iter().find_map(|c| match c {
                crate::store::journal::FileChange::Write { path: p, text, .. } if p == path => Some(text.as_str()),
                _ => None,
            });
            last.insert(path, text);
        }
        for path in &intent.search_removed {
            last.insert(path, None);
        }
    }
    last
}

/// The note at `path` holding `text` (`None`: removed), built into documents exactly as a sync
/// builds them from the files.
fn analyse(policy: &LoadedPolicy, fields: &Fields, path: &str, text: Option<&str>) -> Analysed {
    let (Some(text), Ok(note_path)) = (text, VaultPath::parse_walked(path)) else { return Analysed::Removed };
    let bytes = text.as_bytes();
    let mut record = NoteRecord::empty(note_path, PageKind::Note);
    record.size_bytes = bytes.len() as u64;
    record.content_hash = *blake3::hash(bytes).as_bytes();
    inventory::analyse_bytes(&mut record, bytes, policy);
    if record.valid {
        Analysed::Documents(schema::note_documents(fields, &record, bytes, policy.policy.search.chunk_min_words))
    } else {
        Analysed::Invalid(exclusion_of(&record))
    }
}

/// The delta of the touched notes `notes` (in path order).
fn delta_of<'a>(notes: impl Iterator<Item = (&'a str, Analysed)>) -> Delta {
    let mut out = Delta { upserts: Vec::new(), removes: Vec::new(), invalid: Vec::new(), touched: BTreeSet::new() };
    for (path, analysed) in notes {
        out.touched.insert(path.to_string());
        match analysed {
            Analysed::Documents(documents) => out.upserts.push(documents),
            Analysed::Invalid(exclusion) => {
                out.invalid.push(exclusion);
                out.removes.push(path.to_string());
            }
            Analysed::Removed => out.removes.push(path.to_string()),
        }
    }
    out
}

/// The last text each intent of `tail` gives each note it touches (`None`: removed), built
/// into documents exactly as a sync builds them from the files.
pub(crate) fn delta(policy: &LoadedPolicy, fields: &Fields, tail: &[&Intent]) -> Delta {
    delta_of(last_texts(tail).into_iter().map(|(path, text)| (path, analyse(policy, fields, path, text))))
}

/// (source snapshot hash, counts, exclusions) of `base` + `tail`: the counts and snapshot the
/// writer recorded in the last intent, the base's exclusions with the touched notes' own.
pub(crate) fn summary(base: &Manifest, tail: &[&Intent], delta: &Delta) -> (String, Counts, Vec<Exclusion>) {
    summary_of(base, tail.iter().rev().find_map(|i| i.search_snapshot.as_ref()), delta)
}

/// `summary` with the snapshot of the tail's last intent that recorded one.
fn summary_of(base: &Manifest, snapshot: Option<&SearchSnapshot>, delta: &Delta) -> (String, Counts, Vec<Exclusion>) {
    let mut exclusions: Vec<Exclusion> = base.exclusions.iter().filter(|e| !delta.touched.contains(&e.path)).cloned().collect();
    exclusions.extend(delta.invalid.iter().cloned());
    exclusions.sort_by(|a, b| a.path.cmp(&b.path));
    match snapshot {
        Some(s) => (s.source_snapshot_hash.clone(), Counts { scanned: s.scanned, indexed: s.indexed, excluded: s.excluded }, exclusions),
        None => (base.source_snapshot_hash.clone(), base.counts.clone(), exclusions),
    }
}

/// What a tail generation was built from: kept by the process that built it, so that the next
/// tail generation of the same base reuses it (see the module doc).
#[derive(Clone)]
pub(crate) struct Memo {
    /// The on-disk generation under the tail, and the policy the notes were analysed under.
    base: String,
    policy: [u8; 32],
    /// The tail's intents, in order.
    seqs: Vec<u64>,
    /// Every note the tail touches, as its last intent leaves it, by path.
    notes: Arc<BTreeMap<String, Analysed>>,
    /// The snapshot of the last intent that recorded one.
    snapshot: Option<SearchSnapshot>,
    /// Intents decoded and analysed to build this generation (the new ones only, when it was
    /// built on a previous memo).
    pub(crate) decoded: usize,
    pub(crate) generation: Arc<OpenGeneration>,
}

/// The tail of `base` in `records` served as generation `<base>+<last seq>` (`None`: no
/// intent after it), built on `previous` (the memo of the last tail generation this process
/// built) when that one has the same base and policy and its intents begin these: the same
/// intents serve its generation again; more decode and analyse only the new ones. Either way
/// the generation is the one a build from scratch (`previous` = `None`) gives.
pub(crate) fn serve(
    root: &Path,
    policy: &LoadedPolicy,
    base: Arc<OpenGeneration>,
    records: &[StoredRecord],
    previous: Option<&Memo>,
) -> Result<Option<Memo>> {
    let seqs = seqs_after(records, base.manifest.covers_seq);
    if seqs.is_empty() {
        return Ok(None);
    }
    let previous = previous.filter(|m| m.base == base.id() && m.policy == policy.digest && seqs.starts_with(&m.seqs));
    if let Some(memo) = previous
        && memo.seqs == seqs
    {
        return Ok(Some(Memo { decoded: 0, ..memo.clone() }));
    }
    let (mut notes, mut snapshot, known) = match previous {
        Some(memo) => ((*memo.notes).clone(), memo.snapshot.clone(), memo.seqs.len()),
        None => (BTreeMap::new(), None, 0),
    };
    let new: BTreeSet<u64> = seqs[known..].iter().copied().collect();
    let mut intents = Vec::with_capacity(new.len());
    for record in records.iter().filter(|r| r.is_intent() && new.contains(&r.seq())) {
        intents.extend(record.intent()?);
    }
    intents.sort_by_key(|i| i.seq);
    for (path, text) in last_texts(&intents) {
        notes.insert(path.to_string(), analyse(policy, &base.fields, path, text));
    }
    if let Some(last) = intents.iter().rev().find_map(|i| i.search_snapshot.as_ref()) {
        snapshot = Some(last.clone());
    }
    let created_at = intents.last().and_then(|i| i.receipt.get("at")).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let last = seqs.last().copied().unwrap_or(base.manifest.covers_seq);
    let delta = delta_of(notes.iter().map(|(path, analysed)| (path.as_str(), analysed.clone())));
    let generation = open(root, base.clone(), delta, snapshot.as_ref(), last, created_at)?;
    Ok(Some(Memo {
        base: base.id().to_string(),
        policy: policy.digest,
        seqs,
        notes: Arc::new(notes),
        snapshot,
        decoded: intents.len(),
        generation,
    }))
}

/// Builds generation `<base>+<last>`: the tail's documents (`delta`) as one in-memory segment
/// (and in-memory delete files for the base segments that held their old documents) over `base`.
fn open(
    root: &Path,
    base: Arc<OpenGeneration>,
    delta: Delta,
    snapshot: Option<&SearchSnapshot>,
    last: u64,
    created_at: String,
) -> Result<Arc<OpenGeneration>> {
    let id = generation_id(base.id(), last);
    let corrupt = |reason: String| Error::GenerationCorrupt { generation_id: id.clone(), reason };
    let (source_snapshot_hash, counts, exclusions) = summary_of(&base.manifest, snapshot, &delta);
    let touched = Arc::new(delta.touched.clone());
    let directory =
        base.directory.overlay(base.manifest.tantivy_meta.as_bytes()).map_err(|e| corrupt(format!("index directory unusable: {e}")))?;
    let index = Index::open(directory.clone()).map_err(|e| corrupt(format!("tantivy cannot open the base commit: {e}")))?;
    schema::register(&index);
    let upserts = delta.upserts.into_iter().map(|n| (n.path, n.docs)).collect();
    segment_commit::commit(&index, &base.fields, &base, upserts, &delta.removes, &id)?;
    let meta = index.directory().atomic_read(Path::new("meta.json")).map_err(|e| corrupt(format!("tail commit unreadable: {e}")))?;
    let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into().map_err(tantivy_err("reading the tail"))?;
    let tantivy_meta = String::from_utf8_lossy(&meta).into_owned();
    let manifest = Manifest {
        generation_id: id.clone(),
        parent: Some(base.id().to_string()),
        created_at,
        source_snapshot_hash,
        counts,
        exclusions,
        dense: None,
        tantivy_opstamp: index.load_metas().map_err(tantivy_err("reading the tail commit"))?.opstamp,
        segments: Vec::new(),
        tantivy_meta_blake3: schema::hex(blake3::hash(tantivy_meta.as_bytes()).as_bytes()),
        tantivy_meta,
        covers_seq: last,
        ..base.manifest.clone()
    };
    let modified = std::fs::metadata(crate::store::layout::join(root, crate::store::layout::JOURNAL)).and_then(|m| m.modified()).ok();
    let fields = base.fields;
    let tail_of = TailOf { base: base.clone(), touched };
    Ok(Arc::new(OpenGeneration::new(base.root.clone(), manifest, index, reader, fields, modified, directory, Some(tail_of))))
}
