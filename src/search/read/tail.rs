//! The generation tail: committed write intents newer than the active generation, served on
//! top of it from memory, and folded into an on-disk generation every
//! `search.tail_writes_max` writes.
//!
//! Why: an intent record (`store::journal`) holds every note a write puts in place and is
//! durable before the write returns, so the search generation that includes the write is
//! *derivable* from (active generation, intents after its `covers_seq`). A write therefore
//! publishes generation `<active>+<seq>` by committing its intent, and pays no tantivy segment
//! serialisation and no extra fsync. The generation is immutable: a later write is a later id.
//! A fold publishes the same documents as an ordinary generation (`covers_seq` = the last
//! intent it includes), and only then may the writer empty the journal.
//!
//! How a reader serves it (`Overlay`): the base's tantivy segments through the base's own
//! reader (opened once per base, whatever the number of tail generations on it), the
//! documents of the notes the tail touches counted as deleted there, and the tail's documents
//! as one segment held in memory (`bm25::MemorySegment`: postings, token totals, field norms
//! and fast-field values, as tantivy's segment writer would make them), placed where tantivy's
//! commit would place it. A words-only BM25 query (`search`'s fts mode, and the BM25 lists of
//! the lexical fallbacks), the note entries and the temporal table are answered from these
//! without a tantivy segment of the tail; `Bm25Query::top_k` reproduces tantivy's
//! statistics (a deleted document still counts in N, document frequencies and token totals),
//! per-segment pruning, heap and merge, so the hits, doc addresses, order and score bits are
//! the segment's (`search::tests::a_tail_overlay_answers_as_its_tantivy_segment`). What needs
//! the generation's tantivy index — a query with a quoted phrase (positions), graph expansion
//! along stored links, `suggest_related`'s stored keywords, the building side — builds the
//! tail's segment in memory on first use (`TailOf::segment`: an overlay on the base's
//! `RetainingDirectory`, through the same `segment_commit` an on-disk publish uses), once per
//! generation. A tail generation's manifest keeps its base's tantivy commit fields (the tail's
//! commit exists only in memory, and only once built).
//!
//! A resident process (the MCP server) keeps what its last tail generation was built from (a
//! `Memo`: the intents' sequence numbers and every touched note's analysed documents, each
//! document already tokenised as tantivy's segment writer tokenises it): a journal that changed
//! without a new intent (a checkpoint's `Done` records) serves the same generation again, and a
//! tail that grew decodes, analyses and tokenises only the notes the new intents touch; the
//! in-memory segment is assembled from every note's tokenised documents (shared, `Arc`, with
//! the previous generation), in the order a from-scratch build gives. The
//! temporal table is derived from the base's, and the journal is read from where the last
//! read ended.
//!
//! Dense vaults keep publishing on every write (their chunks need embedding vectors, which a
//! reader does not compute), so a dense base is never served with a tail.
//!
//! This is the reading half; the fold is `search::build::fold`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use tantivy::fieldnorm::FieldNormReader;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::tokenizer::TokenStream;
use tantivy::{DocId, DocSet, Index, IndexReader, ReloadPolicy, TERMINATED, TantivyDocument, Term};

use super::bm25::MemorySegment;
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
    count_heads_after(records.iter().map(|r| (r.seq(), r.done())), covers_seq)
}

/// `count_after` of the records whose heads are `heads`: each record's sequence number and
/// `StoredRecord::done` (`None` for an intent, else whether the intent was abandoned).
pub(crate) fn count_heads_after(heads: impl Iterator<Item = (u64, Option<bool>)> + Clone, covers_seq: u64) -> usize {
    let abandoned: BTreeSet<u64> = heads.clone().filter(|&(_, done)| done == Some(true)).map(|(seq, _)| seq).collect();
    heads.filter(|&(seq, done)| in_tail(done.is_none(), seq, covers_seq, &abandoned)).count()
}

fn tail_records(records: &[StoredRecord], covers_seq: u64) -> impl Iterator<Item = &StoredRecord> {
    let abandoned = crate::store::journal::abandoned_seqs(records);
    records.iter().filter(move |r| in_tail(r.is_intent(), r.seq(), covers_seq, &abandoned))
}

