//! Fuzz target `npy`: see [`stolr_fuzz::npy`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stolr_fuzz::npy(data));
