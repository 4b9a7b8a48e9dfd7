//! all-MiniLM-L6-v2: tokenise, BERT forward (`bert.rs`), mean pooling, L2 normalise.
//!
//! Matches sentence-transformers' `encode(normalize_embeddings=True)`: the tokenizer's shipped
//! truncation (128) is replaced by the policy's `max_tokens` (256) and its padding is turned
//! off (the encoder packs a batch's sequences unpadded). Inference runs on a private rayon pool
//! of the configured thread count, on the CPU, in f32 or with int8 dense layers
//! (`embedding.precision`).

use tokenizers::Tokenizer;

use super::bert::{BertEncoder, Sequence, config_and_tokenizer};
use super::{DIMENSION, ModelConfig, ModelId, Vector, VerifiedModel};
use crate::error::{Error, Result};

/// Tokens per inference batch at most: the packed encoder's rows, the sum of the passages'
/// tokens (4 passages at the 256-token cut). Bounds the activations a batch holds, the peak of
/// a dense sync's memory.
/// Measured with candle's padded `BertModel` on a 1,773-note dense sync: 2,048 → 322 MB peak,
/// 1,024 → 234 MB at the same speed, 512 → 212 MB but 11 % slower (docs/benchmarks.md); with
/// the packed encoder, 2,048 was 13 % slower than 1,024 on 195-token passages.
pub(crate) const BATCH_TOKENS_MAX: usize = 1024;

/// The loaded model. Cheap to share (`Arc`); `embed` may be called from several threads.
pub struct MiniLm {
    id: ModelId,
    model: BertEncoder,
    tokenizer: Tokenizer,
    batch_size: usize,
    pool: rayon::ThreadPool,
}

fn failed(what: &str, e: impl std::fmt::Display) -> Error {
    Error::EmbeddingFailed { reason: format!("{what}: {e}") }
}

impl MiniLm {
    /// Loads verified files (see `resolve`) with the configured cut, batch size and threads.
    pub fn load(files: VerifiedModel, config: &ModelConfig) -> Result<Self> {
        let unavailable = |reason: String| Error::ModelUnavailable {
            model: config.id.to_string(),
            reason,
            remediation: "The files passed their sha256 check, so the policy's embedding section names a model this engine cannot run."
                .into(),
        };
        let (bert_config, tokenizer) = config_and_tokenizer(&files, config, None).map_err(unavailable)?;
        if bert_config.hidden_size != DIMENSION || config.id.dimension != DIMENSION {
            return Err(unavailable(format!("the model's hidden size is {}, this engine embeds {DIMENSION}", bert_config.hidden_size)));
        }
        // Read from the bytes already in memory (they were hashed), not memory-mapped: this
        // keeps the crate free of `unsafe`.
        let model = BertEncoder::load(&files.weights, &bert_config, config.id.precision)
            .map_err(|e| unavailable(format!("the BERT weights do not load: {e}")))?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.threads.max(1))
            .thread_name(|i| format!("paravault-embed-{i}"))
            .build()
            .map_err(|e| failed("starting the inference threads", e))?;
        Ok(MiniLm { id: config.id.clone(), model, tokenizer, batch_size: config.batch_size.max(1), pool })
    }

    pub fn id(&self) -> &ModelId {
        &self.id
    }

    /// Inference threads.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Unit vectors for `texts`, in order, at most `batch_size` at a time and at most
    /// [`BATCH_TOKENS_MAX`] tokens per batch (the packed encoder's rows: the sum of the
    /// passages' tokens).
    ///
    /// Texts are batched longest first (as sentence-transformers does), in batches of about
    /// equal token counts. The token bound keeps a batch of long passages from holding many
    /// large activations at once (the peak of a dense sync's memory), while short passages
    /// still go up to `batch_size` at a time.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| failed("tokenising", e))?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(encodings[i].len()));
        let lengths: Vec<usize> = order.iter().map(|&i| encodings[i].len()).collect();
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        let mut start = 0;
        for end in batch_ends(&lengths, self.batch_size) {
            let indices = &order[start..end];
            let sequences: Vec<Sequence<'_>> =
                indices.iter().map(|&i| Sequence { ids: encodings[i].get_ids(), type_ids: encodings[i].get_type_ids() }).collect();
            let vectors = self.pool.install(|| self.model.embed(&sequences)).map_err(|e| failed("inference", e))?;
            for (&i, vector) in indices.iter().zip(vectors) {
                out[i] = vector;
            }
            start = end;
        }
        Ok(out)
    }

    /// `embed` for owned passages, as fixed-width vectors (what a dense index stores).
    pub fn embed_passages(&self, passages: &[String]) -> Result<Vec<Vector>> {
        let texts: Vec<&str> = passages.iter().map(String::as_str).collect();
        self.embed(&texts)?
            .into_iter()
            .map(|v| Vector::try_from(v.as_slice()).map_err(|_| failed("pooling", format!("a vector of width {} came back", v.len()))))
            .collect()
    }

    /// Where the model's token cut (`max_tokens`) ends `text`: the byte offset past the last
    /// token it embeds when the cut dropped any of it, `None` when the whole text is embedded.
    pub fn cut_at(&self, text: &str) -> Result<Option<usize>> {
        let encoding = self.tokenizer.encode(text, true).map_err(|e| failed("tokenising", e))?;
        if encoding.get_overflowing().is_empty() {
            return Ok(None);
        }
        Ok(Some(encoding.get_offsets().iter().map(|(_, end)| *end).max().unwrap_or(0).min(text.len())))
    }

    /// Number of tokens (after the cut, with [CLS] and [SEP]) each text is embedded from.
    pub fn token_counts(&self, texts: &[&str]) -> Result<Vec<usize>> {
        texts
            .iter()
            .map(|t| self.tokenizer.encode(*t, true).map(|e| e.len()))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| failed("tokenising", e))
    }
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm").field("id", &self.id).field("batch_size", &self.batch_size).field("threads", &self.threads()).finish()
    }
}

/// Where each batch ends, for passages of `lengths` tokens (longest first): consecutive
/// batches of about equal token counts, at most `batch_size` passages and [`BATCH_TOKENS_MAX`]
/// tokens each (a passage longer than the bound goes alone). 32 passages of 39 tokens go as
/// 16 + 16, not 26 + 6: a small last batch runs the products at a fraction of their speed.
fn batch_ends(lengths: &[usize], batch_size: usize) -> Vec<usize> {
    let batch_size = batch_size.max(1);
    let total: usize = lengths.iter().sum();
    let batches = total.div_ceil(BATCH_TOKENS_MAX).max(lengths.len().div_ceil(batch_size)).max(1);
    let target = total.div_ceil(batches);
    let mut ends = Vec::with_capacity(batches);
    let (mut start, mut tokens) = (0, 0);
    for (i, &len) in lengths.iter().enumerate() {
        let with = tokens + len;
        // Past the target only when that lands nearer to it, and never past the bound.
        let full =
            i - start == batch_size || (with > target && (with > BATCH_TOKENS_MAX || with - target >= target.saturating_sub(tokens)));
        if i > start && full {
            ends.push(i);
            (start, tokens) = (i, 0);
        }
        tokens += len;
    }
    if start < lengths.len() {
        ends.push(lengths.len());
    }
    ends
}

#[cfg(test)]
mod tests;
