//! User query text → a tantivy query that can never fail to parse: words and "quoted phrases"
//! are extracted by hand (any Unicode letters or digits), run through the index analyzer, and
//! OR-ed over title, tags, description, section and body with the policy's BM25 field boosts.

use std::collections::BTreeSet;

use tantivy::Term;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, PhraseQuery, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};

use super::schema::{self, Fields};
use crate::policy::Boosts;

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
