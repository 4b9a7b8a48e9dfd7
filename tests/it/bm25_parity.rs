//! fts against the reference BM25 itself (bm25s, Lucene BM25 k1 0.9 b 0.4, English stop words,
//! PyStemmer's Snowball stemmer: `../shared/scripts/baseline_eval.py`'s recipe), not a score on
//! a judged set: SciFact's and Cranfield's documents written as notes, and 500 seeded random
//! queries per collection of 1 to 300 words cut from the documents' own text (stop words,
//! digits, punctuation, repeated stretches). paravault's top 10 must equal bm25s's on ≥ 98 % of
//! positions (a position also agrees when the two documents there tie in bm25s's score) and
//! every score both rank must agree to 1e-4 relative after the one constant factor between
//! them (1 for the shipped scorer). Prints what disagrees.
//!
//! A query holding a double quote is a paravault phrase query: its words score as BM25 words,
//! and a document holding the quoted phrase also gets the phrase's score (an operator bm25s has
//! not). Such queries count in the position figure; their scores are reported apart.
//!
//! Needs `python3` with `bm25s` and `PyStemmer` (PyPI); the test fails, saying how to install
//! them, without them. Seconds: no model, two fts syncs.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;

use paravault::inventory::Inventory;
use paravault::policy::LoadedPolicy;
use paravault::search::{self, SearchRequest, SyncOptions};

/// Queries per collection.
const QUERIES: usize = 500;
const DEPTH: usize = 10;
/// The reference's parameters (Anserini's defaults), which the shipped policy names.
const K1: f64 = 0.9;
const B: f64 = 0.4;

fn eval_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("shared").join("eval").join(name)
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn note_path(id: &str) -> String {
    let safe: String = id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    format!("03_Resources/{safe}.md")
}

/// splitmix64, seeded: the same queries on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A collection written as a vault: (vault, policy, [(note path, the text its BM25 field holds)]).
fn vault(name: &str) -> (tempfile::TempDir, LoadedPolicy, Vec<(String, String)>) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(dir.path().join("03_Resources")).expect("folder");
    let corpus = std::fs::File::open(eval_dir(name).join("corpus.jsonl.gz")).expect("corpus present");
    let mut docs = Vec::new();
    for line in BufReader::new(flate2::read::GzDecoder::new(corpus)).lines() {
        let doc: serde_json::Value = serde_json::from_str(&line.expect("line")).expect("json");
        let id = doc["_id"].as_str().expect("id");
        let text = collapse(doc["text"].as_str().unwrap_or(""));
        let mut title: String = collapse(doc["title"].as_str().unwrap_or("")).chars().take(200).collect();
        if title.is_empty() {
            title = format!("Document {id}");
        }
        let note = format!(
            "---\ntype: Resource\ntitle: {}\ntimestamp: 2024-01-01T00:00:00Z\n---\n{text}\n",
            serde_json::to_string(&title).expect("string")
        );
        std::fs::write(dir.path().join(note_path(id)), note).expect("write note");
        // The body field holds the text and the title (the reference: title and text as one
        // field); the same words go to bm25s.
        docs.push((note_path(id), format!("{title} {text}")));
    }
    // `PARAVAULT_PARITY_POLICY` adds search settings for a local experiment (e.g.
    // "  bm25_lengths: quantised\n"); empty in CI, where the shipped policy is measured.
    let extra = std::env::var("PARAVAULT_PARITY_POLICY").unwrap_or_default();
    let policy = LoadedPolicy::from_texts(Some(&format!(
        "metadata:\n  required_fields: [type, title, timestamp]\nsearch:\n  query_chars_max: 100000\n{extra}"
    )))
    .expect("policy");
    let inventory = Inventory::load(dir.path(), &policy).expect("inventory");
    search::sync(dir.path(), &policy, &inventory, SyncOptions::default()).expect("sync");
    (dir, policy, docs)
}

/// `QUERIES` queries of 1 to 300 words: a stretch of a document's words as written (wrapping
/// into the next document), a third of them 1-10 words, a third 11-60, a third 61-300; one in
/// five repeats a stretch of itself.
fn queries(docs: &[(String, String)], seed: u64) -> Vec<String> {
    let words: Vec<Vec<&str>> = docs.iter().map(|(_, t)| t.split_whitespace().collect()).collect();
    let mut rng = Rng(seed);
    (0..QUERIES)
        .map(|i| {
            let len = match i % 3 {
                0 => 1 + rng.below(10),
                1 => 11 + rng.below(50),
                _ => 61 + rng.below(240),
            };
            let mut d = rng.below(words.len());
            let mut at = rng.below(words[d].len());
            let mut out: Vec<&str> = Vec::with_capacity(len);
            while out.len() < len {
                if at >= words[d].len() {
                    d = (d + 1) % words.len();
                    at = 0;
                    continue;
                }
                out.push(words[d][at]);
                at += 1;
            }
            if rng.below(5) == 0 {
                let from = rng.below(out.len());
                let to = from + 1 + rng.below((out.len() - from).min(20));
                let repeat: Vec<&str> = out[from..to].to_vec();
                let at = rng.below(out.len() + 1);
                out.splice(at..at, repeat);
            }
            out.join(" ")
        })
        .collect()
}

