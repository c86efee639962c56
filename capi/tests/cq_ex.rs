//! `udah_init_ah_from_cq_ex` / `udah_create_ah_from_cq_ex` on a software
//! extended CQ (read functions that return a `struct ibv_wc`'s fields):
//! the same return value, errno and 32 bytes as the `ibv_wc` forms on the
//! same completion, and EINVAL with a sentence naming the missing flag.

use core::ffi::CStr;

use udah::ffi::{ibv_ah_attr, ibv_gid, ibv_gid_entry, ibv_grh, ibv_wc};

#[path = "common/soft_cq.rs"]
mod soft_cq;
use soft_cq::{sl, soft};

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn last_error() -> String {
    // SAFETY: udah_last_error returns a NUL-terminated thread-local string.
    unsafe { CStr::from_ptr(udah::udah_last_error()) }.to_string_lossy().into_owned()
}

fn responder() -> *mut udah::udah_responder {
    let mapped = |a: [u8; 4]| {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&a);
        g
    };
    let v6 = [0xfd, 0, 0, 0xda, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let entries = [
        ibv_gid_entry {
            gid: ibv_gid { raw: mapped([198, 18, 0, 1]) },
            gid_index: 0,
            port_num: 1,
            gid_type: 2,
            ndev_ifindex: 3,
        },
        ibv_gid_entry { gid: ibv_gid { raw: v6 }, gid_index: 1, port_num: 1, gid_type: 2, ndev_ifindex: 3 },
    ];
    // SAFETY: two valid entries; no PD (attributes only).
    let r = unsafe { udah::udah_responder_from_gids(1, 2, 4, entries.as_ptr(), 2, core::ptr::null_mut()) };
    assert!(!r.is_null(), "{}", last_error());
    r
}

fn wc(wc_flags: u32, slid: u16, sl: u8, bits: u8) -> ibv_wc {
    // SAFETY: integers only; all-zero is valid.
    let mut w: ibv_wc = unsafe { core::mem::zeroed() };
    (w.wc_flags, w.slid, w.sl, w.dlid_path_bits, w.src_qp) = (wc_flags, slid, sl, bits, 0x42);
    w
}

