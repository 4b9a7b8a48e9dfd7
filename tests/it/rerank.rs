//! The reranked mode's cross-encoder: parity with `transformers` on a randomly initialised
//! BertForSequenceClassification of cross-encoder/ms-marco-MiniLM-L-6-v2's config (saved as
//! safetensors by this test; no real reranker weights can be fetched here), resolution and
//! sha256 verification through the policy, fail-closed errors, and the search mode itself.
//!
//! Needs `python3` with `torch` and `transformers` (PyPI): the test fails, saying so, without them.

use std::path::{Path, PathBuf};
use std::process::Command;

use paravault::embed::ModelEnv;
use paravault::embed::cross_encoder::{self, CrossEncoder};
use paravault::inventory::Inventory;
use paravault::policy::LoadedPolicy;
use paravault::search::{self, SearchMode, SearchRequest, SyncOptions};

use crate::model::model_dir;

/// Builds the model with transformers, saves it, and scores `pairs` with transformers' own
/// tokenizer call (padding, attention mask) and forward pass.
const PARITY_SCRIPT: &str = r#"
import json, shutil, sys
import torch
from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast
out, tokenizer_json, pairs_file = sys.argv[1], sys.argv[2], sys.argv[3]
torch.manual_seed(20)
# cross-encoder/ms-marco-MiniLM-L-6-v2's config.json, weights drawn at random (wider than the
# 0.02 default so that the logits spread and a wrong kernel cannot hide in a near-constant).
config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                    intermediate_size=1536, hidden_act="gelu", max_position_embeddings=512,
                    type_vocab_size=2, layer_norm_eps=1e-12, num_labels=1, initializer_range=0.08,
                    architectures=["BertForSequenceClassification"])
model = BertForSequenceClassification(config).eval()
model.save_pretrained(out, safe_serialization=True)
shutil.copy(tokenizer_json, out + "/tokenizer.json")
pairs = json.load(open(pairs_file))
# BERT's inputs: without token_type_ids transformers would score every pair as segment 0.
tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer_json, pad_token="[PAD]",
                              model_input_names=["input_ids", "token_type_ids", "attention_mask"])
batch = tok([q for q, _ in pairs], [p for _, p in pairs], truncation=True, max_length=64, padding=True, return_tensors="pt")
assert "token_type_ids" in batch and batch["token_type_ids"].max() == 1
with torch.no_grad():
    logits = model(**batch).logits[:, 0].tolist()
json.dump({"logits": logits}, open(out + "/expected.json", "w"))
"#;

const QUERY: &str = "how does the borrow checker keep memory safe";

fn passages() -> Vec<String> {
    let long = "Ownership rules are checked at compile time. ".repeat(20);
    vec![
        "The borrow checker enforces that references never outlive the data they point to.".into(),
        "Tomatoes need sun and water every day.".into(),
        "Rust's ownership model frees memory when its owner goes out of scope.".into(),
        // Longer than the 64-token pair cut: the passage loses its tail (longest first).
        long,
        "Garbage collectors trace reachable objects at run time.".into(),
    ]
}

/// A folder with the random model, the shared BERT tokenizer and transformers' logits.
fn random_model() -> (tempfile::TempDir, Vec<f32>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let pairs: Vec<(String, String)> = passages().into_iter().map(|p| (QUERY.to_string(), p)).collect();
    let pairs_file = dir.path().join("pairs.json");
    std::fs::write(&pairs_file, serde_json::to_string(&pairs).expect("json")).expect("write pairs");
    let output = Command::new("python3")
        .arg("-c")
        .arg(PARITY_SCRIPT)
        .arg(dir.path())
        .arg(model_dir().join("tokenizer.json"))
        .arg(&pairs_file)
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "the transformers parity script failed (it needs python3 with torch and transformers: pip install torch transformers):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("expected.json")).expect("expected.json")).expect("json");
    let logits = expected["logits"].as_array().expect("logits").iter().map(|v| v.as_f64().expect("number") as f32).collect();
    (dir, logits)
}

fn sha256_of(path: &Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).expect("read")).iter().map(|b| format!("{b:02x}")).collect()
}

/// Policy override naming the model folder with the sha256 of its files.
fn reranker_policy(dir: &Path, extra: &str) -> String {
    format!(
        "reranker:\n  local_dir: {}\n  max_tokens: 64\n  batch_size: 2\n{extra}  sha256:\n    model.safetensors: {}\n    tokenizer.json: {}\n    config.json: {}\n",
        dir.display(),
        sha256_of(&dir.join("model.safetensors")),
        sha256_of(&dir.join("tokenizer.json")),
        sha256_of(&dir.join("config.json")),
    )
}

