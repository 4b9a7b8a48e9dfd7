//! BERT encoder forward pass for sentence embeddings and cross-encoder scores: unpadded sequences, fused row kernels, and
//! candle's gemm for the matrix products.
//!
//! candle-transformers' `BertModel` pads every batch to its longest text and runs each
//! elementwise step (bias, GELU, residual, layer norm, softmax, masking) as its own tensor
//! operation: a fresh allocation and one pass over memory each, with scalar `erf` and `exp`.
//! On this engine's 2-core machines that left the matrix products a third of the time. Here the
//! sequences of a batch are packed row after row (no padding, so no mask), the three attention
//! projections are one product, and everything between two products is one pass per row,
//! vectorised by `pulp` with the CPU's widest SIMD. The arithmetic is BERT's exactly; `erf` and
//! `exp` are polynomial approximations accurate to a few units in the last place of f32 (the
//! parity test against sentence-transformers' vectors holds them to it).

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};
use candle_transformers::models::bert::{Config, HiddenAct};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use tokenizers::{Tokenizer, TruncationParams, TruncationStrategy};

use super::{EmbeddingPrecision, ModelConfig, VerifiedModel};

/// The BERT config and the tokenizer of verified model files, checked against the policy's cut
/// (`max_tokens` within the model's positions) and set to cut there without padding.
/// `pair_strategy` is how a text pair is cut (the tokenizer's own when `None`). An error is
/// the reason, for the caller's typed error.
pub(crate) fn config_and_tokenizer(
    files: &VerifiedModel,
    config: &ModelConfig,
    pair_strategy: Option<TruncationStrategy>,
) -> Result<(Config, Tokenizer), String> {
    let bert_config: Config = serde_json::from_slice(&files.config_json).map_err(|e| format!("config.json is not a BERT config: {e}"))?;
    if config.max_tokens > bert_config.max_position_embeddings {
        return Err(format!(
            "{}.max_tokens {} exceeds the model's {} positions",
            config.section, config.max_tokens, bert_config.max_position_embeddings
        ));
    }
    let mut tokenizer = Tokenizer::from_bytes(&files.tokenizer_json).map_err(|e| format!("tokenizer.json cannot be loaded: {e}"))?;
    let kept = tokenizer.get_truncation().cloned().unwrap_or_default();
    let truncation = TruncationParams { max_length: config.max_tokens, strategy: pair_strategy.unwrap_or(kept.strategy), ..kept };
    tokenizer.with_truncation(Some(truncation)).map_err(|e| format!("tokenizer truncation: {e}"))?;
    tokenizer.with_padding(None);
    Ok((bert_config, tokenizer))
}

/// One sequence to embed: token ids and token type ids (same length, at least one token).
pub(crate) struct Sequence<'a> {
    pub ids: &'a [u32],
    pub type_ids: &'a [u32],
}

/// The weights of a BERT encoder, laid out for [`BertEncoder::embed`].
pub(crate) struct BertEncoder {
    hidden: usize,
    heads: usize,
    eps: f32,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    positions: usize,
    token_types: usize,
    embedding_norm: Norm,
    layers: Vec<Layer>,
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

/// A linear layer: its weight (see [`Weight`]) and bias.
struct Dense {
    weight: Weight,
    bias: Vec<f32>,
}

/// A linear layer's weight, at the precision the policy names.
enum Weight {
    /// Transposed (in × out, contiguous: gemm runs 20–30 % faster on it than on a transposed
    /// view).
    F32(Tensor),
    /// GGML Q8_0 (blocks of 32 weights with one f16 scale) of the out × in weight, zero-padded
    /// to `columns` inputs. candle's quantised matmul quantises each input row on the fly and
    /// accumulates in integers. Where the CPU has VNNI, candle runs a repacked kernel (one
    /// `vpdpbusd` for 16 outputs × 4 inputs) only when the inputs are a whole number of
    /// 256-value blocks, so 384 inputs are padded to 512 there: a third more work at several
    /// times the speed of its generic kernel (docs/embedding.md has the measurement).
    Int8 { matmul: QMatMul, columns: usize },
}

impl Dense {
    /// `weight` is out × in, as stored.
    fn new(weight: Tensor, bias: Vec<f32>, precision: EmbeddingPrecision) -> candle_core::Result<Self> {
        let weight = match precision {
            EmbeddingPrecision::F32 => Weight::F32(weight.t()?.contiguous()?),
            EmbeddingPrecision::Int8 => {
                let (_, input) = weight.dims2()?;
                let columns = quantised_columns(input);
                let padded = if columns > input { weight.pad_with_zeros(1, 0, columns - input)? } else { weight };
                Weight::Int8 { matmul: QMatMul::QTensor(Arc::new(QTensor::quantize(&padded, GgmlDType::Q8_0)?)), columns }
            }
        };
        Ok(Dense { weight, bias })
    }
}

/// The inputs an int8 product of `input` inputs runs with: a whole number of 256-value blocks
/// where candle's VNNI kernel can take them (see [`Weight::Int8`]), else `input` itself.
fn quantised_columns(input: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512vnni") {
        return input.next_multiple_of(256);
    }
    input
}

