//! Dense search benchmark: exact scan and end-to-end semantic/hybrid query latency at 100,000
//! chunks, one-note dense publish at 2,000 / 20,000 / 100,000 notes (flatness), and (opt-in)
//! peak RSS of a real dense sync of FOLDOC.
//!
//! Run: `cargo bench --bench dense_path` (sizes via `PARAVAULT_BENCH_DENSE`, default
//! `2000,20000,100000`; `rerank` in the list times the reranked mode's cross-encoder on 20 and
//! 50 candidates, 2 threads, with random weights of ms-marco-MiniLM-L-6-v2's architecture (the
//! cost of real weights is the same; their files cannot be fetched here); `PARAVAULT_BENCH_DENSE=foldoc` embeds all of FOLDOC with the real model
//! and reports peak RSS — run it alone, it takes minutes).
//!
//! Generated vaults get their dense index without spending hours on embedding: the arena is
//! pre-filled with random unit vectors under the exact content keys the sync computes (the
//! resume path of an interrupted build), so the sync embeds nothing and every measured step —
//! scan, fusion, publish, query embedding — runs the production code on the real model.

// Bench fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

#[path = "../tests/it/model.rs"]
mod model;
#[path = "support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use paravault::Vault;
use paravault::embed::{ModelId, vault_handle};
use paravault::inventory::Inventory;
use paravault::retrieval::{SearchParams, SyncParams};
use paravault::search::dense::{self, ArenaWriter};
use paravault::search::schema;

fn pct(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3
}

