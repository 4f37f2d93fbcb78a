//! Fuzz target `csv`: see [`stolr_fuzz::csv`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stolr_fuzz::csv(data));
