//! Dense embeddings on the real all-MiniLM-L6-v2: parity with sentence-transformers, the
//! similarities published on sbert.net, sha256 verification, offline Hugging Face cache
//! resolution, and refusal to download under `egress: deny`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use paravault::Error;
use paravault::embed::{DIMENSION, EmbeddingPrecision, ModelConfig, ModelEnv, ModelHandle, ModelSource, ThreadsSource, cosine, resolve};
use paravault::policy::{LoadedPolicy, Policy};

use crate::model::{MODEL_FILES, model_dir};

const REPO: &str = "sentence-transformers/all-MiniLM-L6-v2";
const REVISION: &str = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf";
/// Nothing listens on the discard port: a connection attempt would fail, never hang.
const DEAD_ENDPOINT: &str = "http://127.0.0.1:9";

fn policy(override_text: Option<&str>) -> Policy {
    LoadedPolicy::from_texts(override_text).unwrap().policy
}

/// An environment with nothing from the process: no cache, no model folder, a dead endpoint.
fn bare_env() -> ModelEnv {
    ModelEnv { hf_endpoint: Some(DEAD_ENDPOINT.into()), ..ModelEnv::default() }
}

fn dir_config(dir: &Path) -> ModelConfig {
    ModelConfig::from_policy(&policy(None), None, &ModelEnv { model_dir: Some(dir.to_path_buf()), ..bare_env() })
}

/// One loaded model shared by the tests that only embed.
fn shared() -> &'static ModelHandle {
    static HANDLE: OnceLock<ModelHandle> = OnceLock::new();
    HANDLE.get_or_init(|| ModelHandle::new(dir_config(model_dir())))
}

fn embed(texts: &[&str]) -> Vec<Vec<f32>> {
    shared().model().unwrap().embed(texts).unwrap()
}

#[test]
fn parity_with_sentence_transformers_reference() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/eval/minilm_reference.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("the reference vectors {} are missing: {e}", path.display()));
    let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(reference["max_seq_length"], 256);
    let sentences: Vec<&str> = reference["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let expected: Vec<Vec<f32>> = reference["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect())
        .collect();
    assert_eq!(sentences.len(), expected.len());
    assert!(sentences.len() >= 12);

    let ours = embed(&sentences);
    let mut worst = (1.0f64, 0.0f32);
    for (i, (a, b)) in ours.iter().zip(&expected).enumerate() {
        assert_eq!(a.len(), DIMENSION);
        assert_eq!(b.len(), DIMENSION);
        let cos = cosine(a, b);
        let max_abs = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        assert!(cos >= 0.9999 && max_abs <= 1e-4, "sentence {i} {:?}: cosine {cos}, max abs difference {max_abs}", sentences[i]);
        worst = (worst.0.min(cos), worst.1.max(max_abs));
    }
    eprintln!("parity over {} sentences: lowest cosine {:.8}, max abs difference {:.2e}", sentences.len(), worst.0, worst.1);

    // The long sentence is cut at 256 tokens, not at the tokenizer's shipped 128.
    let counts = shared().model().unwrap().token_counts(&sentences).unwrap();
    assert_eq!(counts.iter().max(), Some(&256), "{counts:?}");
}

/// The lowest cosine between an int8 vector (`embedding.precision: int8`) and the f32 vector of
/// the same text that this test accepts; the lowest measured is printed.
const INT8_COSINE_MIN: f64 = 0.99;

