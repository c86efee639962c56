//! Shared by the C-driven tests: where things are, the vectors, gcc.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The repository root.
pub(crate) fn repo() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).canonicalize().expect("manifest dir");
    here.ancestors().find(|p| p.join("include/udah.h").is_file()).expect("repo root (include/udah.h)").to_path_buf()
}

/// The cargo profile directory holding libudah.so (`target/debug`), from
/// the test executable's path (`target/debug/deps/NAME-HASH`).
pub(crate) fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent().and_then(Path::parent).expect("target/<profile>").to_path_buf()
}

/// The directory holding freshly built `libudah.so`, `libudah.a` and
/// `libudah_preload.so`. `cargo test` builds a library crate's `rlib` only
/// (no cdylib or staticlib is produced for its tests), so the C libraries
/// are built here with the same cargo, in a target directory of their own
/// (no wait on the test run's own build lock); once per test process, a
/// no-op when nothing changed.
pub(crate) fn c_libraries() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let target = profile_dir().join("capi-libs");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(repo())
            .args(["build", "-p", "udah-capi", "-p", "udah-preload", "--target-dir"])
            .arg(&target)
            .status()
            .expect("run cargo build for the C libraries");
        assert!(status.success(), "cargo build -p udah-capi -p udah-preload failed: {status}");
        let dir = target.join("debug");
        for f in ["libudah.so", "libudah.a", "libudah_preload.so"] {
            assert!(dir.join(f).is_file(), "{} missing after the build", dir.join(f).display());
        }
        // Programs linked with -ludah need its soname at run time.
        let so0 = dir.join("libudah.so.0");
        let _ = std::fs::remove_file(&so0);
        std::os::unix::fs::symlink("libudah.so", &so0).expect("libudah.so.0 link");
        dir
    })
    .clone()
}

/// A scratch directory for this test process.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let d = profile_dir().join(format!("capi-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Whether missing inputs must fail (CI) rather than skip.
pub(crate) fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The first existing file among `candidates` (relative to the repo root).
pub(crate) fn find(candidates: &[&str]) -> Option<PathBuf> {
    let root = repo();
    candidates.iter().map(|c| root.join(c)).find(|p| p.is_file())
}

/// The shared libibverbs vector files: the public corpus and the hand
/// cases, from the repository's `vectors/` or from `../shared`. `None` when
/// neither is there (a failure under `CI=true`).
pub(crate) fn libibverbs_vector_files() -> Option<Vec<PathBuf>> {
    let public = find(&["vectors/libibverbs-v44-public.jsonl", "../shared/vectors/libibverbs-v44-public.jsonl"]);
    let hand = find(&["vectors/handcheck.jsonl", "../shared/oracle/handcheck.jsonl"]);
    match (public, hand) {
        (Some(p), Some(h)) => Some(vec![p, h]),
        _ => {
            assert!(!in_ci(), "CI=true and the libibverbs vectors are missing (vectors/ or ../shared/vectors/)");
            eprintln!("SKIP: libibverbs vectors not found (vectors/ or ../shared/vectors/)");
            None
        }
    }
}

/// Every case of `files`, parsed.
pub(crate) fn cases(files: &[PathBuf]) -> Vec<Value> {
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).expect("vector file");
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            out.push(serde_json::from_str(line).unwrap_or_else(|e| panic!("{}:{}: {e}", f.display(), i + 1)));
        }
    }
    out
}

