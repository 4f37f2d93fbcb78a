//! Fuzz target `mnist`: see [`stolr_fuzz::mnist`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stolr_fuzz::mnist(data));