/// Whether a record is an intent of the tail after `covers_seq`: an intent after it, not abandoned.
fn in_tail(is_intent: bool, seq: u64, covers_seq: u64, abandoned: &BTreeSet<u64>) -> bool {
    is_intent && seq > covers_seq && !abandoned.contains(&seq)
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
enum Analysed {
    Documents(NoteDocuments),
    /// Not valid: removed from search, named as an exclusion.
    Invalid(Exclusion),
    Removed,
}

/// A touched note as a served tail leaves it: `Analysed` with a valid note's documents
/// tokenised, shared by every later tail generation of the same base that does not touch the
/// note again (a tail that grows tokenises only the notes its new intents touch).
#[derive(Clone)]
enum Served {
    Documents(Arc<Tokenised>),
    Invalid(Exclusion),
    Removed,
}

/// A valid note's documents and, per document, what a tantivy segment holds of it for BM25.
pub(crate) struct Tokenised {
    path: String,
    docs: Vec<TantivyDocument>,
    terms: Vec<DocTerms>,
}

/// One document as tantivy's segment writer indexes it, for BM25 (`memory_segment`).
struct DocTerms {
    /// Per indexed text field with a text value, in field order.
    fields: Vec<FieldTerms>,
    /// Per u64 fast field the document has a value of: its first u64 value.
    fast: Vec<(&'static str, Option<u64>)>,
}

/// One indexed text field of a document as tantivy's segment writer indexes it.
struct FieldTerms {
    field: Field,
    /// Its tokens, every value of the field together.
    tokens: u32,
    /// Its field-norm id (`None`: the field keeps no norms).
    norm: Option<u8>,
    /// Its terms with their frequencies.
    terms: Vec<(Term, u32)>,
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
    summary_of(base, tail.iter().rev().find_map(|i| i.search_snapshot.as_ref()), &delta.touched, delta.invalid.iter())
}

/// `summary` with the snapshot of the tail's last intent that recorded one, the touched notes
/// and the exclusions of those that are not valid.
fn summary_of<'a>(
    base: &Manifest,
    snapshot: Option<&SearchSnapshot>,
    touched: &BTreeSet<String>,
    invalid: impl Iterator<Item = &'a Exclusion>,
) -> (String, Counts, Vec<Exclusion>) {
    let mut exclusions: Vec<Exclusion> = base.exclusions.iter().filter(|e| !touched.contains(&e.path)).cloned().collect();
    exclusions.extend(invalid.cloned());
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
    notes: Arc<BTreeMap<String, Served>>,
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
    let index = base.index()?;
    for (path, text) in last_texts(&intents) {
        let served = match analyse(policy, &base.fields, path, text) {
            Analysed::Documents(documents) => {
                let terms = tokenise(index, &documents.docs)?;
                Served::Documents(Arc::new(Tokenised { path: documents.path, docs: documents.docs, terms }))
            }
            Analysed::Invalid(exclusion) => Served::Invalid(exclusion),
            Analysed::Removed => Served::Removed,
        };
        notes.insert(path.to_string(), served);
    }
    if let Some(last) = intents.iter().rev().find_map(|i| i.search_snapshot.as_ref()) {
        snapshot = Some(last.clone());
    }
    let created_at = intents.last().and_then(|i| i.receipt.get("at")).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let last = seqs.last().copied().unwrap_or(base.manifest.covers_seq);
    let notes = Arc::new(notes);
    let generation = open(root, base.clone(), &notes, snapshot.as_ref(), last, created_at)?;
    Ok(Some(Memo { base: base.id().to_string(), policy: policy.digest, seqs, notes, snapshot, decoded: intents.len(), generation }))
}

/// Generation `<base>+<last>`: the tail's touched notes (`notes`, by path) over `base`, served
/// without a tantivy segment (`Overlay`); the segment is built in memory only when a reader
/// asks for the generation's tantivy index (`TailOf::segment`).
fn open(
    root: &Path,
    base: Arc<OpenGeneration>,
    notes: &BTreeMap<String, Served>,
    snapshot: Option<&SearchSnapshot>,
    last: u64,
    created_at: String,
) -> Result<Arc<OpenGeneration>> {
    let id = generation_id(base.id(), last);
    let corrupt = |reason: String| Error::GenerationCorrupt { generation_id: id.clone(), reason };
    let touched: Arc<BTreeSet<String>> = Arc::new(notes.keys().cloned().collect());
    let invalid = notes.values().filter_map(|n| match n {
        Served::Invalid(exclusion) => Some(exclusion),
        _ => None,
    });
    let (source_snapshot_hash, counts, exclusions) = summary_of(&base.manifest, snapshot, &touched, invalid);
    let directory =
        base.directory.overlay(base.manifest.tantivy_meta.as_bytes()).map_err(|e| corrupt(format!("index directory unusable: {e}")))?;
    // In path order, as `delta` gives them to a segment build.
    let mut upserts = Vec::new();
    let mut removes = Vec::new();
    for (path, note) in notes {
        match note {
            Served::Documents(tokenised) => upserts.push(tokenised.clone()),
            Served::Invalid(_) | Served::Removed => removes.push(path.clone()),
        }
    }
    let overlay = Overlay::new(&base, upserts, removes, &touched)?;
    // The tantivy commit fields stay the base's: the tail's commit exists only once built.
    let manifest = Manifest {
        generation_id: id.clone(),
        parent: Some(base.id().to_string()),
        created_at,
        source_snapshot_hash,
        counts,
        exclusions,
        dense: None,
        segments: Vec::new(),
        covers_seq: last,
        ..base.manifest.clone()
    };
    let modified = std::fs::metadata(crate::store::layout::join(root, crate::store::layout::JOURNAL)).and_then(|m| m.modified()).ok();
    let fields = base.fields;
    let tail_of = TailOf { base: base.clone(), touched, overlay };
    Ok(Arc::new(OpenGeneration::new(base.root.clone(), manifest, None, fields, modified, directory, Some(tail_of))))
}

/// A tail generation as BM25 and the note lookups read it: the base's segments, open once per
/// base (the base's own reader), with the documents of touched notes counted as deleted, and
/// the tail's documents as one segment held in memory (`bm25::MemorySegment`), placed where
/// tantivy's commit places the segment (`segment_commit`: segments by size, largest first, a
/// base segment the tail empties dropped). BM25's statistics are a searcher's over that
/// commit: the deleted documents still count in N, the document frequencies and the token
/// totals, as tantivy counts them. Equal to the built segment's answers
/// (`search::tests::a_tail_overlay_answers_as_its_tantivy_segment`).
pub(crate) struct Overlay {
    /// What the segment is built from when a reader needs it: the upserted notes (shared with
    /// the process's memo and the other tail generations that hold them), and the removed
    /// paths.
    upserts: Vec<Arc<Tokenised>>,
    removes: Vec<String>,
    /// Per tail document in segment order: (index into `upserts`, index into its documents).
    at: Vec<(u32, u32)>,
    pub(crate) memory: MemorySegment,
    /// The generation's segments in tantivy's order: a base segment (its ordinal in the base's
    /// searcher) or the tail's (`None`).
    pub(crate) layout: Vec<Option<u32>>,
    /// Per base segment ordinal: its live documents of touched notes.
    pub(crate) doomed: Vec<HashSet<DocId>>,
    /// Live documents in the generation (tantivy's `Searcher::num_docs`).
    pub(crate) num_docs: u64,
}

impl Overlay {
    fn new(base: &OpenGeneration, upserts: Vec<Arc<Tokenised>>, removes: Vec<String>, touched: &BTreeSet<String>) -> Result<Overlay> {
        let at: Vec<(u32, u32)> =
            upserts.iter().enumerate().flat_map(|(n, note)| (0..note.docs.len()).map(move |d| (n as u32, d as u32))).collect();
        let memory = memory_segment(&upserts, at.len());
        let searcher = base.searcher()?;
        let mut doomed = Vec::new();
        // (max_doc, slot) in the base's commit order, then the tail's segment.
        let mut slots: Vec<(u32, Option<u32>)> = Vec::new();
        let mut num_docs = 0u64;
        for (ord, reader) in searcher.segment_readers().iter().enumerate() {
            let inverted = reader.inverted_index(base.fields.path).map_err(tantivy_err("reading the path index"))?;
            let mut dead = HashSet::new();
            for path in touched {
                let term = Term::from_field_text(base.fields.path, path);
                let postings = inverted
                    .read_postings(&term, IndexRecordOption::Basic)
                    .map_err(|e| Error::SearchIndex { action: "reading postings", reason: e.to_string() })?;
                let Some(mut postings) = postings else { continue };
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    if !reader.is_deleted(doc) {
                        dead.insert(doc);
                    }
                    doc = postings.advance();
                }
            }
            let live = u64::from(reader.num_docs()) - dead.len() as u64;
            // A segment left with no live document is dropped from the commit.
            if dead.is_empty() || live > 0 {
                slots.push((reader.max_doc(), Some(ord as u32)));
            }
            num_docs += live;
            doomed.push(dead);
        }
        if !at.is_empty() {
            slots.push((at.len() as u32, None));
            num_docs += at.len() as u64;
        }
        slots.sort_by_key(|(max_doc, _)| std::cmp::Reverse(*max_doc));
        Ok(Overlay { upserts, removes, at, memory, layout: slots.into_iter().map(|(_, slot)| slot).collect(), doomed, num_docs })
    }

    /// The tail's document `doc` (its id in the tail's segment).
    pub(crate) fn doc(&self, doc: DocId) -> Option<&TantivyDocument> {
        let (note, at) = *self.at.get(doc as usize)?;
        self.upserts.get(note as usize)?.docs.get(at as usize)
    }

    /// The upserted notes in segment order, by path.
    #[cfg(test)]
    pub(crate) fn notes(&self) -> impl Iterator<Item = (&str, &Arc<Tokenised>)> {
        self.upserts.iter().map(|note| (note.path.as_str(), note))
    }

    /// The tail's documents in segment order.
    pub(crate) fn docs(&self) -> impl Iterator<Item = &TantivyDocument> {
        self.upserts.iter().flat_map(|note| note.docs.iter())
    }
}

