//! The ctxvault surface through MCP with the official Python SDK: runs
//! `tests/sdk/ctxvault_behaviour.py` (one check per documented rule of seed 003 and the
//! restricted-vault battery) against the built binary. Needs `python3` with the `mcp` package
//! (PyPI); the test fails, saying so, without them.

use std::process::Command;

#[test]
fn ctxvault_behaviour_through_the_python_sdk() {
    let probe = Command::new("python3").args(["-c", "import mcp, anyio"]).output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("python3 has no `mcp` package (pip install mcp): {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => panic!("python3 is needed for the SDK behaviour tests: {e}"),
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/ctxvault_behaviour.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_paravault"))
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .env_remove("PARAVAULT_CONFIG_DIR")
        .output()
        .expect("run the SDK script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "SDK behaviour checks failed:\n{stdout}\n--- stderr ---\n{stderr}");
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}