#[test]
fn int8_vectors_stay_close_to_f32_on_real_texts() {
    use std::io::BufRead;
    // The reference sentences (accents, emoji, CJK, empty, a 256-token cut) and the first 64
    // SciFact abstracts (title and text, most cut at 256 tokens).
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/eval/minilm_reference.json");
    let reference: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut texts: Vec<String> = reference["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect();
    let corpus = std::fs::File::open(Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/eval/scifact/corpus.jsonl.gz")).unwrap();
    for line in std::io::BufReader::new(flate2::read::GzDecoder::new(corpus)).lines().take(64) {
        let doc: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        texts.push(format!("{}\n{}", doc["title"].as_str().unwrap_or(""), doc["text"].as_str().unwrap_or("")));
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();

    let env = ModelEnv { model_dir: Some(model_dir().to_path_buf()), ..bare_env() };
    let int8 = ModelHandle::new(ModelConfig::from_policy(&policy(Some("embedding:\n  precision: int8\n")), None, &env));
    assert_eq!(int8.id().precision, EmbeddingPrecision::Int8);
    assert_ne!(int8.id(), shared().id(), "the precision is part of the model's identity");
    let quantised = int8.model().unwrap().embed(&refs).unwrap();
    let exact = embed(&refs);
    let (mut lowest, mut sum, mut max_abs) = (1.0f64, 0.0f64, 0.0f32);
    for (i, (q, e)) in quantised.iter().zip(&exact).enumerate() {
        let cos = cosine(q, e);
        assert!(cos >= INT8_COSINE_MIN, "text {i} {:?}: int8 against f32 cosine {cos}", &texts[i][..texts[i].len().min(60)]);
        lowest = lowest.min(cos);
        sum += cos;
        max_abs = q.iter().zip(e).map(|(x, y)| (x - y).abs()).fold(max_abs, f32::max);
    }
    // Equal vectors would mean the quantised products never ran.
    assert!(max_abs > 1e-4, "int8 vectors equal the f32 ones (max abs difference {max_abs})");
    eprintln!(
        "int8 against f32 over {} texts: lowest cosine {lowest:.5}, mean {:.5}, max abs difference {max_abs:.3e}",
        texts.len(),
        sum / texts.len() as f64
    );
}

#[test]
fn reproduces_the_similarities_published_on_sbert_net() {
    let v = embed(&["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]);
    let close = |got: f64, want: f64, what: &str| assert!((got - want).abs() < 5e-4, "{what}: {got:.5} (published {want})");
    close(cosine(&v[0], &v[1]), 0.6660, "weather/sunny");
    close(cosine(&v[0], &v[2]), 0.1046, "weather/stadium");
    close(cosine(&v[1], &v[2]), 0.1411, "sunny/stadium");

    let first = embed(&["The new movie is awesome", "The cat sits outside", "A man is playing guitar"]);
    let second = embed(&["The dog plays in the garden", "The new movie is so great", "A woman watches TV"]);
    let published = [[0.0543, 0.8939, -0.0502], [0.2838, -0.0029, 0.1310], [0.2277, -0.0136, -0.0327]];
    for (i, row) in published.iter().enumerate() {
        for (j, want) in row.iter().enumerate() {
            close(cosine(&first[i], &second[j]), *want, &format!("STS ({i}, {j})"));
        }
    }
}

#[test]
fn batching_and_padding_do_not_change_vectors() {
    let texts = [
        "a",
        "Kubernetes pods restart when the liveness probe fails.",
        "",
        "The mitochondria is the powerhouse of the cell, and this sentence is a good deal longer than the others around it.",
        "东京是日本的首都。",
    ];
    let together = embed(&texts);
    let mut config = dir_config(model_dir());
    config.batch_size = 2;
    config.threads = 1;
    let small = paravault::embed::MiniLm::load(resolve(&config).unwrap(), &config).unwrap();
    assert_eq!(small.threads(), 1);
    let apart = small.embed(&texts).unwrap();
    for (i, (a, b)) in together.iter().zip(&apart).enumerate() {
        let max_abs = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        assert!(max_abs < 1e-5, "text {i}: batch of 5 and batches of 2 differ by {max_abs}");
    }
    let one = small.embed(&texts[3..4]).unwrap();
    assert!(cosine(&one[0], &together[3]) > 0.99999);
    assert!(small.embed(&[]).unwrap().is_empty());
}

#[test]
fn embed_passages_gives_unit_vectors_and_a_recordable_model_id() {
    let handle = shared();
    let passages = vec!["Tantivy is a full-text search engine library written in Rust.".to_string(), "Quarterly revenue grew.".to_string()];
    let vectors = handle.embed_passages(&passages).unwrap();
    assert_eq!(vectors.len(), 2);
    for v in &vectors {
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    }
    let id = handle.id();
    assert_eq!((id.repo.as_str(), id.revision.as_str(), id.dimension), (REPO, REVISION, 384));
    let recorded: paravault::embed::ModelId = serde_json::from_value(serde_json::to_value(id).unwrap()).unwrap();
    assert_eq!(&recorded, id);

    let description = handle.describe();
    let bound = description.bound.expect("the model is bound after use");
    eprintln!("model resolved, verified and loaded in {} ms", bound.load_ms);
    assert!(matches!(&bound.source, ModelSource::LocalDir { origin: "PARAVAULT_MODEL_DIR", .. }), "{:?}", bound.source);
    assert_eq!(description.sources.len(), 1);
    assert!(description.sources[0].files_present);
}

#[test]
fn describe_before_loading_reads_nothing_and_binds_nothing() {
    let empty = tempfile::tempdir().unwrap();
    let env = ModelEnv { hf_hub_cache: Some(empty.path().to_path_buf()), rayon_num_threads: Some(3), ..bare_env() };
    let handle = ModelHandle::new(ModelConfig::from_policy(&policy(Some("egress: allow-public\n")), None, &env));
    let d = handle.describe();
    assert!(d.bound.is_none());
    assert_eq!((d.threads, d.threads_source), (3, ThreadsSource::RayonNumThreads));
    let kinds: Vec<_> = d.sources.iter().map(|s| (s.kind, s.files_present)).collect();
    assert_eq!(kinds, [("hugging face cache", false), ("download", false)]);
    assert_eq!(d.sources[1].location, DEAD_ENDPOINT);
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["model"]["revision"], REVISION);

    let from_policy = ModelConfig::from_policy(&policy(None), None, &bare_env());
    assert_eq!((from_policy.threads, from_policy.threads_source), (2, ThreadsSource::Policy));
    // A relative local_dir is the vault's.
    let vault = Path::new("/vaults/one");
    let relative = ModelConfig::from_policy(&policy(Some("embedding:\n  local_dir: models/minilm\n")), Some(vault), &bare_env());
    assert_eq!(relative.policy_dir.as_deref(), Some(vault.join("models/minilm").as_path()));
}

/// A copy of the model folder (the weights linked, not copied) with one byte of `file` flipped.
fn tampered_copy(file: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in MODEL_FILES {
        let source = model_dir().join(name);
        if name == "model.safetensors" {
            std::os::unix::fs::symlink(&source, dir.path().join(name)).unwrap();
        } else {
            std::fs::copy(&source, dir.path().join(name)).unwrap();
        }
    }
    let path = dir.path().join(file);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();
    dir
}

#[test]
fn a_flipped_byte_is_a_typed_verification_error() {
    for file in ["config.json", "tokenizer.json"] {
        let copy = tampered_copy(file);
        let handle = ModelHandle::new(dir_config(copy.path()));
        let err = handle.model().unwrap_err();
        assert_eq!(err.code(), "model_verification_failed", "{err}");
        match &err {
            Error::ModelVerificationFailed { file: named, expected, found, .. } => {
                assert_eq!(named, file);
                assert_ne!(expected, found);
                assert_eq!(found.len(), 64);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(handle.describe().bound.is_none(), "a failed load binds nothing");
    }
}

#[test]
fn an_explicit_folder_is_the_only_source_when_configured() {
    let empty = tempfile::tempdir().unwrap();
    // The cache would have the model, but the explicit folder wins and is incomplete: an error.
    let hub = fake_cache(REVISION);
    let text = format!("embedding:\n  local_dir: {}\n", empty.path().display());
    let env = ModelEnv { hf_hub_cache: Some(hub.path().to_path_buf()), ..bare_env() };
    let err = resolve(&ModelConfig::from_policy(&policy(Some(&text)), None, &env)).map(|_| ()).unwrap_err();
    assert_eq!(err.code(), "model_unavailable", "{err}");
    let message = err.to_string();
    assert!(message.contains("embedding.local_dir") && message.contains("model.safetensors"), "{message}");
    assert!(!message.contains(&empty.path().display().to_string()), "messages name no absolute paths: {message}");
}

/// A Hugging Face hub cache holding the model at `revision`: `refs/main`, `blobs/<sha256>` and
/// `snapshots/<revision>/<file>` symlinks into the blobs, as the hub clients lay it out.
fn fake_cache(revision: &str) -> tempfile::TempDir {
    let hub = tempfile::tempdir().unwrap();
    let repo = hub.path().join("models--sentence-transformers--all-MiniLM-L6-v2");
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    let snapshot = repo.join("snapshots").join(revision);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::write(repo.join("refs/main"), revision).unwrap();
    let hashes = policy(None).embedding.sha256;
    for (name, sha) in hashes.files() {
        let blob = repo.join("blobs").join(sha);
        std::os::unix::fs::symlink(model_dir().join(name), &blob).unwrap();
        std::os::unix::fs::symlink(PathBuf::from("../../blobs").join(sha), snapshot.join(name)).unwrap();
    }
    hub
}

#[test]
fn resolves_from_the_hugging_face_cache_offline() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());

    // Through HF_HOME (its hub/ subfolder), with `egress: allow-public`: the cache is enough.
    let home = tempfile::tempdir().unwrap();
    let hub = fake_cache(REVISION);
    std::os::unix::fs::symlink(hub.path(), home.path().join("hub")).unwrap();
    let env = ModelEnv { hf_home: Some(home.path().to_path_buf()), hf_endpoint: Some(endpoint.clone()), ..ModelEnv::default() };
    let config = ModelConfig::from_policy(&policy(Some("egress: allow-public\n")), None, &env);
    let handle = ModelHandle::new(config);
    let v = handle.embed_passages(&["It's so sunny outside!".to_string()]).unwrap();
    assert_eq!(v.len(), 1);
    match handle.describe().bound.unwrap().source {
        ModelSource::HfCache { snapshot } => assert!(snapshot.ends_with(format!("snapshots/{REVISION}")), "{}", snapshot.display()),
        other => panic!("unexpected source {other:?}"),
    }

    // HF_HUB_CACHE wins over HF_HOME; under `deny` the cache is still used.
    let env = ModelEnv { hf_hub_cache: Some(hub.path().to_path_buf()), hf_home: Some(PathBuf::from("/nonexistent")), ..bare_env() };
    let verified = resolve(&ModelConfig::from_policy(&policy(None), None, &env)).unwrap();
    assert!(matches!(verified.source, ModelSource::HfCache { .. }));
    assert!(listener.accept().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock), "the cache lookup touched the network");
}

#[test]
fn another_revision_in_the_cache_is_not_used() {
    let other = "0123456789abcdef0123456789abcdef01234567";
    let hub = fake_cache(other);
    let env = ModelEnv { hf_hub_cache: Some(hub.path().to_path_buf()), ..bare_env() };
    let err = resolve(&ModelConfig::from_policy(&policy(None), None, &env)).map(|_| ()).unwrap_err();
    assert_eq!(err.code(), "egress_denied", "{err}");
}

#[test]
fn egress_deny_refuses_to_download_without_touching_the_network() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let hub = tempfile::tempdir().unwrap();
    let env = ModelEnv { hf_hub_cache: Some(hub.path().to_path_buf()), hf_endpoint: Some(endpoint), ..ModelEnv::default() };
    let handle = ModelHandle::new(ModelConfig::from_policy(&policy(None), None, &env));

    let started = Instant::now();
    let err = handle.embed_passages(&["anything".to_string()]).unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(err.code(), "egress_denied", "{err}");
    assert!(elapsed < Duration::from_millis(500), "the refusal took {elapsed:?}");
    let message = err.to_string();
    for needed in ["model.safetensors", "PARAVAULT_MODEL_DIR", "embedding.local_dir", "HF_HUB_CACHE", "allow-public"] {
        assert!(message.contains(needed), "the refusal should mention {needed}: {message}");
    }
    assert!(listener.accept().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock), "a connection was attempted");
    assert!(std::fs::read_dir(hub.path()).unwrap().next().is_none(), "the refusal wrote into the cache");
}

#[test]
fn allow_public_downloads_the_pinned_revision_from_the_configured_endpoint() {
    // A loopback stand-in for the hub that answers 404: the request it sees is the download.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut buffer = [0u8; 4096];
            let n = stream.read(&mut buffer).unwrap_or(0);
            let request = String::from_utf8_lossy(&buffer[..n]).lines().next().unwrap_or_default().to_string();
            let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = sender.send(request);
        }
    });
    let hub = tempfile::tempdir().unwrap();
    let env = ModelEnv { hf_hub_cache: Some(hub.path().to_path_buf()), hf_endpoint: Some(endpoint), ..ModelEnv::default() };
    let err = resolve(&ModelConfig::from_policy(&policy(Some("egress: allow-public\n")), None, &env)).map(|_| ()).unwrap_err();
    assert_eq!(err.code(), "model_unavailable", "{err}");
    assert!(err.to_string().contains("config.json"), "{err}");
    let request = receiver.recv_timeout(Duration::from_secs(10)).expect("the download reached the configured endpoint");
    assert!(request.contains(&format!("/{REPO}/resolve/{REVISION}/config.json")), "{request}");
}
