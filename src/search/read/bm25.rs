//! Lucene's BM25, exactly, over tantivy's postings: a `Query` whose `Weight` scores
//! Σ_t qtf_t · boost_f · idf_t · tf / (tf + k1 (1 − b + b · dl / avgdl)) with the policy's k1 and b,
//! idf_t = ln(1 + (N − df + 0.5) / (df + 0.5)), N the chunk documents, and dl either the exact
//! token count of the field (the `body_len` fast field, written at indexing) or tantivy's
//! quantised field norm (Lucene's one-byte length, `search.bm25_lengths: quantised`).
//!
//! Why not tantivy's `TermQuery`: its scorer fixes k1 = 1.2 and b = 0.75 (only avgdl can be
//! bent, which reaches the BM25s with k1 (1 − b) = 0.3 and no other), multiplies by (k1 + 1),
//! and reads quantised lengths only. This weight is what bm25s (the reference) computes with
//! `method="lucene"`: the same idf, the same saturation, no (k1 + 1), and a query word that
//! occurs twice counts twice (qtf).
//!
//! Top-k search prunes with block-max MaxScore (Turtle & Flood 1995; Lucene 9.9+'s disjunction
//! scorer with its impacts): every term's contribution is below its weight w_t = qtf · boost ·
//! idf (tf / (tf + K) < 1), and below the exact maximum of each 128-posting block (`blocks`:
//! the block's (tf, dl) Pareto frontier, built from the segment on first use and cached). The
//! documents are taken in windows; a window whose terms' block maxima sum to no more than the
//! k-th best score θ is skipped undecoded, and in the others the terms whose maxima together
//! cannot beat θ are only looked up (seek) for the candidates the others bring. tantivy's
//! block-max WAND needs its own `Bm25Weight` (fixed k1, b) for its per-block bounds and is not
//! reachable from outside the crate; docs/retrieval.md measures the difference.

use std::cmp::{Ordering as CmpOrdering, Reverse};
use std::collections::BinaryHeap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tantivy::columnar::Column;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::{Postings, SegmentPostings};
use tantivy::query::{EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, DocSet, Score, SegmentReader, TERMINATED, Term};

use self::blocks::{BLOCK, Blocks};

mod blocks;

/// Where a document's length dl comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthNorm {
    /// The exact token count, from a u64 fast field written at indexing.
    Exact,
    /// tantivy's (Lucene's) field norm: the length quantised to one byte (exact up to 40 tokens,
    /// then 256 buckets growing by about 1/8).
    Quantised,
}

/// BM25's two parameters and where lengths come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Params {
    pub k1: f32,
    pub b: f32,
    pub lengths: LengthNorm,
}

/// One scored field: the field, its boost, and the name of the fast field holding its exact
/// token counts (`None`: field norms are used whatever `lengths` says).
#[derive(Debug, Clone)]
pub struct ScoredField {
    pub field: Field,
    pub boost: f32,
    pub exact_lengths: Option<&'static str>,
}

/// A BM25 disjunction of terms over one or more fields: each (term, field) is one clause,
/// weighted by the term's count in the query and the field's boost.
#[derive(Clone)]
pub struct Bm25Query {
    fields: Vec<ScoredField>,
    /// (term text, how many times the query holds it).
    terms: Vec<(String, u32)>,
    /// The term whose document frequency is N (the chunk documents).
    population: Term,
    params: Bm25Params,
    /// Query terms, one per (field, term), for `query_terms`.
    all_terms: Vec<Term>,
    /// Postings per block of the pruning bounds (tantivy's 128; tests use small blocks).
    block: usize,
}

impl fmt::Debug for Bm25Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bm25Query").field("terms", &self.terms).field("params", &self.params).finish()
    }
}

impl Bm25Query {
    /// `population`: a term every scored document holds once (N is its document frequency).
    pub fn new(fields: Vec<ScoredField>, terms: Vec<(String, u32)>, population: Term, params: Bm25Params) -> Bm25Query {
        let all_terms = fields.iter().flat_map(|f| terms.iter().map(move |(t, _)| Term::from_field_text(f.field, t))).collect();
        Bm25Query { fields, terms, population, params, all_terms, block: BLOCK }
    }

    /// The same query pruning with blocks of `block` postings (tests: many blocks in a small index).
    #[cfg(test)]
    pub(crate) fn with_block(mut self, block: usize) -> Bm25Query {
        self.block = block.max(1);
        self
    }
}

