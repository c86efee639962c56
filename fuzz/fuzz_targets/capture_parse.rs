#![no_main]
//! Capture files (pcap, pcapng, gzip; Ethernet, Linux cooked, InfiniBand,
//! ERF) through the replay reader, frame decoder and both profiles: no input
//! may panic. Seeds: the two shared captures (fuzz/corpus/capture_parse/).
libfuzzer_sys::fuzz_target!(|data: &[u8]| udah_cli::capture::fuzz_capture(data));
