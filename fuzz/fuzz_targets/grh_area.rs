#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| udah_core::fuzzing::fuzz_grh_area(data));
