//! The C responder's tests, against a fake create/destroy.

use super::*;
use core::sync::atomic::AtomicUsize;

/// A fake `ibv_create_ah` (a fresh heap address per AH) and
/// `ibv_destroy_ah`, counting into their own two statics.
macro_rules! fake_verbs {
    ($create:ident, $destroy:ident, $created:ident, $destroyed:ident) => {
        static $created: AtomicUsize = AtomicUsize::new(0);
        static $destroyed: AtomicUsize = AtomicUsize::new(0);

        unsafe extern "C" fn $create(_pd: *mut ibv_pd, _attr: *mut ibv_ah_attr) -> *mut ibv_ah {
            $created.fetch_add(1, Ordering::SeqCst);
            Box::into_raw(Box::new(0u64)).cast()
        }

        unsafe extern "C" fn $destroy(ah: *mut ibv_ah) -> i32 {
            $destroyed.fetch_add(1, Ordering::SeqCst);
            // SAFETY: every AH comes from the create's `Box<u64>`.
            drop(unsafe { Box::from_raw(ah.cast::<u64>()) });
            0
        }
    };
}

fake_verbs!(fake_create, fake_destroy, CREATED, DESTROYED);
// The multi-threaded test's own, so that its counts are exact.
fake_verbs!(mt_create, mt_destroy, MT_CREATED, MT_DESTROYED);

pub(super) fn v4_area(src: [u8; 4], dst: [u8; 4]) -> Area {
    let mut a = [0u8; 40];
    let h = [0x45, 0, 0, 0x3c, 0, 0, 0x40, 0, 0x40, 0x11, 0, 0];
    a[20..32].copy_from_slice(&h);
    a[32..36].copy_from_slice(&src);
    a[36..40].copy_from_slice(&dst);
    a
}

#[test]
fn identical_completions_share_one_ah_until_the_last_reference() {
    let local = [192, 168, 1, 10];
    let gids = gids_from_list(1, LinkLayer::Ethernet, 16, [(3, GidEntry::new(Gid::from_ipv4(local), GidType::RoceV2))])
        .unwrap();
    let pd = core::ptr::NonNull::<ibv_pd>::dangling().as_ptr();
    let verbs = Verbs { create_ah: fake_create, destroy_ah: fake_destroy };
    // SAFETY: the fake verbs never dereference `pd`.
    let r = unsafe { Responder::from_gids(gids, pd, verbs) }.unwrap();
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    let a = v4_area([192, 168, 1, 20], local);
    let b = v4_area([192, 168, 1, 21], local);

    let ah1 = r.create_ah_from_wc(&wc, &a).unwrap();
    let ah2 = r.create_ah_from_wc(&wc, &a).unwrap();
    let ah3 = r.create_ah_from_wc(&wc, &b).unwrap();
    assert_eq!(ah1, ah2);
    assert_ne!(ah1, ah3);
    let s = r.stats();
    assert_eq!((s.create_calls, s.kernel_ahs_created, s.ah_hits, s.ahs_outstanding), (3, 2, 1, 3));

    // Not ours: refused, nothing released.
    assert_eq!(r.destroy_ah(AhPtr(8)), Err(libc::EINVAL));
    assert_eq!(r.close(), Err(libc::EBUSY));
    r.destroy_ah(ah1).unwrap();
    r.destroy_ah(ah2).unwrap();
    assert_eq!(r.destroy_ah(ah2), Err(libc::EINVAL), "given back more often than handed out");
    r.destroy_ah(ah3).unwrap();
    assert_eq!(r.stats().ahs_outstanding, 0);
    // Cached until the responder closes: then every kernel AH is gone.
    r.close().unwrap();
    let s = r.stats();
    assert_eq!((s.kernel_ahs_created, s.kernel_ahs_destroyed, s.kernel_ahs_live), (2, 2, 0));
    assert!(CREATED.load(Ordering::SeqCst) >= 2 && DESTROYED.load(Ordering::SeqCst) >= 2);
}

pub(super) fn v4_responder(local: [u8; 4]) -> Responder {
    v4_responder_with(local, Verbs { create_ah: fake_create, destroy_ah: fake_destroy })
}