struct Layer {
    /// Query, key and value projections as one (hidden → 3 × hidden) product.
    qkv: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    intermediate: Dense,
    output: Dense,
    output_norm: Norm,
}

/// Rows handed to one rayon task (keeps the per-task dispatch cost negligible).
const ROWS_PER_TASK: usize = 8;

impl BertEncoder {
    /// Reads the weights from safetensors bytes, the dense layers' at `precision`. The error
    /// names what does not fit.
    pub fn load(safetensors: &[u8], config: &Config, precision: EmbeddingPrecision) -> std::result::Result<Self, String> {
        if !matches!(config.hidden_act, HiddenAct::Gelu) {
            return Err(format!("hidden_act {:?} is not supported (this engine runs exact-GELU BERT models)", config.hidden_act));
        }
        if config.num_attention_heads == 0 || !config.hidden_size.is_multiple_of(config.num_attention_heads) {
            return Err(format!("{} attention heads do not divide the hidden size {}", config.num_attention_heads, config.hidden_size));
        }
        if !matches!(config.hidden_size / config.num_attention_heads, 32 | 64) {
            return Err(format!("attention heads {} wide are not supported (32 or 64)", config.hidden_size / config.num_attention_heads));
        }
        Self::from_weights(&Weights::read(safetensors)?, config, precision)
    }

