//! Ranked note lists for the dense search modes: `semantic` (exact cosine over the generation's
//! stored chunk vectors, max per note), `hybrid` (reciprocal-rank fusion of BM25 and dense) and
//! `graph_assisted` (hybrid anchors expanded along the links stored with the generation), and
//! the cross-encoder's reordering of hybrid's (or BM25's) top candidates for `reranked`.

use std::collections::{HashMap, VecDeque};
use std::sync::{LazyLock, Mutex};

use tantivy::collector::{DocSetCollector, TopDocs};
use tantivy::query::Query;
use tantivy::schema::Value;
use tantivy::{Searcher, TantivyDocument};

use super::dense::DenseView;
use super::generation::OpenGeneration;
use super::{NoteHit, kind_and_term, note_doc, search_err, stored_text};
use crate::embed::ModelHandle;
use crate::error::Result;
use crate::search::schema;

const QUERY_CACHE: usize = 256;

type QueryCache = (HashMap<String, Vec<f32>>, VecDeque<String>);
static QUERIES: LazyLock<Mutex<QueryCache>> = LazyLock::new(|| Mutex::new((HashMap::new(), VecDeque::new())));

/// The query's unit vector (a small per-process cache spares re-embedding repeated queries).
pub(super) fn query_vector(handle: &ModelHandle, text: &str) -> Result<Vec<f32>> {
    let key = format!("{}\u{0}{text}", handle.id());
    if let Some(v) = QUERIES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0.get(&key) {
        return Ok(v.clone());
    }
    let vector = handle.model()?.embed(&[text])?.pop().unwrap_or_default();
    let mut cache = QUERIES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if cache.0.len() >= QUERY_CACHE
        && let Some(old) = cache.1.pop_front()
    {
        cache.0.remove(&old);
    }
    cache.0.insert(key.clone(), vector.clone());
    cache.1.push_back(key);
    Ok(vector)
}

/// The `query_embedding_truncated` reason when the embedding model's token cut drops the end
/// of `text` (MiniLM reads 256 tokens, about 150-200 English words): the dense list then ranks
/// by the query's beginning only, while BM25 searched all of it.
pub(super) fn embedding_cut(handle: &ModelHandle, text: &str) -> Result<Option<String>> {
    let Some(end) = handle.model()?.cut_at(text)? else { return Ok(None) };
    let mut end = end.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let (kept, total) = (text[..end].chars().count(), text.chars().count());
    Ok(Some(format!(
        "query_embedding_truncated: the embedding model reads at most {} tokens; the dense ranking embedded the query's first {kept} of {total} characters (BM25 searched all of them)",
        handle.config().max_tokens
    )))
}

