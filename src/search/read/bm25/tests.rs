//! Tests of the BM25 scorer: a property test against the formula on small random indexes.

use std::collections::HashMap;

use proptest::prelude::*;
use tantivy::collector::TopDocs;
use tantivy::postings::Postings;
use tantivy::query::{EnableScoring, Query, Scorer};
use tantivy::schema::IndexRecordOption;
use tantivy::{DocSet, Index, IndexWriter, TantivyDocument, Term};

use super::blocks::Blocks;
use super::{Bm25Params, Bm25Query, LengthNorm, ScoredField, idf};
use crate::search::schema::{self, Fields};

/// Words the stemmer leaves alone, so the direct formula can count them as written.
const VOCABULARY: [&str; 8] = ["rock", "tree", "lamp", "fish", "wind", "gold", "salt", "moon"];

/// A RAM index of `docs` (each a list of vocabulary indexes), one commit per `per_segment`.
fn index(docs: &[Vec<usize>], per_segment: usize) -> (Index, Fields) {
    let index = Index::create_in_ram(schema::build_schema());
    schema::register(&index);
    let fields = Fields::of(&index.schema()).expect("fields");
    let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000).expect("writer");
    for (i, words) in docs.iter().enumerate() {
        let text: Vec<&str> = words.iter().map(|&w| VOCABULARY[w]).collect();
        let text = text.join(" ");
        let mut doc = TantivyDocument::default();
        doc.add_text(fields.doc_kind, schema::KIND_CHUNK);
        doc.add_u64(fields.note_key, i as u64);
        doc.add_u64(fields.body_len, schema::token_count(&text));
        doc.add_text(fields.body, &text);
        writer.add_document(doc).expect("add");
        if (i + 1) % per_segment == 0 {
            writer.commit().expect("commit");
        }
    }
    writer.commit().expect("commit");
    (index, fields)
}

/// BM25 straight from its definition, per document (0 when nothing matches).
fn direct(docs: &[Vec<usize>], query: &[usize], k1: f64, b: f64) -> Vec<f64> {
    let n = docs.len() as u64;
    let avgdl = docs.iter().map(Vec::len).sum::<usize>() as f64 / n as f64;
    let df = |w: usize| docs.iter().filter(|d| d.contains(&w)).count() as u64;
    docs.iter()
        .map(|d| {
            query
                .iter()
                .map(|&w| {
                    let tf = d.iter().filter(|&&x| x == w).count() as f64;
                    if tf == 0.0 { 0.0 } else { idf(df(w), n) * tf / (tf + k1 * (1.0 - b + b * d.len() as f64 / avgdl)) }
                })
                .sum()
        })
        .collect()
}

fn query(fields: &Fields, words: &[usize], k1: f32, b: f32, lengths: LengthNorm) -> Bm25Query {
    let mut counts: HashMap<&str, u32> = HashMap::new();
    for &w in words {
        *counts.entry(VOCABULARY[w]).or_default() += 1;
    }
    Bm25Query::new(
        vec![ScoredField { field: fields.body, boost: 1.0, exact_lengths: Some(schema::BODY_LEN) }],
        counts.into_iter().map(|(t, n)| (t.to_string(), n)).collect(),
        Term::from_field_text(fields.doc_kind, schema::KIND_CHUNK),
        Bm25Params { k1, b, lengths },
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-5 * a.abs().max(b.abs()).max(1e-3)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every document's score (the exhaustive scorer) and the top k (MaxScore pruning) equal
    /// the formula, whatever k1, b, segmenting and repeats in the query.
    #[test]
    fn the_scorer_is_the_formula(
        docs in prop::collection::vec(prop::collection::vec(0usize..8, 1..40), 1..60),
        words in prop::collection::vec(0usize..8, 1..8),
        k1 in 0.0f32..3.0,
        b in 0.0f32..=1.0,
        per_segment in 1usize..30,
        k in 1usize..12,
    ) {
        let (index, fields) = index(&docs, per_segment);
        let searcher = index.reader().expect("reader").searcher();
        let want = direct(&docs, &words, f64::from(k1), f64::from(b));
        let q = query(&fields, &words, k1, b, LengthNorm::Exact);
        // Exhaustive: every document, by its number (the `note_key` fast field).
        let weight = q.weight(EnableScoring::enabled_from_searcher(&searcher)).expect("weight");
        let mut got = vec![0f64; docs.len()];
        for reader in searcher.segment_readers() {
            let keys = reader.fast_fields().u64("note_key").expect("note_key");
            let mut scorer = weight.scorer(reader, 1.0).expect("scorer");
            while scorer.doc() != tantivy::TERMINATED {
                got[keys.first(scorer.doc()).expect("a key") as usize] = f64::from(scorer.score());
                scorer.advance();
            }
        }
        prop_assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            prop_assert!(close(*g, *w), "doc {}: scorer {} formula {}", i, g, w);
        }
        // Pruned top k: the same k best scores as the formula's.
        let top = searcher.search(&q, &TopDocs::with_limit(k).order_by_score()).expect("search");
        let mut best: Vec<f64> = want.iter().copied().filter(|s| *s > 0.0).collect();
        best.sort_by(|a, b| b.total_cmp(a));
        best.truncate(k);
        prop_assert_eq!(top.len(), best.len());
        for ((score, _), w) in top.iter().zip(&best) {
            prop_assert!(close(f64::from(*score), *w), "top: {} vs {}", score, w);
        }
    }
}