    fn from_weights(weights: &Weights, config: &Config, precision: EmbeddingPrecision) -> std::result::Result<Self, String> {
        let hidden = config.hidden_size;
        let embedding = |name: &str, rows: usize| weights.matrix(&format!("embeddings.{name}.weight"), rows, hidden);
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for l in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            let qkv_weight = Tensor::cat(
                &[
                    weights.tensor(&format!("{p}.attention.self.query.weight"), &[hidden, hidden])?,
                    weights.tensor(&format!("{p}.attention.self.key.weight"), &[hidden, hidden])?,
                    weights.tensor(&format!("{p}.attention.self.value.weight"), &[hidden, hidden])?,
                ],
                0,
            )
            .map_err(|e| e.to_string())?;
            let mut qkv_bias = weights.vector(&format!("{p}.attention.self.query.bias"), hidden)?;
            qkv_bias.extend(weights.vector(&format!("{p}.attention.self.key.bias"), hidden)?);
            qkv_bias.extend(weights.vector(&format!("{p}.attention.self.value.bias"), hidden)?);
            layers.push(Layer {
                qkv: Dense::new(qkv_weight, qkv_bias, precision).map_err(|e| e.to_string())?,
                attention_out: weights.dense(&format!("{p}.attention.output.dense"), hidden, hidden, precision)?,
                attention_norm: weights.norm(&format!("{p}.attention.output.LayerNorm"), hidden)?,
                intermediate: weights.dense(&format!("{p}.intermediate.dense"), config.intermediate_size, hidden, precision)?,
                output: weights.dense(&format!("{p}.output.dense"), hidden, config.intermediate_size, precision)?,
                output_norm: weights.norm(&format!("{p}.output.LayerNorm"), hidden)?,
            });
        }
        Ok(BertEncoder {
            hidden,
            heads: config.num_attention_heads,
            eps: config.layer_norm_eps as f32,
            word: embedding("word_embeddings", config.vocab_size)?,
            position: embedding("position_embeddings", config.max_position_embeddings)?,
            token_type: embedding("token_type_embeddings", config.type_vocab_size)?,
            positions: config.max_position_embeddings,
            token_types: config.type_vocab_size,
            embedding_norm: weights.norm("embeddings.LayerNorm", hidden)?,
            layers,
        })
    }

    /// Mean-pooled (over every token, [CLS] and [SEP] included, as sentence-transformers'
    /// attention mask does), L2-normalised vectors, one per sequence, in order.
    pub fn embed(&self, sequences: &[Sequence<'_>]) -> std::result::Result<Vec<Vec<f32>>, String> {
        let h = self.hidden;
        let (x, starts) = self.forward(sequences)?;
        Ok((0..starts.len().saturating_sub(1))
            .map(|s| {
                let (start, end) = (starts[s], starts[s + 1]);
                let mut mean = vec![0f32; h];
                for row in x[start * h..end * h].chunks_exact(h) {
                    for (m, v) in mean.iter_mut().zip(row) {
                        *m += v;
                    }
                }
                let count = (end - start) as f32;
                mean.iter_mut().for_each(|m| *m /= count);
                let norm = mean.iter().map(|m| m * m).sum::<f32>().sqrt().max(1e-12);
                mean.iter_mut().for_each(|m| *m /= norm);
                mean
            })
            .collect())
    }

    /// The last hidden states of the packed sequences (rows × hidden) and each sequence's first
    /// row (`starts[s]..starts[s + 1]`); empty when there are no rows.
    fn forward(&self, sequences: &[Sequence<'_>]) -> std::result::Result<(Vec<f32>, Vec<usize>), String> {
        let h = self.hidden;
        // Row r of every activation is token `r - starts[s]` of sequence `s = row_sequence[r]`.
        let mut starts = Vec::with_capacity(sequences.len() + 1);
        let mut row_sequence = Vec::new();
        starts.push(0);
        for (s, sequence) in sequences.iter().enumerate() {
            let len = sequence.ids.len();
            if len == 0 || len != sequence.type_ids.len() || len > self.positions {
                return Err(format!("sequence {s} has {len} tokens ({} type ids, {} positions)", sequence.type_ids.len(), self.positions));
            }
            if let Some(bad) = sequence.ids.iter().find(|&&id| id as usize * h >= self.word.len()) {
                return Err(format!("token id {bad} is outside the vocabulary"));
            }
            if let Some(bad) = sequence.type_ids.iter().find(|&&t| t as usize >= self.token_types) {
                return Err(format!("token type {bad} is outside the model's {} types", self.token_types));
            }
            row_sequence.extend(std::iter::repeat_n(s, len));
            starts.push(starts[s] + len);
        }
        let rows = row_sequence.len();
        if rows == 0 {
            return Ok((Vec::new(), vec![0]));
        }

        let packing = Packing { sequences, starts: &starts, row_sequence: &row_sequence };
        let mut x = vec![0f32; rows * h];
        run_rows(&EmbeddingRows { encoder: self, packing: &packing }, &mut x, h);

        let (heads, head_dim) = (self.heads, h / self.heads);
        let mut qkv = vec![0f32; rows * 3 * h];
        let mut context = vec![0f32; rows * h];
        let mut inner = Vec::new();
        for layer in &self.layers {
            // Q, K, V with their biases.
            product(&x, rows, &layer.qkv, Epilogue::Bias, &mut qkv)?;
            // Attention per (sequence, head), on copies of that head's keys (transposed) and
            // values: a few tens of kB that stay in L1 while every query of the sequence uses them.
            let per_head: Vec<Vec<f32>> = (0..sequences.len() * heads)
                .into_par_iter()
                .map(|item| {
                    let (s, head) = (item / heads, item % heads);
                    let (start, len) = (starts[s], starts[s + 1] - starts[s]);
                    match head_dim {
                        32 => pulp::Arch::new().dispatch(AttendHead::<32> { qkv: &qkv, hidden: h, start, len, head }),
                        _ => pulp::Arch::new().dispatch(AttendHead::<64> { qkv: &qkv, hidden: h, start, len, head }),
                    }
                })
                .collect();
            context.par_chunks_mut(h).enumerate().for_each(|(r, row)| {
                let s = row_sequence[r];
                let t = r - starts[s];
                for (head, out) in row.chunks_exact_mut(head_dim).enumerate() {
                    out.copy_from_slice(&per_head[s * heads + head][t * head_dim..][..head_dim]);
                }
            });
            // x = LayerNorm(context · W_o + b_o + x)
            product(&context, rows, &layer.attention_out, Epilogue::ResidualNorm { norm: &layer.attention_norm, eps: self.eps }, &mut x)?;
            // inner = GELU(x · W_i + b_i)
            inner.resize(rows * layer.intermediate.bias.len(), 0.0);
            product(&x, rows, &layer.intermediate, Epilogue::Gelu, &mut inner)?;
            // x = LayerNorm(inner · W_out + b_out + x)
            product(&inner, rows, &layer.output, Epilogue::ResidualNorm { norm: &layer.output_norm, eps: self.eps }, &mut x)?;
        }

        Ok((x, starts))
    }
}

/// A BERT cross-encoder (`BertForSequenceClassification`): the encoder above, then the pooler
/// (tanh of a dense layer over the [CLS] row) and the linear classifier; one logit per
/// sequence (the first label's: a reranker has one).
pub(crate) struct BertClassifier {
    encoder: BertEncoder,
    /// Pooler weight, out × in row-major as stored, and bias.
    pooler_weight: Vec<f32>,
    pooler_bias: Vec<f32>,
    /// The first label's classifier row and bias.
    classifier_weight: Vec<f32>,
    classifier_bias: f32,
}

impl BertClassifier {
    /// Reads the weights (`bert.*`, `bert.pooler.dense.*`, `classifier.*`) from safetensors bytes.
    pub fn load(safetensors: &[u8], config: &Config) -> std::result::Result<Self, String> {
        let weights = Weights::read(safetensors)?;
        // The reranker keeps the model's own arithmetic (its scores were not measured in int8).
        let encoder = BertEncoder::from_weights(&weights, config, EmbeddingPrecision::F32)?;
        let h = config.hidden_size;
        let labels = weights.exact("classifier.weight").map(|t| t.dims().first().copied().unwrap_or(0)).unwrap_or(0);
        if labels == 0 {
            return Err("the weights have no classifier.weight (not a sequence-classification model)".into());
        }
        let classifier = weights.exact_tensor("classifier.weight", &[labels, h])?;
        let classifier_weight = classifier.get(0).and_then(|row| row.to_vec1::<f32>()).map_err(|e| e.to_string())?;
        let classifier_bias = weights.exact_tensor("classifier.bias", &[labels])?.to_vec1::<f32>().map_err(|e| e.to_string())?[0];
        Ok(BertClassifier {
            encoder,
            pooler_weight: weights.matrix("pooler.dense.weight", h, h)?,
            pooler_bias: weights.vector("pooler.dense.bias", h)?,
            classifier_weight,
            classifier_bias,
        })
    }

    /// One logit per sequence, in order.
    pub fn logits(&self, sequences: &[Sequence<'_>]) -> std::result::Result<Vec<f32>, String> {
        let h = self.encoder.hidden;
        let (x, starts) = self.encoder.forward(sequences)?;
        Ok((0..starts.len().saturating_sub(1))
            .map(|s| {
                let cls = &x[starts[s] * h..][..h];
                let mut logit = self.classifier_bias;
                for (o, (row, bias)) in self.pooler_weight.chunks_exact(h).zip(&self.pooler_bias).enumerate() {
                    let pooled = (row.iter().zip(cls).map(|(w, v)| w * v).sum::<f32>() + bias).tanh();
                    logit += self.classifier_weight[o] * pooled;
                }
                logit
            })
            .collect())
    }
}

/// `dst = epilogue(input · W + b)`, row by row: `input` is rows × in, `dst` rows × out. The
/// product is read straight out of candle's buffer by the epilogue, never copied.
fn product(input: &[f32], rows: usize, dense: &Dense, epilogue: Epilogue<'_>, dst: &mut [f32]) -> std::result::Result<(), String> {
    let run = |dst: &mut [f32]| -> candle_core::Result<()> {
        let columns = input.len() / rows;
        let input = Tensor::from_slice(input, (rows, columns), &Device::Cpu)?;
        let out = match &dense.weight {
            Weight::F32(weight_t) => input.matmul(weight_t)?,
            Weight::Int8 { matmul, columns: padded } if *padded > columns => {
                matmul.forward(&input.pad_with_zeros(1, 0, padded - columns)?)?
            }
            Weight::Int8 { matmul, .. } => matmul.forward(&input)?,
        };
        let (storage, layout) = out.storage_and_layout();
        let candle_core::Storage::Cpu(cpu) = &*storage else { candle_core::bail!("the product did not land in CPU memory") };
        let Some((from, to)) = layout.contiguous_offsets() else { candle_core::bail!("the product is not contiguous") };
        let product = &cpu.as_slice::<f32>()?[from..to];
        if product.len() != dst.len() {
            candle_core::bail!("the product has {} values, its destination {}", product.len(), dst.len())
        }
        run_rows(&ProductRows { product, bias: &dense.bias, epilogue }, dst, dense.bias.len());
        Ok(())
    };
    run(dst).map_err(|e| format!("matrix product: {e}"))
}

/// Where each row of the packed activations comes from.
struct Packing<'a> {
    sequences: &'a [Sequence<'a>],
    /// First row of each sequence, and the total row count last.
    starts: &'a [usize],
    row_sequence: &'a [usize],
}

