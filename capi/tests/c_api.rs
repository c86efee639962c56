//! The C API from C: `tests/c/vectors.c` is compiled with gcc against
//! `include/udah.h` and linked with `libudah.so` and, separately,
//! `libudah.a`; both binaries must reproduce every shared libibverbs vector
//! bit-exactly (return value, errno when -1, all 32 bytes of
//! `struct ibv_ah_attr`), and must report a deliberately wrong expectation
//! as a failure. The C example under `examples/` is built and run too.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

/// `layout.h`: a `_Static_assert` per layout fact of the Rust mirrors.
fn write_layout_header(dir: &Path) {
    let mut s = String::from("#include <stddef.h>\n#include <infiniband/verbs.h>\n");
    for (expr, v) in udah::ffi::LAYOUT {
        s += &format!("_Static_assert({expr} == {v}, \"udah mirror: {expr} is {v}\");\n");
    }
    std::fs::write(dir.join("layout.h"), s).expect("layout.h");
}

/// Builds `tests/c/vectors.c` twice: against libudah.so and libudah.a.
fn build(dir: &Path) -> [PathBuf; 2] {
    write_layout_header(dir);
    let lib = c_libraries();
    assert!(lib.join("libudah.so").is_file() && lib.join("libudah.a").is_file(), "libudah not built in {lib:?}");
    let src = repo().join("capi/tests/c/vectors.c");
    let inc = repo().join("include");
    let shared = dir.join("vectors-shared");
    let stat = dir.join("vectors-static");
    run(Command::new("gcc")
        .args(cflags())
        .arg("-I")
        .arg(&inc)
        .arg("-I")
        .arg(dir)
        .arg(&src)
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-ludah", "-libverbs", "-o"])
        .arg(&shared));
    run(Command::new("gcc")
        .args(cflags())
        .arg("-I")
        .arg(&inc)
        .arg("-I")
        .arg(dir)
        .arg(&src)
        .arg(lib.join("libudah.a"))
        .args(["-libverbs", "-lpthread", "-ldl", "-lm", "-lgcc_s", "-o"])
        .arg(&stat));
    [shared, stat]
}

fn run_c(bin: &Path, input: &str) -> (bool, String) {
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{bin:?}: {e}"));
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write cases");
    let out = child.wait_with_output().expect("wait");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn c_reproduces_every_libibverbs_vector_and_rejects_a_wrong_one() {
    let Some(files) = libibverbs_vector_files() else { return };
    let cases = cases(&files);
    assert!(cases.len() >= 2000, "only {} cases in {files:?}", cases.len());
    let input: String = cases.iter().map(|c| c_line(c, &expected_image(c)) + "\n").collect();

    // The deliberately wrong case: a successful search whose expected
    // sgid_index is off by one.
    let victim = cases
        .iter()
        .find(|c| c["expect"]["ret"] == 0 && c["expect"]["ah_attr"]["is_global"] == 1)
        .expect("a successful GRH case");
    let mut wrong = expected_image(victim);
    wrong[20] ^= 1;
    let wrong_input = c_line(victim, &wrong) + "\n";

    let dir = scratch("ctest");
    for bin in build(&dir) {
        let (ok, out) = run_c(&bin, &input);
        let last = out.lines().last().unwrap_or_default().to_owned();
        assert!(
            ok,
            "{bin:?}: {}",
            out.lines().filter(|l| l.starts_with("FAIL")).take(20).collect::<Vec<_>>().join("\n")
        );
        assert_eq!(last, format!("{} passed, 0 failed", cases.len()), "{bin:?}");

        let (ok, out) = run_c(&bin, &wrong_input);
        assert!(!ok, "{bin:?} accepted a wrong expectation: {out}");
        let name = victim["name"].as_str().expect("name");
        assert!(out.contains(&format!("FAIL {name}:")) && out.contains("0 passed, 1 failed"), "{out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn c_example_builds_and_runs() {
    let dir = scratch("example");
    let lib = c_libraries();
    let bin = dir.join("udah-example");
    run(Command::new("gcc")
        .args(cflags())
        .arg("-I")
        .arg(repo().join("include"))
        .arg(repo().join("examples/udah_example.c"))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-ludah", "-libverbs", "-o"])
        .arg(&bin));
    let out = run(&mut Command::new(&bin));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("reply to ::ffff:192.168.1.20 from sgid_index 3"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
