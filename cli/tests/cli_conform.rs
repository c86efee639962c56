//! The built `udah conform` binary: final line and exit status.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

fn udah(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_udah")).args(args).output().expect("run udah")
}

fn last_line(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).lines().last().unwrap_or_default().to_owned()
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{}-{name}", std::process::id()));
    std::fs::write(&p, text).expect("write temp file");
    p
}

fn repo_vector(name: &str) -> String {
    common::workspace_root().join("vectors").join(name).to_string_lossy().into_owned()
}

#[test]
fn passes_the_repo_vectors() {
    let o = udah(&["conform", &repo_vector("handcheck.jsonl"), &repo_vector("kernel-handcheck.jsonl")]);
    assert_eq!(last_line(&o), "36 passed, 0 failed", "stderr: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn reports_a_mismatch_and_exits_1() {
    let text = std::fs::read_to_string(repo_vector("handcheck.jsonl")).expect("read handcheck");
    let first = text.lines().next().expect("a line");
    let broken = first.replace("\"flow_label\":74565", "\"flow_label\":74566");
    assert_ne!(broken, first, "the first hand-check case changed; update this test");
    let f = temp_file("broken.jsonl", &format!("{broken}\n{}\n", text.lines().nth(1).expect("line 2")));
    let o = udah(&["conform", f.to_str().expect("utf-8 path")]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("MISMATCH 01-ib-no-grh-flag: ah_attr.grh.flow_label: expected 74566, got 74565"), "{out}");
    assert_eq!(last_line(&o), "1 passed, 1 failed");
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn unreadable_input_exits_2_with_file_and_line() {
    let text = std::fs::read_to_string(repo_vector("handcheck.jsonl")).expect("read handcheck");
    let first = text.lines().next().expect("a line");
    let f = temp_file("garbage.jsonl", &format!("{first}\n{{\"name\": \"x\", \"port\": 7}}\n"));
    let o = udah(&["conform", f.to_str().expect("utf-8 path")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains(&format!("{}:2:", f.display())), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let o = udah(&["conform", "/nonexistent/udah-vectors.jsonl"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/udah-vectors.jsonl"));
}

#[test]
fn profile_override() {
    // A kernel expectation cannot be read as a libibverbs one: unreadable.
    let o = udah(&["conform", "--profile", "libibverbs", &repo_vector("kernel-handcheck.jsonl")]);
    assert_eq!(o.status.code(), Some(2));
    let o = udah(&["conform", "--profile", "kernel", &repo_vector("kernel-handcheck.jsonl")]);
    assert_eq!(last_line(&o), "17 passed, 0 failed");
    assert_eq!(o.status.code(), Some(0));
}