/// A responder on port 1 with `local` at GID index 3, over fake `verbs`.
fn v4_responder_with(local: [u8; 4], verbs: Verbs) -> Responder {
    let gids = gids_from_list(1, LinkLayer::Ethernet, 16, [(3, GidEntry::new(Gid::from_ipv4(local), GidType::RoceV2))])
        .unwrap();
    let pd = core::ptr::NonNull::<ibv_pd>::dangling().as_ptr();
    // SAFETY: the fake verbs never dereference `pd`.
    unsafe { Responder::from_gids(gids, pd, verbs) }.unwrap()
}

#[test]
fn threads_share_one_ah_and_give_every_reference_back() {
    let local = [10, 0, 0, 1];
    let r = v4_responder(local);
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    let a = v4_area([10, 0, 0, 2], local);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..500 {
                    let ah = r.create_ah_from_wc(&wc, &a).unwrap();
                    let again = r.create_ah_from_wc(&wc, &a).unwrap();
                    assert_eq!(ah, again);
                    r.destroy_ah(again).unwrap();
                    r.destroy_ah(ah).unwrap();
                }
            });
        }
    });
    let s = r.stats();
    assert_eq!((s.create_calls, s.create_failures, s.ahs_outstanding), (4000, 0, 0));
    assert_eq!(s.kernel_ahs_created, 1, "one kernel AH for one peer: {s:?}");
    r.close().unwrap();
    assert_eq!(r.stats().kernel_ahs_live, 0);
}

#[test]
fn threads_create_and_destroy_same_and_different_ahs_and_the_counts_balance() {
    let local = [10, 0, 0, 1];
    let r = v4_responder_with(local, Verbs { create_ah: mt_create, destroy_ah: mt_destroy });
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    let (threads, rounds) = if cfg!(miri) { (3u8, 20usize) } else { (4, 2000) };
    let shared = v4_area([10, 0, 0, 2], local);
    let (tx, rx) = std::sync::mpsc::channel::<AhPtr>();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (r, tx) = (&r, tx.clone());
            s.spawn(move || {
                let own = v4_area([10, 0, 1, t], local);
                for i in 0..rounds {
                    let a = r.create_ah_from_wc(&wc, &shared).unwrap();
                    let b = r.create_ah_from_wc(&wc, &own).unwrap();
                    // One of four peers the threads have in common.
                    let c = r.create_ah_from_wc(&wc, &v4_area([10, 0, 2, (i % 4) as u8], local)).unwrap();
                    assert_ne!(a, b);
                    let (_, e) = r.init_ah_from_wc(&wc, Some(&own), Profile::Libibverbs, Evidence::None);
                    assert_eq!(e, 0);
                    // Given back in another order than taken; one of
                    // every 8 on another thread.
                    r.destroy_ah(b).unwrap();
                    if i % 8 == 0 {
                        tx.send(a).unwrap()
                    } else {
                        r.destroy_ah(a).unwrap()
                    }
                    r.destroy_ah(c).unwrap();
                }
            });
        }
        drop(tx);
        // The collector: gives back what the others sent.
        let r = &r;
        s.spawn(move || {
            for ah in rx {
                r.destroy_ah(ah).unwrap();
            }
        });
    });
    let calls = u64::from(threads) * rounds as u64;
    let s = r.stats();
    assert_eq!((s.create_calls, s.create_failures, s.destroy_calls, s.ahs_outstanding), (3 * calls, 0, 3 * calls, 0));
    // One kernel AH per peer: the shared one, one per thread, the four.
    assert_eq!(s.kernel_ahs_created, 1 + u64::from(threads) + 4, "{s:?}");
    // Nothing is out any more: a further give-back of each is refused.
    let again = r.create_ah_from_wc(&wc, &shared).unwrap();
    r.destroy_ah(again).unwrap();
    assert_eq!(r.destroy_ah(again), Err(libc::EINVAL), "double destroy");
    assert_eq!(r.destroy_ah(AhPtr(16)), Err(libc::EINVAL), "not ours");
    r.close().unwrap();
    let s = r.stats();
    assert_eq!(
        (s.kernel_ahs_created, s.kernel_ahs_destroyed, s.kernel_ahs_live),
        (s.kernel_ahs_created, s.kernel_ahs_created, 0)
    );
    assert_eq!(MT_CREATED.load(Ordering::SeqCst), MT_DESTROYED.load(Ordering::SeqCst));
    assert_eq!(MT_CREATED.load(Ordering::SeqCst) as u64, s.kernel_ahs_created);
}