/// Notes by their best chunk's cosine, at most `n` accepted by `keep`.
pub(super) fn dense_notes(
    g: &OpenGeneration,
    view: &DenseView,
    query: &[f32],
    n: usize,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<NoteHit>> {
    let searcher = g.searcher()?;
    let mut paths: HashMap<u64, (String, bool)> = HashMap::new();
    let mut failure = None;
    let top = view.top_notes(query, n, &mut |entry| {
        if let Some((_, kept)) = paths.get(&entry.note_key) {
            return *kept;
        }
        match searcher.doc::<TantivyDocument>(entry.doc) {
            Ok(doc) => {
                let path = stored_text(&doc, g.fields.path);
                let kept = keep(&path);
                paths.insert(entry.note_key, (path, kept));
                kept
            }
            Err(e) => {
                failure = Some(e);
                false
            }
        }
    });
    if let Some(e) = failure {
        return Err(search_err(e));
    }
    let mut out = Vec::with_capacity(top.len());
    for (score, entry) in top {
        let doc: TantivyDocument = searcher.doc(entry.doc).map_err(search_err)?;
        out.push(NoteHit { path: stored_text(&doc, g.fields.path), score, body: stored_text(&doc, g.fields.body), matches: 1 });
    }
    Ok(out)
}

/// A ranked note before its stored document is read: its key, score, best chunk and how many
/// of its chunks matched.
#[derive(Debug, Clone, Copy)]
pub(super) struct Candidate {
    pub key: u64,
    pub score: f32,
    pub doc: tantivy::DocAddress,
    pub matches: usize,
    /// Best (lowest) rank in any fused list, and the list it came from.
    pub best_rank: usize,
    pub best_list: usize,
}

/// The BM25 list, `depth` notes deep, aggregated by the `note_key` fast field (no stored
/// document is read).
pub(super) fn fts_candidates(g: &OpenGeneration, q: &dyn Query, depth: usize) -> Result<Vec<Candidate>> {
    let searcher = g.searcher()?;
    let stats = super::query::Bm25Statistics::new(&searcher, &g.fields).map_err(search_err)?;
    let columns: Vec<Option<tantivy::columnar::Column<u64>>> =
        searcher.segment_readers().iter().map(|r| r.fast_fields().u64("note_key").ok()).collect();
    let top = searcher.search_with_statistics_provider(q, &TopDocs::with_limit(depth * 2).order_by_score(), &stats).map_err(search_err)?;
    let mut out: Vec<Candidate> = Vec::new();
    let mut at: HashMap<u64, usize> = HashMap::new();
    for (score, addr) in top {
        let Some(key) = columns.get(addr.segment_ord as usize).and_then(Option::as_ref).and_then(|c| c.first(addr.doc_id)) else {
            continue;
        };
        match at.get(&key) {
            Some(&i) => out[i].matches += 1,
            None => {
                at.insert(key, out.len());
                out.push(Candidate { key, score, doc: addr, matches: 1, best_rank: 0, best_list: 0 });
            }
        }
    }
    out.truncate(depth);
    Ok(out)
}

/// The dense list, `depth` notes deep (max chunk cosine per note).
pub(super) fn dense_candidates(view: &DenseView, query: &[f32], depth: usize) -> Vec<Candidate> {
    view.top_notes(query, depth, &mut |_| true)
        .into_iter()
        .map(|(score, e)| Candidate { key: e.note_key, score, doc: e.doc, matches: 1, best_rank: 0, best_list: 0 })
        .collect()
}

/// Reciprocal-rank fusion of candidate lists by note: score = Σ 1 / (k + rank), rank from 1;
/// a note keeps the best chunk of the first list that has it (BM25 first: its chunk holds the
/// query terms, for the snippet).
pub(super) fn fuse_candidates(lists: Vec<Vec<Candidate>>, k: f32) -> Vec<Candidate> {
    let mut fused: Vec<Candidate> = Vec::new();
    let mut at: HashMap<u64, usize> = HashMap::new();
    for (list_index, list) in lists.into_iter().enumerate() {
        for (rank, c) in list.into_iter().enumerate() {
            let contribution = 1.0 / (k + rank as f32 + 1.0);
            match at.get(&c.key) {
                Some(&i) => {
                    fused[i].score += contribution;
                    fused[i].matches += c.matches;
                    if rank < fused[i].best_rank {
                        fused[i].best_rank = rank;
                        fused[i].best_list = list_index;
                    }
                }
                None => {
                    at.insert(c.key, fused.len());
                    fused.push(Candidate { score: contribution, best_rank: rank, best_list: list_index, ..c });
                }
            }
        }
    }
    // Equal fused scores are common (rank r in one list only): the note ranked higher in either
    // list comes first, then the one the lexical list ranked (exact term matches; on SciFact
    // this tie-break is worth 0.005 nDCG@10), then the stable key.
    fused.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then(a.best_rank.cmp(&b.best_rank)).then(a.best_list.cmp(&b.best_list)).then_with(|| a.key.cmp(&b.key))
    });
    fused
}

/// Reads the stored documents of candidates, best first, until `n` pass `keep`.
pub(super) fn materialize(g: &OpenGeneration, candidates: &[Candidate], n: usize, keep: &dyn Fn(&str) -> bool) -> Result<Vec<NoteHit>> {
    let searcher = g.searcher()?;
    let mut out = Vec::new();
    for c in candidates {
        let doc: TantivyDocument = searcher.doc(c.doc).map_err(search_err)?;
        let path = stored_text(&doc, g.fields.path);
        if keep(&path) {
            out.push(NoteHit { path, score: c.score, body: stored_text(&doc, g.fields.body), matches: c.matches });
            if out.len() == n {
                break;
            }
        }
    }
    Ok(out)
}

