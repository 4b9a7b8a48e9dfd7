//! Benchmark fixtures: a deterministic synthetic P.A.R.A. vault generator and the FOLDOC vault.
//!
//! Shared by the bench files through `#[path = "support/mod.rs"] mod support;`. Benches may use
//! `std::fs` freely (the engine's own writes still go through `store::durable`). Data lives under
//! `target/bench-data/` of this crate (override with `PARAVAULT_BENCH_DATA`).
#![allow(dead_code)]

pub mod mcp_client;
pub mod stats;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The six P.A.R.A. folders of the default policy and the OKF `type` each gets.
pub const FOLDERS: [(&str, &str); 6] = [
    ("00_Inbox", "Resource"),
    ("01_Projects", "Project"),
    ("02_Areas", "Area"),
    ("03_Resources", "Resource"),
    ("04_Archive", "Archive"),
    ("06_Daily_Logs", "Daily Log"),
];

/// Subtopic directories under each topic directory.
pub const SUBTOPICS: usize = 3;

/// Default synthetic vault size.
pub const DEFAULT_NOTES: usize = 20_000;

const WORDS: [&str; 64] = [
    "alpha", "beta", "gamma", "delta", "kernel", "vector", "graph", "cache", "latency", "schema", "ledger", "budget", "review", "archive",
    "signal", "window", "buffer", "thread", "socket", "parser", "compiler", "syntax", "module", "policy", "catalog", "index", "journal",
    "summary", "project", "area", "resource", "meeting", "decision", "risk", "metric", "target", "release", "draft", "outline", "source",
    "evidence", "memory", "context", "search", "ranking", "token", "stream", "object", "record", "pattern", "theory", "method", "result",
    "figure", "table", "chapter", "garden", "river", "mountain", "harbor", "lantern", "compass", "orbit", "prism",
];

/// Where bench data is kept (created on demand).
pub fn bench_data_dir() -> PathBuf {
    let dir = std::env::var_os("PARAVAULT_BENCH_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("bench-data"));
    std::fs::create_dir_all(&dir).expect("create bench data dir");
    dir
}

/// splitmix64: a tiny deterministic generator (no dependency, stable across versions).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn word(&mut self) -> &'static str {
        WORDS[self.below(WORDS.len())]
    }
}

/// A query of `words` words of the generated vault's vocabulary (seeded; words repeat as they
/// do in its notes): the long-query figures of benches/search_path.rs.
pub fn vocabulary_query(seed: u64, words: usize) -> String {
    let mut rng = Rng::new(0x9_0e55 ^ seed);
    (0..words).map(|_| rng.word()).collect::<Vec<_>>().join(" ")
}

/// Topic directories per folder for a vault of `n` notes: 20 at 20,000 notes, scaled so that a
/// leaf directory holds ~55 notes at any vault size (≤ ~200 per directory).
pub fn topics_for(n: usize) -> usize {
    n.div_ceil(1000).max(1)
}

/// Unique basename (without `.md`) of note `i`.
pub fn note_basename(i: usize) -> String {
    let mut rng = Rng::new(i as u64);
    format!("n{i:05}-{}-{}", rng.word(), rng.word())
}

/// Vault-relative path of note `i` in a vault of `n` notes.
pub fn note_rel_path(n: usize, i: usize) -> String {
    let topics = topics_for(n);
    let (folder, _) = FOLDERS[i % FOLDERS.len()];
    let topic = (i / FOLDERS.len()) % topics;
    let sub = (i / (FOLDERS.len() * topics)) % SUBTOPICS;
    format!("{folder}/topic-{topic:02}/sub-{sub}/{}.md", note_basename(i))
}

/// The full text of note `i` in a vault of `n` notes; `title_suffix` lets benches change it.
pub fn note_text(n: usize, i: usize, title_suffix: &str) -> String {
    let (folder, note_type) = FOLDERS[i % FOLDERS.len()];
    note_text_in(n, i, title_suffix, folder, note_type, (i / FOLDERS.len()) % topics_for(n))
}

/// Notes per folder of the wide layout (issue 52's "flat at 100,000 notes" measurement).
pub const WIDE_NOTES_PER_FOLDER: usize = 40;

/// Vault-relative path of note `i` in the wide layout: every note under `03_Resources/topicN/`,
/// [`WIDE_NOTES_PER_FOLDER`] per folder (2,500 sibling folders at 100,000 notes).
pub fn wide_note_rel_path(i: usize) -> String {
    format!("03_Resources/topic{}/{}.md", i / WIDE_NOTES_PER_FOLDER, note_basename(i))
}

