//! The verbs backend is behind the `ibverbs` feature: without it, every verbs
//! command says how to get it (and fails), and the mock-fabric commands work.

use std::process::{Command, Output};

fn udah(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_udah")).args(args).output().expect("run udah")
}

#[cfg(not(feature = "ibverbs"))]
#[test]
fn verbs_commands_say_how_to_get_the_backend() {
    for args in [
        &["devices"][..],
        &["devices", "-d", "rxe0", "--no-gids"][..],
        &["serve", "--hal", "ibverbs", "--count", "1"][..],
        &["ping", "--hal", "ibverbs", "--dest", "10.0.0.1", "--qpn", "0x11"][..],
    ] {
        let o = udah(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(5), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(err.contains("built without the verbs backend"), "{args:?}: {err}");
        assert!(err.contains("cargo build --release -p udah-cli --features ibverbs"), "{args:?}: {err}");
        assert!(err.contains("apt-get install cmake libclang-dev"), "{args:?}: {err}");
    }
}

#[cfg(feature = "ibverbs")]
#[test]
fn verbs_commands_are_built_in() {
    // `devices` runs the real listing: whatever it finds, it is not the
    // missing-feature message.
    let o = udah(&["devices"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(5), "{err}");
    assert!(!err.contains("built without the verbs backend"), "{err}");
}

#[test]
fn mock_commands_work_with_or_without_the_backend() {
    let o = udah(&["serve", "--hal", "mock", "--count", "100"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = udah(&["ping", "--count", "3"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
