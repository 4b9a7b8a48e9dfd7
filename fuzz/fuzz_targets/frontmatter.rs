//! Fuzz target: frontmatter split/parse never panic and round-trip byte-identically.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| paravault_fuzz::check_frontmatter(data));