/// Lucene's idf: ln(1 + (N − df + 0.5) / (df + 0.5)), df capped at N.
pub fn idf(doc_freq: u64, docs: u64) -> f64 {
    let df = doc_freq.min(docs) as f64;
    (1.0 + (docs as f64 - df + 0.5) / (df + 0.5)).ln()
}

/// One (field, term) clause with its weight w = qtf · boost · idf.
#[derive(Clone)]
struct Clause {
    term: Term,
    field_ix: usize,
    weight: f64,
}

/// Per field: k1 (1 − b) and k1 b / avgdl, so that K = a + c · dl.
#[derive(Clone, Copy)]
struct FieldNorm {
    a: f64,
    c: f64,
    exact: Option<&'static str>,
}

struct Bm25Weight {
    clauses: Vec<Clause>,
    fields: Vec<FieldNorm>,
    /// Per field, K for each of the 256 field-norm ids (the quantised lengths).
    quantised: Vec<[f64; 256]>,
    block: usize,
    /// The highest k-th best score a finished segment reached (f32 bits; 0: none yet).
    segment_best: AtomicU32,
}

impl Bm25Query {
    /// The weight under the collection statistics `counts` gives: N (the population term's
    /// document frequency), each field's total tokens, each term's document frequency.
    fn weight_with(&self, counts: &dyn Counts) -> tantivy::Result<Bm25Weight> {
        let docs = counts.doc_freq(&self.population)?.max(1);
        let k1 = f64::from(self.params.k1);
        let b = f64::from(self.params.b);
        let mut fields = Vec::with_capacity(self.fields.len());
        let mut quantised = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            let tokens = counts.total_num_tokens(f.field)?;
            let avgdl = (tokens as f64 / docs as f64).max(f64::MIN_POSITIVE);
            let norm = FieldNorm {
                a: k1 * (1.0 - b),
                c: k1 * b / avgdl,
                exact: if self.params.lengths == LengthNorm::Exact { f.exact_lengths } else { None },
            };
            let mut table = [0f64; 256];
            for (id, k) in table.iter_mut().enumerate() {
                *k = norm.a + norm.c * f64::from(FieldNormReader::id_to_fieldnorm(id as u8));
            }
            fields.push(norm);
            quantised.push(table);
        }
        let mut clauses = Vec::new();
        for (field_ix, f) in self.fields.iter().enumerate() {
            for (text, count) in &self.terms {
                let term = Term::from_field_text(f.field, text);
                let df = counts.doc_freq(&term)?;
                if df == 0 {
                    continue;
                }
                let weight = f64::from(*count) * f64::from(f.boost) * idf(df, docs);
                clauses.push(Clause { term, field_ix, weight });
            }
        }
        Ok(Bm25Weight { clauses, fields, quantised, block: self.block, segment_best: AtomicU32::new(0) })
    }

    /// The top `k` documents of `parts` taken as one collection, in the order and with the
    /// score bits tantivy's `TopDocs::with_limit(k).order_by_score()` gives over a searcher
    /// whose segments are `parts` in that order (each `Part::Base`'s dead documents deleted):
    /// (score, part, document), best first, ties by (part, document).
    ///
    /// Same weight (the statistics summed over the parts), same per-segment pruning with the
    /// same thresholds in the same segment order (so every reported score is summed in the
    /// same order), same per-segment top-k heap and the same merge.
    pub(crate) fn top_k(&self, parts: &[Part<'_>], k: usize) -> tantivy::Result<Vec<(Score, u32, DocId)>> {
        let weight = self.weight_with(&PartCounts(parts))?;
        let mut all: Vec<(Score, u32, DocId)> = Vec::new();
        for (ord, part) in parts.iter().enumerate() {
            let mut top = TopHeap::new(k);
            match part {
                Part::Base { reader, dead } => {
                    let mut callback = |doc: DocId, score: Score| {
                        if !dead(doc) {
                            top.push(score, doc);
                        }
                        top.threshold.unwrap_or(Score::MIN)
                    };
                    let (scoring, mut cursors) = weight.segment(reader)?;
                    weight.block_bounds(reader, &scoring, &mut cursors)?;
                    weight.prune(&scoring, &mut cursors, Score::MIN, &mut callback);
                }
                Part::Memory(segment) => {
                    let (scoring, mut cursors) = weight.memory_segment(segment);
                    weight.memory_block_bounds(&scoring, &mut cursors);
                    weight.prune(&scoring, &mut cursors, Score::MIN, &mut |doc, score| {
                        top.push(score, doc);
                        top.threshold.unwrap_or(Score::MIN)
                    });
                }
            }
            all.extend(top.heap.into_iter().map(|Reverse(e)| (e.score, ord as u32, e.doc)));
        }
        all.sort_by(|x, y| y.0.partial_cmp(&x.0).unwrap_or(CmpOrdering::Equal).then((x.1, x.2).cmp(&(y.1, y.2))));
        all.truncate(k);
        Ok(all)
    }
}

