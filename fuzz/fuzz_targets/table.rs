//! Fuzz target `table`: see [`stolr_fuzz::table`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stolr_fuzz::table(data));
