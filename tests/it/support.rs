//! Test support: build a vault from a txtar-style fixture string and open it.

use std::path::Path;

use chrono::NaiveDate;
use paravault::vault::{Vault, VaultOptions};

/// The date every test treats as today.
pub fn today() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 6, 1).unwrap()
}

/// An `ingest_note` request for a Project note `name` with `content` as its body.
pub fn ingest(name: &str, content: &str) -> paravault::write::operations::IngestRequest {
    paravault::write::operations::IngestRequest {
        name: name.into(),
        note_type: "Project".into(),
        title: format!("Title of {name}"),
        description: "A note written by a test".into(),
        content: content.into(),
        ..Default::default()
    }
}

/// A valid note with the given type, title and body.
pub fn note(note_type: &str, title: &str, body: &str) -> String {
    format!("---\ntype: {note_type}\ntitle: {title}\ndescription: About {title}\ntimestamp: 2026-01-01T00:00:00Z\n---\n{body}")
}

/// Writes every `-- path --` section of `fixture` under `root` (creating directories).
pub fn write_fixture(root: &Path, fixture: &str) {
    let mut current: Option<(String, String)> = None;
    let flush = |entry: Option<(String, String)>| {
        if let Some((path, text)) = entry {
            let full = root.join(&path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, text).unwrap();
        }
    };
    for line in fixture.split_inclusive('\n') {
        if let Some(path) = line.trim_end().strip_prefix("-- ").and_then(|l| l.strip_suffix(" --")) {
            flush(current.take());
            current = Some((path.to_string(), String::new()));
        } else if let Some((_, text)) = current.as_mut() {
            text.push_str(line);
        }
    }
    flush(current);
}

/// A temporary folder with the P.A.R.A. folders of the default policy (not yet opened).
pub fn para_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for folder in ["00_Inbox", "01_Projects", "02_Areas", "03_Resources", "04_Archive", "06_Daily_Logs", "PROTOCOLS"] {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
    }
    dir
}

/// A temporary vault with the P.A.R.A. folders and the fixture's files.
pub fn vault(fixture: &str) -> (tempfile::TempDir, Vault) {
    let dir = para_dir();
    write_fixture(dir.path(), fixture);
    let vault = Vault::open(dir.path(), VaultOptions { today: Some(today()), ..Default::default() }).unwrap();
    (dir, vault)
}

/// (rule, path) of every finding, for compact assertions.
pub fn rules(report: &paravault::lint::LintReport) -> Vec<(String, String)> {
    report.findings.iter().map(|f| (f.rule.to_string(), f.path.clone())).collect()
}

/// Every file under `root` with its bytes (for byte-identical checks), except the persisted
/// inventory: a derived, checksummed cache any process may write (`inventory_cache`).
pub fn snapshot_tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else if path != paravault::store::layout::join(root, paravault::store::layout::INVENTORY_INDEX) {
                out.push((path.strip_prefix(root).unwrap().to_string_lossy().into_owned(), std::fs::read(&path).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// Damages the persisted inventory of `root` at rest: flips the case of the first byte of
/// every occurrence of `needle` in its file (a note's title, held in its record's value).
pub fn damage_persisted_inventory(root: &Path, needle: &[u8]) {
    let path = root.join(paravault::store::layout::INVENTORY_INDEX);
    let mut bytes = std::fs::read(&path).unwrap();
    let at: Vec<usize> = bytes.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect();
    assert!(!at.is_empty(), "{} is not in the persisted inventory", String::from_utf8_lossy(needle));
    for i in at {
        bytes[i] ^= 0x20;
    }
    std::fs::write(&path, &bytes).unwrap();
}

/// Runs the `paravault` binary on `vault` with the test date as today and no vault variables.
pub fn paravault(vault: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_paravault"))
        .arg("--vault")
        .arg(vault)
        .args(args)
        .env("PARAVAULT_TODAY", "2026-06-01")
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .output()
        .unwrap()
}

/// `paravault` with a private configuration folder, feeding `stdin` (an approver secret's
/// channel when it is not a terminal).
pub fn paravault_with_input(vault: &Path, config: &Path, args: &[&str], stdin: &str) -> std::process::Output {
    run_with_input(paravault_command(vault, config, args), stdin)
}

/// `paravault --vault VAULT ARGS` as a person's shell runs it: the test date, a per-user
/// config folder of its own, no vault from the environment.
pub fn paravault_command(vault: &Path, config: &Path, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_paravault"));
    command
        .arg("--vault")
        .arg(vault)
        .args(args)
        .env("PARAVAULT_TODAY", "2026-06-01")
        .env("PARAVAULT_CONFIG_DIR", config)
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR");
    command
}

/// Runs `command` with `stdin` written to it and its output captured.
pub fn run_with_input(mut command: std::process::Command, stdin: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Open options with the test date as today.
pub fn options() -> VaultOptions {
    VaultOptions { today: Some(today()), ..Default::default() }
}

/// Runs `tests/sdk/<script>` with python3 against the built binary (no vault or config folder
/// inherited from the environment) and asserts it passed every check ('N passed, 0 failed').
/// Fails, saying so, when python3 or its `mcp` package (PyPI) is missing.
pub fn run_sdk_script(script: &str) {
    run_sdk_script_with(script, &[]);
}

/// `run_sdk_script`, with `args` after the binary's path.
pub fn run_sdk_script_with(script: &str, args: &[&Path]) {
    use std::process::Command;
    match Command::new("python3").args(["-c", "import mcp, anyio"]).output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("python3 has no `mcp` package (pip install mcp): {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => panic!("python3 is needed for the SDK behaviour tests: {e}"),
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk").join(script);
    let out = Command::new("python3")
        .arg(&path)
        .arg(env!("CARGO_BIN_EXE_paravault"))
        .args(args)
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .env_remove("PARAVAULT_CONFIG_DIR")
        .output()
        .expect("run the SDK script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed:\n{stdout}\n--- stderr ---\n{stderr}");
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

/// A small deterministic generator (xorshift64*) for seeded workloads, so a failing seed
/// replays exactly.
pub struct Rng(pub u64);

impl Rng {
    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}
