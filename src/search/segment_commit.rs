//! Small commits without an `IndexWriter`: one new segment for the changed notes' documents,
//! delete files for the segments that held their old documents, and a new `meta.json`.
//!
//! Why: a tantivy `IndexWriter` commit of a one-note change costs ~10–15 ms of CPU on these
//! machines, almost none of it for the note: the writer spawns its threads, sizes each segment
//! writer's term table from the memory budget (at least 15 MB, so a 512 Ki-entry table is
//! filled and then scanned at serialisation), and re-opens every segment to apply deletes. A
//! write transaction changes a handful of documents, so this module builds the segment with a
//! `SegmentWriter` sized for a few notes and computes the deletes with the parent
//! generation's already-open segment readers. The files are tantivy's own formats written
//! through tantivy's own writers (`SegmentWriter::finalize`, `write_alive_bitset`,
//! `IndexMeta`'s serde form), so the index stays an ordinary tantivy index: `IndexWriter`
//! merges and full rebuilds open it as usual.
//!
//! Shared by both halves of search: it writes only into the tantivy `Directory` it is given —
//! the on-disk index for a publish (`search::build::publish`), an in-memory overlay for the tail
//! generation a reader builds (`search::read::tail`).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use tantivy::directory::{Directory, INDEX_WRITER_LOCK, TerminatingWrite};
use tantivy::fastfield::write_alive_bitset;
use tantivy::index::{SegmentComponent, SegmentId};
use tantivy::indexer::{AddOperation, SegmentWriter};
use tantivy::schema::IndexRecordOption;
use tantivy::{BitSet, DocSet, Index, SegmentReader, TERMINATED, TantivyDocument, Term};

use super::read::generation::{OpenGeneration, tantivy_err};
use super::schema::Fields;
use crate::error::{Error, Result};

/// Largest change (in documents) committed this way; bigger ones go through an `IndexWriter`,
/// whose multi-threaded indexing pays off.
pub(crate) const MAX_DOCUMENTS: usize = 256;

/// Segment-writer memory budget: sizes the term table at 2^13 entries (it grows if a change
/// has more distinct terms), instead of the 2^19 a minimum `IndexWriter` budget gives.
const SEGMENT_WRITER_BUDGET: usize = 400_000;

fn io_err(action: &'static str) -> impl Fn(std::io::Error) -> Error {
    move |e| Error::SearchIndex { action, reason: e.to_string() }
}

/// The documents of `reader` whose path is one of `paths` and that are still alive.
fn live_documents_of(reader: &SegmentReader, fields: &Fields, paths: &BTreeSet<&str>) -> Result<Vec<u32>> {
    let inverted = reader.inverted_index(fields.path).map_err(tantivy_err("reading the path index"))?;
    let mut found = Vec::new();
    for path in paths {
        let term = Term::from_field_text(fields.path, path);
        let Some(mut postings) = inverted.read_postings(&term, IndexRecordOption::Basic).map_err(io_err("reading postings"))? else {
            continue;
        };
        let mut doc = postings.doc();
        while doc != TERMINATED {
            if !reader.is_deleted(doc) {
                found.push(doc);
            }
            doc = postings.advance();
        }
    }
    Ok(found)
}

