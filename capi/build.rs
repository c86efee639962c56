//! Builds the libibverbs shim (`src/shim.c`), links libibverbs, and links
//! libudah.so with its soname and symbol versions (`udah.map`).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".to_owned());
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-changed=udah.map");
    cc::Build::new().file("src/shim.c").warnings(true).extra_warnings(true).compile("udah_shim");
    println!("cargo:rustc-link-lib=dylib=ibverbs");
    // `rustc-link-arg`, not `rustc-cdylib-link-arg`: cargo passes a
    // package's cdylib link arguments to the cdylibs of every package that
    // depends on it too (rust-lang/cargo#9562, kept for compatibility), so
    // libudah-preload.so (which links this crate's rlib) came out with this
    // soname and version script. `rustc-link-arg` applies to this package's
    // own targets only: the cdylib's link (the rlib and staticlib are not
    // linked), and this package's test and bench executables, where a soname
    // and a version script that exports no symbol of theirs change nothing.
    println!("cargo:rustc-link-arg=-Wl,-soname,libudah.so.0");
    println!("cargo:rustc-link-arg=-Wl,--version-script={dir}/udah.map");
}
