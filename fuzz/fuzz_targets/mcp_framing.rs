//! Fuzz target: see `paravault_fuzz::check_mcp_framing`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| paravault_fuzz::check_mcp_framing(data));
