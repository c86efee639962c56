//! Builds the libibverbs shim (`src/shim.c`), links libibverbs, and links
//! libudah.so with its soname and symbol versions (`udah.map`).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".to_owned());
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-changed=udah.map");
    cc::Build::new().file("src/shim.c").warnings(true).extra_warnings(true).compile("udah_shim");
    println!("cargo:rustc-link-lib=dylib=ibverbs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libudah.so.0");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/udah.map");
}
