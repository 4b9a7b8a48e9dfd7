//! Governance side doors (issue 45) through the surfaces an attacker uses: the official MCP
//! Python SDK for agents and the CLI for the person (`tests/sdk/governance_side_doors.py`):
//! review escapes, a rule that governs what changes whichever tool makes it, the gateway's
//! authority and limits, one path rule for every writer, reads that never wait for the writer
//! lock, a FIFO seen by a running server, one refusal for every vault name, one skill per
//! Unicode spelling. Needs `python3` with the `mcp` package (PyPI); fails, saying so, without.

use std::process::Command;

#[test]
fn governance_side_doors_through_the_python_sdk() {
    let probe = Command::new("python3").args(["-c", "import mcp, anyio"]).output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("python3 has no `mcp` package (pip install mcp): {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => panic!("python3 is needed for the SDK behaviour tests: {e}"),
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/governance_side_doors.py");
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
    assert!(out.status.success(), "governance side-door checks failed:\n{stdout}\n--- stderr ---\n{stderr}");
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}