/// A computation that fills whole rows of an output, row by row.
///
/// `run` is `#[inline(always)]` in every implementation, so it is compiled inside `pulp`'s
/// dispatch with the CPU's widest SIMD enabled and its plain loops vectorise (a closure would
/// be called through a shim compiled without them).
trait RowKernel: Sync {
    /// Fills `dst`, whole rows of the output starting at row `first`.
    fn run(&self, first: usize, dst: &mut [f32]);
}

struct WithWidestSimd<'a, K>(&'a K, usize, &'a mut [f32]);

impl<K: RowKernel> pulp::WithSimd for WithWidestSimd<'_, K> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        self.0.run(self.1, self.2)
    }
}

/// Runs `kernel` over every row of `dst` (rows of `width`), in parallel.
fn run_rows<K: RowKernel>(kernel: &K, dst: &mut [f32], width: usize) {
    dst.par_chunks_mut(width * ROWS_PER_TASK)
        .enumerate()
        .for_each(|(task, chunk)| pulp::Arch::new().dispatch(WithWidestSimd(kernel, task * ROWS_PER_TASK, chunk)));
}

/// Word + position + token type embeddings, layer-normalised.
struct EmbeddingRows<'a> {
    encoder: &'a BertEncoder,
    packing: &'a Packing<'a>,
}