/// The collection statistics a weight is computed from.
trait Counts {
    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64>;
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64>;
}

/// A searcher's: every segment, deleted documents included (as tantivy's `Searcher::doc_freq`).
struct SearcherCounts<'a>(&'a tantivy::Searcher);

impl Counts for SearcherCounts<'_> {
    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.0.doc_freq(term)
    }

    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let mut tokens = 0u64;
        for reader in self.0.segment_readers() {
            tokens += reader.inverted_index(field)?.total_num_tokens();
        }
        Ok(tokens)
    }
}

/// The parts', counted as a searcher over them counts (dead documents included).
struct PartCounts<'a, 'b>(&'a [Part<'b>]);

impl Counts for PartCounts<'_, '_> {
    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let mut total = 0u64;
        for part in self.0 {
            total += match part {
                Part::Base { reader, .. } => u64::from(reader.inverted_index(term.field())?.doc_freq(term)?),
                Part::Memory(segment) => segment.postings.get(term).map_or(0, |p| p.len() as u64),
            };
        }
        Ok(total)
    }

    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let mut total = 0u64;
        for part in self.0 {
            total += match part {
                Part::Base { reader, .. } => reader.inverted_index(field)?.total_num_tokens(),
                Part::Memory(segment) => segment.tokens.get(&field).copied().unwrap_or(0),
            };
        }
        Ok(total)
    }
}

/// One segment of a collection `Bm25Query::top_k` searches.
pub(crate) enum Part<'a> {
    /// A tantivy segment, and which of its live documents count as deleted too.
    Base { reader: &'a SegmentReader, dead: &'a dyn Fn(DocId) -> bool },
    /// Documents held in memory, indexed as tantivy would index them into a segment.
    Memory(&'a MemorySegment),
}

/// What BM25 reads of a segment, for documents held in memory: what a tantivy segment built
/// from them (in the same order) would hold. Built by the caller, which knows the analysis.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct MemorySegment {
    /// Documents in the segment.
    pub(crate) max_doc: u32,
    /// Per (field, term): (document, term frequency) by document.
    pub(crate) postings: std::collections::HashMap<Term, Vec<(DocId, u32)>>,
    /// Per field: the tokens of every document (tantivy's `total_num_tokens`).
    pub(crate) tokens: std::collections::HashMap<Field, u64>,
    /// Per indexed text field: every document's field-norm id (0 where it has no value).
    pub(crate) norms: std::collections::HashMap<Field, Arc<Vec<u8>>>,
    /// Per u64 fast field: every document's first value (`None`: no document has one).
    pub(crate) fast: std::collections::HashMap<&'static str, Arc<Vec<Option<u64>>>>,
}

/// Min-heap entry of the per-segment top k: a higher score is greater, a lower document wins
/// ties (tantivy's `ScoreHeapEntry`).
struct HeapEntry {
    score: Score,
    doc: DocId,
}

impl PartialEq for HeapEntry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for HeapEntry {}

impl PartialOrd for HeapEntry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for HeapEntry {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        self.score.partial_cmp(&other.score).unwrap_or(CmpOrdering::Equal).then_with(|| other.doc.cmp(&self.doc))
    }
}

/// tantivy's `TopNHeap` (the top-k by score of `TopDocs::order_by_score`, per segment): the
/// threshold is always the k-th best score, and an equal score is refused (the lower document
/// wins).
struct TopHeap {
    heap: BinaryHeap<Reverse<HeapEntry>>,
    k: usize,
    threshold: Option<Score>,
}

impl TopHeap {
    fn new(k: usize) -> TopHeap {
        TopHeap { heap: BinaryHeap::with_capacity(k), k, threshold: None }
    }

    fn push(&mut self, score: Score, doc: DocId) {
        if self.heap.len() < self.k {
            self.heap.push(Reverse(HeapEntry { score, doc }));
            if self.heap.len() == self.k {
                self.threshold = self.heap.peek().map(|Reverse(e)| e.score);
            }
        } else if let Some(threshold) = self.threshold
            && score > threshold
        {
            if let Some(mut min) = self.heap.peek_mut() {
                *min = Reverse(HeapEntry { score, doc });
            }
            self.threshold = self.heap.peek().map(|Reverse(e)| e.score);
        }
    }
}

