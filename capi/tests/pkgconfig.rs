//! The pkg-config file, tested the way a user consumes it: `udah.pc.in`
//! (the same fields as `[package.metadata.capi.pkg_config]`, which
//! `cargo cinstall` writes) is installed with libudah and `udah.h` into a
//! scratch prefix, and `examples/udah_example.c` is compiled and linked with
//! nothing but `pkg-config --cflags --libs udah`, then run. CI does this
//! instead of building cargo-c, which compiles cargo itself.

mod common;

use std::process::Command;

use common::*;

#[test]
fn pc_file_agrees_with_the_cargo_c_metadata() {
    let pc = std::fs::read_to_string(repo().join("capi/udah.pc.in")).expect("udah.pc.in");
    let toml = std::fs::read_to_string(repo().join("capi/Cargo.toml")).expect("Cargo.toml");
    let field = |k: &str| pc.lines().find_map(|l| l.strip_prefix(&format!("{k}: "))).unwrap_or_default().to_owned();
    assert!(toml.contains(&format!("name = \"{}\"", field("Name"))));
    assert!(toml.contains(&format!("description = \"{}\"", field("Description"))));
    assert!(toml.contains(&format!("requires = \"{}\"", field("Requires"))));
    assert!(field("Libs").ends_with("-ludah") && toml.contains("[package.metadata.capi.library]\nname = \"udah\""));
}

#[test]
fn example_links_through_pkg_config() {
    let prefix = scratch("prefix");
    let (lib, inc, pcdir) = (prefix.join("lib"), prefix.join("include"), prefix.join("lib/pkgconfig"));
    for d in [&lib, &inc, &pcdir] {
        std::fs::create_dir_all(d).expect("prefix dirs");
    }
    for f in ["libudah.so", "libudah.a"] {
        std::fs::copy(c_libraries().join(f), lib.join(f)).expect("install lib");
    }
    std::os::unix::fs::symlink("libudah.so", lib.join("libudah.so.0")).expect("soname link");
    std::fs::copy(repo().join("include/udah.h"), inc.join("udah.h")).expect("install header");
    let pc = std::fs::read_to_string(repo().join("capi/udah.pc.in"))
        .expect("udah.pc.in")
        .replace("@PREFIX@", prefix.to_str().expect("UTF-8 path"))
        .replace("@VERSION@", env!("CARGO_PKG_VERSION"));
    std::fs::write(pcdir.join("udah.pc"), pc).expect("udah.pc");

    let out = run(Command::new("pkg-config").env("PKG_CONFIG_PATH", &pcdir).args(["--cflags", "--libs", "udah"]));
    let flags = String::from_utf8(out.stdout).expect("flags");
    assert!(flags.contains("-ludah") && flags.contains("-libverbs"), "{flags}");
    let out = run(Command::new("pkg-config").env("PKG_CONFIG_PATH", &pcdir).args(["--modversion", "udah"]));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), env!("CARGO_PKG_VERSION"));

    let bin = prefix.join("udah-example");
    run(Command::new("gcc")
        .args(CFLAGS)
        .arg(repo().join("examples/udah_example.c"))
        .args(flags.split_whitespace())
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&bin));
    let out = run(&mut Command::new(&bin));
    assert!(String::from_utf8_lossy(&out.stdout).contains("sgid_index 3"));
    let _ = std::fs::remove_dir_all(&prefix);
}
