//! Fuzz target `model_load`: see [`stolr_fuzz::model_load`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stolr_fuzz::model_load(data));
