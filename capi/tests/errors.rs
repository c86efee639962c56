//! Bad arguments through the C entry points (no device needed): each returns
//! its errno with a `udah_last_error()` sentence, none aborts.

use core::ffi::CStr;

fn last_error() -> String {
    // SAFETY: udah_last_error returns a NUL-terminated thread-local string.
    unsafe { CStr::from_ptr(udah::udah_last_error()) }.to_string_lossy().into_owned()
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn from_gids(port: u8, ll: u8, len: u32, n: usize) -> (bool, i32, String) {
    // SAFETY: n_gids is checked against gid_tbl_len before `gids` is read.
    let r = unsafe { udah::udah_responder_from_gids(port, ll, len, core::ptr::null(), n, core::ptr::null_mut()) };
    let e = errno();
    if !r.is_null() {
        // SAFETY: a responder just made, with no AHs out.
        unsafe { udah::udah_responder_destroy(r) };
    }
    (r.is_null(), e, last_error())
}

#[test]
fn huge_n_gids_is_einval_with_a_sentence() {
    let (null, e, msg) = from_gids(1, 2, 16, usize::MAX / 64);
    assert!(null);
    assert_eq!(e, libc::EINVAL);
    assert!(msg.contains("GID entries for a table of 16 slots"), "{msg}");
}

#[test]
fn port_zero_and_unknown_link_layer_are_rejected() {
    let (null, e, msg) = from_gids(0, 2, 16, 0);
    assert!(null && e == libc::EINVAL && msg.contains("port 0"), "{e} {msg}");
    let (null, e, msg) = from_gids(1, 77, 16, 0);
    assert!(null && e == libc::EINVAL && msg.contains("link layer 77"), "{e} {msg}");
    let (null, e, msg) = from_gids(1, 2, 2048, 0);
    assert!(null && e == libc::E2BIG && msg.contains("2048 slots"), "{e} {msg}");
    let (null, _, _) = from_gids(1, 2, 16, 0);
    assert!(!null, "a valid empty table is accepted");
}

#[test]
fn batch_with_a_null_responder_is_rejected_even_when_empty() {
    // SAFETY: NULL arrays with n = 0 are never read.
    let rc = unsafe {
        udah::udah_create_ah_batch(
            core::ptr::null_mut(),
            core::ptr::null(),
            core::ptr::null(),
            0,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        )
    };
    assert_eq!((rc, errno()), (-1, libc::EINVAL));
    assert!(last_error().contains("responder is NULL"), "{}", last_error());
}

fn open_ex(cfg: *const udah::udah_config) -> (i32, String) {
    // SAFETY: a NULL context is refused after the configuration is read.
    let r = unsafe { udah::udah_responder_open_ex(core::ptr::null_mut(), 1, core::ptr::null_mut(), cfg) };
    assert!(r.is_null());
    (errno(), last_error())
}

#[test]
fn open_ex_reads_a_shorter_struct_and_checks_its_fields() {
    // An older caller's struct: size and ah_slots only.
    let short: [u32; 2] = [8, 256];
    let (e, msg) = open_ex(short.as_ptr().cast());
    assert_eq!((e, msg.as_str()), (libc::EINVAL, "context is NULL"), "the short struct was accepted");
    let tiny: [u32; 1] = [4];
    let (e, msg) = open_ex(tiny.as_ptr().cast());
    assert!(e == libc::EINVAL && msg.contains("size is 4"), "{msg}");
    let bad = udah::udah_config { size: 20, ah_slots: 3, ..Default::default() };
    let (e, msg) = open_ex(&bad);
    assert!(e == libc::EINVAL && msg.contains("ah_slots 3"), "{msg}");
    let (e, msg) = open_ex(core::ptr::null());
    assert_eq!((e, msg.as_str()), (libc::EINVAL, "context is NULL"));
}

#[test]
fn stats_ex_fills_a_shorter_struct_only() {
    // SAFETY: a valid empty table, no PD.
    let r = unsafe { udah::udah_responder_from_gids(1, 2, 4, core::ptr::null(), 0, core::ptr::null_mut()) };
    assert!(!r.is_null());
    // An older caller's struct: the first two counters, and a guard word.
    let mut old = [u64::MAX; 3];
    // SAFETY: `old` has room for the 16 bytes asked for.
    let rc = unsafe { udah::udah_responder_stats_ex(r, old.as_mut_ptr().cast(), 16) };
    assert_eq!(rc, 0);
    assert_eq!(old, [0, 0, u64::MAX], "wrote past the caller's struct");
    // SAFETY: as above; 12 is refused before anything is written.
    let rc = unsafe { udah::udah_responder_stats_ex(r, old.as_mut_ptr().cast(), 12) };
    assert_eq!((rc, errno()), (-1, libc::EINVAL));
    // SAFETY: no AH is out.
    assert_eq!(unsafe { udah::udah_responder_destroy(r) }, 0);
}
