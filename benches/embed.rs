//! Embedding throughput: chunks per second with 2 threads, batches of 32, ~40 and ~200 tokens
//! (plus ~40 tokens on 1 thread, to show the scaling).
//!
//! Uses the real all-MiniLM-L6-v2 (fetched into target/models/ like the tests do). Run with
//! `cargo bench --bench embed` (or `--profile dev`, whose dependencies are optimised too);
//! criterion reports elements (chunks) per second, and the mean token count is printed.

// Bench fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use paravault::embed::{MiniLm, ModelConfig, ModelEnv, resolve};
use paravault::policy::LoadedPolicy;

#[path = "../tests/it/model.rs"]
#[allow(dead_code)]
mod model;

#[path = "support/embed_chunks.rs"]
mod embed_chunks;
use embed_chunks::chunks;

const BATCH: usize = 32;

fn bench(c: &mut Criterion) {
    let policy = LoadedPolicy::from_texts(None).expect("default policy").policy;
    let env = ModelEnv { model_dir: Some(model::model_dir().to_path_buf()), ..ModelEnv::default() };
    let config = ModelConfig::from_policy(&policy, None, &env);
    let load = |threads: usize| {
        let config = ModelConfig { threads, batch_size: BATCH, ..config.clone() };
        MiniLm::load(resolve(&config).expect("model files"), &config).expect("model loads")
    };

    let mut group = c.benchmark_group("embed");
    group.sample_size(10);
    group.throughput(Throughput::Elements(BATCH as u64));
    for (threads, tokens) in [(2, 40), (2, 200), (1, 40)] {
        let model = load(threads);
        let texts = chunks(BATCH, tokens);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let counts = model.token_counts(&refs).expect("tokenises");
        let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
        eprintln!("embed: {BATCH} chunks of {mean:.1} tokens on average, {} threads", model.threads());
        group.bench_function(format!("{tokens}_tokens/{threads}_threads"), |b| {
            b.iter(|| black_box(model.embed(black_box(&refs)).expect("embeds")))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
