//! Reading by example: `memory_context` (the few most relevant current notes for a query) and
//! `suggest_related` (notes like a given one, by its stored keywords or its stored vectors).
//! Both answer from the published generation only.

use std::path::Path;
use std::sync::Arc;

use tantivy::TantivyDocument;
use tantivy::collector::DocSetCollector;

use super::envelope::{MAX_RESULTS_LIMIT, NoteRef, Related, RelatedHits, RelatedMethod, SearchRequest};
use super::generation::{self, OpenGeneration};
use super::{dense, kind_and_term, modes, note_entry, query, ranked_notes, search, search_err, stored_text};
use crate::error::{Error, Result};
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::search::schema;

/// The five most relevant notes current at `as_of` for a query (paths and titles only).
pub fn memory_context(root: &Path, policy: &LoadedPolicy, query_text: &str, as_of: chrono::NaiveDate) -> Result<Vec<NoteRef>> {
    let envelope = search(root, policy, SearchRequest::fts(query_text, 5.min(policy.policy.search.max_results_cap), as_of))?;
    Ok(envelope.results.into_iter().map(|r| NoteRef { path: r.source.path, title: r.metadata.title }).collect())
}

/// The most frequent content terms of a note, from its stored chunk texts: one note's worth
/// of analysis per call, instead of keywords computed and stored for every note at sync.
pub(in crate::search) fn stored_keywords(
    g: &OpenGeneration,
    searcher: &tantivy::Searcher,
    entry: &schema::NoteEntry,
) -> Result<Vec<String>> {
    let q = kind_and_term(g, schema::KIND_CHUNK, g.fields.path, &entry.path);
    let mut text = format!("{}\n{}", entry.title, entry.description);
    for addr in searcher.search(&q, &DocSetCollector).map_err(search_err)? {
        let doc: TantivyDocument = searcher.doc(addr).map_err(search_err)?;
        text.push('\n');
        text.push_str(&stored_text(&doc, g.fields.body));
    }
    Ok(schema::keywords(&text))
}

/// Notes related to `target` by its stored keywords, tags and title, or by its stored vectors
/// (generation data only).
pub fn suggest_related(root: &Path, policy: &LoadedPolicy, target: &str, method: RelatedMethod, max_results: usize) -> Result<RelatedHits> {
    let cap = MAX_RESULTS_LIMIT.min(policy.policy.search.max_results_cap);
    if !(1..=cap).contains(&max_results) {
        return Err(Error::InvalidArgument { name: "max_results", reason: format!("must be in 1..={cap}") });
    }
    let target = VaultPath::parse(target)?;
    let g: Arc<OpenGeneration> = generation::acquire(root, policy)?.generation;
    let entry = note_entry(&g, target.as_str())?.ok_or_else(|| Error::InvalidArgument {
        name: "target",
        reason: format!("'{}' is not in the published search generation", target.as_str()),
    })?;
    let me = target.as_str().to_string();
    let keep = |p: &str| p != me;
    // P.O.W.E.R. reports a labelled fallback to keyword when semantic cannot run.
    let (method, fallback_reason) = match (method, g.dense()?) {
        (RelatedMethod::Semantic, None) => (
            RelatedMethod::Keyword,
            Some(
                "dense_index_unavailable: the active generation has no dense vectors (sync_vault fts_only=false builds them); ran keyword"
                    .to_string(),
            ),
        ),
        (method, _) => (method, None),
    };
    let hits = match method {
        RelatedMethod::Keyword => {
            let mut analysed = query::analyse(&format!("{} {}", entry.title, entry.tags.join(" ")));
            for keyword in stored_keywords(&g, &g.searcher()?, &entry)? {
                analysed.add_term(keyword);
            }
            // A related-notes query weighs each distinct keyword once.
            analysed.terms.values_mut().for_each(|n| *n = 1);
            ranked_notes(&g, &policy.policy.search, &analysed, max_results, &keep)?
        }
        RelatedMethod::Semantic => {
            let view = g.dense()?.ok_or_else(|| Error::DenseIndexUnavailable {
                reason: "semantic suggestions read stored vectors and the active generation has no dense index".into(),
            })?;
            let centre = view
                .note_vector(dense::note_key(&me))
                .ok_or_else(|| Error::InvalidArgument { name: "target", reason: format!("'{me}' has no stored chunk vectors") })?;
            modes::dense_notes(&g, &view, &centre, max_results, &keep)?
        }
    };
    let mut out = Vec::new();
    for hit in hits {
        let title = note_entry(&g, &hit.path)?.map(|e| e.title.clone()).unwrap_or_default();
        out.push(Related { path: hit.path, title, score: f64::from(hit.score) });
    }
    Ok(RelatedHits { related: out, method, fallback_reason })
}
