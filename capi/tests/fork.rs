//! Fork safety from C: `tests/c/fork_ah.c` forks 100 times while four
//! threads create and destroy AHs, and every child must create and destroy
//! one more (through udah and through plain verbs) and exit 0 within its
//! alarm. With no RDMA device on the host the verbs are
//! `tests/c/fake_verbs.c` (libudah-fakeverbs.so, preloaded): a heap AH per
//! create, a GID table of four slots, libibverbs' symbol versions. The same
//! program runs on rxe in the Soft-RoCE guest suite (check
//! 52-fork.sh, verdicts fork-udah and fork-preload).
//!
//! Run under sanitizers by capi/check-sanitizers.sh (`UDAH_TEST_CFLAGS`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

/// libudah-fakeverbs.so and udah-fork-ah, built in `dir`.
fn build(dir: &Path) -> (PathBuf, PathBuf) {
    let lib = c_libraries();
    let c = repo().join("capi/tests/c");
    let fake = dir.join("libudah-fakeverbs.so");
    run(Command::new("gcc")
        .args(cflags())
        .args(["-shared", "-fPIC"])
        .arg(c.join("fake_verbs.c"))
        .arg(format!("-Wl,--version-script={}", c.join("fake_verbs.map").display()))
        .arg("-o")
        .arg(&fake));
    let bin = dir.join("udah-fork-ah");
    run(Command::new("gcc")
        .args(cflags())
        .arg("-I")
        .arg(repo().join("include"))
        .arg(c.join("fork_ah.c"))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-ludah", "-libverbs", "-lpthread", "-ldl", "-o"])
        .arg(&bin));
    (fake, bin)
}

/// Runs `bin ARGS` with `preload` (space-separated) and extra `env`.
fn fork_ah(bin: &Path, preload: &[&Path], env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args).env("LD_PRELOAD", ld_preload(preload));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap_or_else(|e| panic!("{bin:?}: {e}"))
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn assert_clean(out: &Output, what: &str) {
    let t = text(out);
    assert!(out.status.success(), "{what}: {}\n{t}", out.status);
    assert!(t.contains(&format!("{what}: 100 forks,")) && t.contains(", 0 failures"), "{what}:\n{t}");
}

/// Whether the preload's stats line in `t` shows no fallback at all.
fn no_fallback(t: &str) -> bool {
    let line = t.lines().find(|l| l.starts_with("udah-preload: ")).unwrap_or_default();
    let fallbacks: Vec<&str> = line.split(' ').filter(|w| w.starts_with("fallback_")).collect();
    fallbacks.len() == 8 && fallbacks.iter().all(|w| w.ends_with("=0"))
}

#[test]
fn fork_harness_reports_a_child_blocked_on_a_lock_held_across_fork() {
    let dir = scratch("fork-selftest");
    let (fake, bin) = build(&dir);
    // One thread holds a plain mutex across fork, the child takes it: the
    // child must be reported as blocked, within the (shortened) alarm.
    let out = fork_ah(&bin, &[&fake], &[("UDAH_FORK_ALARM", "1")], &["selftest", "fake", "3"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "selftest: {t}");
    assert!(t.contains("fork 0: the child died of signal 14") && t.contains("deadlock"), "selftest: {t}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// libudah: its responder's locks across fork (the engine's atfork handlers).
#[test]
fn libudah_fork_while_four_threads_create_and_destroy() {
    let dir = scratch("fork-udah");
    let (fake, bin) = build(&dir);
    let out = fork_ah(&bin, &[&fake], &[], &["udah", "fake", "100"]);
    assert_clean(&out, "fork-ah udah fake");
    assert!(text(&out).contains(" 0 bad destroys"), "{}", text(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// libudah-preload.so, by default and with shared AHs; the fake verbs come
/// after it, as libibverbs would (its `dlvsym(RTLD_NEXT)` finds them).
#[test]
fn preload_fork_while_four_threads_create_and_destroy() {
    let dir = scratch("fork-preload");
    let (fake, bin) = build(&dir);
    let preload = c_libraries().join("libudah_preload.so");
    for share in ["0", "1"] {
        let out = fork_ah(
            &bin,
            &[&preload, &fake],
            &[("UDAH_PRELOAD_SHARE", share), ("UDAH_PRELOAD_STATS", "1")],
            &["preload", "fake", "100"],
        );
        assert_clean(&out, "fork-ah preload fake");
        let t = text(&out);
        // Every call served by udah: none went to the fake's ENOSYS.
        assert!(t.contains("udah-preload: enabled=1") && no_fallback(&t), "share={share}: {t}");
        assert!(t.contains(" 0 bad destroys"), "share={share}: {t}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
