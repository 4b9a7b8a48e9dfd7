//! BEIR retrieval harness: SciFact and Cranfield written as vault notes, synced, and every
//! judged test query run through `search` in fts mode; asserts nDCG@10 floors.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Instant;

use paravault::inventory::Inventory;
use paravault::policy::LoadedPolicy;
use paravault::search::{self, SearchRequest, SyncOptions};

fn eval_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("shared").join("eval").join(name)
}

fn yaml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn truncate_chars(text: &str, n: usize) -> String {
    text.chars().take(n).collect()
}

struct Run {
    ndcg10: f64,
    queries: usize,
    docs: usize,
    sync_ms: u128,
    query_p50_ms: f64,
    query_p99_ms: f64,
    publish_one_ms: Vec<f64>,
    index_bytes: u64,
}

fn run(name: &str) -> Run {
    let dir = eval_dir(name);
    let vault = tempfile::tempdir().expect("temp dir");
    let notes = vault.path().join("03_Resources");
    std::fs::create_dir_all(&notes).expect("create folder");
    let corpus = std::fs::File::open(dir.join("corpus.jsonl.gz")).expect("corpus present");
    let mut docs = 0;
    for line in BufReader::new(flate2::read::GzDecoder::new(corpus)).lines() {
        let line = line.expect("corpus line");
        let doc: serde_json::Value = serde_json::from_str(&line).expect("corpus json");
        let id = doc["_id"].as_str().expect("id").to_string();
        let text = collapse(doc["text"].as_str().unwrap_or(""));
        let mut title = truncate_chars(&collapse(doc["title"].as_str().unwrap_or("")), 200);
        if title.is_empty() {
            title = format!("Document {id}");
        }
        let safe: String = id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        let note = format!(
            "---\ntype: Resource\ntitle: {}\ndescription: {}\ntimestamp: 2024-01-01T00:00:00Z\n---\n{}\n",
            yaml_string(&title),
            yaml_string(&format!("{name} document {id}")),
            text
        );
        std::fs::write(notes.join(format!("{safe}.md")), note).expect("write note");
        docs += 1;
    }
    let policy = LoadedPolicy::from_texts(None).expect("default policy");
    let started = Instant::now();
    let inventory = Inventory::load(vault.path(), &policy).expect("inventory");
    let report = search::sync(vault.path(), &policy, &inventory, SyncOptions::default()).expect("sync");
    let sync_ms = started.elapsed().as_millis();
    assert_eq!(report.counts.indexed, docs, "every document indexed");

    let mut qrels: HashMap<String, HashSet<String>> = HashMap::new();
    let qrel_text = std::fs::read_to_string(dir.join("qrels").join("test.tsv")).expect("qrels");
    for line in qrel_text.lines().skip(1) {
        let parts: Vec<&str> = line.split('\t').collect();
        if parts.len() == 3 && parts[2].trim().parse::<f64>().unwrap_or(0.0) > 0.0 {
            qrels.entry(parts[0].to_string()).or_default().insert(format!("03_Resources/{}.md", parts[1]));
        }
    }
    let queries: BTreeMap<String, String> = std::fs::read_to_string(dir.join("queries.jsonl"))
        .expect("queries")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("query json");
            (v["_id"].as_str().expect("qid").to_string(), v["text"].as_str().expect("qtext").to_string())
        })
        .collect();
    let mut total = 0.0;
    let mut n = 0;
    let mut times = Vec::new();
    for (qid, relevant) in &qrels {
        let Some(text) = queries.get(qid) else { continue };
        let t = Instant::now();
        let envelope = search::search(vault.path(), &policy, SearchRequest::fts(text, 10)).expect("search");
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        let mut dcg = 0.0;
        for (rank, result) in envelope.results.iter().enumerate() {
            if relevant.contains(&result.source.path) {
                dcg += 1.0 / ((rank + 2) as f64).log2();
            }
        }
        let ideal: f64 = (0..relevant.len().min(10)).map(|rank| 1.0 / ((rank + 2) as f64).log2()).sum();
        total += dcg / ideal;
        n += 1;
    }
    // O(change): republish one edited note, several times.
    let mut inventory = inventory;
    let mut publish_one_ms = Vec::new();
    let first = std::fs::read_dir(&notes).expect("notes").flatten().next().expect("a note").path();
    let rel = format!("03_Resources/{}", first.file_name().expect("name").to_string_lossy());
    let path = paravault::note::path::VaultPath::parse(&rel).expect("path");
    for i in 0..5 {
        let text = std::fs::read_to_string(&first).expect("read");
        std::fs::write(&first, format!("{text}\nedit {i}\n")).expect("edit");
        let t = Instant::now();
        inventory.upsert(paravault::inventory::read_record(vault.path(), &path, paravault::scan::PageKind::Note, &policy));
        search::publish_changes(vault.path(), &policy, &inventory, std::slice::from_ref(&path), &[], None).expect("publish one");
        publish_one_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let index_bytes = std::fs::read_dir(vault.path().join(".paravault/search/index"))
        .expect("index")
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    times.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| times[((times.len() as f64 - 1.0) * p).round() as usize];
    Run {
        ndcg10: total / n as f64,
        queries: n,
        docs,
        sync_ms,
        query_p50_ms: pct(0.5),
        query_p99_ms: pct(0.99),
        publish_one_ms,
        index_bytes,
    }
}

fn report(name: &str, r: &Run) {
    println!(
        "{name}: docs {} queries {} nDCG@10 {:.4} full sync {} ms query p50 {:.2} ms p99 {:.2} ms; one-note publish {:?} ms; index {} KiB",
        r.docs,
        r.queries,
        r.ndcg10,
        r.sync_ms,
        r.query_p50_ms,
        r.query_p99_ms,
        r.publish_one_ms.iter().map(|m| (m * 10.0).round() / 10.0).collect::<Vec<_>>(),
        r.index_bytes / 1024
    );
}

#[test]
fn scifact_fts_ndcg10() {
    let r = run("scifact");
    report("scifact", &r);
    assert!(r.ndcg10 >= 0.66, "SciFact fts nDCG@10 {:.4} below 0.66", r.ndcg10);
}

#[test]
fn cranfield_fts_ndcg10() {
    let r = run("cranfield");
    report("cranfield", &r);
    assert!(r.ndcg10 >= 0.34, "Cranfield fts nDCG@10 {:.4} below 0.34", r.ndcg10);
}
