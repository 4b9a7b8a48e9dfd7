//! Unit tests of `bert`.

use super::*;

#[test]
fn exp_matches_the_standard_library() {
    let mut worst: f32 = 0.0;
    for i in -8700..=8800 {
        let x = i as f32 / 100.0;
        let (ours, std) = (exp(x), x.exp());
        worst = worst.max(((ours - std) / std).abs());
    }
    assert!(worst < 4e-7, "worst relative error {worst}");
    assert_eq!(exp(-87.5), 0.0);
    assert_eq!(exp(-1e30), 0.0);
}

#[test]
fn gelu_matches_the_erf_definition() {
    let mut worst: f64 = 0.0;
    for i in -1000..=1000 {
        let x = i as f64 / 100.0;
        let z = x / std::f64::consts::SQRT_2;
        let reference = 0.5 * x * (1.0 + erf_f64(z));
        worst = worst.max((gelu(x as f32) as f64 - reference).abs());
    }
    assert!(worst < 2e-6, "worst absolute error {worst}");
}

/// Attention of one head against an f64 evaluation of its definition, for lengths around
/// every block and register boundary, both head widths, with AVX-512 (where the CPU has
/// it), AVX2 and no SIMD at all.
#[test]
fn attention_matches_its_definition() {
    #[derive(Clone, Copy, Debug)]
    enum Isa {
        Widest,
        Avx2,
        Scalar,
    }
    fn check<const D: usize>(len: usize, isa: Isa) {
        use pulp::Simd;
        let (heads, start, head) = (3, 2, 1);
        let hidden = heads * D;
        let rows = start + len + 1;
        // Deterministic values in [-2, 2): a multiplicative hash of the index.
        let qkv: Vec<f32> = (0..rows * 3 * hidden)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0)
            .collect();
        let head_of = AttendHead::<D> { qkv: &qkv, hidden, start, len, head };
        let ours = match isa {
            Isa::Widest => pulp::Arch::new().dispatch(head_of),
            Isa::Avx2 => match pulp::x86::V3::try_new() {
                Some(simd) => Simd::vectorize(simd, head_of),
                None => return,
            },
            Isa::Scalar => Simd::vectorize(pulp::Scalar::new(), head_of),
        };
        let at = |t: usize, part: usize, d: usize| qkv[(start + t) * 3 * hidden + part * hidden + head * D + d] as f64;
        let mut worst: f64 = 0.0;
        for t in 0..len {
            let scores: Vec<f64> = (0..len).map(|j| (0..D).map(|d| at(t, 0, d) * at(j, 1, d)).sum::<f64>() / (D as f64).sqrt()).collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            for d in 0..D {
                let expected = (0..len).map(|j| weights[j] / total * at(j, 2, d)).sum::<f64>();
                worst = worst.max((ours[t * D + d] as f64 - expected).abs());
            }
        }
        assert!(worst < 2e-5, "D={D} len={len} {isa:?}: worst absolute error {worst}");
    }
    for len in [1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 39, 64, 65, 130] {
        for isa in [Isa::Widest, Isa::Avx2, Isa::Scalar] {
            check::<32>(len, isa);
            check::<64>(len, isa);
        }
    }
}

/// erf in f64: Maclaurin series for |z| < 3, the asymptotic continued fraction beyond.
fn erf_f64(z: f64) -> f64 {
    let a = z.abs();
    let value = if a < 3.0 {
        let (mut term, mut total, mut n) = (a, a, 0.0);
        while term.abs() > 1e-17 {
            n += 1.0;
            term *= -a * a / n;
            total += term / (2.0 * n + 1.0);
        }
        total * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        let mut fraction = 0.0;
        for k in (1..60).rev() {
            fraction = (k as f64 / 2.0) / (a + fraction);
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / (a + fraction)
    };
    value.copysign(z)
}

/// A BERT config.json of `positions` positions (the shape of all-MiniLM-L6-v2's).
fn bert_config_json(positions: usize) -> Vec<u8> {
    serde_json::json!({
        "vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
        "intermediate_size": 1536, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "max_position_embeddings": positions, "type_vocab_size": 2, "initializer_range": 0.02,
        "layer_norm_eps": 1e-12, "pad_token_id": 0, "position_embedding_type": "absolute",
        "use_cache": true, "model_type": "bert"
    })
    .to_string()
    .into_bytes()
}

#[test]
fn a_cut_beyond_the_models_positions_is_refused_naming_the_policy_section() {
    let policy = crate::policy::LoadedPolicy::from_texts(None).expect("the default policy").policy;
    let env = super::super::ModelEnv::default();
    let files = |config_json: Vec<u8>| VerifiedModel {
        source: super::super::ModelSource::HfCache { snapshot: std::path::PathBuf::new() },
        config_json,
        tokenizer_json: b"not a tokenizer".to_vec(),
        weights: Vec::new(),
    };
    let embedding = ModelConfig::from_policy(&policy, None, &env);
    let reranker = super::super::cross_encoder::config(&policy, None, &env);
    for (config, section) in [(&embedding, "embedding"), (&reranker, "reranker")] {
        let short = config_and_tokenizer(&files(bert_config_json(config.max_tokens - 1)), config, None).unwrap_err();
        let expected = format!("{section}.max_tokens {} exceeds the model's {} positions", config.max_tokens, config.max_tokens - 1);
        assert_eq!(short, expected);
        // Within the positions, the next thing read is the tokenizer.
        let long_enough = config_and_tokenizer(&files(bert_config_json(512)), config, None).unwrap_err();
        assert!(long_enough.starts_with("tokenizer.json cannot be loaded"), "{long_enough}");
    }
    let not_bert = config_and_tokenizer(&files(b"{}".to_vec()), &embedding, None).unwrap_err();
    assert!(not_bert.starts_with("config.json is not a BERT config"), "{not_bert}");
}