/// Each of `docs` as tantivy's segment writer indexes it for BM25: every indexed text field's
/// tokens (by the index's own analyzers, every value of the field together), field-norm id and
/// term frequencies, and the u64 fast fields' first values.
fn tokenise(index: &Index, docs: &[TantivyDocument]) -> Result<Vec<DocTerms>> {
    let schema = index.schema();
    let fast_names: Vec<(Field, &'static str)> =
        [schema::BODY_LEN, "note_key"].into_iter().filter_map(|n| schema.get_field(n).ok().map(|f| (f, n))).collect();
    let mut analyzers: HashMap<Field, tantivy::tokenizer::TextAnalyzer> = HashMap::new();
    let mut out = Vec::with_capacity(docs.len());
    for doc in docs {
        // Per field: tokens and term frequencies, every value of the field together.
        let mut fields: BTreeMap<Field, (u32, BTreeMap<String, u32>)> = BTreeMap::new();
        let mut fast: Vec<(&'static str, Option<u64>)> = Vec::new();
        for (field, value) in doc.field_values() {
            if let Some((_, name)) = fast_names.iter().find(|(f, _)| *f == field) {
                let first = tantivy::schema::Value::as_u64(&value);
                match fast.iter_mut().find(|(n, _)| n == name) {
                    Some((_, v)) => *v = v.or(first),
                    None => fast.push((name, first)),
                }
                continue;
            }
            let tantivy::schema::FieldType::Str(options) = schema.get_field_entry(field).field_type() else { continue };
            let Some(indexing) = options.get_indexing_options() else { continue };
            let Some(text) = tantivy::schema::Value::as_str(&value) else { continue };
            let analyzer = match analyzers.entry(field) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let Some(analyzer) = index.tokenizers().get(indexing.tokenizer()) else {
                        return Err(Error::SearchIndex {
                            action: "analysing the tail",
                            reason: format!("no tokenizer {}", indexing.tokenizer()),
                        });
                    };
                    v.insert(analyzer)
                }
            };
            let (count, terms) = fields.entry(field).or_default();
            let mut stream = analyzer.token_stream(text);
            stream.process(&mut |token| {
                // tantivy drops a token past its term length bound, uncounted.
                if token.text.len() <= tantivy::tokenizer::MAX_TOKEN_LEN {
                    *count += 1;
                    *terms.entry(token.text.clone()).or_default() += 1;
                }
            });
        }
        let fields = fields
            .into_iter()
            .map(|(field, (count, terms))| {
                let norm = schema.get_field_entry(field).has_fieldnorms().then(|| FieldNormReader::fieldnorm_to_id(count));
                let terms = terms.into_iter().map(|(text, tf)| (Term::from_field_text(field, &text), tf)).collect();
                FieldTerms { field, tokens: count, norm, terms }
            })
            .collect();
        out.push(DocTerms { fields, fast });
    }
    Ok(out)
}