/// Writes a synthetic vault of `n` notes in the wide layout at `root`.
pub fn generate_wide_vault(root: &Path, n: usize) {
    for i in 0..n {
        let path = root.join(wide_note_rel_path(i));
        std::fs::create_dir_all(path.parent().expect("note has a parent")).expect("create note dir");
        std::fs::write(&path, note_text_in(n, i, "", "03_Resources", "Resource", i / WIDE_NOTES_PER_FOLDER)).expect("write note");
    }
}

/// A freshly generated wide-layout vault of `n` notes under `target/bench-data/work/`.
pub fn fresh_wide_vault(n: usize) -> PathBuf {
    let root = bench_data_dir().join("work").join(format!("wide-{n}"));
    if root.exists() {
        std::fs::remove_dir_all(&root).expect("remove old generated vault");
    }
    generate_wide_vault(&root, n);
    root
}

/// Note `i`'s text in `folder` with OKF `note_type`, tagged with `topic`.
fn note_text_in(n: usize, i: usize, title_suffix: &str, folder: &str, note_type: &str, topic: usize) -> String {
    let mut rng = Rng::new(0x5eed_0000 + i as u64);
    let title = format!("{} {} {} {i}{title_suffix}", capitalise(rng.word()), rng.word(), rng.word());
    let description = format!("Notes on {} and {} for topic {topic} in {folder}.", rng.word(), rng.word());
    let mut text = String::with_capacity(3000);
    let _ = write!(
        text,
        "---\ntype: {note_type}\ntitle: \"{title}\"\ndescription: \"{description}\"\ntimestamp: 2026-01-01T00:00:00Z\ntags: [topic-{topic:02}, {}, {}]\n---\n\n# {title}\n\n",
        rng.word(),
        rng.word()
    );
    // Links: the next note (so every note has an inbound link) and two pseudo-random ones.
    let links = [(i + 1) % n, rng.below(n), rng.below(n)];
    let words = 150 + rng.below(251);
    let paragraphs = 3 + rng.below(3);
    let per_paragraph = words / paragraphs;
    let mut link_at = 0;
    for p in 0..paragraphs {
        if p == 1 {
            text.push_str("## Details\n\n");
        }
        for w in 0..per_paragraph {
            if w > 0 {
                text.push(' ');
            }
            if w == per_paragraph / 2 && link_at < links.len() {
                let _ = write!(text, "see [[{}]]", note_basename(links[link_at]));
                link_at += 1;
            } else {
                text.push_str(rng.word());
            }
        }
        text.push_str(".\n\n");
    }
    while link_at < links.len() {
        let _ = writeln!(text, "- Related: [[{}]]", note_basename(links[link_at]));
        link_at += 1;
    }
    text
}

fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

/// Writes a synthetic vault of `n` notes at `root` (which must not exist or be empty).
pub fn generate_vault(root: &Path, n: usize) {
    for i in 0..n {
        let path = root.join(note_rel_path(n, i));
        std::fs::create_dir_all(path.parent().expect("note has a parent")).expect("create note dir");
        std::fs::write(&path, note_text(n, i, "")).expect("write note");
    }
}

/// A freshly generated synthetic vault of `n` notes under `target/bench-data/work/`.
pub fn fresh_generated_vault(n: usize) -> PathBuf {
    let root = bench_data_dir().join("work").join(format!("gen-{n}"));
    if root.exists() {
        std::fs::remove_dir_all(&root).expect("remove old generated vault");
    }
    generate_vault(&root, n);
    root
}

/// Deletes every generated catalog: `index.md`, all `_index*.md` and the catalog state.
pub fn remove_catalogs(root: &Path) {
    let _ = std::fs::remove_file(root.join(".paravault").join("catalog-state.json"));
    let _ = std::fs::remove_file(root.join("index.md"));
    fn walk(dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                walk(&path);
            } else if entry.file_name().to_str().is_some_and(|n| n.starts_with("_index") && n.ends_with(".md")) {
                std::fs::remove_file(&path).expect("remove catalog page");
            }
        }
    }
    walk(root);
}

