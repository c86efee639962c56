//! Replays every checked-in fuzz seed (`fuzz/corpus/<target>/*`) and every
//! regression input (`fuzz/regressions/<target>/*`) through the same entry
//! points the cargo-fuzz targets call, on stable, without libFuzzer.
//!
//! It also checks `fuzz/seeds-manifest.tsv`: every `ah_from_wc_diff` seed
//! made from a shared vector must give the outcome that vector expects,
//! which proves that `fuzz/gen_corpus.py` and the Rust decoder agree.

#![allow(clippy::std_instead_of_core)]

use std::fs;
use std::path::{Path, PathBuf};

use udah_core::fuzzing;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 3] = [
    ("grh_area", fuzzing::fuzz_grh_area),
    ("ah_from_wc_diff", fuzzing::fuzz_ah_from_wc_diff),
    ("gid_table", fuzzing::fuzz_gid_table),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("fuzz")
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(dir) else { return Vec::new() };
    let mut v: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    v.sort();
    v
}

fn replay(kind: &str, min_files: usize) {
    for (target, run) in TARGETS {
        let files = files_in(&fuzz_dir().join(kind).join(target));
        assert!(files.len() >= min_files, "{kind}/{target}: only {} files", files.len());
        for f in files {
            let data = fs::read(&f).unwrap();
            // A panic here names the file in the test output.
            eprintln!("replaying {}", f.display());
            run(&data);
        }
    }
}

#[test]
fn corpus_replays_without_findings() {
    replay("corpus", 5);
}

#[test]
fn regressions_replay_without_findings() {
    replay("regressions", 0);
}

#[test]
fn seeds_decode_to_what_the_vectors_expect() {
    let manifest = fs::read_to_string(fuzz_dir().join("seeds-manifest.tsv")).unwrap();
    let mut checked = 0;
    for line in manifest.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [file, profile, expected] = cols[..] else { panic!("bad manifest line {line:?}") };
        let data = fs::read(fuzz_dir().join("corpus/ah_from_wc_diff").join(file)).unwrap();
        let (lib, kernel) = fuzzing::ah_case_outcomes(&data);
        let got = if profile == "lib" { lib } else { kernel };
        assert_eq!(got, expected, "{file}: {profile} profile");
        checked += 1;
    }
    assert!(checked >= 100, "only {checked} manifest rows");
}

#[test]
fn tiny_and_empty_inputs() {
    for (_, run) in TARGETS {
        run(&[]);
        for len in 1..=200usize {
            run(&vec![0xffu8; len]);
            run(&(0..len).map(|i| i as u8).collect::<Vec<_>>());
        }
    }
}