/// Quantised lengths are Lucene's: exact up to 40 tokens, so a short-document index scores the
/// same either way, and a long document is scored with its one-byte norm.
#[test]
fn quantised_lengths_are_exact_for_short_documents_only() {
    let docs: Vec<Vec<usize>> = vec![vec![0, 1, 2], vec![0; 30], [vec![0], vec![1; 200]].concat(), vec![3, 4]];
    let (index, fields) = index(&docs, 10);
    let searcher = index.reader().expect("reader").searcher();
    let scores = |lengths| {
        let q = query(&fields, &[0], 0.9, 0.4, lengths);
        let mut s: Vec<(u32, f32)> = searcher
            .search(&q, &TopDocs::with_limit(10).order_by_score())
            .expect("search")
            .into_iter()
            .map(|(s, a)| (a.doc_id, s))
            .collect();
        s.sort_by_key(|(d, _)| *d);
        s
    };
    let exact = scores(LengthNorm::Exact);
    let quantised = scores(LengthNorm::Quantised);
    let want = direct(&docs, &[0], 0.9, 0.4);
    assert!(close(f64::from(exact[2].1), want[2]), "{exact:?} {want:?}");
    assert!(close(f64::from(quantised[0].1), want[0]) && close(f64::from(quantised[1].1), want[1]), "{quantised:?}");
    // 201 tokens has the one-byte norm 200 (a bucket's floor): a little higher than exact.
    assert!(quantised[2].1 > exact[2].1, "{quantised:?} {exact:?}");
}

/// Posting lists of many full 128-document blocks over two segments (the small property-test
/// indexes never reach them): the pruned top k still equals the formula's, for skewed lengths
/// and several k1, b and k.
#[test]
fn pruning_never_loses_a_top_document_on_long_posting_lists() {
    let mut state = 0x51u64;
    let mut next = |n: usize| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) as usize) % n
    };
    let docs: Vec<Vec<usize>> = (0..3000)
        .map(|_| {
            let len = 1 + if next(10) == 0 { next(400) } else { next(40) };
            // Skewed word frequencies: word w with weight 1/(w+1).
            (0..len).map(|_| next(8).min(next(8))).collect()
        })
        .collect();
    let (index, fields) = index(&docs, 1500);
    let searcher = index.reader().expect("reader").searcher();
    for (words, k1, b, k) in [
        (vec![0], 0.9, 0.4, 10),
        (vec![7], 0.9, 0.4, 1),
        (vec![0, 1], 1.2, 0.75, 10),
        (vec![3, 5, 5, 7], 0.9, 0.4, 5),
        (vec![0, 1, 2, 3, 4, 5, 6, 7], 0.5, 1.0, 50),
        (vec![6, 7], 2.0, 0.0, 10),
    ] {
        let want = direct(&docs, &words, f64::from(k1), f64::from(b));
        let q = query(&fields, &words, k1, b, LengthNorm::Exact);
        let top = searcher.search(&q, &TopDocs::with_limit(k).order_by_score()).expect("search");
        let mut best: Vec<f64> = want.iter().copied().filter(|s| *s > 0.0).collect();
        best.sort_by(|a, b| b.total_cmp(a));
        best.truncate(k);
        assert_eq!(top.len(), best.len(), "{words:?}");
        for ((score, _), w) in top.iter().zip(&best) {
            assert!(close(f64::from(*score), *w), "{words:?} k1 {k1} b {b} k {k}: {score} vs {w}");
        }
    }
}