fn policy_text() -> String {
    format!("embedding:\n  local_dir: {}\n", model::model_dir().display())
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Fills a building arena with random unit vectors for every chunk the sync will want.
fn seed_vectors(root: &Path, vault: &Vault) -> usize {
    let policy = vault.policy().clone();
    let handle = vault_handle(&policy.policy, root);
    let id: ModelId = handle.id().clone();
    let max_tokens = policy.policy.embedding.max_tokens;
    let fields = schema::Fields::of(&schema::build_schema()).expect("schema");
    let inventory = Inventory::load(root, &policy).expect("inventory");
    let mut writer = ArenaWriter::create(root, id.dimension, None).expect("arena");
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut batch: Vec<([u8; 32], Vec<f32>)> = Vec::new();
    let mut seeded = 0;
    let flush = |writer: &mut ArenaWriter, batch: &mut Vec<([u8; 32], Vec<f32>)>| {
        let entries: Vec<([u8; 32], &[f32])> = batch.iter().map(|(k, v)| (*k, v.as_slice())).collect();
        writer.append(&entries).expect("append");
        batch.clear();
    };
    for record in inventory.notes().filter(|r| r.valid) {
        let bytes = std::fs::read(record.path.under(root)).expect("read note");
        let docs = schema::note_documents(&fields, record, &bytes, policy.policy.search.chunk_min_words);
        for (_, text) in &docs.embed_texts {
            let key = dense::content_key(&id, max_tokens, text);
            let mut v: Vec<f32> = (0..id.dimension)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
            batch.push((key, v));
            seeded += 1;
            if batch.len() == 4096 {
                flush(&mut writer, &mut batch);
            }
        }
    }
    flush(&mut writer, &mut batch);
    dense::set_building_arena(root, Some(writer.arena())).expect("mark building");
    seeded
}

const QUERIES: &[&str] = &[
    "how do agents keep memory of past sessions",
    "plans for the next release",
    "ranking documents by meaning",
    "notes about rivers and mountains",
    "compiler and parser design",
    "weekly review of decisions",
    "where evidence for a claim is kept",
    "streams of tokens",
    "summary of the meeting outcome",
    "risk metrics and targets",
];

fn search(vault: &Vault, q: &str, mode: &str) {
    vault
        .search(&SearchParams {
            query: q.into(),
            max_results: 10,
            search_mode: mode.into(),
            temporal_view: "current".into(),
            as_of: None,
            domain: None,
        })
        .expect("search");
}

fn query_latency(label: &str, vault: &Vault, mode: &str, rounds: usize) {
    for q in QUERIES {
        search(vault, q, mode); // warm: query vectors cached, generation verified and loaded
    }
    let mut samples = Vec::new();
    for _ in 0..rounds {
        for q in QUERIES {
            let start = Instant::now();
            search(vault, q, mode);
            samples.push(start.elapsed());
        }
    }
    samples.sort();
    println!(
        "{label:<22} {mode:<9} query p50 {:.2} ms  p99 {:.2} ms  (query vector cached; n={})",
        pct(&samples, 0.5),
        pct(&samples, 0.99),
        samples.len()
    );
}

fn query_embedding(vault: &Vault) {
    let handle = vault_handle(&vault.policy().policy, vault.root());
    let model = handle.model().expect("model");
    let mut samples = Vec::new();
    for round in 0..5 {
        for q in QUERIES {
            let text = format!("{q} {round}");
            let start = Instant::now();
            std::hint::black_box(model.embed(&[text.as_str()]).expect("embed"));
            samples.push(start.elapsed());
        }
    }
    samples.sort();
    println!(
        "{:<22} query embedding (uncached, {} threads): p50 {:.2} ms  p99 {:.2} ms",
        "model",
        model.threads(),
        pct(&samples, 0.5),
        pct(&samples, 0.99)
    );
}

fn publish_one(label: &str, vault: &Vault, n: usize, writes: usize) {
    let samples = support::publish_changed_notes(vault, n, writes);
    println!(
        "{label:<22} dense publish of one changed note (embeds its chunk, durable): p50 {:.2} ms  p90 {:.2} ms",
        pct(&samples, 0.5),
        pct(&samples, 0.9)
    );
}

fn generated(n: usize) {
    let root = support::fresh_generated_vault(n);
    std::fs::create_dir_all(root.join(".paravault")).expect("dir");
    std::fs::write(root.join(".paravault/policy.yaml"), policy_text()).expect("policy");
    let vault = Vault::open(&root, Default::default()).expect("open");
    let label = format!("generated {n}");
    let seeded = seed_vectors(&root, &vault);
    let start = Instant::now();
    let report = vault.sync_vault(&SyncParams { fts_only: false, allow_partial: true, ..Default::default() }).expect("dense sync");
    let dense = report.dense.expect("dense");
    assert_eq!(dense["embedded_now"], 0, "every chunk vector was pre-seeded");
    println!(
        "{label:<22} dense sync over {seeded} pre-seeded chunk vectors: {:.2} s (FTS index + vector attach + publish)",
        start.elapsed().as_secs_f64()
    );
    query_latency(&label, &vault, "semantic", if n >= 100_000 { 20 } else { 30 });
    query_latency(&label, &vault, "hybrid", if n >= 100_000 { 20 } else { 30 });
    publish_one(&label, &vault, n, 10);
    drop(vault);
    let _ = std::fs::remove_dir_all(&root);
}

fn foldoc() {
    let Some(root) = support::foldoc_working_copy() else {
        panic!("FOLDOC is not available: see benches/support (apt-get download dict-foldoc)");
    };
    std::fs::create_dir_all(root.join(".paravault")).expect("dir");
    std::fs::write(root.join(".paravault/policy.yaml"), policy_text()).expect("policy");
    let vault = Vault::open(&root, Default::default()).expect("open");
    let before = peak_rss_mib();
    let start = Instant::now();
    let report = vault.sync_vault(&SyncParams { fts_only: false, allow_partial: true, ..Default::default() }).expect("dense sync");
    let secs = start.elapsed().as_secs_f64();
    let dense = report.dense.expect("dense");
    println!(
        "FOLDOC dense sync: {} notes, {} chunks embedded in {secs:.1} s ({:.1} chunks/s); peak RSS {:.0} MiB (before the sync {before:.0} MiB)",
        report.counts.indexed,
        dense["embedded_now"],
        dense["embedded_now"].as_f64().unwrap_or(0.0) / secs,
        peak_rss_mib()
    );
}

/// A random BERT sequence classifier of cross-encoder/ms-marco-MiniLM-L-6-v2's shape (6
/// layers, 384 wide, 12 heads, 1,536 inner), saved with the shared BERT tokenizer, and the
/// policy text that pins it.
fn random_reranker(dir: &Path) -> String {
    use candle_core::{DType, Device, Tensor};
    let (h, inner, layers) = (384usize, 1536usize, 6usize);
    let mut tensors = std::collections::HashMap::new();
    let mut add = |name: String, shape: &[usize]| {
        let t = Tensor::randn(0f32, 0.05, shape, &Device::Cpu).and_then(|t| t.to_dtype(DType::F32)).expect("tensor");
        tensors.insert(name, t);
    };
    add("bert.embeddings.word_embeddings.weight".into(), &[30522, h]);
    add("bert.embeddings.position_embeddings.weight".into(), &[512, h]);
    add("bert.embeddings.token_type_embeddings.weight".into(), &[2, h]);
    let norms =
        std::iter::once("bert.embeddings.LayerNorm".to_string()).chain((0..layers).flat_map(|l| {
            [format!("bert.encoder.layer.{l}.attention.output.LayerNorm"), format!("bert.encoder.layer.{l}.output.LayerNorm")]
        }));
    for norm in norms {
        add(format!("{norm}.weight"), &[h]);
        add(format!("{norm}.bias"), &[h]);
    }
    for l in 0..layers {
        let p = format!("bert.encoder.layer.{l}");
        for (name, out, input) in [
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", inner, h),
            ("output.dense", h, inner),
        ] {
            add(format!("{p}.{name}.weight"), &[out, input]);
            add(format!("{p}.{name}.bias"), &[out]);
        }
    }
    add("bert.pooler.dense.weight".into(), &[h, h]);
    add("bert.pooler.dense.bias".into(), &[h]);
    add("classifier.weight".into(), &[1, h]);
    add("classifier.bias".into(), &[1]);
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).expect("save weights");
    let config = serde_json::json!({
        "vocab_size": 30522, "hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": 12,
        "intermediate_size": inner, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "max_position_embeddings": 512,
        "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12, "pad_token_id": 0,
        "position_embedding_type": "absolute", "model_type": "bert"
    });
    std::fs::write(dir.join("config.json"), config.to_string()).expect("config");
    std::fs::copy(model::model_dir().join("tokenizer.json"), dir.join("tokenizer.json")).expect("tokenizer");
    let sha = |name: &str| {
        use sha2::Digest;
        sha2::Sha256::digest(std::fs::read(dir.join(name)).expect("read")).iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    format!(
        "reranker:\n  local_dir: {}\n  threads: 2\n  sha256:\n    model.safetensors: {}\n    tokenizer.json: {}\n    config.json: {}\n",
        dir.display(),
        sha("model.safetensors"),
        sha("tokenizer.json"),
        sha("config.json")
    )
}

/// The cross-encoder's cost per reranked query: 20 and 50 candidates of about 200 words each
/// (cut to the policy's 256-token pairs), 2 threads.
fn rerank_latency() {
    use paravault::embed::ModelEnv;
    use paravault::embed::cross_encoder::{self, CrossEncoder};
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = paravault::policy::LoadedPolicy::from_texts(Some(&random_reranker(dir.path()))).expect("policy");
    let config = cross_encoder::config(&policy.policy, None, &ModelEnv::default());
    let model = CrossEncoder::load(&config).expect("load the random reranker");
    let words = ["retrieval", "ranking", "vault", "note", "memory", "index", "policy", "search", "model", "token"];
    for candidates in [20usize, 50] {
        let passages: Vec<String> =
            (0..candidates).map(|i| (0..200).map(|w| words[(i * 7 + w * 3) % words.len()]).collect::<Vec<_>>().join(" ")).collect();
        let refs: Vec<&str> = passages.iter().map(String::as_str).collect();
        let mut samples = Vec::new();
        for (round, q) in QUERIES.iter().cycle().enumerate().take(11) {
            let start = Instant::now();
            std::hint::black_box(model.score(q, &refs, None).expect("score"));
            if round > 0 {
                samples.push(start.elapsed());
            }
        }
        samples.sort();
        println!(
            "{:<22} rerank {candidates} candidates ({} tokens per pair, {} threads): p50 {:.1} ms  p99 {:.1} ms  (n={})",
            "cross-encoder",
            policy.policy.reranker.max_tokens,
            config.threads,
            pct(&samples, 0.5),
            pct(&samples, 0.99),
            samples.len()
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let spec = std::env::var("PARAVAULT_BENCH_DENSE").unwrap_or_else(|_| "2000,20000,100000".into());
    if spec.trim() == "foldoc" {
        foldoc();
        return;
    }
    if spec.split(',').any(|s| s.trim() == "rerank") {
        rerank_latency();
    }
    let sizes: Vec<usize> = spec.split(',').filter_map(|s| s.trim().parse().ok()).collect();
    let mut embedded_once = false;
    for n in sizes {
        generated(n);
        if !embedded_once {
            let root = support::fresh_generated_vault(10);
            std::fs::create_dir_all(root.join(".paravault")).expect("dir");
            std::fs::write(root.join(".paravault/policy.yaml"), policy_text()).expect("policy");
            query_embedding(&Vault::open(&root, Default::default()).expect("open"));
            embedded_once = true;
        }
    }
}
