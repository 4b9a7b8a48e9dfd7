//! Embedding throughput: chunks per second with 2 threads, batches of 32, ~40 and ~200 tokens
//! (plus ~40 tokens on 1 thread, to show the scaling).
//!
//! Uses the real all-MiniLM-L6-v2 (fetched into target/models/ like the tests do). Run with
//! `cargo bench --bench embed` (or `--profile dev`, whose dependencies are optimised too);
//! criterion reports elements (chunks) per second, and the mean token count is printed.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use paravault::embed::{MiniLm, ModelConfig, ModelEnv, resolve};
use paravault::policy::LoadedPolicy;

#[path = "../tests/it/model.rs"]
#[allow(dead_code)]
mod model;

const BATCH: usize = 32;

const WORDS: &str = "the vault keeps governed notes in folders for projects areas resources and archives while search \
    generations stay immutable so every write publishes a fresh index that readers pin consistently across crashes \
    receipts chain each change and the lint gate judges only what a write introduces never the whole vault";

/// `count` distinct chunks of about `tokens` tokens each (with [CLS] and [SEP]; a few of the
/// words are two word pieces, hence the 0.9).
fn chunks(count: usize, tokens: usize) -> Vec<String> {
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    let per_chunk = ((tokens - 2) as f64 * 0.9) as usize;
    (0..count).map(|i| (0..per_chunk).map(|j| words[(i * 7 + j * 3) % words.len()]).collect::<Vec<_>>().join(" ")).collect()
}

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
