//! Ranking a few texts held in memory (not a vault's notes) by BM25: tantivy over an in-RAM
//! index, for lists too small and short-lived to publish as a generation (vaultspec's catalog of
//! CLI verbs). Query syntax is not interpreted: operators are read as spaces.

use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{STORED, Schema, TEXT, Value as _};
use tantivy::{Index, TantivyDocument, doc};

use crate::error::{Error, Result};

/// The positions in `texts` of the `limit` texts that best match `query`, with their BM25 scores,
/// best first. `action` names what is ranked in an error.
pub fn rank_texts(texts: &[String], query: &str, limit: usize, action: &'static str) -> Result<Vec<(usize, f32)>> {
    let failed = |reason: tantivy::TantivyError| Error::SearchIndex { action, reason: reason.to_string() };
    let mut builder = Schema::builder();
    let position = builder.add_u64_field("position", STORED);
    let text = builder.add_text_field("text", TEXT);
    let index = Index::create_in_ram(builder.build());
    let mut writer = index.writer_with_num_threads(1, 15_000_000).map_err(failed)?;
    for (i, body) in texts.iter().enumerate() {
        writer.add_document(doc!(position => i as u64, text => body.as_str())).map_err(failed)?;
    }
    writer.commit().map_err(failed)?;
    let searcher = index.reader().map_err(failed)?.searcher();
    let (parsed, _) = QueryParser::for_index(&index, vec![text])
        .parse_query_lenient(&query.replace(['"', ':', '(', ')', '[', ']', '{', '}', '^', '~', '+', '-'], " "));
    let top = searcher.search(&parsed, &TopDocs::with_limit(limit).order_by_score()).map_err(failed)?;
    let mut ranked = Vec::with_capacity(top.len());
    for (score, address) in top {
        let document: TantivyDocument = searcher.doc(address).map_err(failed)?;
        if let Some(i) = document.get_first(position).and_then(|v| v.as_u64()) {
            ranked.push((i as usize, score));
        }
    }
    Ok(ranked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_match_comes_first_and_operators_are_words() {
        let texts = ["goals add a goal".to_string(), "lint the vault".to_string(), "search the vault for notes".to_string()];
        let ranked = rank_texts(&texts, "search: notes (vault)", 2, "ranking a test list").unwrap();
        assert_eq!(ranked.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [2, 1]);
        assert!(ranked[0].1 > ranked[1].1);
        assert!(rank_texts(&texts, "absent", 5, "ranking a test list").unwrap().is_empty());
    }
}
