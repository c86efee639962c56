#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| udah_core::fuzzing::fuzz_ah_from_wc_diff(data));
