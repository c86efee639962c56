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

/// `udah conform FILE` fails with status 2, nothing on stdout, and a message
/// on stderr containing every `want`.
fn refused(file: &std::path::Path, extra: &[&str], want: &[&str]) {
    let mut args = vec!["conform"];
    args.extend_from_slice(extra);
    let path = file.to_str().expect("utf-8 path");
    args.push(path);
    let o = udah(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}\n{}", String::from_utf8_lossy(&o.stdout));
    assert!(o.stdout.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&o.stdout));
    for w in want {
        assert!(err.contains(w), "{args:?}: want {w:?} in {err}");
    }
}

fn first_hand_case() -> String {
    let text = std::fs::read_to_string(repo_vector("handcheck.jsonl")).expect("read handcheck");
    text.lines().next().expect("a line").to_owned()
}

#[test]
fn an_empty_file_is_an_error_not_a_vacuous_pass() {
    let f = temp_file("empty.jsonl", "");
    refused(&f, &[], &["no cases"]);
    let f = temp_file("blank.jsonl", "\n  \n");
    refused(&f, &[], &["no cases"]);
}

#[test]
fn gid_tbl_len_above_65536_is_rejected() {
    let case = first_hand_case();
    assert!(case.contains("\"gid_tbl_len\":4"), "the first hand case changed; update this test");
    let f = temp_file("len.jsonl", &format!("{}\n", case.replace("\"gid_tbl_len\":4", "\"gid_tbl_len\":65537")));
    refused(&f, &[], &[":1:", "gid_tbl_len 65537 is above 65536"]);
    // 65536 itself is allowed.
    let f = temp_file("len-ok.jsonl", &format!("{}\n", case.replace("\"gid_tbl_len\":4", "\"gid_tbl_len\":65536")));
    assert_eq!(udah(&["conform", f.to_str().unwrap()]).status.code(), Some(0));
}

#[test]
fn duplicate_gid_indices_and_case_names_are_rejected() {
    let case = first_hand_case();
    assert!(case.contains("{\"index\":2,"), "the first hand case changed; update this test");
    let f = temp_file("dup-index.jsonl", &format!("{}\n", case.replace("{\"index\":2,", "{\"index\":0,")));
    refused(&f, &[], &[":1:", "GID index 0 is listed twice"]);
    let f = temp_file("dup-name.jsonl", &format!("{case}\n{case}\n"));
    refused(&f, &[], &[":2:", "case name \"01-ib-no-grh-flag\" already used at line 1"]);
    let f = temp_file("past-len.jsonl", &format!("{}\n", case.replace("{\"index\":2,", "{\"index\":9,")));
    refused(&f, &[], &[":1:", "GID index 9 is not below gid_tbl_len 4"]);
}

#[test]
fn a_cut_off_one_line_file_is_reported_at_line_1() {
    let case = first_hand_case();
    let f = temp_file("cut.jsonl", &format!("{}\n", &case[..case.len() / 2]));
    refused(&f, &[], &[":1:", "the line ends inside the JSON object"]);
    // Without the trailing newline too.
    let f = temp_file("cut-nonl.jsonl", &case[..case.len() / 2]);
    refused(&f, &[], &[":1:", "the line ends inside the JSON object"]);
}

#[test]
fn an_over_capacity_index_message_does_not_repeat_itself() {
    let case = first_hand_case();
    let f = temp_file(
        "cap.jsonl",
        &format!(
            "{}\n",
            case.replace("\"gid_tbl_len\":4", "\"gid_tbl_len\":65536").replace("{\"index\":2,", "{\"index\":5000,")
        ),
    );
    let o = udah(&["conform", f.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let line = out.lines().find(|l| l.contains("5000")).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(line.matches("5000").count(), 1, "{line}");
}

#[test]
fn the_table_error_names_the_index_once() {
    // Was "GID index 128: GID index 128 is outside the table (length 128)".
    let error = udah_core::GidTableError::IndexOutOfRange { index: 128, len: 100 };
    let text = udah_cli::vectors::CaseError::Table { index: 128, error }.to_string();
    assert_eq!(text.matches("128").count(), 1, "{text}");
    // Through the binary, the format check names it once too.
    let case = first_hand_case();
    let f = temp_file(
        "index-past-end.jsonl",
        &format!(
            "{}\n",
            case.replace("\"gid_tbl_len\":4", "\"gid_tbl_len\":128").replace("{\"index\":2,", "{\"index\":128,")
        ),
    );
    let o = udah(&["conform", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("128").count(), 2, "the index and the length, once each: {err}");
}

#[test]
fn profile_kernel_on_a_libibverbs_file_says_why() {
    refused(
        std::path::Path::new(&repo_vector("handcheck.jsonl")),
        &["--profile", "kernel"],
        &["\"expect\" is in the libibverbs format (FORMAT.md)", "cannot run under the kernel profile"],
    );
    refused(
        std::path::Path::new(&repo_vector("kernel-handcheck.jsonl")),
        &["--profile", "libibverbs"],
        &["\"expect\" is in the kernel format (FORMAT-kernel.md)"],
    );
}
