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

/// The files of `dir`, sorted; a missing directory is a failure (the corpus
/// is part of the repository).
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let rd = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e} (the fuzz corpus is part of the repository)", dir.display()));
    let mut v: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    v.sort();
    v
}

/// Replays every file of `dir` through `run`; returns how many.
fn replay_dir(dir: &Path, run: Target) -> usize {
    let files = files_in(dir);
    for f in &files {
        let data = fs::read(f).unwrap();
        // A panic here names the file in the test output.
        eprintln!("replaying {}", f.display());
        run(&data);
    }
    files.len()
}

/// Each target's seeds (at least `MIN_SEEDS`, never zero), then its
/// regression inputs (a target without findings has no directory).
#[test]
fn corpus_and_regressions_replay_without_findings() {
    const MIN_SEEDS: usize = 5;
    let mut regressions = 0;
    for (target, run) in TARGETS {
        let seeds = replay_dir(&fuzz_dir().join("corpus").join(target), run);
        assert!(seeds >= MIN_SEEDS, "corpus/{target}: only {seeds} files");
        let reg = fuzz_dir().join("regressions").join(target);
        if reg.exists() {
            let n = replay_dir(&reg, run);
            assert!(n > 0, "{}: an empty regressions directory", reg.display());
            regressions += n;
        }
    }
    // fuzz/regressions/ah_from_wc_diff/ holds the findings so far.
    assert!(regressions >= 1, "no regression input replayed");
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