/// Every document's exhaustive score, best first: (score, segment, document).
fn exhaustive(searcher: &tantivy::Searcher, q: &Bm25Query) -> Vec<(f32, u32, u32)> {
    let weight = q.weight(EnableScoring::enabled_from_searcher(searcher)).expect("weight");
    let mut all = Vec::new();
    for (ord, reader) in searcher.segment_readers().iter().enumerate() {
        let mut scorer = weight.scorer(reader, 1.0).expect("scorer");
        while scorer.doc() != tantivy::TERMINATED {
            all.push((scorer.score(), ord as u32, scorer.doc()));
            scorer.advance();
        }
    }
    all.sort_by(|x, y| y.0.total_cmp(&x.0));
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Block-max pruning with small blocks, so that a posting list has many (the production
    /// 128 needs large indexes; the code path is the same): the pruned top k has the exhaustive
    /// top k's scores, and each document it returns has that score, for exact and quantised
    /// lengths, any k1, b, segmenting, repeated query words and k.
    #[test]
    fn block_pruned_top_k_is_the_exhaustive_top_k(
        docs in prop::collection::vec(prop::collection::vec((0usize..8, 0usize..8), 1..50), 1..300),
        words in prop::collection::vec(0usize..8, 1..6),
        k1 in 0.0f32..3.0,
        b in 0.0f32..=1.0,
        per_segment in 1usize..200,
        block in 1usize..12,
        k in 1usize..15,
        quantised in any::<bool>(),
    ) {
        // Skewed word frequencies (the smaller of two draws), so term frequencies vary.
        let docs: Vec<Vec<usize>> = docs.iter().map(|d| d.iter().map(|&(x, y)| x.min(y)).collect()).collect();
        let (index, fields) = index(&docs, per_segment);
        let searcher = index.reader().expect("reader").searcher();
        let lengths = if quantised { LengthNorm::Quantised } else { LengthNorm::Exact };
        let q = query(&fields, &words, k1, b, lengths).with_block(block);
        let all = exhaustive(&searcher, &q);
        let score_of: HashMap<(u32, u32), f32> = all.iter().map(|&(s, seg, d)| ((seg, d), s)).collect();
        let top = searcher.search(&q, &TopDocs::with_limit(k).order_by_score()).expect("search");
        prop_assert_eq!(top.len(), all.len().min(k));
        for ((score, addr), (want, _, _)) in top.iter().zip(&all) {
            prop_assert!(close(f64::from(*score), f64::from(*want)), "top: {} vs {}", score, want);
            let own = score_of.get(&(addr.segment_ord, addr.doc_id)).copied();
            prop_assert!(own.is_some_and(|s| close(f64::from(s), f64::from(*score))), "{:?}: {} vs {:?}", addr, score, own);
        }
    }
}

/// The blocks' bounds are each block's exact maximum (not merely above it: a loose bound would
/// prune less), for exact and quantised lengths.
#[test]
fn block_bounds_are_the_blocks_maxima() {
    let docs: Vec<Vec<usize>> =
        (0..700).map(|i| (0..(1 + (i * 37) % 90)).map(|j| if (i + j) % 3 == 0 { 0 } else { 1 + j % 7 }).collect()).collect();
    let (index, fields) = index(&docs, 700);
    let searcher = index.reader().expect("reader").searcher();
    let reader = &searcher.segment_readers()[0];
    let term = Term::from_field_text(fields.body, VOCABULARY[0]);
    let postings = || {
        reader
            .inverted_index(fields.body)
            .expect("inverted")
            .read_postings(&term, IndexRecordOption::WithFreqs)
            .expect("read")
            .expect("postings")
    };
    let exact = reader.fast_fields().u64(schema::BODY_LEN).expect("body_len");
    let norms = reader.get_fieldnorms_reader(fields.body).expect("norms");
    let (a, c) = (0.9 * 0.6, 0.9 * 0.4 / 30.0);
    for quantised in [false, true] {
        let dl = |doc: tantivy::DocId| if quantised { u64::from(norms.fieldnorm(doc)) } else { exact.first(doc).expect("a length") };
        let blocks = Blocks::build(postings(), 16, dl);
        let bounds: Vec<f64> = (0..blocks.len()).map(|i| blocks.bound(i, 2.0, a, c)).collect();
        assert_eq!(bounds.len(), blocks.last_doc.len());
        assert!(bounds.len() > 10, "{}", bounds.len());
        let mut p = postings();
        let mut maxima = vec![0f64; bounds.len()];
        let mut at = 0;
        for i in 0.. {
            let doc = p.doc();
            if doc == tantivy::TERMINATED {
                break;
            }
            let tf = f64::from(p.term_freq());
            let s = 2.0 * tf / (tf + (a + c * dl(doc) as f64));
            maxima[i / 16] = maxima[i / 16].max(s);
            assert!(doc <= blocks.last_doc[i / 16]);
            at = i / 16;
            p.advance();
        }
        assert_eq!(at + 1, bounds.len());
        assert_eq!(bounds, maxima, "quantised {quantised}");
    }
}