/// What a tantivy segment of the documents of `notes` (in this order; `max_doc` of them) holds
/// for BM25: postings, token totals, field norms and fast-field values, from each document's
/// `DocTerms` (tokenised once, when its note's intent was first served). The same whether the
/// notes were tokenised now or by an earlier tail generation
/// (`search::tests::a_tail_overlay_answers_as_its_tantivy_segment` grows each tail on the last one's memo).
fn memory_segment(notes: &[Arc<Tokenised>], max_doc: usize) -> MemorySegment {
    let mut out = MemorySegment { max_doc: max_doc as u32, ..MemorySegment::default() };
    let mut norms: HashMap<Field, Vec<u8>> = HashMap::new();
    let mut fast: HashMap<&'static str, Vec<Option<u64>>> = HashMap::new();
    let terms = notes.iter().flat_map(|note| note.terms.iter());
    for (doc_id, doc) in terms.enumerate() {
        for (name, value) in &doc.fast {
            fast.entry(name).or_insert_with(|| vec![None; max_doc])[doc_id] = *value;
        }
        for FieldTerms { field, tokens: count, norm, terms } in &doc.fields {
            *out.tokens.entry(*field).or_default() += u64::from(*count);
            if let Some(norm) = norm {
                norms.entry(*field).or_insert_with(|| vec![0; max_doc])[doc_id] = *norm;
            }
            for (term, tf) in terms {
                match out.postings.get_mut(term) {
                    Some(postings) => postings.push((doc_id as DocId, *tf)),
                    None => drop(out.postings.insert(term.clone(), vec![(doc_id as DocId, *tf)])),
                }
            }
        }
    }
    out.norms = norms.into_iter().map(|(f, v)| (f, Arc::new(v))).collect();
    out.fast = fast.into_iter().map(|(n, v)| (n, Arc::new(v))).collect();
    out
}

impl TailOf {
    /// The tail's documents as one tantivy segment in memory (an overlay on the base's
    /// `RetainingDirectory`, through the same `segment_commit` an on-disk publish uses), and a
    /// reader of the commit: for the readers that need the generation's tantivy index.
    pub(crate) fn segment(&self, g: &OpenGeneration) -> Result<(Index, IndexReader)> {
        let corrupt = |reason: String| Error::GenerationCorrupt { generation_id: g.id().to_string(), reason };
        let index = Index::open(g.directory.clone()).map_err(|e| corrupt(format!("tantivy cannot open the base commit: {e}")))?;
        schema::register(&index);
        let upserts = self.overlay.upserts.iter().map(|note| (note.path.clone(), note.docs.clone())).collect();
        segment_commit::commit(&index, &self.base.fields, &self.base, upserts, &self.overlay.removes, g.id())?;
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into().map_err(tantivy_err("reading the tail"))?;
        Ok((index, reader))
    }
}
