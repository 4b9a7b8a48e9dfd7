//! Governance side doors (issue 45) through the surfaces an attacker uses: the official MCP
//! Python SDK for agents and the CLI for the person (`tests/sdk/governance_side_doors.py`):
//! review escapes, a rule that governs what changes whichever tool makes it, the gateway's
//! authority and limits, one path rule for every writer, reads that never wait for the writer
//! lock, a FIFO seen by a running server, one refusal for every vault name, one skill per
//! Unicode spelling. Needs `python3` with the `mcp` package (PyPI); fails, saying so, without.

#[test]
fn governance_side_doors_through_the_python_sdk() {
    crate::support::run_sdk_script("governance_side_doors.py");
}
