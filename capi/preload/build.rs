//! Links libudah-preload.so with libibverbs' symbol version (`preload.map`)
//! and its soname.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".to_owned());
    println!("cargo:rerun-if-changed=preload.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/preload.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libudah-preload.so");
    println!("cargo:rustc-cdylib-link-arg=-ldl");
    // rustc lists the `udah_preload_ibv_*` definitions in its own version
    // script; the `.symver ..., remove` directives take those names out of
    // the object (only the versioned `ibv_*` remain), which the linker must
    // accept.
    println!("cargo:rustc-cdylib-link-arg=-Wl,--undefined-version");
    // libudah (an rlib, i.e. an archive here) keeps its udah_* symbols local.
    println!("cargo:rustc-cdylib-link-arg=-Wl,--exclude-libs,ALL");
}
