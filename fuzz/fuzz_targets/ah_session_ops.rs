#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| udah_hal_mock::fuzzing::fuzz_session_ops(data));
