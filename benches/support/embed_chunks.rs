//! The synthetic passages the embedding benchmarks embed (the same ones
//! `support/sentence_transformers_embed.py` gives sentence-transformers).

const WORDS: &str = "the vault keeps governed notes in folders for projects areas resources and archives while search \
    generations stay immutable so every write publishes a fresh index that readers pin consistently across crashes \
    receipts chain each change and the lint gate judges only what a write introduces never the whole vault";

/// `count` distinct chunks of about `tokens` tokens each (with [CLS] and [SEP]; a few of the
/// words are two word pieces, hence the 0.9).
pub fn chunks(count: usize, tokens: usize) -> Vec<String> {
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    let per_chunk = ((tokens - 2) as f64 * 0.9) as usize;
    (0..count).map(|i| (0..per_chunk).map(|j| words[(i * 7 + j * 3) % words.len()]).collect::<Vec<_>>().join(" ")).collect()
}