#[test]
fn a_reference_out_keeps_close_busy_and_its_slot_counted() {
    let local = [10, 0, 0, 1];
    let r = v4_responder(local);
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    let a = v4_area([10, 0, 0, 2], local);
    let ah = r.create_ah_from_wc(&wc, &a).unwrap();
    let (_, e) = r.init_ah_from_wc(&wc, Some(&a), Profile::Libibverbs, Evidence::None);
    assert_eq!(e, 0);
    assert_eq!(r.close(), Err(libc::EBUSY));
    // Another thread gives it back; then it is unknown.
    std::thread::scope(|s| {
        s.spawn(|| r.destroy_ah(ah).unwrap());
    });
    assert_eq!(r.destroy_ah(ah), Err(libc::EINVAL));
    assert_eq!(r.stats().ahs_outstanding, 0);
    r.close().unwrap();
    assert_eq!(r.stats().kernel_ahs_live, 0);
}

#[test]
fn retire_dgid_retires_only_that_peer_and_a_held_ah_stays_valid() {
    let local = [10, 0, 0, 1];
    let r = v4_responder(local);
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    let b = r.create_ah_from_wc(&wc, &v4_area([10, 0, 0, 2], local)).unwrap();
    let c = r.create_ah_from_wc(&wc, &v4_area([10, 0, 0, 3], local)).unwrap();
    let mut other = [0u8; 16];
    other[10..12].copy_from_slice(&[0xff, 0xff]);
    other[12..].copy_from_slice(&[10, 0, 0, 9]);
    assert_eq!(r.retire_dgid(&Gid(other)), 0, "no AH to that peer");
    let mut gid_b = other;
    gid_b[12..].copy_from_slice(&[10, 0, 0, 2]);
    assert_eq!(r.retire_dgid(&Gid(gid_b)), 1);
    assert_eq!(r.is_current(b), Ok(false), "retired, still held");
    assert_eq!(r.is_current(c), Ok(true), "another peer");
    assert_eq!(r.stats().kernel_ahs_live, 2, "the held AH is not destroyed");
    r.destroy_ah(b).unwrap();
    assert_eq!(r.stats().kernel_ahs_live, 1, "destroyed at its last give-back");
    let again = r.create_ah_from_wc(&wc, &v4_area([10, 0, 0, 2], local)).unwrap();
    assert_eq!(r.is_current(again), Ok(true), "a new AH for the peer");
    r.destroy_ah(again).unwrap();
    r.destroy_ah(c).unwrap();
    r.close().unwrap();
    assert_eq!(r.stats().kernel_ahs_live, 0);
}

#[test]
fn a_held_ah_reports_current_until_retired_and_unknown_after_give_back() {
    let local = [10, 0, 0, 1];
    let r = v4_responder(local);
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    let ah = r.create_ah_from_wc(&wc, &v4_area([10, 0, 0, 2], local)).unwrap();
    let again = r.create_ah_from_wc(&wc, &v4_area([10, 0, 0, 2], local)).unwrap();
    assert_eq!(ah, again);
    assert_eq!(r.is_current(ah), Ok(true));
    assert_eq!(r.is_current(AhPtr(16)), Err(libc::EINVAL), "not ours");
    assert_eq!(r.retire_dgid(&Gid::from_ipv4([10, 0, 0, 2])), 1);
    assert_eq!(r.is_current(ah), Ok(false), "retired, still held");
    r.destroy_ah(ah).unwrap();
    assert_eq!(r.is_current(ah), Ok(false), "one reference still out");
    r.destroy_ah(again).unwrap();
    assert_eq!(r.is_current(ah), Err(libc::EINVAL), "given back");
    r.close().unwrap();
    assert_eq!(r.stats().kernel_ahs_live, 0);
}

