//! `udah devices`, `udah serve` and `udah ping` as a user runs them: over
//! hal-mock end to end (bounded), and the clear failures of the ibverbs
//! backend on a machine without RDMA devices or without libibverbs.

#[cfg(feature = "ibverbs")]
use std::path::PathBuf;
use std::process::{Command, Output};

fn udah(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_udah")).args(args).output().expect("run udah")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[cfg(feature = "ibverbs")]
fn machine_has_devices() -> bool {
    std::fs::read_dir("/sys/class/infiniband").map(|d| d.count() > 0).unwrap_or(false)
}

#[test]
#[cfg(feature = "ibverbs")]
fn devices_reports_no_devices_clearly() {
    let o = udah(&["devices"]);
    let (out, err) = text(&o);
    if machine_has_devices() {
        assert!(o.status.success(), "{out}\n{err}");
        assert!(out.contains("port 1:") && out.contains("INDEX"), "{out}");
        return;
    }
    assert_eq!(o.status.code(), Some(3), "exit code for no devices\n{out}\n{err}");
    assert!(err.contains("udah: no RDMA devices found"), "{err}");
    if !std::path::Path::new("/sys/class/infiniband").exists() {
        assert!(err.contains("/sys/class/infiniband is missing") && err.contains("no RDMA support"), "{err}");
        assert!(err.contains("rdma link add"), "the message says how to get a device: {err}");
    }
    assert!(out.is_empty(), "nothing on stdout: {out}");
}

#[test]
#[cfg(feature = "ibverbs")]
fn serve_and_ping_over_ibverbs_without_devices() {
    if machine_has_devices() {
        return; // covered by the hardware instructions in hardware.md
    }
    for args in [
        &["serve", "--hal", "ibverbs", "--device", "rxe0", "--count", "1"][..],
        &["ping", "--hal", "ibverbs", "--device", "rxe0", "--dest", "10.0.0.1", "--qpn", "0x11", "--count", "1"][..],
    ] {
        let o = udah(args);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {err}");
        assert!(err.contains("no RDMA devices"), "{err}");
    }
    let o = udah(&["ping", "--hal", "ibverbs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).1.contains("--dest is required"));
}

/// Builds a `libibverbs.so.1` that exports nothing, in a fresh directory.
#[cfg(feature = "ibverbs")]
fn stub_library_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("udah-cli-stub-ibverbs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("stub.c");
    std::fs::write(&src, "int udah_stub_libibverbs;\n").unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-Wl,-soname,libibverbs.so.1", "-o"])
        .arg(dir.join("libibverbs.so.1"))
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?}: {e}"));
    assert!(status.success());
    dir
}

#[test]
#[cfg(feature = "ibverbs")]
fn devices_without_libibverbs() {
    let dir = stub_library_dir();
    let o = Command::new(env!("CARGO_BIN_EXE_udah")).arg("devices").env("LD_LIBRARY_PATH", &dir).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(4), "exit code for a missing libibverbs\n{out}\n{err}");
    assert!(err.contains("libibverbs is not installed"), "{err}");
}

#[test]
fn the_binary_does_not_link_libibverbs() {
    // rdma-mummy-sys loads libibverbs at run time: no DT_NEEDED entry.
    let o = Command::new("ldd").arg(env!("CARGO_BIN_EXE_udah")).output();
    if let Ok(o) = o {
        let (out, _) = text(&o);
        assert!(!out.contains("libibverbs"), "{out}");
    }
}

#[test]
fn serve_over_mock_end_to_end() {
    for extra in [&[][..], &["--stamp"][..], &["--link", "ib"][..], &["--link", "ib", "--peers", "1"][..]] {
        let mut args = vec!["serve", "--hal", "mock", "--count", "1000"];
        args.extend_from_slice(extra);
        let o = udah(&args);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{args:?}\n{out}\n{err}");
        assert!(out.contains("requests 1000, answered 1000, failed 0, echoes received 1000, wrong 0"), "{out}");
    }
    // The default backend is the mock.
    let o = udah(&["serve", "--count", "10"]);
    assert!(o.status.success() && text(&o).0.contains("mock fabric"));
}

#[test]
fn ping_over_mock_end_to_end() {
    for link in ["roce", "ib"] {
        let o = udah(&["ping", "--hal", "mock", "--link", link, "--count", "1000", "--size", "256"]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{out}\n{err}");
        assert!(out.contains("1000 sent, 1000 received, 0 lost, 0 wrong"), "{out}");
        assert!(out.contains("rtt min/avg/p50/p99/max"), "{out}");
    }
    let o = udah(&["ping", "--count", "3", "-v"]);
    let (out, _) = text(&o);
    assert!(o.status.success() && out.contains("seq=2 rtt="), "{out}");
}

/// Issue 16's serve/ping edges under `--hal mock` (and the ones refused for
/// every backend): each a usage error (exit 2) saying what is wrong, before
/// anything runs.
#[test]
fn serve_and_ping_refuse_bad_arguments_up_front() {
    let cases: &[(&[&str], &str)] = &[
        (&["serve", "--peers", "0"], "--peers 0"),
        (&["serve", "--port", "0"], "port numbers start at 1"),
        (&["serve", "--hal", "ibverbs", "--port", "0"], "port numbers start at 1"),
        (&["serve", "--port", "9"], "the mock fabric's server is port 1"),
        (&["serve", "--gid-index", "999"], "--gid-index is for --hal ibverbs"),
        (&["serve", "--device", "rxe0"], "--device is for --hal ibverbs"),
        (&["serve", "--check-libibverbs"], "--check-libibverbs is for --hal ibverbs"),
        (&["serve", "--stamp", "--link", "ib"], "not with --link ib"),
        (&["ping", "--size", "0"], "--size 0: at least 8 bytes"),
        (&["ping", "--size", "4"], "--size 4: at least 8 bytes"),
        (&["ping", "--size", "100000000"], "above the MTU (4096 on the mock fabric)"),
        (&["ping", "--hal", "ibverbs", "--size", "4", "--dest", "10.0.0.1", "--qpn", "1"], "at least 8 bytes"),
        (&["ping", "--dest", "foo"], "--dest is for --hal ibverbs"),
        (&["ping", "--qpn", "0x11"], "--qpn is for --hal ibverbs"),
        (&["ping", "--port", "0"], "port numbers start at 1"),
        (&["ping", "--port", "9"], "the mock fabric's client is port 1"),
        (&["ping", "--ud-pingpong", "127.0.0.1"], "--ud-pingpong is for --hal ibverbs"),
        (&["serve", "--ud-pingpong"], "--ud-pingpong is for --hal ibverbs"),
        (&["serve", "--ah-slots", "4096"], "--ah-slots is for --hal ibverbs"),
        (&["serve", "--hal", "ibverbs", "--ah-slots", "1000"], "1000 AH slots is not one of the table sizes"),
        (&["serve", "--hal", "ibverbs", "--ah-slots", "4194304"], "1024, 4096, 16384, 65536, 262144, 1048576, 2097152"),
    ];
    #[cfg(feature = "ibverbs")]
    let cases =
        &[cases, &[(&["ping", "--hal", "ibverbs", "--ud-pingpong", "127.0.0.1", "--qpn", "1"][..], "no --dest/--qpn")]]
            .concat();
    for (args, want) in cases {
        let o = udah(args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}\n{out}\n{err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: nothing runs: {out}");
    }
    // The edges' neighbours still run.
    let o = udah(&["ping", "--size", "8", "--count", "2"]);
    assert!(o.status.success(), "{}", text(&o).1);
    let o = udah(&["ping", "--size", "4096", "--count", "2"]);
    assert!(o.status.success(), "{}", text(&o).1);
    let o = udah(&["serve", "--peers", "1", "--count", "3", "--stamp"]);
    assert!(o.status.success() && text(&o).0.contains("requests 3, answered 3"), "{:?}", text(&o));
}

#[test]
fn help_shows_q_keys_in_hex() {
    for cmd in ["serve", "ping"] {
        let o = udah(&[cmd, "--help"]);
        let (out, _) = text(&o);
        assert!(o.status.success());
        assert!(out.contains("[default: 0x11111111]"), "{cmd}: {out}");
        assert!(!out.contains("286331153"), "{cmd}: {out}");
    }
}

/// `serve --count 0` runs until SIGINT/SIGTERM, then prints its final
/// statistics and exits 0 (bounded: the test signals as soon as the server
/// has started, and fails if it is not gone 60 s later).
#[test]
fn serve_count_0_runs_until_a_signal_then_reports_and_exits_0() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    for sig in ["TERM", "INT"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_udah"))
            .args(["serve", "--count", "0", "--peers", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        assert!(first.contains("until SIGINT/SIGTERM"), "{first}");
        let st = Command::new("kill").args([&format!("-{sig}"), &child.id().to_string()]).status().unwrap();
        assert!(st.success());
        let deadline = std::time::Instant::now() + core::time::Duration::from_secs(60);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("serve did not stop within 60 s of SIG{sig}");
            }
            std::thread::sleep(core::time::Duration::from_millis(20));
        };
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        assert_eq!(status.code(), Some(0), "SIG{sig}: {status:?}\n{rest}");
        assert!(rest.contains("stopped by a signal"), "{rest}");
        assert!(rest.contains("failed 0") && rest.contains("wrong 0"), "{rest}");
    }
}