impl Query for Bm25Query {
    fn weight(&self, enable_scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        let Some(searcher) = enable_scoring.searcher() else {
            return Err(tantivy::TantivyError::InvalidArgument("BM25 needs a searcher for its statistics".into()));
        };
        Ok(Box::new(self.weight_with(&SearcherCounts(searcher))?))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a Term, bool)) {
        for term in &self.all_terms {
            visitor(term, false);
        }
    }
}

/// A field's lengths in one segment.
enum Lengths {
    Exact(Column<u64>),
    /// The same exact lengths, one array per segment (`blocks::dense_lengths`).
    Dense(Arc<Vec<u32>>),
    Quantised(FieldNormReader),
    /// Exact lengths of documents held in memory (`MemorySegment::fast`).
    Memory(Arc<Vec<Option<u64>>>),
    /// Field-norm ids of documents held in memory (`MemorySegment::norms`).
    Ids(Arc<Vec<u8>>),
}

/// A clause's postings in one segment, with its per-block bounds when pruning.
struct Cursor<P = SegmentPostings> {
    postings: P,
    weight: f64,
    field_ix: usize,
    /// Its index in `Bm25Weight::clauses`.
    clause: usize,
    /// `None`: the list is one block (at most `block` postings, or nothing cached) whose bound
    /// is the weight.
    blocks: Option<Arc<Blocks>>,
    /// Each block's bound (times `BOUND_MARGIN`), NaN until first needed.
    bounds: Vec<f64>,
    /// The first block that can still hold a document to come.
    at: usize,
}

impl<P> Cursor<P> {
    /// A cursor at the start of clause `clause_ix`'s postings, one block whose bound is the
    /// clause's weight until its blocks are known.
    fn new(postings: P, clause_ix: usize, clause: &Clause) -> Cursor<P> {
        Cursor {
            postings,
            weight: clause.weight,
            field_ix: clause.field_ix,
            clause: clause_ix,
            blocks: None,
            bounds: vec![clause.weight * BOUND_MARGIN],
            at: 0,
        }
    }

    fn last_doc(&self, block: usize) -> DocId {
        self.blocks.as_ref().map_or(TERMINATED - 1, |b| b.last_doc[block])
    }

    /// Moves `at` to the first block whose last document is at or after `doc` (metadata only:
    /// nothing is decoded); false when no block is left.
    fn shallow(&mut self, doc: DocId) -> bool {
        while self.at < self.bounds.len() && self.last_doc(self.at) < doc {
            self.at += 1;
        }
        self.at < self.bounds.len()
    }

    /// The largest bound of the blocks from `at` that hold documents up to `end`.
    fn bound_upto(&mut self, end: DocId, norm: &FieldNorm) -> f64 {
        let mut best = 0f64;
        for i in self.at..self.bounds.len() {
            let mut bound = self.bounds[i];
            if bound.is_nan() {
                bound = self.blocks.as_ref().map_or(self.weight, |b| b.bound(i, self.weight, norm.a, norm.c)) * BOUND_MARGIN;
                self.bounds[i] = bound;
            }
            best = best.max(bound);
            if self.last_doc(i) >= end {
                break;
            }
        }
        best
    }
}

/// The per-segment scoring state: lengths per field and K for a document.
struct SegmentScoring<'w> {
    weight: &'w Bm25Weight,
    lengths: Vec<Lengths>,
}

