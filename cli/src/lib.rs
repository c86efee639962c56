//! Library part of the `udah` command: the test-vector model and runner
//! ([`vectors`]) that `udah conform` and the conformance tests share.

pub mod alloc_count;
pub mod capture;
pub mod miss_queue;
pub mod raw_roce;
pub mod vectors;
