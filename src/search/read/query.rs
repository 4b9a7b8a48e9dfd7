//! User query text → a tantivy query that can never fail to parse: words and "quoted phrases"
//! are extracted by hand (any Unicode letters or digits), run through the index analyzer, and
//! OR-ed over the fields with a positive policy boost (by default the body alone), scored with
//! the BM25 statistics of `Bm25Statistics`.

use std::collections::BTreeSet;

use tantivy::Term;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, PhraseQuery, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};

use crate::policy::Boosts;
use crate::search::schema::{self, Fields};

/// One piece of the user's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clause {
    Word(String),
    Phrase(String),
}

/// Splits user text into words and quoted phrases. An unterminated quote runs to the end.
pub fn clauses(text: &str) -> Vec<Clause> {
    let mut out = Vec::new();
    let mut in_phrase = false;
    let mut current = String::new();
    let flush_word = |current: &mut String, out: &mut Vec<Clause>| {
        if !current.is_empty() {
            out.push(Clause::Word(std::mem::take(current)));
        }
    };
    for c in text.chars() {
        if matches!(c, '"' | '\u{201c}' | '\u{201d}') {
            if in_phrase {
                if !current.trim().is_empty() {
                    out.push(Clause::Phrase(current.trim().to_string()));
                }
                current.clear();
            } else {
                flush_word(&mut current, &mut out);
            }
            in_phrase = !in_phrase;
        } else if in_phrase || c.is_alphanumeric() {
            current.push(c);
        } else {
            flush_word(&mut current, &mut out);
        }
    }
    if in_phrase {
        if !current.trim().is_empty() {
            out.push(Clause::Phrase(current.trim().to_string()));
        }
    } else {
        flush_word(&mut current, &mut out);
    }
    out
}

/// The analysed query: distinct stemmed terms and phrases (as positioned token lists).
#[derive(Debug, Clone, Default)]
pub struct Analysed {
    pub terms: BTreeSet<String>,
    pub phrases: Vec<Vec<(usize, String)>>,
}

impl Analysed {
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty() && self.phrases.is_empty()
    }

    /// Every stemmed token, for locating snippets.
    pub fn all_tokens(&self) -> BTreeSet<String> {
        let mut all = self.terms.clone();
        for p in &self.phrases {
            all.extend(p.iter().map(|(_, t)| t.clone()));
        }
        all
    }
}

pub fn analyse(text: &str) -> Analysed {
    let mut analyzer = schema::analyzer();
    let mut out = Analysed::default();
    for clause in clauses(text) {
        match clause {
            Clause::Word(w) => out.terms.extend(schema::tokens(&mut analyzer, &w).into_iter().map(|(_, t, _)| t)),
            Clause::Phrase(p) => {
                let toks: Vec<(usize, String)> = schema::tokens(&mut analyzer, &p).into_iter().map(|(pos, t, _)| (pos, t)).collect();
                match toks.len() {
                    0 => {}
                    1 => out.terms.extend(toks.into_iter().map(|(_, t)| t)),
                    _ => out.phrases.push(toks),
                }
            }
        }
    }
    out
}

fn weighted_fields(fields: &Fields, boosts: &Boosts) -> Vec<(Field, f32)> {
    vec![
        (fields.title, boosts.title),
        (fields.tags, boosts.tags),
        (fields.description, boosts.description),
        (fields.section, boosts.section),
        (fields.body, boosts.body),
    ]
    .into_iter()
    .filter(|(_, b)| *b > 0.0)
    .collect()
}

/// Builds the OR query over the weighted fields; `None` when nothing searchable remains.
///
/// Every (term, field) pair is one boosted `TermQuery` clause of a flat disjunction, so each
/// field's BM25 contribution adds up (multi-field BM25) and tantivy can answer the top-k with
/// block-max WAND, skipping posting blocks that cannot reach the current top-k (a dis-max per
/// term would force an exhaustive union over every matching document). Phrases add one boosted
/// `PhraseQuery` clause for the title and one for the body, the fields that index positions.
pub fn build(fields: &Fields, boosts: &Boosts, analysed: &Analysed) -> Option<Box<dyn Query>> {
    if analysed.is_empty() {
        return None;
    }
    let weighted = weighted_fields(fields, boosts);
    let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for term in &analysed.terms {
        for (field, boost) in &weighted {
            let q = TermQuery::new(Term::from_field_text(*field, term), IndexRecordOption::WithFreqs);
            should.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), *boost))));
        }
    }
    for phrase in &analysed.phrases {
        let first = phrase.first().map_or(0, |(p, _)| *p);
        // Only the title and the body index positions (the body also holds the section).
        for (field, boost) in weighted.iter().filter(|(f, _)| *f == fields.title || *f == fields.body) {
            let terms: Vec<(usize, Term)> = phrase.iter().map(|(p, t)| (p - first, Term::from_field_text(*field, t))).collect();
            should.push((Occur::Should, Box::new(BoostQuery::new(Box::new(PhraseQuery::new_with_offset(terms)), *boost))));
        }
    }
    Some(Box::new(BooleanQuery::new(should)))
}

/// The BM25 statistics the scorer sees: the collection is the chunk documents only (the
/// per-note documents carry no text, yet tantivy would count them in N and halve the average
/// length), and the average length is scaled so that tantivy's fixed k1 = 1.2, b = 0.75 score
/// exactly as BM25 with the policy's k1.
///
/// With the average length scaled by c, tantivy's length term 1.2 (0.25 + 0.75 dl / (c avgdl))
/// equals k1' (1 - b' + b' dl / avgdl) with k1' = 0.3 + 0.9 / c and b' = 1 - 0.3 / k1': every
/// BM25 with k1 (1 - b) = 0.3 is reachable, and no other (tantivy's block-max scorer has no
/// k1/b setting). The policy names k1; c = 0.9 / (k1 - 0.3). The score's constant factor
/// (k1 + 1) scales every term alike and leaves the ranking unchanged. k1 = 1.2 is tantivy as
/// is; the default k1 = 0.9 (Anserini's, as the reference runs) gives b = 2/3, whose length
/// term equals Lucene's k1 0.9, b 0.4 at the average length.
pub(crate) struct Bm25Statistics<'a> {
    searcher: &'a tantivy::Searcher,
    chunk_docs: u64,
    length_scale: f64,
}

impl<'a> Bm25Statistics<'a> {
    pub fn new(searcher: &'a tantivy::Searcher, fields: &Fields, k1: f32) -> tantivy::Result<Self> {
        let chunk_docs = searcher.doc_freq(&Term::from_field_text(fields.doc_kind, schema::KIND_CHUNK))?;
        Ok(Bm25Statistics { searcher, chunk_docs: chunk_docs.max(1), length_scale: Self::length_scale(k1) })
    }

    /// The factor the average length is multiplied by for `k1`.
    pub fn length_scale(k1: f32) -> f64 {
        0.9 / (f64::from(k1).max(0.35) - 0.3)
    }
}

impl tantivy::query::Bm25StatisticsProvider for Bm25Statistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let tokens = tantivy::query::Bm25StatisticsProvider::total_num_tokens(self.searcher, field)?;
        Ok(((tokens as f64) * self.length_scale).round().max(1.0) as u64)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.chunk_docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        // A term's document frequency can never exceed N (idf asserts it).
        Ok(self.searcher.doc_freq(term)?.min(self.chunk_docs))
    }
}
