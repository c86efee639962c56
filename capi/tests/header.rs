//! `include/udah.h` is what cbindgen generates from `src/lib.rs` with
//! `cbindgen.toml`: this test regenerates it with the cbindgen library and
//! fails when the checked-in header differs (`UDAH_BLESS_HEADER=1` rewrites
//! it instead).

use std::path::Path;

#[test]
fn checked_in_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8 header");
    let path = crate_dir.join("../include/udah.h");
    if std::env::var_os("UDAH_BLESS_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("write include/udah.h");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/udah.h is stale: regenerate with `UDAH_BLESS_HEADER=1 cargo test -p udah-capi --test header`\n\
         --- generated ---\n{generated}"
    );
    // Every exported function is declared.
    for f in [
        "udah_responder_open",
        "udah_init_ah_from_wc",
        "udah_create_ah_from_wc",
        "udah_destroy_ah",
        "udah_create_ah_batch",
        "udah_handle_async_event",
        "udah_responder_stats",
    ] {
        assert!(generated.contains(&format!("{f}(")), "{f} missing from the header");
    }
}
