//! Fuzz target: see `paravault_fuzz::check_catalog`.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| paravault_fuzz::check_catalog(data));
