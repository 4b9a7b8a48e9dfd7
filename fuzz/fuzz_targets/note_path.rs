//! Fuzz target: `VaultPath::parse` never panics and never accepts an escaping path.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| paravault_fuzz::check_note_path(data));