#[test]
fn an_attribute_and_its_completion_share_the_core_cache_entry() {
    let local = [10, 0, 0, 1];
    let r = v4_responder(local);
    let a = v4_area([10, 0, 0, 2], local);
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    let from_wc = r.create_ah_from_wc(&wc, &a).unwrap();
    let (attr, e) = r.init_ah_from_wc(&wc, Some(&a), Profile::Libibverbs, Evidence::None);
    assert_eq!(e, 0);
    assert_eq!(r.create_ah(&attr).unwrap(), from_wc, "one cache, one key form");
    // An SL above 15 reaches the cache as words and is refused there as
    // an invalid attribute (EINVAL), without a kernel AH.
    let bad = IbvWc { sl: 16, ..wc };
    assert_eq!(r.create_ah_from_wc(&bad, &a), Err(AhFailure::Attr(libc::EINVAL)));
    assert_eq!(r.create_ah(&IbvAhAttr { sl: 16, ..attr }), Err(AhFailure::Attr(libc::EINVAL)));
    let s = r.stats();
    assert_eq!(
        (s.create_calls, s.create_failures, s.kernel_ahs_created, s.ah_hits, s.ahs_outstanding, s.gid_generation),
        (4, 2, 1, 1, 2, 1)
    );
    r.destroy_ah(from_wc).unwrap();
    r.destroy_ah(from_wc).unwrap();
    r.close().unwrap();
    assert_eq!(r.stats().kernel_ahs_live, 0);
}

#[test]
fn each_responder_draws_its_own_table_seed() {
    // Two draws agree with probability 2^-64.
    assert_ne!(random_seed(), random_seed());
}

#[test]
fn kernel_profile_through_the_c_attribute() {
    let local = [10, 0, 0, 1];
    let r = v4_responder(local);
    let a = v4_area([10, 0, 0, 2], local);
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, sl: 2, ..IbvWc::default() };
    let (attr, e) = r.init_ah_from_wc(&wc, Some(&a), Profile::Kernel, Evidence::None);
    assert_eq!(e, 0);
    assert_eq!((attr.grh.sgid_index, attr.grh.hop_limit, attr.is_global, attr.sl), (3, 0xff, 1, 2));
    assert_eq!(attr.grh.dgid, Gid::from_ipv4([10, 0, 0, 2]).0);
    // The libibverbs profile copies the received TTL instead.
    let (attr, _) = r.init_ah_from_wc(&wc, Some(&a), Profile::Libibverbs, Evidence::None);
    assert_eq!(attr.grh.hop_limit, 64);
    // A RoCE completion without IB_WC_GRH: the kernel refuses it.
    let (_, e) = r.init_ah_from_wc(&IbvWc::default(), Some(&a), Profile::Kernel, Evidence::None);
    assert_eq!(e, libc::EPROTOTYPE);
    // Evidence that contradicts the bytes.
    let ev = Evidence::NetworkType(udah_core::wire::NetworkType::Ipv6);
    let (_, e) = r.init_ah_from_wc(&wc, Some(&a), Profile::Libibverbs, ev);
    assert_eq!(e, libc::EPROTO);
}

#[test]
fn failures_keep_the_c_attribute_and_errno() {
    let gids = gids_from_list(1, LinkLayer::Ethernet, 4, []).unwrap();
    // SAFETY: no PD.
    let r = unsafe { Responder::from_gids(gids, core::ptr::null_mut(), Verbs::libibverbs()) }.unwrap();
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    let a = v4_area([10, 0, 0, 2], [10, 0, 0, 1]);
    let (_, e) = r.init_ah_from_wc(&wc, Some(&a), Profile::Libibverbs, Evidence::None);
    assert_eq!(e, libc::EINVAL);
    let (attr, e) = r.init_ah_from_wc(&wc, None, Profile::Libibverbs, Evidence::None);
    assert_eq!((attr, e), (IbvAhAttr::default(), libc::EFAULT));
    // The GID is not found: no AH, and the failure is counted.
    assert_eq!(r.create_ah_from_wc(&wc, &a), Err(AhFailure::Attr(libc::EINVAL)));
    assert_eq!(r.stats().create_failures, 1);
    assert_eq!(r.refresh(), Err(libc::EOPNOTSUPP));
    assert_eq!(r.handle_event(crate::ffi::IBV_EVENT_GID_CHANGE, Some(1)), Err(libc::EOPNOTSUPP));
    assert_eq!(r.handle_event(crate::ffi::IBV_EVENT_GID_CHANGE, Some(2)), Ok(false));
    assert_eq!(gids_from_list(1, LinkLayer::Ethernet, 2000, []).unwrap_err(), Errno(libc::E2BIG));
}