/// bm25s's top `2 * DEPTH` per query: (note path, score).
fn reference(docs: &[(String, String)], queries: &[String]) -> Vec<Vec<(String, f64)>> {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("in.json");
    let output = dir.path().join("out.json");
    std::fs::write(&input, serde_json::to_string(&serde_json::json!({ "docs": docs, "queries": queries })).expect("json")).expect("write");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/bm25_parity.py");
    let run = Command::new("python3")
        .arg(&script)
        .arg(&input)
        .arg(&output)
        .arg(K1.to_string())
        .arg(B.to_string())
        .arg((2 * DEPTH).to_string())
        .output();
    let run = match run {
        Ok(run) => run,
        Err(e) => panic!("the BM25 parity test needs python3 ({e}) with bm25s and PyStemmer: python3 -m pip install bm25s PyStemmer"),
    };
    assert!(
        run.status.success(),
        "the reference BM25 (tests/it/bm25_parity.py) failed; it needs python3 with bm25s and PyStemmer (python3 -m pip install bm25s PyStemmer):\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let out: serde_json::Value = serde_json::from_slice(&std::fs::read(&output).expect("output")).expect("json");
    out["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|q| {
            q.as_array()
                .expect("hits of a query")
                .iter()
                .map(|h| (h[0].as_str().expect("id").to_string(), h[1].as_f64().expect("score")))
                .collect()
        })
        .collect()
}

fn relative(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1e-12)
}

/// Whether paravault reads `query` as holding a quoted phrase.
fn quoted(query: &str) -> bool {
    query.contains(['"', '\u{201c}', '\u{201d}'])
}

/// (positions agreeing, positions compared, scores within 1e-4, scores compared, constant
/// factor), the scores of queries without a quoted phrase.
fn parity(name: &str, seed: u64) -> (usize, usize, usize, usize, f64) {
    let (vault, policy, docs) = vault(name);
    let queries = queries(&docs, seed);
    let reference = reference(&docs, &queries);
    let paths: HashMap<&str, ()> = docs.iter().map(|(p, _)| (p.as_str(), ())).collect();
    let mut ours: Vec<Vec<(String, f64)>> = Vec::with_capacity(queries.len());
    for q in &queries {
        let env = search::search(vault.path(), &policy, SearchRequest::fts(q, DEPTH, chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap()))
            .expect("search");
        ours.push(env.results.iter().map(|r| (r.source.path.clone(), r.score)).collect());
    }
    // The constant factor: the median ratio over the documents both rank (1 for Lucene's formula).
    let mut ratios: Vec<f64> = Vec::new();
    for (mine, theirs) in ours.iter().zip(&reference) {
        let theirs: HashMap<&str, f64> = theirs.iter().map(|(p, s)| (p.as_str(), *s)).collect();
        ratios.extend(mine.iter().filter_map(|(p, s)| theirs.get(p.as_str()).map(|t| s / t)));
    }
    ratios.sort_by(f64::total_cmp);
    let factor = ratios.get(ratios.len() / 2).copied().unwrap_or(1.0);
    let (mut agree, mut positions, mut close, mut compared) = (0, 0, 0, 0);
    let (mut phrase_queries, mut phrase_close, mut phrase_compared) = (0, 0, 0);
    let mut shown = 0;
    for (i, ((mine, theirs), q)) in ours.iter().zip(&reference).zip(&queries).enumerate() {
        let score_of: HashMap<&str, f64> = theirs.iter().map(|(p, s)| (p.as_str(), *s)).collect();
        let want: Vec<&(String, f64)> = theirs.iter().take(DEPTH).collect();
        for rank in 0..want.len().max(mine.len()) {
            positions += 1;
            let ok = match (mine.get(rank), want.get(rank)) {
                (Some((p, _)), Some((t, ts))) => p == t || score_of.get(p.as_str()).is_some_and(|s| relative(*s, *ts) <= 1e-6),
                _ => false,
            };
            if ok {
                agree += 1;
            } else if shown < 25 {
                shown += 1;
                println!(
                    "{name} query {i} ({} words) rank {}: paravault {:?} bm25s {:?} (\"{}\")",
                    q.split_whitespace().count(),
                    rank + 1,
                    mine.get(rank),
                    want.get(rank),
                    q.chars().take(80).collect::<String>()
                );
            }
        }
        let phrase = quoted(q);
        phrase_queries += usize::from(phrase);
        for (p, s) in mine {
            if let Some(t) = score_of.get(p.as_str()) {
                let within = relative(s / factor, *t) <= 1e-4;
                if phrase {
                    phrase_compared += 1;
                    phrase_close += usize::from(within);
                    continue;
                }
                compared += 1;
                if within {
                    close += 1;
                } else if shown < 25 {
                    shown += 1;
                    println!("{name} query {i}: {p} scores {s} here, {t} in bm25s (factor {factor})");
                }
            }
        }
        assert!(mine.iter().all(|(p, _)| paths.contains_key(p.as_str())), "unknown path");
    }
    println!(
        "{name}: top-{DEPTH} positions agreeing {agree}/{positions} = {:.4}; scores within 1e-4 {close}/{compared}; constant factor {factor:.6}; {phrase_queries} queries with a quoted phrase: scores within 1e-4 {phrase_close}/{phrase_compared}",
        agree as f64 / positions.max(1) as f64
    );
    (agree, positions, close, compared, factor)
}

#[test]
fn fts_equals_the_reference_bm25_on_random_queries() {
    let mut failures = Vec::new();
    for (name, seed) in [("scifact", 51), ("cranfield", 52)] {
        let (agree, positions, close, compared, factor) = parity(name, seed);
        let share = agree as f64 / positions.max(1) as f64;
        if share < 0.98 {
            failures.push(format!("{name}: top-10 positions agree {share:.4} < 0.98"));
        }
        if close < compared {
            failures.push(format!("{name}: {} of {compared} scores differ by more than 1e-4 (factor {factor})", compared - close));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("; "));
}
