//! Replays the `ah_table_ops` and `ah_session_ops` fuzz seeds
//! (`fuzz/corpus/<target>/`), their regression inputs
//! (`fuzz/regressions/<target>/`) and 2,000 inputs each from a seeded
//! xorshift through the entry points the cargo-fuzz targets call, on stable,
//! without libFuzzer.

#![allow(clippy::std_instead_of_core)]

use std::fs;
use std::path::{Path, PathBuf};

use udah_hal_mock::fuzzing::{fuzz_ah_table_ops, fuzz_session_ops};

/// A fuzz entry point.
type Target = fn(&[u8]);

/// The targets: name and entry point.
const TARGETS: [(&str, Target); 2] = [("ah_table_ops", fuzz_ah_table_ops), ("ah_session_ops", fuzz_session_ops)];

/// The files of `fuzz/<kind>/<target>`, sorted; `None` when the directory
/// does not exist.
fn files_in(kind: &str, target: &str) -> Option<Vec<PathBuf>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz").join(kind).join(target);
    let rd = fs::read_dir(&dir).ok()?;
    let mut v: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    v.sort();
    Some(v)
}

/// Each target's seeds (at least 4, never zero: the corpus is part of the
/// repository), then its regression inputs when it has a directory of them
/// (none so far; a directory must not be empty).
#[test]
fn corpus_and_regressions_replay_without_findings() {
    for (target, run) in TARGETS {
        let seeds = files_in("corpus", target).unwrap_or_else(|| panic!("fuzz/corpus/{target} is missing"));
        assert!(seeds.len() >= 4, "corpus/{target}: only {} files", seeds.len());
        let regressions = files_in("regressions", target).unwrap_or_default();
        if files_in("regressions", target).is_some() {
            assert!(!regressions.is_empty(), "fuzz/regressions/{target} is empty");
        }
        for f in seeds.iter().chain(&regressions) {
            // A panic here names the file in the test output.
            eprintln!("replaying {}", f.display());
            run(&fs::read(f).unwrap());
        }
    }
}

#[test]
fn tiny_and_empty_inputs() {
    for (_, run) in TARGETS {
        run(&[]);
        for len in 1..=64usize {
            run(&vec![0xffu8; len]);
            run(&(0..len).map(|i| i as u8).collect::<Vec<_>>());
        }
    }
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[test]
fn random_inputs() {
    for (_, run) in TARGETS {
        let mut rng = XorShift(0x5eed_ab1e_0000_0006);
        for case in 0..2000 {
            let len = (rng.next() % 300) as usize;
            let mut data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            // Half of the cases without faults, so that creates mostly succeed.
            if case % 2 == 0 && data.len() > 3 {
                data[0] &= 0x01;
                data[1] = 0;
                data[2] = 0;
            }
            run(&data);
        }
    }
}