#[test]
fn a_configured_capacity_holds_more_peers_than_the_default() {
    let gids = gids_from_list(
        1,
        LinkLayer::Ethernet,
        16,
        [(3, GidEntry::new(Gid::from_ipv4([10, 0, 0, 1]), GidType::RoceV2))],
    )
    .unwrap();
    let pd = core::ptr::NonNull::<ibv_pd>::dangling().as_ptr();
    let verbs = Verbs { create_ah: fake_create, destroy_ah: fake_destroy };
    let options = Options { ah_slots: 1 << 16, ..Options::default() };
    // SAFETY: the fake verbs never dereference `pd`.
    let r = unsafe { Responder::from_gids_with(gids, pd, verbs, options) }.unwrap();
    assert_eq!(r.ah_slots(), 1 << 16);
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    let peers = if cfg!(miri) { 64u32 } else { 20_000 };
    let held: Vec<AhPtr> = (0..peers)
        .map(|i| {
            let [_, a, b, c] = i.to_be_bytes();
            r.create_ah_from_wc(&wc, &v4_area([10, a, b, c], [10, 0, 0, 1])).unwrap()
        })
        .collect();
    let s = r.stats();
    assert_eq!((s.kernel_ahs_live, s.ahs_outstanding, s.ah_slots), (u64::from(peers), u64::from(peers), 1 << 16));
    for ah in held {
        r.destroy_ah(ah).unwrap();
    }
    r.close().unwrap();
    assert_eq!(r.stats().kernel_ahs_live, 0);
    // SAFETY: the fake verbs never dereference `pd`.
    let bad = unsafe {
        Responder::from_gids_with(
            gids_from_list(1, LinkLayer::Ethernet, 4, []).unwrap(),
            pd,
            verbs,
            Options { ah_slots: 2048, ..Options::default() },
        )
    };
    assert_eq!(bad.err(), Some(Errno(libc::EINVAL)), "2048 is not an offered capacity");
}

/// The destination whose create [`slow_create`] holds until `SLOW_GO`.
const SLOW_PEER: [u8; 4] = [10, 0, 9, 9];
static SLOW_IN: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
static SLOW_GO: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// `fake_create`, but a create for [`SLOW_PEER`] waits (as an
/// `ibv_create_ah` resolving an unanswered neighbour does) until `SLOW_GO`.
unsafe extern "C" fn slow_create(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    // SAFETY: the engine passes a valid attribute.
    let dgid = unsafe { (*attr).attr.grh.dgid };
    if dgid == Gid::from_ipv4(SLOW_PEER).0 {
        SLOW_IN.store(true, Ordering::SeqCst);
        while !SLOW_GO.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }
    // SAFETY: forwarded.
    unsafe { fake_create(pd, attr) }
}

#[test]
fn a_slow_create_blocks_neither_other_peers_nor_hits() {
    let local = [10, 0, 0, 1];
    let r = v4_responder_with(local, Verbs { create_ah: slow_create, destroy_ah: fake_destroy });
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    let known = r.create_ah_from_wc(&wc, &v4_area([10, 0, 0, 2], local)).unwrap();
    std::thread::scope(|s| {
        let slow = s.spawn(|| r.create_ah_from_wc(&wc, &v4_area(SLOW_PEER, local)));
        while !SLOW_IN.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // The slow create is in the "kernel" now. A hit, a new peer's miss,
        // an attribute's create, a give-back and the counters all go on (a
        // lock held across the slow create would hang here).
        let hit = r.create_ah_from_wc(&wc, &v4_area([10, 0, 0, 2], local)).unwrap();
        assert_eq!(hit, known);
        let other = r.create_ah_from_wc(&wc, &v4_area([10, 0, 0, 3], local)).unwrap();
        assert_ne!(other, known);
        r.destroy_ah(hit).unwrap();
        r.destroy_ah(other).unwrap();
        assert_eq!(r.stats().kernel_ahs_created, 2, "the slow one is still being created");
        assert!(!slow.is_finished());
        SLOW_GO.store(true, Ordering::SeqCst);
        let ah = slow.join().unwrap().unwrap();
        r.destroy_ah(ah).unwrap();
    });
    r.destroy_ah(known).unwrap();
    assert_eq!(r.stats().kernel_ahs_created, 3);
    r.close().unwrap();
}

