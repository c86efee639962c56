//! Links libudah-preload.so with libibverbs' symbol version (`preload.map`)
//! and its soname.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".to_owned());
    println!("cargo:rerun-if-changed=preload.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/preload.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libudah-preload.so");
    println!("cargo:rustc-cdylib-link-arg=-ldl");
    // libudah (an rlib, i.e. an archive here) keeps its udah_* symbols local.
    println!("cargo:rustc-cdylib-link-arg=-Wl,--exclude-libs,ALL");
}
