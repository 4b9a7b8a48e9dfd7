//! Exact per-block score bounds for the BM25 scorer (Lucene's "impacts").
//!
//! A clause's posting list in one segment is cut into blocks of `BLOCK` postings (tantivy's own
//! 128-document blocks, so a skipped block is never decoded). For each block we keep the Pareto
//! frontier of its (tf, dl) pairs: the pairs no other pair of the block beats on both counts
//! (a larger or equal tf with a shorter or equal length). The term's contribution
//! w · tf / (tf + k1 (1 − b) + k1 b · dl / avgdl) grows with tf and shrinks with dl for every
//! k1 ≥ 0, b ∈ [0, 1], avgdl > 0 and w ≥ 0, so its maximum over the block is reached on the
//! frontier: evaluating the frontier gives the block's exact maximum.
//!
//! The frontier holds no parameter: not k1, b, the boost, idf, nor avgdl (a whole-index
//! statistic that moves with every publish). It depends only on the segment's postings and
//! lengths, which never change (segments are immutable; a deletion only removes documents, so a
//! bound over all of a block's documents still bounds the live ones). It is therefore computed
//! once per (segment, term, length source), on first use, from the published segment alone, and
//! kept in memory for the process; no file is written.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use tantivy::{DocId, TERMINATED};

/// Postings per block: tantivy's compression block.
pub(super) const BLOCK: usize = 128;

/// One posting list's blocks: block i covers the documents after `last_doc[i - 1]` up to
/// `last_doc[i]`, and its frontier is `frontier[start[i]..start[i + 1]]`, (tf, dl) pairs by
/// growing dl and growing tf.
#[derive(Debug, Default)]
pub(super) struct Blocks {
    pub(super) last_doc: Vec<DocId>,
    start: Vec<u32>,
    frontier: Vec<(u32, u32)>,
}

impl Blocks {
    /// Walks `postings` from its start, reading each document's length with `dl`.
    pub(super) fn build(mut postings: impl super::TermPostings, block: usize, dl: impl Fn(DocId) -> u64) -> Blocks {
        let mut out = Blocks { last_doc: Vec::new(), start: vec![0], frontier: Vec::new() };
        let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(block);
        let mut doc = postings.at();
        while doc != TERMINATED {
            // A length past u32 is clamped down: a shorter length only raises the bound.
            pairs.push((postings.tf(), dl(doc).min(u64::from(u32::MAX)) as u32));
            let next = postings.next_doc();
            if pairs.len() == block || next == TERMINATED {
                out.close_block(doc, &mut pairs);
            }
            doc = next;
        }
        out
    }

    fn close_block(&mut self, last: DocId, pairs: &mut Vec<(u32, u32)>) {
        // By length, then by tf falling: a pair is kept when its tf beats every shorter pair's.
        pairs.sort_unstable_by(|x, y| x.1.cmp(&y.1).then(y.0.cmp(&x.0)));
        let mut best_tf = 0;
        for &(tf, dl) in pairs.iter() {
            if tf > best_tf {
                self.frontier.push((tf, dl));
                best_tf = tf;
            }
        }
        pairs.clear();
        self.last_doc.push(last);
        self.start.push(self.frontier.len() as u32);
    }

    /// Block `i`'s maximum of w · tf / (tf + (a + c · dl)), computed as the scorer computes a
    /// contribution.
    pub(super) fn bound(&self, i: usize, weight: f64, a: f64, c: f64) -> f64 {
        let mut best = 0f64;
        for &(tf, dl) in &self.frontier[self.start[i] as usize..self.start[i + 1] as usize] {
            let tf = f64::from(tf);
            best = best.max(weight * tf / (tf + (a + c * f64::from(dl))));
        }
        best
    }

    pub(super) fn len(&self) -> usize {
        self.last_doc.len()
    }

    fn bytes(&self) -> usize {
        self.last_doc.len() * 8 + self.frontier.len() * 8 + 64
    }
}

/// What the blocks of one posting list are keyed by: the segment, the term (field and text), where
/// lengths come from (a fast field's name, or "" for field norms) and the block size.
type Key = (tantivy::index::SegmentId, tantivy::Term, &'static str, usize);

/// The process's blocks and dense length columns, dropped wholesale past `CACHE_BYTES` (each
/// is rebuilt on next use).
struct Cache {
    map: HashMap<Key, Arc<Blocks>>,
    lengths: HashMap<(tantivy::index::SegmentId, &'static str), Arc<Vec<u32>>>,
    bytes: usize,
}

const CACHE_BYTES: usize = 64 << 20;

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(Cache { map: HashMap::new(), lengths: HashMap::new(), bytes: 0 }));

/// The cached blocks for `key`, built with `build` on first use.
pub(super) fn cached(key: Key, build: impl FnOnce() -> Blocks) -> Arc<Blocks> {
    if let Some(found) = lock().map.get(&key) {
        return Arc::clone(found);
    }
    // Built outside the lock: two searches may build the same blocks, and both are equal.
    let built = Arc::new(build());
    let mut cache = lock();
    cache.make_room(built.bytes());
    if let Some(old) = cache.map.insert(key, Arc::clone(&built)) {
        cache.bytes -= old.bytes();
    }
    built
}

/// A segment's exact lengths (the u64 fast field `name`) as one dense array, built on first use:
/// an array index instead of the column's lookup (an optional column: the per-note documents
/// have no length) for every scored posting. `None` when a length does not fit 32 bits.
pub(super) fn dense_lengths(
    segment: tantivy::index::SegmentId,
    name: &'static str,
    column: &tantivy::columnar::Column<u64>,
    max_doc: DocId,
) -> Option<Arc<Vec<u32>>> {
    if let Some(found) = lock().lengths.get(&(segment, name)) {
        return Some(Arc::clone(found));
    }
    let mut dense = Vec::with_capacity(max_doc as usize);
    for doc in 0..max_doc {
        dense.push(u32::try_from(column.first(doc).unwrap_or(0)).ok()?);
    }
    let dense = Arc::new(dense);
    let mut cache = lock();
    cache.make_room(dense.len() * 4 + 64);
    if let Some(old) = cache.lengths.insert((segment, name), Arc::clone(&dense)) {
        cache.bytes -= old.len() * 4 + 64;
    }
    Some(dense)
}

impl Cache {
    /// Counts `bytes` more, emptying the cache first when they would not fit.
    fn make_room(&mut self, bytes: usize) {
        if self.bytes + bytes > CACHE_BYTES {
            self.map.clear();
            self.lengths.clear();
            self.bytes = 0;
        }
        self.bytes += bytes;
    }
}

fn lock() -> std::sync::MutexGuard<'static, Cache> {
    CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