impl RowKernel for EmbeddingRows<'_> {
    #[inline(always)]
    fn run(&self, first: usize, dst: &mut [f32]) {
        let (e, h) = (self.encoder, self.encoder.hidden);
        for (i, row) in dst.chunks_exact_mut(h).enumerate() {
            let r = first + i;
            let s = self.packing.row_sequence[r];
            let t = r - self.packing.starts[s];
            let sequence = &self.packing.sequences[s];
            let (id, kind) = (sequence.ids[t] as usize, sequence.type_ids[t] as usize);
            let (word, position, kind) = (&e.word[id * h..][..h], &e.position[t * h..][..h], &e.token_type[kind * h..][..h]);
            for (((out, w), p), k) in row.iter_mut().zip(word).zip(position).zip(kind) {
                *out = w + p + k;
            }
            layer_norm(row, &e.embedding_norm, e.eps);
        }
    }
}

/// What a product's row (plus the layer's bias) becomes.
#[derive(Clone, Copy)]
enum Epilogue<'a> {
    /// `dst = product + bias`.
    Bias,
    /// `dst = GELU(product + bias)`.
    Gelu,
    /// `dst = LayerNorm(product + bias + dst)`: the residual connection.
    ResidualNorm { norm: &'a Norm, eps: f32 },
}

/// One product's rows through their [`Epilogue`].
struct ProductRows<'a> {
    product: &'a [f32],
    bias: &'a [f32],
    epilogue: Epilogue<'a>,
}

impl RowKernel for ProductRows<'_> {
    #[inline(always)]
    fn run(&self, first: usize, dst: &mut [f32]) {
        let width = self.bias.len();
        let src = &self.product[first * width..][..dst.len()];
        for (dst, src) in dst.chunks_exact_mut(width).zip(src.chunks_exact(width)) {
            let biased = src.iter().zip(self.bias).map(|(s, b)| s + b);
            match self.epilogue {
                Epilogue::Bias => dst.iter_mut().zip(biased).for_each(|(d, v)| *d = v),
                Epilogue::Gelu => dst.iter_mut().zip(biased).for_each(|(d, v)| *d = gelu(v)),
                Epilogue::ResidualNorm { norm, eps } => {
                    dst.iter_mut().zip(biased).for_each(|(d, v)| *d += v);
                    layer_norm(dst, norm, eps);
                }
            }
        }
    }
}