fn areas() -> Vec<[u8; 40]> {
    let mut v4 = [0u8; 40];
    v4[20] = 0x45;
    v4[28] = 64;
    v4[29] = 17;
    v4[32..36].copy_from_slice(&[198, 18, 0, 9]);
    v4[36..40].copy_from_slice(&[198, 18, 0, 1]);
    let mut v6 = [0u8; 40];
    v6[0] = 0x60;
    v6[6] = 17;
    v6[7] = 64;
    v6[8..24].copy_from_slice(&[0xfd, 0, 0, 0xda, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);
    v6[24..40].copy_from_slice(&[0xfd, 0, 0, 0xda, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    let mut mcast = v6;
    mcast[24] = 0xff;
    vec![v4, v6, mcast, [0u8; 40], [0xa5; 40]]
}

fn zeroed_attr() -> ibv_ah_attr {
    // SAFETY: integers and a GID; all-zero is valid.
    unsafe { core::mem::zeroed() }
}

fn attr_bytes(a: &ibv_ah_attr) -> [u8; 32] {
    // SAFETY: `ibv_ah_attr` is 32 bytes (pinned in ffi) written in full.
    unsafe { core::mem::transmute_copy(a) }
}

#[test]
fn init_from_cq_ex_is_the_wc_form_bit_for_bit() {
    let r = responder();
    let (mut n, mut ok) = (0, 0);
    for area in areas() {
        let grh = ibv_grh { bytes: area };
        for w in [wc(1, 0, 0, 0), wc(0, 0x1234, 3, 1), wc(1, 0xffff, 0xff, 0x7f), wc(0xffff_ffff, 7, 16, 0)] {
            for (profile, evidence) in [(0, 0), (1, 0), (0, 3), (0, 4), (1, 4)] {
                let mut cq = soft(w);
                let (mut a, mut b) = (zeroed_attr(), zeroed_attr());
                // SAFETY: a live responder, CQ with a current completion, valid structs.
                let rc_ex =
                    unsafe { udah::udah_init_ah_from_cq_ex(r, &raw mut cq.ex, &grh, profile, evidence, &mut a) };
                let e_ex = errno();
                // SAFETY: as above.
                let rc_wc = unsafe { udah::udah_init_ah_from_wc(r, &w, &grh, profile, evidence, &mut b) };
                let e_wc = errno();
                assert_eq!(rc_ex, rc_wc, "{w:?} {profile} {evidence}");
                if rc_ex != 0 {
                    assert_eq!(e_ex, e_wc);
                }
                assert_eq!(attr_bytes(&a), attr_bytes(&b), "{w:?} {profile} {evidence}");
                n += 1;
                ok += usize::from(rc_ex == 0);
            }
        }
    }
    assert_eq!(n, 100);
    assert!(ok > 10 && ok < 90, "{ok} of 100 succeeded: the cases cover both outcomes");
    // SAFETY: a responder with no AHs out.
    unsafe { udah::udah_responder_destroy(r) };
}

#[test]
fn a_missing_reader_is_einval_naming_its_flag() {
    let r = responder();
    let grh = ibv_grh { bytes: areas()[0] };
    let mut cq = soft(wc(1, 0, 0, 0));
    cq.ex.read_sl = None;
    let mut a = zeroed_attr();
    // SAFETY: as in the test above; the NULL reader is never called.
    let rc = unsafe { udah::udah_init_ah_from_cq_ex(r, &raw mut cq.ex, &grh, 0, 0, &mut a) };
    assert_eq!((rc, errno()), (-1, libc::EINVAL));
    assert!(last_error().contains("IBV_WC_EX_WITH_SL)"), "{}", last_error());
    cq.ex.read_sl = Some(sl);
    cq.ex.read_dlid_path_bits = None;
    // SAFETY: as above.
    let ah = unsafe { udah::udah_create_ah_from_cq_ex(r, &raw mut cq.ex, &grh) };
    assert!(ah.is_null());
    assert_eq!(errno(), libc::EINVAL);
    assert!(last_error().contains("IBV_WC_EX_WITH_DLID_PATH_BITS"), "{}", last_error());
    // SAFETY: NULL CQ: refused before anything is read.
    let rc = unsafe { udah::udah_init_ah_from_cq_ex(r, core::ptr::null_mut(), &grh, 0, 0, &mut a) };
    assert_eq!((rc, errno()), (-1, libc::EINVAL));
    assert!(last_error().contains("cq is NULL"), "{}", last_error());
    // SAFETY: a responder with no AHs out.
    unsafe { udah::udah_responder_destroy(r) };
}

#[test]
fn create_from_cq_ex_fails_as_the_wc_form() {
    // A responder without PD: both forms refuse with the same errno.
    let r = responder();
    let grh = ibv_grh { bytes: areas()[0] };
    let w = wc(1, 0, 0, 0);
    let mut cq = soft(w);
    // SAFETY: live responder and CQ, valid GRH.
    let a = unsafe { udah::udah_create_ah_from_cq_ex(r, &raw mut cq.ex, &grh) };
    let e_ex = errno();
    // SAFETY: as above.
    let b = unsafe { udah::udah_create_ah_from_wc(r, &w, &grh) };
    assert!(a.is_null() && b.is_null());
    assert_eq!(e_ex, errno());
    // SAFETY: NULL GRH: EFAULT as the wc form.
    let a = unsafe { udah::udah_create_ah_from_cq_ex(r, &raw mut cq.ex, core::ptr::null()) };
    assert!(a.is_null());
    assert_eq!(errno(), libc::EFAULT);
    // SAFETY: a responder with no AHs out.
    unsafe { udah::udah_responder_destroy(r) };
}
