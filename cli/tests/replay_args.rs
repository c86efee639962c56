//! `udah replay`'s edges: one rule for unreadable arguments (checked before
//! any capture is read: status 2, no report) and for files that are not
//! captures (reported in turn, status 1, the reason once on stderr), `-` as
//! standard input, contradicting table flags, and `--check` files that are
//! not text.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn udah(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_udah")).arg("replay").arg("--no-progress").args(args).output().expect("run udah")
}

fn capture(name: &str) -> String {
    common::repo_vectors().join("captures").join(name).to_string_lossy().into_owned()
}

fn temp_file(name: &str, bytes: &[u8]) -> String {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{}-{name}", std::process::id()));
    std::fs::write(&p, bytes).expect("write temp file");
    p.to_string_lossy().into_owned()
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Refused with status 2 before any report, with `want` on stderr.
fn refused(args: &[&str], want: &str) {
    let o = udah(args);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}\n{out}");
    assert!(out.is_empty(), "{args:?}: a report was printed:\n{out}");
    assert!(err.contains(want), "{args:?}: want {want:?} in {err}");
}

#[test]
fn a_damaged_container_is_reported_once_on_stderr() {
    let garbage = temp_file("garbage.pcap", b"this is not a capture at all");
    let o = udah(&[&garbage]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("not a pcap or pcapng file").count(), 1, "{err}");
    assert!(!out.contains("not a pcap or pcapng file"), "the reason is on stderr only:\n{out}");
    assert!(out.contains("reading stopped at the file header"), "{out}");
}

#[test]
fn an_empty_file_says_it_is_empty() {
    let empty = temp_file("empty.pcap", b"");
    let o = udah(&[&empty]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("the file is empty: not a pcap or pcapng capture"), "{err}");
    assert!(!err.contains("truncated"), "{err}");
}

#[test]
fn a_directory_is_an_unreadable_argument() {
    let dir = common::repo_vectors().join("captures");
    refused(&[dir.to_str().unwrap()], "is a directory, not a capture file");
}

#[test]
fn missing_and_garbage_files_follow_one_rule() {
    let good = capture("rocev2-ud.pcap");
    let garbage = temp_file("garbage2.pcap", b"garbage garbage garbage");
    // Unreadable, anywhere in the list: nothing is read.
    for args in [["/nonexistent/a.pcap", good.as_str()], [good.as_str(), "/nonexistent/a.pcap"]] {
        refused(&args, "/nonexistent/a.pcap");
    }
    // Not a capture, anywhere in the list: the others are still read.
    for args in [[garbage.as_str(), good.as_str()], [good.as_str(), garbage.as_str()]] {
        let o = udah(&args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(out.contains("8 frames, 7 UD packets"), "{args:?}: the good file was read:\n{out}");
    }
}

#[test]
fn dash_reads_standard_input() {
    let bytes = std::fs::read(capture("ib-ud.pcap")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_udah"))
        .args(["replay", "--no-progress", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let o = child.wait_with_output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("== stdin (pcap, 5 frames)"), "{out}");
    assert!(out.contains("5 frames, 4 UD packets"), "{out}");
    refused(&["-", "-"], "more than once");
}

#[test]
fn port_zero_is_refused() {
    refused(&["--port-num", "0", &capture("rocev2-ud.pcap")], "--port-num 0: ports are numbered from 1");
    let table = temp_file("port0.json", br#"{"num":0,"link_layer":"ethernet","gid_tbl_len":4,"gids":[]}"#);
    refused(&["--gid-table", &table, &capture("rocev2-ud.pcap")], "port number 0");
}

#[test]
fn gid_types_must_fit_the_link_layer() {
    let cap = capture("rocev2-ud.pcap");
    refused(&["--gid", "fe80::1@ib", "--link-layer", "ethernet", &cap], "has type ib but --link-layer is ethernet");
    refused(
        &["--gid", "10.0.0.1@roce_v2", "--link-layer", "infiniband", &cap],
        "has type roce_v2 but --link-layer is infiniband",
    );
    // A mix without --link-layer: the table is Ethernet, so the ib entry does not fit.
    refused(&["--gid", "10.0.0.1", "--gid", "fe80::1@ib", &cap], "--gid #2 has type ib");
    // What fits runs.
    let o = udah(&["--gid", "fe80::2:12@ib", "--link-layer", "infiniband", &capture("ib-ud.pcap")]);
    assert!(o.status.success(), "{}", text(&o).1);
}

#[test]
fn check_on_a_binary_file_names_the_line() {
    let cases = std::fs::read(capture("ib-ud.pcap.cases.jsonl")).unwrap();
    let mut bad = cases.clone();
    let second_line = bad.iter().position(|&b| b == b'\n').unwrap() + 1;
    bad[second_line + 5] = 0xff;
    let f = temp_file("binary.jsonl", &bad);
    refused(&["--check", &f, &capture("ib-ud.pcap")], ":2: byte 6 of the line is not UTF-8");
    // A capture given as the cases file: line 1.
    refused(&["--check", &capture("ib-ud.pcap"), &capture("ib-ud.pcap")], "ib-ud.pcap:1:");
}
