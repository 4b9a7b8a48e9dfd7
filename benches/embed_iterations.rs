//! Embedding throughput for a fixed number of iterations, one configuration per run: what
//! `support/sentence_transformers_embed.py --paired` alternates with sentence-transformers.
//!
//! `cargo bench --bench embed_iterations -- TOKENS THREADS ITERATIONS [f32|int8]` prints
//! `… chunks/s` for batches of 32 chunks of about TOKENS tokens (the model load is not timed),
//! with the dense layers at the given `embedding.precision` (f32 when absent).
//! Criterion's `benches/embed.rs` is the benchmark to read on its own; this one exists because
//! this machine's speed drifts by ±15 % within minutes, so a comparison with another engine
//! only holds when the two alternate in short runs.

// Bench fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

use paravault::embed::{EmbeddingPrecision, MiniLm, ModelConfig, ModelEnv, resolve};
use paravault::policy::LoadedPolicy;

#[path = "../tests/it/model.rs"]
#[allow(dead_code)]
mod model;

#[path = "support/embed_chunks.rs"]
mod embed_chunks;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let numbers: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let precision = match args.iter().find(|a| a.parse::<usize>().is_err()).map(String::as_str) {
        None | Some("f32") => EmbeddingPrecision::F32,
        Some("int8") => EmbeddingPrecision::Int8,
        Some(other) => {
            eprintln!("unknown precision {other:?} (f32 or int8)");
            std::process::exit(2);
        }
    };
    let [tokens, threads, iterations] = numbers[..] else {
        eprintln!("usage: cargo bench --bench embed_iterations -- TOKENS THREADS ITERATIONS [f32|int8]");
        std::process::exit(2);
    };
    let policy = LoadedPolicy::from_texts(None).expect("default policy").policy;
    let env = ModelEnv { model_dir: Some(model::model_dir().to_path_buf()), ..ModelEnv::default() };
    let mut config = ModelConfig { threads, batch_size: 32, ..ModelConfig::from_policy(&policy, None, &env) };
    config.id.precision = precision;
    let model = MiniLm::load(resolve(&config).expect("model files"), &config).expect("model loads");
    let texts = embed_chunks::chunks(32, tokens);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    model.embed(&refs).expect("embeds");
    let start = std::time::Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(model.embed(std::hint::black_box(&refs)).expect("embeds"));
    }
    let seconds = start.elapsed().as_secs_f64();
    println!("paravault {} {tokens} tokens, {threads} threads: {:.1} chunks/s", precision.as_str(), (32 * iterations) as f64 / seconds);
}
