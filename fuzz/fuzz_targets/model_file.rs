//! Fuzz target `model_file`: see [`stolr_fuzz::model_file`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stolr_fuzz::model_file(data));
