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

/// A responder over an empty 4-slot table on port 1 (no PD) with `cfg`.
fn from_gids_ex(cfg: &udah::udah_config) -> *mut udah::udah_responder {
    // SAFETY: no GIDs are read (n_gids 0); `cfg` is a whole struct.
    unsafe { udah::udah_responder_from_gids_ex(1, 2, 4, core::ptr::null(), 0, core::ptr::null_mut(), cfg) }
}

fn stats(r: *mut udah::udah_responder) -> udah::udah_stats {
    let mut s = udah::udah_stats::default();
    // SAFETY: `r` is live; `s` is a whole struct.
    let rc = unsafe { udah::udah_responder_stats_ex(r, &mut s, core::mem::size_of::<udah::udah_stats>()) };
    assert_eq!(rc, 0);
    s
}

#[test]
fn the_ah_table_capacity_follows_the_configuration_up_to_2_pow_21() {
    let size = core::mem::size_of::<udah::udah_config>() as u32;
    for (asked, got) in [(0u32, 1024u64), (1, 1024), (1024, 1024), (2048, 4096), (1 << 16, 1 << 16), (1 << 21, 1 << 21)]
    {
        let r = from_gids_ex(&udah::udah_config { size, ah_slots: asked, ..Default::default() });
        assert!(!r.is_null(), "ah_slots {asked}: {}", last_error());
        assert_eq!(stats(r).ah_slots, got, "ah_slots {asked}");
        // SAFETY: no AH is out.
        assert_eq!(unsafe { udah::udah_responder_destroy(r) }, 0);
    }
    for bad in [3u32, 5000, 1 << 22, u32::MAX] {
        let r = from_gids_ex(&udah::udah_config { size, ah_slots: bad, ..Default::default() });
        assert!(r.is_null(), "ah_slots {bad} was accepted");
        let msg = last_error();
        assert_eq!(errno(), libc::EINVAL);
        assert!(msg.contains(&format!("ah_slots {bad} is not 0 or a power of two up to 2097152")), "{msg}");
    }
}

#[test]
fn plain_stats_write_only_the_first_version_of_the_struct() {
    let r = from_gids_ex(&udah::udah_config { size: 8, ah_slots: 4096, ..Default::default() });
    assert!(!r.is_null());
    // A caller compiled against version 0.1: 14 counters, then a guard.
    let mut old = [u64::MAX; 15];
    // SAFETY: `old` holds the 112 bytes of the 0.1 struct and a guard word.
    assert_eq!(unsafe { udah::udah_responder_stats(r, old.as_mut_ptr().cast()) }, 0);
    assert_eq!(old[14], u64::MAX, "wrote past the version-0.1 struct");
    assert_eq!(old[13], 1, "gid_generation");
    assert_eq!(stats(r).ah_slots, 4096);
    // SAFETY: no AH is out.
    assert_eq!(unsafe { udah::udah_responder_destroy(r) }, 0);
}

#[test]
fn the_event_fd_is_one_socket_and_processing_never_blocks() {
    let r = from_gids_ex(&udah::udah_config { size: 8, ..Default::default() });
    assert!(!r.is_null());
    // SAFETY: `r` is live.
    let processed_before = unsafe { udah::udah_responder_process_events(r) };
    assert_eq!(processed_before, 0, "no events before the fd is asked for");
    // SAFETY: `r` is live.
    let fd = unsafe { udah::udah_responder_event_fd(r) };
    assert!(fd >= 0, "event fd: {} {}", errno(), last_error());
    // SAFETY: `r` is live.
    assert_eq!(unsafe { udah::udah_responder_event_fd(r) }, fd, "the same fd every time");
    // The neighbour-table dump's entries, or nothing: never a wait.
    // SAFETY: `r` is live.
    let n = unsafe { udah::udah_responder_process_events(r) };
    assert!(n >= 0, "process_events: {} {}", errno(), last_error());
    assert_eq!(stats(r).net_events, n as u64);
    // SAFETY: NULL is refused.
    assert_eq!(unsafe { udah::udah_responder_event_fd(core::ptr::null_mut()) }, -1);
    assert_eq!(errno(), libc::EINVAL);
    // SAFETY: no AH is out; the responder closes its fd.
    assert_eq!(unsafe { udah::udah_responder_destroy(r) }, 0);
}

#[test]
fn an_allow_list_is_checked_at_open() {
    let size = core::mem::size_of::<udah::udah_config>() as u32;
    let p = |len| udah::udah_gid_prefix { raw: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], len };
    let nine = [p(64); 9];
    let cases: [(u32, *const udah::udah_gid_prefix, &str); 3] = [
        (9, nine.as_ptr(), "n_allow 9 is above the 8 prefixes"),
        (2, core::ptr::null(), "allow is NULL with n_allow 2"),
        (1, [p(129)].as_ptr(), "allow[0].len is 129, above 128 bits"),
    ];
    for (n, allow, want) in cases {
        let r = from_gids_ex(&udah::udah_config { size, n_allow: n, allow, ..Default::default() });
        assert!(r.is_null(), "{want}: accepted");
        assert_eq!(errno(), libc::EINVAL);
        assert!(last_error().contains(want), "{}", last_error());
    }
    let ok = [p(64), p(128)];
    let r = from_gids_ex(&udah::udah_config { size, n_allow: 2, allow: ok.as_ptr(), ..Default::default() });
    assert!(!r.is_null(), "{}", last_error());
    // SAFETY: no AH is out.
    assert_eq!(unsafe { udah::udah_responder_destroy(r) }, 0);
}
