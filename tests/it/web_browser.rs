//! The issue 21 flow in a real browser: runs `tests/browser/web_flow.py` (headless Chromium
//! through selenium, an MCP agent through the official Python SDK) against the built binary.
//! Needs Debian's `chromium` and `chromium-driver` and python3 with `selenium` and `mcp`
//! (`.ci/run` installs them); the test fails, saying which is missing, without them.

use std::path::Path;
use std::process::Command;

#[test]
fn the_review_flow_in_headless_chromium() {
    for binary in ["chromium", "chromedriver"] {
        let found = Command::new("sh").args(["-c", &format!("command -v {binary}")]).output().map(|o| o.status.success()).unwrap_or(false);
        assert!(found, "`{binary}` is not installed (apt-get install -y chromium chromium-driver); the browser test cannot run");
    }
    let probe = Command::new("python3").args(["-c", "import selenium, mcp, anyio"]).output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("python3 lacks `selenium` or `mcp` (pip install selenium mcp): {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => panic!("python3 is needed for the browser test: {e}"),
    }
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web_flow_screenshots");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/web_flow.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_paravault"))
        .arg(&shots)
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .env_remove("PARAVAULT_CONFIG_DIR")
        .output()
        .expect("run the browser flow");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the browser flow failed (screenshots in {}):\n{stdout}\n--- stderr ---\n{stderr}", shots.display());
    assert!(stdout.contains("ALL PASS"), "{stdout}");
    for shot in ["dashboard.png", "proposal.png", "search.png", "hostile_note.png"] {
        assert!(shots.join(shot).is_file(), "{shot} was not saved");
    }
}