/// The errno number of an errno name (the ones the vectors use).
pub(crate) fn errno_number(name: &str) -> i32 {
    match name {
        "EINVAL" => libc::EINVAL,
        "EPROTONOSUPPORT" => libc::EPROTONOSUPPORT,
        "ENODATA" => libc::ENODATA,
        "ENOENT" => libc::ENOENT,
        "EFAULT" => libc::EFAULT,
        other => panic!("unexpected errno name {other}"),
    }
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

/// The 32-byte memory image of `struct ibv_ah_attr` for an `expect.ah_attr`.
pub(crate) fn attr_image(a: &Value) -> [u8; 32] {
    let g = &a["grh"];
    let mut b = [0u8; 32];
    let dgid = g["dgid"].as_str().expect("dgid");
    for (i, byte) in b.iter_mut().take(16).enumerate() {
        *byte = u8::from_str_radix(&dgid[2 * i..2 * i + 2], 16).expect("hex");
    }
    b[16..20].copy_from_slice(&(u(g, "flow_label") as u32).to_le_bytes());
    b[20] = u(g, "sgid_index") as u8;
    b[21] = u(g, "hop_limit") as u8;
    b[22] = u(g, "traffic_class") as u8;
    b[24..26].copy_from_slice(&(u(a, "dlid") as u16).to_le_bytes());
    b[26] = u(a, "sl") as u8;
    b[27] = u(a, "src_path_bits") as u8;
    b[28] = u(a, "static_rate") as u8;
    b[29] = u(a, "is_global") as u8;
    b[30] = u(a, "port_num") as u8;
    b
}

/// The line `tests/c/vectors.c` reads for one case, with the expected
/// attribute image `attr`. A NULL `grh` (libibverbs crashes) is expected as
/// -1 / `EFAULT` with an all-zero attribute (FORMAT.md: "reject a NULL grh
/// in a way the harness treats as equivalent").
pub(crate) fn c_line(case: &Value, attr: &[u8; 32]) -> String {
    let port = &case["port"];
    let ll = match port["link_layer"].as_str() {
        Some("ethernet") => 2,
        _ => 1,
    };
    let gids = port["gids"].as_array().expect("gids");
    let mut s = format!(
        "{} {} {} {} {}",
        case["name"].as_str().expect("name"),
        u(port, "num"),
        ll,
        u(port, "gid_tbl_len"),
        gids.len()
    );
    for g in gids {
        let ty = match g["type"].as_str() {
            Some("ib") => 0,
            Some("roce_v1") => 1,
            _ => 2,
        };
        s += &format!(" {} {} {ty}", u(g, "index"), g["gid"].as_str().expect("gid"));
    }
    let wc = &case["wc"];
    let exp = &case["expect"];
    let (ret, errno) = if exp["signal"].is_string() {
        (-1, libc::EFAULT)
    } else {
        let ret = exp["ret"].as_i64().expect("ret");
        (ret, if ret != 0 { errno_number(exp["errno"].as_str().expect("errno")) } else { 0 })
    };
    s += &format!(
        " {} {} {} {} {} {} {} {ret} {errno} {}",
        u(wc, "wc_flags"),
        u(wc, "slid"),
        u(wc, "sl"),
        u(wc, "dlid_path_bits"),
        u(wc, "src_qp"),
        u(wc, "pkey_index"),
        case["grh"].as_str().unwrap_or("-"),
        attr.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    s
}

/// The expected image of a case (all zero for a NULL `grh`).
pub(crate) fn expected_image(case: &Value) -> [u8; 32] {
    if case["expect"]["signal"].is_string() { [0; 32] } else { attr_image(&case["expect"]["ah_attr"]) }
}

/// Runs `cmd`, panicking with its output when it fails.
pub(crate) fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// gcc flags shared by every C build.
pub(crate) const CFLAGS: &[&str] = &["-std=gnu11", "-O1", "-g", "-Wall", "-Wextra", "-Werror"];

/// An `LD_PRELOAD` value for a C program the tests run: `libs`, after the
/// words of `UDAH_TEST_LD_PRELOAD` (capi/check-sanitizers.sh puts the
/// sanitizer runtime there: it must be initialised before the preload's
/// constructor runs).
pub(crate) fn ld_preload(libs: &[&Path]) -> String {
    let first = std::env::var("UDAH_TEST_LD_PRELOAD").unwrap_or_default();
    let rest = libs.iter().map(|p| p.display().to_string());
    first.split_whitespace().map(str::to_owned).chain(rest).collect::<Vec<_>>().join(" ")
}

/// [`CFLAGS`] and the words of `UDAH_TEST_CFLAGS` (capi/check-sanitizers.sh
/// passes `-fsanitize=...` there), for the C programs the tests build and
/// run.
pub(crate) fn cflags() -> Vec<String> {
    let extra = std::env::var("UDAH_TEST_CFLAGS").unwrap_or_default();
    CFLAGS.iter().map(|s| (*s).to_owned()).chain(extra.split_whitespace().map(str::to_owned)).collect()
}