/// Counts `.md` files under `root` (excluding catalog pages and `index.md`).
pub fn count_notes(root: &Path) -> usize {
    fn walk(dir: &Path, n: &mut usize) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if kind.is_dir() {
                if !name.starts_with('.') {
                    walk(&entry.path(), n);
                }
            } else if name.ends_with(".md") && !name.starts_with("_index") && name != "index.md" {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    walk(root, &mut n);
    n
}

/// Recursively copies a directory tree (plain files and directories only).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy dir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let kind = entry.file_type().expect("file type");
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

fn loud(message: &str) {
    let bar = "!".repeat(78);
    eprintln!("\n{bar}\n!! FOLDOC benches SKIPPED: {message}\n{bar}\n");
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()))
    }
}

fn build_foldoc(data: &Path, vault: &Path) -> Result<(), String> {
    let cache = data.join("foldoc-deb");
    std::fs::create_dir_all(&cache).map_err(|e| e.to_string())?;
    let has_deb = |dir: &Path| {
        std::fs::read_dir(dir)
            .ok()
            .and_then(|mut it| it.find_map(|e| e.ok().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "deb"))))
    };
    let deb = match has_deb(&cache) {
        Some(deb) => deb,
        None => {
            run(Command::new("apt-get").arg("download").arg("dict-foldoc").current_dir(&cache))?;
            has_deb(&cache).ok_or("apt-get download produced no .deb")?
        }
    };
    let extracted = cache.join("x");
    let index = extracted.join("usr/share/dictd/foldoc.index");
    let dict = extracted.join("usr/share/dictd/foldoc.dict.dz");
    if !index.is_file() || !dict.is_file() {
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&extracted))?;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/scripts/dictd_to_vault.py");
    let script = if script.is_file() { script } else { PathBuf::from("/work/shared/scripts/dictd_to_vault.py") };
    let partial = data.join("foldoc-vault.partial");
    let _ = std::fs::remove_dir_all(&partial);
    run(Command::new("python3").arg(&script).arg(&index).arg(&dict).arg(&partial).args(["--okf", "--source", "FOLDOC"]))?;
    std::fs::rename(&partial, vault).map_err(|e| e.to_string())
}

/// The FOLDOC vault (built once and cached at `target/bench-data/foldoc-vault`), or `None`
/// with a loud message when it cannot be obtained (no apt, no network, no python3).
pub fn foldoc_vault() -> Option<PathBuf> {
    let data = bench_data_dir();
    let vault = data.join("foldoc-vault");
    if !vault.is_dir()
        && let Err(e) = build_foldoc(&data, &vault)
    {
        loud(&e);
        return None;
    }
    Some(vault)
}

/// A scratch copy of the cached FOLDOC vault under `target/bench-data/work/` (benches write
/// catalogs into it; the cache stays pristine).
pub fn foldoc_working_copy() -> Option<PathBuf> {
    let source = foldoc_vault()?;
    let work = bench_data_dir().join("work").join("foldoc");
    if work.exists() {
        std::fs::remove_dir_all(&work).expect("remove old FOLDOC working copy");
    }
    copy_tree(&source, &work);
    Some(work)
}

/// Edits `writes` notes of a generated vault of `n` notes one at a time and publishes each
/// change alone (durable, `search::publish_changes`); returns the publish times, sorted.
pub fn publish_changed_notes(vault: &paravault::Vault, n: usize, writes: usize) -> Vec<std::time::Duration> {
    let root = vault.root().to_path_buf();
    let policy = vault.policy().clone();
    let mut samples = Vec::new();
    for w in 0..writes {
        let rel = note_rel_path(n, w * 7 % n);
        let path = paravault::note::path::VaultPath::parse(&rel).expect("path");
        std::fs::write(root.join(&rel), note_text(n, w * 7 % n, &format!(" edited {w}"))).expect("edit");
        vault.refresh_path(&path).expect("refresh");
        let start = std::time::Instant::now();
        vault
            .with_inventory(|inv: &paravault::inventory::Inventory| {
                paravault::search::publish_changes(&root, &policy, inv, std::slice::from_ref(&path), &[], None, None)
            })
            .expect("inventory")
            .expect("publish");
        samples.push(start.elapsed());
    }
    samples.sort();
    samples
}

/// Holds the vault's writer lock as another process does during a long job (`paravault sync
/// --dense`), with the holder's line in the lock file: readers must answer regardless
/// (issue 46). Released when the file is dropped.
pub fn hold_writer_lock(root: &Path) -> std::fs::File {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(root.join(".paravault/writer.lock"))
        .expect("writer.lock");
    file.lock().expect("take the writer lock");
    file.set_len(0).expect("truncate writer.lock");
    writeln!(file, "`paravault sync --dense` (pid {})", std::process::id()).expect("name the holder");
    file
}