impl SegmentScoring<'_> {
    /// K = k1 (1 − b + b · dl / avgdl) of `doc` in field `field_ix`.
    #[inline]
    fn k(&self, field_ix: usize, doc: DocId) -> f64 {
        match &self.lengths[field_ix] {
            Lengths::Exact(column) => {
                let dl = column.first(doc).unwrap_or(0) as f64;
                let f = &self.weight.fields[field_ix];
                f.a + f.c * dl
            }
            Lengths::Dense(lengths) => {
                let dl = f64::from(lengths.get(doc as usize).copied().unwrap_or(0));
                let f = &self.weight.fields[field_ix];
                f.a + f.c * dl
            }
            Lengths::Quantised(reader) => self.weight.quantised[field_ix][reader.fieldnorm_id(doc) as usize],
            Lengths::Memory(lengths) => {
                let dl = lengths.get(doc as usize).copied().flatten().unwrap_or(0) as f64;
                let f = &self.weight.fields[field_ix];
                f.a + f.c * dl
            }
            Lengths::Ids(ids) => self.weight.quantised[field_ix][ids.get(doc as usize).copied().unwrap_or(0) as usize],
        }
    }

    /// The length dl that `k` uses for `doc` in field `field_ix`.
    fn dl(&self, field_ix: usize, doc: DocId) -> u64 {
        match &self.lengths[field_ix] {
            Lengths::Exact(column) => column.first(doc).unwrap_or(0),
            Lengths::Dense(lengths) => u64::from(lengths.get(doc as usize).copied().unwrap_or(0)),
            Lengths::Quantised(reader) => u64::from(FieldNormReader::id_to_fieldnorm(reader.fieldnorm_id(doc))),
            Lengths::Memory(lengths) => lengths.get(doc as usize).copied().flatten().unwrap_or(0),
            Lengths::Ids(ids) => u64::from(FieldNormReader::id_to_fieldnorm(ids.get(doc as usize).copied().unwrap_or(0))),
        }
    }

    /// The clause's contribution for the document its postings are on.
    #[inline]
    fn contribution<P: TermPostings>(&self, cursor: &Cursor<P>, doc: DocId) -> f64 {
        let tf = f64::from(cursor.postings.tf());
        cursor.weight * tf / (tf + self.k(cursor.field_ix, doc))
    }
}