/// Commits `upserts` (new documents per path, replacing the path's old ones) and `removes` on
/// top of `parent`'s commit, which must be the live `meta.json` of `index`. The commit's
/// payload is `payload` (the generation id).
pub(crate) fn commit(
    index: &Index,
    fields: &Fields,
    parent: &OpenGeneration,
    upserts: Vec<(String, Vec<TantivyDocument>)>,
    removes: &[String],
    payload: &str,
) -> Result<()> {
    let clock = std::time::Instant::now();
    let lap = |what: &str| tracing::debug!(phase = what, elapsed_ms = clock.elapsed().as_secs_f64() * 1e3, "segment commit");
    let directory = index.directory();
    let _lock = directory
        .acquire_lock(&INDEX_WRITER_LOCK)
        .map_err(|e| Error::SearchIndex { action: "locking the index", reason: e.to_string() })?;
    lap("locked");
    let mut meta = index.load_metas().map_err(tantivy_err("reading the commit"))?;
    let paths: BTreeSet<&str> = removes.iter().map(String::as_str).chain(upserts.iter().map(|(p, _)| p.as_str())).collect();

    // Deletes: the parent's open segment readers answer which documents each path holds.
    let searcher = parent.searcher()?;
    let readers: HashMap<SegmentId, &SegmentReader> = searcher.segment_readers().iter().map(|r| (r.segment_id(), r)).collect();
    let mut deletes: Vec<(usize, BitSet, u32)> = Vec::new();
    for (position, segment) in meta.segments.iter().enumerate() {
        let reader = readers.get(&segment.id()).ok_or_else(|| Error::SearchIndex {
            action: "reading the commit",
            reason: format!("segment {} of the live commit is not in the parent generation", segment.id().uuid_string()),
        })?;
        let doomed = live_documents_of(reader, fields, &paths)?;
        if doomed.is_empty() {
            continue;
        }
        let max_doc = reader.max_doc();
        let mut alive = BitSet::with_max_value_and_full(max_doc);
        if let Some(previous) = reader.alive_bitset() {
            alive.intersect_update(previous.bitset());
        }
        for doc in doomed {
            alive.remove(doc);
        }
        let deleted = max_doc - alive.len() as u32;
        deletes.push((position, alive, deleted));
    }

    lap("deletes found");
    // The new opstamp names the delete files: the first one whose files do not exist yet (a
    // crashed publish from the same parent may have left some; GC removes them later).
    let mut opstamp = meta.opstamp + 1;
    while deletes.iter().any(|(position, _, _)| {
        let name = format!("{}.{opstamp}.del", meta.segments[*position].id().uuid_string());
        directory.exists(Path::new(&name)).unwrap_or(true)
    }) {
        opstamp += 1;
    }
    let mut emptied = BTreeSet::new();
    for (position, alive, deleted) in &deletes {
        let segment_meta = meta.segments[*position].clone();
        if *deleted == segment_meta.max_doc() {
            emptied.insert(*position);
            continue;
        }
        let segment_meta = segment_meta.with_delete_meta(*deleted, opstamp);
        let mut file = index
            .segment(segment_meta.clone())
            .open_write(SegmentComponent::Delete)
            .map_err(|e| Error::SearchIndex { action: "writing a delete file", reason: e.to_string() })?;
        write_alive_bitset(alive, &mut file).map_err(io_err("writing a delete file"))?;
        file.terminate().map_err(io_err("writing a delete file"))?;
        meta.segments[*position] = segment_meta;
    }
    let mut segments: Vec<_> =
        meta.segments.drain(..).enumerate().filter(|(position, _)| !emptied.contains(position)).map(|(_, s)| s).collect();

    lap("delete files");
    // The new segment.
    let documents: Vec<TantivyDocument> = upserts.into_iter().flat_map(|(_, docs)| docs).collect();
    if !documents.is_empty() {
        let segment = index.new_segment();
        let mut writer = SegmentWriter::for_segment(SEGMENT_WRITER_BUDGET, segment.clone()).map_err(tantivy_err("opening a segment"))?;
        for document in documents {
            writer.add_document(AddOperation { opstamp, document }).map_err(tantivy_err("adding a document"))?;
        }
        lap("documents added");
        let max_doc = writer.max_doc();
        writer.finalize().map_err(tantivy_err("writing the segment"))?;
        segments.push(segment.with_max_doc(max_doc).meta().clone());
    }

    lap("segment written");
    // tantivy's own meta.json: segments by size, newest opstamp, the generation id as payload.
    segments.sort_by_key(|s| std::cmp::Reverse(s.max_doc()));
    meta.segments = segments;
    meta.opstamp = opstamp;
    meta.payload = Some(payload.to_string());
    let mut bytes =
        serde_json::to_vec_pretty(&meta).map_err(|e| Error::SearchIndex { action: "writing the commit", reason: e.to_string() })?;
    bytes.push(b'\n');
    directory.sync_directory().map_err(io_err("syncing the index directory"))?;
    directory.atomic_write(Path::new("meta.json"), &bytes).map_err(io_err("writing the commit"))?;
    lap("meta written");
    Ok(())
}
