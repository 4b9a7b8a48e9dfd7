//! The issue 21 flow in a real browser: runs `tests/browser/web_flow.py` (headless Chromium
//! through selenium, an MCP agent through the official Python SDK) against the built binary.
//! Needs Debian's `chromium` and `chromium-driver`, python3 with `selenium` and `mcp`, and
//! axe-core under `target/axe` (`.ci/run` installs them); the test fails, saying which is
//! missing, without them. The flow also tours every page at 1280 and 390 px in light and dark
//! mode (no horizontal overflow, no serious or critical axe-core violation) and saves the
//! screenshots kept in `docs/screenshots/`.

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
    let axe = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/axe/node_modules/axe-core/axe.min.js");
    assert!(
        axe.is_file(),
        "axe-core is not installed (npm install --prefix target/axe axe-core@4, as .ci/run does); the accessibility check cannot run"
    );
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web_flow_screenshots");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/web_flow.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_paravault"))
        .arg(&shots)
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .env_remove("PARAVAULT_CONFIG_DIR")
        .env("PARAVAULT_AXE_JS", &axe)
        .output()
        .expect("run the browser flow");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the browser flow failed (screenshots in {}):\n{stdout}\n--- stderr ---\n{stderr}", shots.display());
    assert!(stdout.contains("ALL PASS"), "{stdout}");
    assert!(stdout.contains("axe-core: no serious or critical violation"), "the accessibility check ran: {stdout}");
    let mut expected: Vec<String> = ["dashboard.png", "proposal.png", "search.png", "hostile_note.png"].map(String::from).to_vec();
    expected.extend(["switcher-390-light.png", "switcher-1280-light.png"].map(String::from));
    for page in ["dashboard", "note", "graph", "charts", "search", "proposal"] {
        for width in [1280, 390] {
            for scheme in ["light", "dark"] {
                expected.push(format!("{page}-{width}-{scheme}.png"));
            }
        }
    }
    for shot in expected {
        assert!(shots.join(&shot).is_file(), "{shot} was not saved");
    }
}