impl Bm25Weight {
    fn segment<'w>(&'w self, reader: &SegmentReader) -> tantivy::Result<(SegmentScoring<'w>, Vec<Cursor>)> {
        let mut lengths = Vec::with_capacity(self.fields.len());
        for (ix, f) in self.fields.iter().enumerate() {
            let field = self.clauses.iter().find(|c| c.field_ix == ix).map(|c| c.term.field());
            let exact = f.exact.and_then(|name| reader.fast_fields().u64(name).ok().map(|column| (name, column)));
            lengths.push(match (exact, field) {
                (Some((name, column)), _) => match blocks::dense_lengths(reader.segment_id(), name, &column, reader.max_doc()) {
                    Some(dense) => Lengths::Dense(dense),
                    None => Lengths::Exact(column),
                },
                (None, Some(field)) => Lengths::Quantised(reader.get_fieldnorms_reader(field)?),
                (None, None) => Lengths::Quantised(FieldNormReader::constant(reader.max_doc(), 1)),
            });
        }
        let mut cursors = Vec::with_capacity(self.clauses.len());
        for (clause_ix, clause) in self.clauses.iter().enumerate() {
            let inverted = reader.inverted_index(clause.term.field())?;
            if let Some(postings) = inverted.read_postings(&clause.term, IndexRecordOption::WithFreqs)?
                && postings.doc() != TERMINATED
            {
                cursors.push(Cursor::new(postings, clause_ix, clause));
            }
        }
        Ok((SegmentScoring { weight: self, lengths }, cursors))
    }

    /// Gives every cursor of more than one block its per-block bounds (the blocks are built
    /// from the segment on first use and cached, `blocks`).
    fn block_bounds(&self, reader: &SegmentReader, scoring: &SegmentScoring<'_>, cursors: &mut [Cursor]) -> tantivy::Result<()> {
        for cursor in cursors.iter_mut() {
            if cursor.postings.df() as usize <= self.block {
                continue;
            }
            let term = &self.clauses[cursor.clause].term;
            let source = match &scoring.lengths[cursor.field_ix] {
                Lengths::Exact(_) | Lengths::Dense(_) => self.fields[cursor.field_ix].exact.unwrap_or(""),
                Lengths::Quantised(_) | Lengths::Memory(_) | Lengths::Ids(_) => "",
            };
            let key = (reader.segment_id(), term.clone(), source, self.block);
            let inverted = reader.inverted_index(term.field())?;
            let Some(postings) = inverted.read_postings(term, IndexRecordOption::WithFreqs)? else { continue };
            let field_ix = cursor.field_ix;
            let blocks = blocks::cached(key, || Blocks::build(postings, self.block, |doc| scoring.dl(field_ix, doc)));
            cursor.bounds = vec![f64::NAN; blocks.len()];
            cursor.blocks = Some(blocks);
        }
        Ok(())
    }
    /// One segment's pruned top-k pass (`Weight::for_each_pruning`), its cursors made.
    fn prune<P: TermPostings>(
        &self,
        scoring: &SegmentScoring<'_>,
        cursors: &mut [Cursor<P>],
        threshold: Score,
        callback: &mut dyn FnMut(DocId, Score) -> Score,
    ) {
        // A segment done before this one (tantivy's `Searcher::search` makes one weight per
        // search, whose top-k collector merges its segments' lists) holds k documents scoring at
        // least its final threshold: a document here scoring strictly less cannot make the
        // merged top k. Starting just below it (so that ties are still offered, whatever the
        // merge's tie order) spares the warm-up of every segment after the first.
        let before = f32::from_bits(self.segment_best.load(Ordering::Relaxed));
        let start = if before > 0.0 { threshold.max(f32::from_bits(before.to_bits() - 1)) } else { threshold };
        let reached = max_score(scoring, cursors, start, callback);
        if reached > before {
            self.segment_best.fetch_max(reached.to_bits(), Ordering::Relaxed);
        }
    }

    /// `segment` for documents held in memory: the lengths and cursors a tantivy segment of
    /// the same documents gives.
    fn memory_segment<'w, 's>(&'w self, segment: &'s MemorySegment) -> (SegmentScoring<'w>, Vec<Cursor<MemoryPostings<'s>>>) {
        let mut lengths = Vec::with_capacity(self.fields.len());
        for (ix, f) in self.fields.iter().enumerate() {
            let field = self.clauses.iter().find(|c| c.field_ix == ix).map(|c| c.term.field());
            let exact = f.exact.and_then(|name| segment.fast.get(name).filter(|v| v.iter().any(Option::is_some)));
            lengths.push(match (exact, field) {
                (Some(column), _) => Lengths::Memory(column.clone()),
                (None, Some(field)) => Lengths::Ids(segment.norms.get(&field).cloned().unwrap_or_default()),
                (None, None) => Lengths::Quantised(FieldNormReader::constant(segment.max_doc, 1)),
            });
        }
        let mut cursors = Vec::with_capacity(self.clauses.len());
        for (clause_ix, clause) in self.clauses.iter().enumerate() {
            if let Some(list) = segment.postings.get(&clause.term).filter(|l| !l.is_empty()) {
                cursors.push(Cursor::new(MemoryPostings { list, at: 0 }, clause_ix, clause));
            }
        }
        (SegmentScoring { weight: self, lengths }, cursors)
    }

    /// `block_bounds` for documents held in memory (the blocks are built for this search).
    fn memory_block_bounds(&self, scoring: &SegmentScoring<'_>, cursors: &mut [Cursor<MemoryPostings<'_>>]) {
        for cursor in cursors.iter_mut() {
            if cursor.postings.df() as usize <= self.block {
                continue;
            }
            let field_ix = cursor.field_ix;
            let blocks = Blocks::build(MemoryPostings { list: cursor.postings.list, at: 0 }, self.block, |doc| scoring.dl(field_ix, doc));
            cursor.bounds = vec![f64::NAN; blocks.len()];
            cursor.blocks = Some(Arc::new(blocks));
        }
    }
}

/// What the pruning reads of one term's postings: tantivy's, or a `MemorySegment`'s.
trait TermPostings {
    /// The current document (`TERMINATED` past the end).
    fn at(&self) -> DocId;
    fn next_doc(&mut self) -> DocId;
    /// The first document at or after `target` (`target` after the current document).
    fn skip_to(&mut self, target: DocId) -> DocId;
    fn tf(&self) -> u32;
    /// Documents in the list.
    fn df(&self) -> u32;
}

impl TermPostings for SegmentPostings {
    fn at(&self) -> DocId {
        DocSet::doc(self)
    }

    fn next_doc(&mut self) -> DocId {
        DocSet::advance(self)
    }

    fn skip_to(&mut self, target: DocId) -> DocId {
        DocSet::seek(self, target)
    }

    fn tf(&self) -> u32 {
        Postings::term_freq(self)
    }

    fn df(&self) -> u32 {
        self.doc_freq()
    }
}

/// A `MemorySegment` posting list being read.
struct MemoryPostings<'s> {
    list: &'s [(DocId, u32)],
    at: usize,
}