/// Scaled dot-product attention of one head over one sequence: the head's output rows
/// (`len` × `D`). `D` is the head width (a compile-time constant, so accumulators live in
/// registers).
///
/// Queries go through in blocks (see [`attend_blocks`]), so every key or value vector loaded
/// feeds one fused multiply-add per query of the block: enough independent accumulators to
/// keep both FMA units busy (one query at a time left the value sum waiting on FMA latency).
/// The transposed keys are zero-padded to whole SIMD registers, so short sequences take the
/// vector path too; the padded keys' scores are never read.
struct AttendHead<'a, const D: usize> {
    qkv: &'a [f32],
    hidden: usize,
    start: usize,
    len: usize,
    head: usize,
}

impl<const D: usize> pulp::WithSimd for AttendHead<'_, D> {
    type Output = Vec<f32>;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) -> Vec<f32> {
        let (h, len) = (self.hidden, self.len);
        let row = |t: usize, part: usize| &self.qkv[(self.start + t) * 3 * h + part * h + self.head * D..][..D];
        let scale = 1.0 / (D as f32).sqrt();
        let mut out = vec![0f32; len * D];
        // Block sizes: at most half the register file in accumulators (32 registers with
        // AVX-512, 16 with AVX2), the rest for loads and broadcasts. `R` registers hold a head row.
        match (S::F32_LANES, D) {
            (16, 32) => attend_blocks::<S, D, 8, 2>(simd, row, len, scale, &mut out),
            (16, 64) => attend_blocks::<S, D, 4, 4>(simd, row, len, scale, &mut out),
            (8, 32) => attend_blocks::<S, D, 2, 4>(simd, row, len, scale, &mut out),
            (8, 64) => attend_blocks::<S, D, 1, 8>(simd, row, len, scale, &mut out),
            (4, 32) => attend_blocks::<S, D, 1, 8>(simd, row, len, scale, &mut out),
            // pulp's scalar fallback, and widths without a register plan.
            _ => attend_plain::<D>(row, len, scale, &mut out),
        }
        out
    }
}

/// [`AttendHead`] with `B` queries per block and `R` SIMD registers per head row
/// (`R × S::F32_LANES == D`).
#[inline(always)]
fn attend_blocks<'q, S: pulp::Simd, const D: usize, const B: usize, const R: usize>(
    simd: S,
    row: impl Fn(usize, usize) -> &'q [f32],
    len: usize,
    scale: f32,
    out: &mut [f32],
) {
    let lanes = S::F32_LANES;
    debug_assert_eq!(R * lanes, D);
    // Keys transposed and scaled (D rows of `padded`, zeros past `len`), values as they are.
    // The transpose goes through 16 × D tiles held in a local array: written straight into
    // `keys_t`, the loop compiled to scatter instructions, which cost more than the key scores.
    let padded = len.next_multiple_of(lanes);
    let mut keys_t = vec![0f32; D * padded];
    let mut values = Vec::with_capacity(len * D);
    let mut tile = [[0f32; D]; 16];
    for first in (0..len).step_by(16) {
        let rows = 16.min(len - first);
        for (t, tile_row) in tile[..rows].iter_mut().enumerate() {
            tile_row.copy_from_slice(row(first + t, 1));
            values.extend_from_slice(row(first + t, 2));
        }
        for (d, keys) in keys_t.chunks_exact_mut(padded).enumerate() {
            for (k, tile_row) in keys[first..first + rows].iter_mut().zip(&tile) {
                *k = tile_row[d] * scale;
            }
        }
    }
    // The block's scores, query-major; rows past the sequence's end score a zero query (as
    // does nothing else: `row` always yields exactly D values, so the conversion cannot fail).
    let mut scores = vec![0f32; B * padded];
    let zero = [0f32; D];
    for first in (0..len).step_by(B) {
        let used = B.min(len - first);
        let queries: [&[f32; D]; B] = std::array::from_fn(|i| if i < used { row(first + i, 0).try_into().unwrap_or(&zero) } else { &zero });
        // scores = queries · keys, one register of keys at a time for the whole block.
        for j in (0..padded).step_by(lanes) {
            let mut acc = [simd.splat_f32s(0.0); B];
            for d in 0..D {
                let key = S::as_simd_f32s(&keys_t[d * padded + j..][..lanes]).0[0];
                for (a, query) in acc.iter_mut().zip(&queries) {
                    *a = simd.mul_add_f32s(simd.splat_f32s(query[d]), key, *a);
                }
            }
            for (scores, a) in scores.chunks_exact_mut(padded).zip(acc) {
                S::as_mut_simd_f32s(&mut scores[j..j + lanes]).0[0] = a;
            }
        }
        for scores in scores.chunks_exact_mut(padded).take(used) {
            softmax(&mut scores[..len]);
        }
        // out = Σ_t p_t · value_t, every query of the block at once.
        let probabilities: [&[f32]; B] = std::array::from_fn(|i| &scores[i * padded..][..len]);
        let mut acc = [[simd.splat_f32s(0.0); R]; B];
        for (t, value) in values.chunks_exact(D).enumerate().take(len) {
            let (value, _) = S::as_simd_f32s(value);
            for (acc, p) in acc.iter_mut().zip(&probabilities) {
                let p = simd.splat_f32s(p[t]);
                for (a, v) in acc.iter_mut().zip(value) {
                    *a = simd.mul_add_f32s(p, *v, *a);
                }
            }
        }
        // Constant indices only (no slice of `acc` by `used`), so the accumulators stay in
        // registers through the loop above instead of being stored back every step.
        for (i, acc) in acc.into_iter().enumerate() {
            if i < used {
                let (dst, _) = S::as_mut_simd_f32s(&mut out[(first + i) * D..][..D]);
                dst.copy_from_slice(&acc);
            }
        }
    }
}