fn load(policy: &LoadedPolicy) -> paravault::error::Result<CrossEncoder> {
    CrossEncoder::load(&cross_encoder::config(&policy.policy, None, &ModelEnv::default()))
}

#[test]
fn cross_encoder_matches_transformers_within_1e_5() {
    let (dir, expected) = random_model();
    let policy = LoadedPolicy::from_texts(Some(&reranker_policy(dir.path(), ""))).expect("policy");
    let model = load(&policy).expect("the verified random model loads");
    let passages = passages();
    let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
    let got = model.score(QUERY, &refs, None).expect("score").expect("no deadline");
    assert_eq!(got.len(), expected.len());
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert!((g - e).abs() <= 1e-5, "pair {i}: paravault {g} vs transformers {e}");
    }
    let max = got.iter().zip(&expected).map(|(g, e)| (g - e).abs()).fold(0.0f32, f32::max);
    println!("cross-encoder parity: {} pairs, max |paravault - transformers| = {max:e}", got.len());
    let spread = expected.iter().cloned().fold(f32::MIN, f32::max) - expected.iter().cloned().fold(f32::MAX, f32::min);
    assert!(spread > 0.01, "the logits spread ({spread}), so the comparison can tell kernels apart");
    // A deadline already past scores nothing.
    assert!(model.score(QUERY, &refs, Some(std::time::Instant::now())).expect("score").is_none());
}

#[test]
fn the_reranker_fails_closed_unpinned_absent_or_tampered() {
    // The shipped policy pins the revision but has no file hashes: not pinned.
    let shipped = LoadedPolicy::from_texts(None).expect("default policy");
    let err = load(&shipped).expect_err("not pinned");
    assert_eq!(err.code(), "reranker_unavailable");
    assert!(err.to_string().contains("is not pinned"), "{err}");

    let (dir, _) = random_model();
    // A folder without the files.
    let empty = tempfile::tempdir().expect("tempdir");
    let text = reranker_policy(dir.path(), "").replace(&dir.path().display().to_string(), &empty.path().display().to_string());
    let err = load(&LoadedPolicy::from_texts(Some(&text)).expect("policy")).expect_err("absent");
    assert_eq!(err.code(), "reranker_unavailable");
    assert!(err.to_string().contains("policy reranker.local_dir"), "{err}");
    // One flipped byte in the weights fails the sha256 check.
    let text = reranker_policy(dir.path(), "");
    let weights = dir.path().join("model.safetensors");
    let mut bytes = std::fs::read(&weights).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&weights, bytes).expect("write");
    let err = load(&LoadedPolicy::from_texts(Some(&text)).expect("policy")).expect_err("tampered");
    assert_eq!(err.code(), "reranker_unavailable");
    assert!(err.to_string().contains("sha256"), "{err}");
}

fn note(root: &Path, name: &str, title: &str, body: &str) {
    let dir = root.join("03_Resources");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join(name),
        format!("---\ntype: Resource\ntitle: \"{title}\"\ndescription: \"About {title}\"\ntimestamp: 2024-01-01T00:00:00Z\n---\n{body}\n"),
    )
    .expect("write");
}

fn fts_vault() -> (tempfile::TempDir, Vec<PathBuf>) {
    let v = tempfile::tempdir().expect("tempdir");
    for (i, body) in passages().iter().enumerate() {
        note(v.path(), &format!("n{i}.md"), &format!("Note {i}"), &format!("{body} memory safe borrow"));
    }
    (v, Vec::new())
}

