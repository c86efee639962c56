//! Builds the libibverbs shim (`src/shim.c`) and links libibverbs.

fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    cc::Build::new().file("src/shim.c").warnings(true).extra_warnings(true).compile("udah_shim");
    println!("cargo:rustc-link-lib=dylib=ibverbs");
}