/// [`AttendHead`] without SIMD registers: one query at a time, plain loops.
#[inline(always)]
fn attend_plain<'q, const D: usize>(row: impl Fn(usize, usize) -> &'q [f32], len: usize, scale: f32, out: &mut [f32]) {
    let mut scores = vec![0f32; len];
    for (t, out) in out.chunks_exact_mut(D).enumerate() {
        let query = row(t, 0);
        for (j, score) in scores.iter_mut().enumerate() {
            *score = query.iter().zip(row(j, 1)).map(|(q, k)| q * k).sum::<f32>() * scale;
        }
        softmax(&mut scores);
        out.fill(0.0);
        for (j, p) in scores.iter().enumerate() {
            for (o, v) in out.iter_mut().zip(row(j, 2)) {
                *o = p.mul_add(*v, *o);
            }
        }
    }
}

/// In-place layer norm of one row (biased variance, as BERT).
#[inline(always)]
fn layer_norm(row: &mut [f32], norm: &Norm, eps: f32) {
    let n = row.len() as f32;
    let mean = sum_of(row, |v| v) / n;
    let variance = sum_of(row, |v| (v - mean) * (v - mean));
    let inverse = 1.0 / (variance / n + eps).sqrt();
    for ((v, w), b) in row.iter_mut().zip(&norm.weight).zip(&norm.bias) {
        *v = (*v - mean) * inverse * w + b;
    }
}

/// Σ f(v) with sixteen independent accumulators (vectorises).
#[inline(always)]
fn sum_of(values: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0f32; 16];
    let chunks = values.chunks_exact(16);
    let rest: f32 = chunks.remainder().iter().map(|v| f(*v)).sum();
    for chunk in chunks {
        for (l, v) in lanes.iter_mut().zip(chunk) {
            *l += f(*v);
        }
    }
    lanes.iter().sum::<f32>() + rest
}

/// In-place softmax.
#[inline(always)]
fn softmax(scores: &mut [f32]) {
    let max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
    for s in scores.iter_mut() {
        *s = exp(*s - max);
    }
    let inverse = 1.0 / sum_of(scores, |s| s);
    scores.iter_mut().for_each(|s| *s *= inverse);
}

/// Exact GELU, `x/2 · (1 + erf(x/√2))`, as BERT's `gelu`.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf, Abramowitz & Stegun 7.1.26 (absolute error ≤ 1.5e-7), branch-free so it vectorises.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly = t * t.mul_add(t.mul_add(t.mul_add(t.mul_add(1.061_405_4, -1.453_152_1), 1.421_413_7), -0.284_496_74), 0.254_829_6);
    let magnitude = (-poly).mul_add(exp(-z * z), 1.0);
    magnitude.copysign(x)
}