#[test]
fn an_allow_list_refuses_strangers_before_the_table() {
    let local = [10, 0, 0, 1];
    let gids = gids_from_list(1, LinkLayer::Ethernet, 16, [(3, GidEntry::new(Gid::from_ipv4(local), GidType::RoceV2))])
        .unwrap();
    let pd = core::ptr::NonNull::<ibv_pd>::dangling().as_ptr();
    let verbs = Verbs { create_ah: fake_create, destroy_ah: fake_destroy };
    let admission = Admission::allow_all().allow_ipv4_subnet([10, 0, 0, 0], 24).unwrap();
    // SAFETY: the fake verbs never dereference `pd`.
    let r = unsafe { Responder::from_gids_with(gids, pd, verbs, Options { admission, ..Options::default() }) }.unwrap();
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    let friend = r.create_ah_from_wc(&wc, &v4_area([10, 0, 0, 2], local)).unwrap();
    let stranger = r.create_ah_from_wc(&wc, &v4_area([10, 0, 1, 2], local));
    assert_eq!(stranger.map_err(AhFailure::errno), Err(libc::EACCES));
    let s = r.stats();
    assert_eq!((s.refused, s.kernel_ahs_created, s.create_failures), (1, 1, 1));
    r.destroy_ah(friend).unwrap();
    r.close().unwrap();
}

#[test]
fn a_staged_batch_on_a_table_past_the_caches_answers_as_one_by_one() {
    let local = [10, 0, 0, 1];
    let pd = core::ptr::NonNull::<ibv_pd>::dangling().as_ptr();
    let verbs = Verbs { create_ah: fake_create, destroy_ah: fake_destroy };
    let gids = || {
        gids_from_list(1, LinkLayer::Ethernet, 16, [(3, GidEntry::new(Gid::from_ipv4(local), GidType::RoceV2))])
            .unwrap()
    };
    let admission = Admission::allow_all().allow_ipv4_subnet([10, 0, 0, 0], 16).unwrap();
    let big = Options { ah_slots: 1 << 20, admission };
    const { assert!(AhTable::<PdBackend, { 1 << 20 }>::PREFETCH, "the staged path is the one tested") };
    // SAFETY: the fake verbs never dereference `pd`.
    let staged = unsafe { Responder::from_gids_with(gids(), pd, verbs, big) }.unwrap();
    // SAFETY: as above.
    let single =
        unsafe { Responder::from_gids_with(gids(), pd, verbs, Options { admission, ..Options::default() }) }.unwrap();
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    // 100 requests: 40 peers (each twice or more), a stranger, a missing
    // area, a multicast destination the profile refuses.
    let areas: Vec<Area> = (0..100u8)
        .map(|i| match i {
            17 => v4_area([10, 1, 9, 9], local),
            53 => v4_area([10, 0, 0, 2], [224, 0, 0, 1]),
            _ => v4_area([10, 0, 3, i % 40], local),
        })
        .collect();
    let batch: Vec<(IbvWc, Option<&Area>)> =
        areas.iter().enumerate().map(|(i, a)| (wc, if i == 71 { None } else { Some(a) })).collect();
    let mut out = vec![Err(AhFailure::Table(0)); batch.len()];
    staged.create_ah_batch(&batch, &mut out);
    let one: Vec<Result<AhPtr, AhFailure>> = batch
        .iter()
        .map(|(wc, a)| match a {
            Some(a) => single.create_ah_from_wc(wc, a),
            None => Err(AhFailure::Attr(libc::EFAULT)),
        })
        .collect();
    let errs = |v: &[Result<AhPtr, AhFailure>]| v.iter().map(|r| r.err().map(AhFailure::errno)).collect::<Vec<_>>();
    assert_eq!(errs(&out), errs(&one), "the same failures at the same places");
    assert_eq!(out[17].err(), Some(AhFailure::Refused));
    assert_eq!(out[71].err().map(AhFailure::errno), Some(libc::EFAULT));
    for i in 0..100 {
        for j in 0..100 {
            if let (Ok(a), Ok(b), Ok(c), Ok(d)) = (out[i], out[j], one[i], one[j]) {
                assert_eq!(a == b, c == d, "requests {i} and {j} share an AH in one and not the other");
            }
        }
    }
    let (s, t) = (staged.stats(), single.stats());
    // The batch entry without an area is a request that failed (the
    // one-by-one emulation above never asked).
    assert_eq!((s.create_calls, s.create_failures), (t.create_calls + 1, t.create_failures + 1));
    assert_eq!(
        (s.kernel_ahs_created, s.ahs_outstanding, s.refused),
        (t.kernel_ahs_created, t.ahs_outstanding, t.refused)
    );
    assert_eq!(s.kernel_ahs_created, 40);
    for (r, ahs) in [(&staged, &out), (&single, &one)] {
        for ah in ahs.iter().flatten() {
            r.destroy_ah(*ah).unwrap();
        }
        r.close().unwrap();
    }
}