impl TermPostings for MemoryPostings<'_> {
    fn at(&self) -> DocId {
        self.list.get(self.at).map_or(TERMINATED, |p| p.0)
    }

    fn next_doc(&mut self) -> DocId {
        self.at = (self.at + 1).min(self.list.len());
        self.at()
    }

    fn skip_to(&mut self, target: DocId) -> DocId {
        self.at += self.list[self.at.min(self.list.len())..].partition_point(|p| p.0 < target);
        self.at()
    }

    fn tf(&self) -> u32 {
        self.list.get(self.at).map_or(0, |p| p.1)
    }

    fn df(&self) -> u32 {
        self.list.len() as u32
    }
}

impl Weight for Bm25Weight {
    /// Every matching document, scored exhaustively (term at a time into a per-document
    /// array): the path of a boolean query that holds this one beside phrases.
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let (scoring, mut cursors) = self.segment(reader)?;
        let mut scores = vec![0f64; reader.max_doc() as usize];
        let mut hit = vec![false; reader.max_doc() as usize];
        for cursor in &mut cursors {
            let mut doc = cursor.postings.at();
            while doc != TERMINATED {
                scores[doc as usize] += scoring.contribution(cursor, doc);
                hit[doc as usize] = true;
                doc = cursor.postings.next_doc();
            }
        }
        let docs: Vec<(DocId, Score)> =
            hit.iter().enumerate().filter(|(_, h)| **h).map(|(d, _)| (d as DocId, (scores[d] as Score) * boost)).collect();
        Ok(Box::new(ScoredDocs { docs, at: 0 }))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let (scoring, mut cursors) = self.segment(reader)?;
        let mut total = 0f64;
        let mut details = Vec::new();
        for cursor in &mut cursors {
            if cursor.postings.skip_to(doc) == doc {
                let s = scoring.contribution(cursor, doc);
                total += s;
                details.push(Explanation::new("w · tf / (tf + k1 (1 - b + b dl / avgdl))", s as Score));
            }
        }
        if details.is_empty() {
            return Err(tantivy::TantivyError::InvalidArgument(format!("document {doc} does not match")));
        }
        let mut explanation = Explanation::new("BM25 (Lucene), sum of", total as Score);
        for d in details {
            explanation.add_detail(d);
        }
        Ok(explanation)
    }

    fn for_each_pruning(
        &self,
        threshold: Score,
        reader: &SegmentReader,
        callback: &mut dyn FnMut(DocId, Score) -> Score,
    ) -> tantivy::Result<()> {
        let (scoring, mut cursors) = self.segment(reader)?;
        self.block_bounds(reader, &scoring, &mut cursors)?;
        self.prune(&scoring, &mut cursors, threshold, callback);
        Ok(())
    }
}

/// Every bound carries a margin for the order of summation (a document's score and its
/// bound add the same terms in different orders; f64's error there is below 1e-13).
const BOUND_MARGIN: f64 = 1.0 + 1e-9;

/// Whether a document scoring at most `bound` (f64) cannot beat θ: scores are reported, and
/// compared with θ, in f32 (tantivy's `Score`; its top-k heap takes a document only when its
/// score is greater than the k-th), and rounding to f32 keeps order, so a bound that rounds to
/// θ or below bounds only documents the collector would refuse.
#[inline]
fn cannot_beat(bound: f64, theta: Score) -> bool {
    (bound as Score) <= theta
}

/// Smallest window of documents, per essential clause, whose bounds are taken together (as
/// Lucene's MaxScore: fewer, longer windows when many clauses would each end one early).
const WINDOW_PER_CLAUSE: DocId = 32;