#[test]
fn reranked_search_orders_bm25_candidates_by_the_cross_encoder_and_degrades_on_budget() {
    let (dir, _) = random_model();
    let (v, _) = fts_vault();
    let policy = LoadedPolicy::from_texts(Some(&reranker_policy(dir.path(), "  candidates: 5\n"))).expect("policy");
    let inventory = Inventory::load(v.path(), &policy).expect("inventory");
    search::sync(v.path(), &policy, &inventory, SyncOptions::default()).expect("sync");

    let mut request = SearchRequest::fts("memory safe borrow", 5, chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap());
    let fts = search::search(v.path(), &policy, request.clone()).expect("fts");
    assert_eq!(fts.result_count, 5);
    request.search_mode = SearchMode::parse("hybrid_reranked").expect("alias");
    let reranked = search::search(v.path(), &policy, request.clone()).expect("reranked");
    assert_eq!(reranked.actual_mode, "reranked");
    let reason = reranked.fallback_reason.as_deref().expect("no dense vectors: said");
    assert!(reason.contains("reranked the BM25 candidates"), "{reason}");
    // The order is the cross-encoder's, over the BM25 candidates' best chunks.
    let model = load(&policy).expect("model");
    let bodies: Vec<String> = fts.results.iter().map(|r| std::fs::read_to_string(v.path().join(&r.source.path)).expect("note")).collect();
    let chunk_texts: Vec<&str> = bodies.iter().map(|b| b.rsplit("---\n").next().expect("body").trim()).collect();
    let logits = model.score("memory safe borrow", &chunk_texts, None).expect("score").expect("scored");
    let mut expected: Vec<(f32, String)> = logits.into_iter().zip(fts.results.iter().map(|r| r.source.path.clone())).collect();
    expected.sort_by(|a, b| b.0.total_cmp(&a.0));
    let got: Vec<(f32, String)> = reranked.results.iter().map(|r| (r.score as f32, r.source.path.clone())).collect();
    assert_eq!(got.iter().map(|g| &g.1).collect::<Vec<_>>(), expected.iter().map(|e| &e.1).collect::<Vec<_>>());
    for (g, e) in got.iter().zip(&expected) {
        assert!((g.0 - e.0).abs() <= 1e-5, "{g:?} vs {e:?}");
    }
    assert_ne!(
        got.iter().map(|g| &g.1).collect::<Vec<_>>(),
        fts.results.iter().map(|r| &r.source.path).collect::<Vec<_>>(),
        "the random cross-encoder reorders the BM25 list (else this test could not tell)"
    );

    // A zero time budget answers the fused (here BM25) order and says so.
    let policy = LoadedPolicy::from_texts(Some(&reranker_policy(dir.path(), "  candidates: 5\n  time_budget_ms: 0\n"))).expect("policy");
    let degraded = search::search(v.path(), &policy, request).expect("degraded");
    assert_eq!(degraded.actual_mode, "reranked");
    assert!(degraded.fallback_reason.as_deref().is_some_and(|r| r.starts_with("reranker_time_budget: ")), "{:?}", degraded.fallback_reason);
    assert_eq!(
        degraded.results.iter().map(|r| &r.source.path).collect::<Vec<_>>(),
        fts.results.iter().map(|r| &r.source.path).collect::<Vec<_>>()
    );
}

#[test]
fn reranked_search_over_a_dense_vault_reorders_hybrid_candidates() {
    let (dir, _) = random_model();
    let (v, _) = fts_vault();
    let text = format!("embedding:\n  local_dir: {}\n{}", model_dir().display(), reranker_policy(dir.path(), "  candidates: 4\n"));
    let policy = LoadedPolicy::from_texts(Some(&text)).expect("policy");
    let inventory = Inventory::load(v.path(), &policy).expect("inventory");
    search::sync(v.path(), &policy, &inventory, SyncOptions { fts_only: false, ..Default::default() }).expect("dense sync");

    let mut request = SearchRequest::fts("memory safe borrow", 3, chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap());
    request.search_mode = SearchMode::Hybrid;
    let mut wide = request.clone();
    wide.max_results = 4;
    let hybrid = search::search(v.path(), &policy, wide).expect("hybrid");
    assert_eq!((hybrid.actual_mode, hybrid.result_count), ("hybrid", 4));
    request.search_mode = SearchMode::Reranked;
    let reranked = search::search(v.path(), &policy, request).expect("reranked");
    assert_eq!(reranked.actual_mode, "reranked");
    assert_eq!(reranked.fallback_reason, None, "hybrid candidates, nothing to explain");
    // The top 3 of hybrid's 4 candidates in the cross-encoder's order.
    let model = load(&policy).expect("model");
    let bodies: Vec<String> =
        hybrid.results.iter().map(|r| std::fs::read_to_string(v.path().join(&r.source.path)).expect("note")).collect();
    let chunk_texts: Vec<&str> = bodies.iter().map(|b| b.rsplit("---\n").next().expect("body").trim()).collect();
    let logits = model.score("memory safe borrow", &chunk_texts, None).expect("score").expect("scored");
    let mut expected: Vec<(f32, String)> = logits.into_iter().zip(hybrid.results.iter().map(|r| r.source.path.clone())).collect();
    expected.sort_by(|a, b| b.0.total_cmp(&a.0));
    let got: Vec<&String> = reranked.results.iter().map(|r| &r.source.path).collect();
    assert_eq!(got, expected.iter().take(3).map(|e| &e.1).collect::<Vec<_>>());
}
