//! The ctxvault surface through MCP with the official Python SDK: runs
//! `tests/sdk/ctxvault_behaviour.py` (one check per documented rule of seed 003 and the
//! restricted-vault battery) against the built binary. Needs `python3` with the `mcp` package
//! (PyPI); the test fails, saying so, without them.

#[test]
fn ctxvault_behaviour_through_the_python_sdk() {
    crate::support::run_sdk_script("ctxvault_behaviour.py");
}