/// Block-max MaxScore over `cursors`: calls `callback` for every document whose score exceeds
/// the threshold it returns (the k-th best so far), in document order, skipping only documents
/// that provably cannot exceed it. Returns the collector's last threshold (`Score::MIN`:
/// none reported).
///
/// Globally, a clause contributes less than its weight, and the clauses whose weights together
/// cannot exceed θ never lead (as plain MaxScore). The documents are then taken in windows that
/// end at a block boundary of a leading clause; in a window each clause's bound is the largest
/// of its blocks' exact maxima there. A window whose bounds sum to θ or less is skipped without
/// decoding anything; in the others, the clauses whose window bounds together cannot exceed θ
/// are only looked up (seek) for the documents the others bring, while the sum can still win.
fn max_score<P: TermPostings>(
    scoring: &SegmentScoring<'_>,
    cursors: &mut [Cursor<P>],
    threshold: Score,
    callback: &mut dyn FnMut(DocId, Score) -> Score,
) -> Score {
    // Smallest weight first; upto[i] = Σ weight of cursors[..i] (the bound of the first i).
    cursors.sort_by(|x, y| x.weight.total_cmp(&y.weight));
    let n = cursors.len();
    let mut upto = Vec::with_capacity(n + 1);
    upto.push(0f64);
    for c in cursors.iter() {
        upto.push(upto.last().copied().unwrap_or(0.0) + c.weight * BOUND_MARGIN);
    }
    let mut theta = threshold;
    // The collector's own threshold, last reported (θ is never below `threshold`).
    let mut reported = Score::MIN;
    // Window bounds, the clauses by window bound, and its prefix sums.
    let mut local = vec![0f64; n];
    let mut order: Vec<usize> = (0..n).collect();
    let mut prefix = vec![0f64; n + 1];
    let mut start: DocId = 0;
    loop {
        // Cursors [..leading] are non-leading: their weights together cannot exceed θ.
        let leading = upto.iter().rposition(|&u| cannot_beat(u, theta)).unwrap_or(0).min(n);
        if leading >= n {
            return reported;
        }
        // The window [start, end]: up to the first block end of a leading clause, at least
        // WINDOW_PER_CLAUSE documents per leading clause.
        let mut end = TERMINATED;
        for c in cursors[leading..].iter_mut() {
            let from = c.postings.at().max(start);
            if from != TERMINATED && c.shallow(from) {
                end = end.min(c.last_doc(c.at));
            }
        }
        if end == TERMINATED {
            return reported;
        }
        let floor = u64::from(start) + u64::from(WINDOW_PER_CLAUSE) * (n - leading) as u64 - 1;
        end = end.max(floor.min(u64::from(TERMINATED - 1)) as DocId);
        for (i, c) in cursors.iter_mut().enumerate() {
            // A clause's next posting is at or after its cursor: nothing before it is left.
            let from = c.postings.at().max(start);
            let norm = &scoring.weight.fields[c.field_ix];
            local[i] = if from <= end && c.shallow(from) { c.bound_upto(end, norm) } else { 0.0 };
        }
        order.sort_by(|&x, &y| local[x].total_cmp(&local[y]));
        for (k, &i) in order.iter().enumerate() {
            prefix[k + 1] = prefix[k] + local[i];
        }
        // order[..essential]: together they cannot exceed θ in this window.
        let mut essential = prefix.iter().rposition(|&u| cannot_beat(u, theta)).unwrap_or(0).min(n);
        if essential < n {
            for &i in &order[essential..] {
                let c = &mut cursors[i];
                if c.postings.at() < start {
                    c.postings.skip_to(start);
                }
            }
        }
        while essential < n {
            let Some(doc) = order[essential..].iter().map(|&i| cursors[i].postings.at()).min() else { break };
            if doc > end {
                break;
            }
            // Essential clauses first, then the others from the largest window bound down.
            let mut score = 0f64;
            for &i in &order[essential..] {
                let cursor = &mut cursors[i];
                if cursor.postings.at() == doc {
                    score += scoring.contribution(cursor, doc);
                    cursor.postings.next_doc();
                }
            }
            let mut possible = true;
            for k in (0..essential).rev() {
                if cannot_beat(score + prefix[k + 1], theta) {
                    possible = false;
                    break;
                }
                let cursor = &mut cursors[order[k]];
                if cursor.postings.at() < doc {
                    cursor.postings.skip_to(doc);
                }
                if cursor.postings.at() == doc {
                    score += scoring.contribution(cursor, doc);
                }
            }
            if possible && !cannot_beat(score, theta) {
                reported = callback(doc, score as Score);
                theta = reported.max(threshold);
                while essential < n && cannot_beat(prefix[essential + 1], theta) {
                    essential += 1;
                }
            }
        }
        if end >= TERMINATED - 1 {
            return reported;
        }
        start = end + 1;
    }
}

/// Scored documents in document order (the exhaustive path).
struct ScoredDocs {
    docs: Vec<(DocId, Score)>,
    at: usize,
}

impl DocSet for ScoredDocs {
    fn advance(&mut self) -> DocId {
        self.at += 1;
        self.doc()
    }

    fn doc(&self) -> DocId {
        self.docs.get(self.at).map_or(TERMINATED, |(d, _)| *d)
    }

    fn size_hint(&self) -> u32 {
        self.docs.len().saturating_sub(self.at) as u32
    }
}

impl Scorer for ScoredDocs {
    fn score(&mut self) -> Score {
        self.docs.get(self.at).map_or(0.0, |(_, s)| *s)
    }
}

#[cfg(test)]
mod tests;