/// e^x for f32 (Cephes `expf`: range reduction by ln 2, degree-6 polynomial; about 1 ulp),
/// branch-free and cast-free so it vectorises. Inputs below -87 give 0, not a denormal: products
/// with denormals take a microcode assist (~100 cycles each), and softmax and GELU make many.
#[inline(always)]
fn exp(input: f32) -> f32 {
    // Adding 1.5 · 2^23 rounds x·log2(e) to the integer n and leaves n in the low mantissa bits.
    const SHIFT: f32 = 12_582_912.0;
    let x = input.clamp(-87.0, 88.0);
    let shifted = x.mul_add(std::f32::consts::LOG2_E, SHIFT);
    let n = shifted - SHIFT;
    let r = n.mul_add(2.121_944_4e-4, n.mul_add(-0.693_359_4, x));
    let p = r.mul_add(
        r.mul_add(r.mul_add(r.mul_add(r.mul_add(1.987_569_1e-4, 1.398_199_9e-3), 8.333_452e-3), 4.166_579_6e-2), 1.666_666_5e-1),
        0.5, // Cephes: 5.0000001201e-1, which is 0.5 in f32
    );
    let y = (p * r).mul_add(r, r) + 1.0;
    // 2^n: n + 127 into the exponent field (the shift drops the constant's own bits).
    let value = y * f32::from_bits(shifted.to_bits().wrapping_add(127) << 23);
    if input < -87.0 { 0.0 } else { value }
}

/// Named tensors of a safetensors file, with the checks `load` needs.
struct Weights {
    tensors: HashMap<String, Tensor>,
    prefix: String,
}

impl Weights {
    fn read(safetensors: &[u8]) -> std::result::Result<Self, String> {
        let tensors = candle_core::safetensors::load_buffer(safetensors, &Device::Cpu).map_err(|e| e.to_string())?;
        Ok(Weights { tensors, prefix: String::new() }.with_prefix())
    }

    /// A tensor by its full name (no `bert.` prefix: the classifier sits beside the encoder).
    fn exact(&self, name: &str) -> Option<&Tensor> {
        self.tensors.get(name)
    }

    fn exact_tensor(&self, name: &str, shape: &[usize]) -> std::result::Result<Tensor, String> {
        let tensor = self.exact(name).ok_or_else(|| format!("the weights have no tensor {name}"))?;
        if tensor.dims() != shape {
            return Err(format!("tensor {name} has shape {:?}, expected {shape:?}", tensor.dims()));
        }
        tensor.to_dtype(DType::F32).map_err(|e| e.to_string())
    }

    /// Some exports name every tensor `bert.…`; use that prefix when the plain names are absent.
    fn with_prefix(mut self) -> Self {
        if !self.tensors.contains_key("embeddings.word_embeddings.weight")
            && self.tensors.contains_key("bert.embeddings.word_embeddings.weight")
        {
            self.prefix = "bert.".into();
        }
        self
    }

    fn tensor(&self, name: &str, shape: &[usize]) -> std::result::Result<Tensor, String> {
        let full = format!("{}{name}", self.prefix);
        let tensor = self.tensors.get(&full).ok_or_else(|| format!("the weights have no tensor {full}"))?;
        if tensor.dims() != shape {
            return Err(format!("tensor {full} has shape {:?}, expected {shape:?}", tensor.dims()));
        }
        tensor.to_dtype(DType::F32).map_err(|e| e.to_string())
    }

    fn vector(&self, name: &str, len: usize) -> std::result::Result<Vec<f32>, String> {
        self.tensor(name, &[len])?.to_vec1::<f32>().map_err(|e| e.to_string())
    }

    fn matrix(&self, name: &str, rows: usize, columns: usize) -> std::result::Result<Vec<f32>, String> {
        self.tensor(name, &[rows, columns])?.flatten_all().and_then(|t| t.to_vec1::<f32>()).map_err(|e| e.to_string())
    }

    fn dense(&self, name: &str, out: usize, input: usize, precision: EmbeddingPrecision) -> std::result::Result<Dense, String> {
        let weight = self.tensor(&format!("{name}.weight"), &[out, input])?;
        Dense::new(weight, self.vector(&format!("{name}.bias"), out)?, precision).map_err(|e| e.to_string())
    }

    fn norm(&self, name: &str, len: usize) -> std::result::Result<Norm, String> {
        Ok(Norm { weight: self.vector(&format!("{name}.weight"), len)?, bias: self.vector(&format!("{name}.bias"), len)? })
    }
}

#[cfg(test)]
mod tests;
