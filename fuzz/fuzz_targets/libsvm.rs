//! Fuzz target `libsvm`: see [`stolr_fuzz::libsvm`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stolr_fuzz::libsvm(data));
