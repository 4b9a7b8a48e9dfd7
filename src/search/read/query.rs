//! User query text → a tantivy query that can never fail to parse: words and "quoted phrases"
//! are extracted by hand (runs of word characters), run through the index analyzer, and scored
//! as one Lucene BM25 disjunction (`bm25::Bm25Query`) over the fields with a positive policy
//! boost (by default the body alone); a quoted phrase's words count as words, and the phrase
//! adds a `PhraseQuery` clause on top.

use std::collections::{BTreeMap, BTreeSet};

use tantivy::Term;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, PhraseQuery, Query};
use tantivy::schema::Field;

use super::bm25::{Bm25Params, Bm25Query, LengthNorm, ScoredField};
use crate::policy::{Boosts, SearchPolicy};
use crate::search::schema::{self, Fields};
use crate::search::words::is_word_char;

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
        } else if in_phrase || is_word_char(c) {
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

/// The analysed query: stemmed terms with how many times the query holds each (BM25 sums a
/// repeated word, as the reference does), and phrases (as positioned token lists).
#[derive(Debug, Clone, Default)]
pub struct Analysed {
    pub terms: BTreeMap<String, u32>,
    pub phrases: Vec<Vec<(usize, String)>>,
}

impl Analysed {
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty() && self.phrases.is_empty()
    }

    /// Counts `term` once more.
    pub fn add_term(&mut self, term: String) {
        *self.terms.entry(term).or_default() += 1;
    }

    /// Every stemmed token, for locating snippets.
    pub fn all_tokens(&self) -> BTreeSet<String> {
        let mut all: BTreeSet<String> = self.terms.keys().cloned().collect();
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
            Clause::Word(w) => {
                for (_, t, _) in schema::tokens(&mut analyzer, &w) {
                    out.add_term(t);
                }
            }
            Clause::Phrase(p) => {
                let toks: Vec<(usize, String)> = schema::tokens(&mut analyzer, &p).into_iter().map(|(pos, t, _)| (pos, t)).collect();
                for (_, t) in &toks {
                    out.add_term(t.clone());
                }
                if toks.len() > 1 {
                    out.phrases.push(toks);
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

/// The policy's BM25 parameters.
pub fn params(search: &SearchPolicy) -> Bm25Params {
    let lengths = if search.bm25_lengths == "quantised" { LengthNorm::Quantised } else { LengthNorm::Exact };
    Bm25Params { k1: search.bm25_k1, b: search.bm25_b, lengths }
}

/// Builds the query; `None` when nothing searchable remains.
///
/// The terms are one `Bm25Query` over the weighted fields (each field's contribution adds up:
/// multi-field BM25 when a vault boosts more than the body); it prunes the top-k itself
/// (block-max MaxScore). Phrases add one boosted `PhraseQuery` clause for the title and one for the body,
/// the fields that index positions; a query with phrases is scored exhaustively.
pub fn build(fields: &Fields, search: &SearchPolicy, analysed: &Analysed) -> Option<Box<dyn Query>> {
    if analysed.is_empty() {
        return None;
    }
    let weighted = weighted_fields(fields, &search.boosts);
    let bm25: Box<dyn Query> = Box::new(bm25(fields, search, analysed)?);
    if analysed.phrases.is_empty() {
        return Some(bm25);
    }
    let mut should: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Should, bm25)];
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

/// The terms' `Bm25Query` of `build` (the whole query when it has no phrase); `None` when
/// nothing searchable remains.
pub(crate) fn bm25(fields: &Fields, search: &SearchPolicy, analysed: &Analysed) -> Option<Bm25Query> {
    if analysed.is_empty() {
        return None;
    }
    let weighted = weighted_fields(fields, &search.boosts);
    let scored: Vec<ScoredField> = weighted
        .iter()
        .map(|(field, boost)| ScoredField {
            field: *field,
            boost: *boost,
            exact_lengths: (*field == fields.body).then_some(schema::BODY_LEN),
        })
        .collect();
    let terms: Vec<(String, u32)> = analysed.terms.iter().map(|(t, n)| (t.clone(), *n)).collect();
    let population = Term::from_field_text(fields.doc_kind, schema::KIND_CHUNK);
    Some(Bm25Query::new(scored, terms, population, params(search)))
}

/// The BM25 statistics tantivy's own scorers (the phrase clauses) see: the collection is the
/// chunk documents only (the per-note documents carry no text, yet tantivy would count them
/// in N and halve the average length). The terms' `Bm25Query` computes the same N itself.
pub(crate) struct Bm25Statistics<'a> {
    searcher: &'a tantivy::Searcher,
    chunk_docs: u64,
}

impl<'a> Bm25Statistics<'a> {
    pub fn new(searcher: &'a tantivy::Searcher, fields: &Fields) -> tantivy::Result<Self> {
        let chunk_docs = searcher.doc_freq(&Term::from_field_text(fields.doc_kind, schema::KIND_CHUNK))?;
        Ok(Bm25Statistics { searcher, chunk_docs: chunk_docs.max(1) })
    }
}

impl tantivy::query::Bm25StatisticsProvider for Bm25Statistics<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        tantivy::query::Bm25StatisticsProvider::total_num_tokens(self.searcher, field)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.chunk_docs)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        // A term's document frequency can never exceed N (idf asserts it).
        Ok(self.searcher.doc_freq(term)?.min(self.chunk_docs))
    }
}