/// Waits for child `pid` for at most `secs` seconds: its exit status, or
/// `None` (then killed) when it did not end in time: a deadlock.
fn wait_child(pid: libc::pid_t, secs: u64) -> Option<i32> {
    let deadline = std::time::Instant::now() + core::time::Duration::from_secs(secs);
    loop {
        let mut status = 0;
        // SAFETY: `pid` is this process's child; `status` is a valid out-pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == pid {
            return Some(if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 });
        }
        if std::time::Instant::now() > deadline {
            // SAFETY: killing and reaping our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            // SAFETY: as above.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            return None;
        }
        std::thread::sleep(core::time::Duration::from_millis(5));
    }
}

#[test]
fn forks_while_four_threads_create_and_destroy_and_every_child_goes_on() {
    let local = [10, 0, 0, 1];
    let r = v4_responder(local);
    let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, ..IbvWc::default() };
    let stop = core::sync::atomic::AtomicBool::new(false);
    let forks = if cfg!(miri) { 0u8 } else { 24 };
    let mut statuses = Vec::new();
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let (r, stop) = (&r, &stop);
            s.spawn(move || {
                let mut i = 0u8;
                while !stop.load(Ordering::Relaxed) {
                    // Misses (new peers), hits, first hand-outs, last
                    // give-backs, and now and then a retirement.
                    let a = r.create_ah_from_wc(&wc, &v4_area([10, 0, t, i % 32], local)).unwrap();
                    let b = r.create_ah_from_wc(&wc, &v4_area([10, 0, t, i % 32], local)).unwrap();
                    r.destroy_ah(b).unwrap();
                    r.destroy_ah(a).unwrap();
                    if i.is_multiple_of(64) {
                        r.retire_dgid(&Gid::from_ipv4([10, 0, t, 0]));
                    }
                    i = i.wrapping_add(1);
                }
            });
        }
        for k in 0..forks {
            std::thread::sleep(core::time::Duration::from_millis(2));
            // SAFETY: the child calls only this responder (whose windows
            // the fork handlers closed), malloc (fork safe in glibc), and
            // `_exit`.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // (References the parent's other threads held at the fork
                // stay counted in the child: nothing there gives them back.)
                let code = (|| {
                    let ah = r.create_ah_from_wc(&wc, &v4_area([10, 0, 9, k], local)).map_err(|_| 2)?;
                    let again = r.create_ah_from_wc(&wc, &v4_area([10, 0, 0, 7], local)).map_err(|_| 3)?;
                    r.destroy_ah(again).map_err(|_| 4)?;
                    r.destroy_ah(ah).map_err(|_| 5)?;
                    r.retire_dgid(&Gid::from_ipv4([10, 0, 1, 0]));
                    let _ = r.stats();
                    Ok::<i32, i32>(0)
                })()
                .unwrap_or_else(|e| e);
                // SAFETY: ends the child without running the parent's
                // destructors or test harness.
                unsafe { libc::_exit(code) };
            }
            assert!(pid > 0, "fork failed");
            statuses.push(wait_child(pid, 20));
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(statuses.iter().all(|s| *s == Some(0)), "children: {statuses:?} (None: deadlocked; 2-5: a step failed)");
    assert_eq!(r.stats().ahs_outstanding, 0);
    r.close().unwrap();
}