/// The candidates ordered by the cross-encoder's logit for (query, best chunk), best first (a
/// tie keeps the fused order), each scored by its logit; `Err(candidates)` unchanged when the
/// deadline passed before every candidate was scored.
pub(super) fn rerank(
    model: &crate::embed::cross_encoder::CrossEncoder,
    query: &str,
    candidates: Vec<NoteHit>,
    deadline: std::time::Instant,
) -> Result<std::result::Result<Vec<NoteHit>, Vec<NoteHit>>> {
    let passages: Vec<&str> = candidates.iter().map(|h| h.body.as_str()).collect();
    let Some(logits) = model.score(query, &passages, Some(deadline))? else { return Ok(Err(candidates)) };
    let mut scored: Vec<(usize, NoteHit)> =
        candidates.into_iter().zip(logits).enumerate().map(|(i, (hit, logit))| (i, NoteHit { score: logit, ..hit })).collect();
    scored.sort_by(|(ai, a), (bi, b)| b.score.total_cmp(&a.score).then(ai.cmp(bi)));
    Ok(Ok(scored.into_iter().map(|(_, h)| h).collect()))
}

/// Paths of the notes `path` links to and the notes that link to it (at most `cap`).
fn neighbours(g: &OpenGeneration, searcher: &Searcher, path: &str, cap: usize) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let paths_of = |q: &dyn Query, out: &mut Vec<String>| -> Result<()> {
        for addr in searcher.search(q, &DocSetCollector).map_err(search_err)?.into_iter().take(cap) {
            let doc: TantivyDocument = searcher.doc(addr).map_err(search_err)?;
            out.push(stored_text(&doc, g.fields.path));
        }
        Ok(())
    };
    if let Some(doc) = note_doc(g, searcher, path)? {
        for key in doc.get_all(g.fields.links_to).filter_map(|v| v.as_str()).take(cap) {
            paths_of(&kind_and_term(g, schema::KIND_NOTE, g.fields.link_key, key), &mut out)?;
        }
    }
    let inbound = kind_and_term(g, schema::KIND_NOTE, g.fields.links_to, &crate::inventory::link_key(path));
    paths_of(&inbound, &mut out)?;
    out.sort();
    out.dedup();
    out.retain(|p| p != path);
    Ok(out)
}

/// The first chunk body of a note (for the snippet of a note reached only through links).
fn first_chunk_body(g: &OpenGeneration, searcher: &Searcher, path: &str) -> Result<String> {
    let q = kind_and_term(g, schema::KIND_CHUNK, g.fields.path, path);
    let docs = searcher.search(&q, &DocSetCollector).map_err(search_err)?;
    match docs.into_iter().min() {
        Some(addr) => Ok(stored_text(&searcher.doc::<TantivyDocument>(addr).map_err(search_err)?, g.fields.body)),
        None => Ok(String::new()),
    }
}

/// Expands `anchors` (scored, best first) along stored links up to `hops` hops; a note reached
/// at hop h from an anchor scores anchor × decay^h, and keeps its best score over all paths.
pub(super) fn graph_expand(
    g: &OpenGeneration,
    anchors: Vec<NoteHit>,
    hops: usize,
    decay: f32,
    n: usize,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<NoteHit>> {
    const NEIGHBOURS_PER_NOTE: usize = 32;
    let searcher = g.searcher()?;
    // (hit, order first reached): anchors keep the fused order on equal scores.
    let mut best: HashMap<String, (NoteHit, usize)> = HashMap::new();
    let mut frontier: Vec<(String, f32)> = Vec::new();
    for (i, hit) in anchors.into_iter().enumerate() {
        frontier.push((hit.path.clone(), hit.score));
        best.insert(hit.path.clone(), (hit, i));
    }
    for _hop in 1..=hops {
        let mut next: Vec<(String, f32)> = Vec::new();
        for (path, score) in &frontier {
            for other in neighbours(g, &searcher, path, NEIGHBOURS_PER_NOTE)? {
                let contributed = score * decay;
                let better = best.get(&other).is_none_or(|(h, _)| h.score < contributed);
                if better {
                    let reached = best.len();
                    let (body, order) = match best.remove(&other) {
                        Some((h, order)) => (h.body, order),
                        None => (first_chunk_body(g, &searcher, &other)?, reached),
                    };
                    best.insert(other.clone(), (NoteHit { path: other.clone(), score: contributed, body, matches: 0 }, order));
                    next.push((other, contributed));
                }
            }
        }
        // Only the strongest notes of each hop expand further (bounded work per query).
        next.sort_by(|a, b| b.1.total_cmp(&a.1));
        next.truncate(n.max(10));
        frontier = next;
    }
    let mut out: Vec<(NoteHit, usize)> = best.into_values().filter(|(h, _)| keep(&h.path)).collect();
    out.sort_by(|(a, ai), (b, bi)| b.score.total_cmp(&a.score).then(ai.cmp(bi)));
    out.truncate(n);
    Ok(out.into_iter().map(|(h, _)| h).collect())
}
