//! The WC → AH-attribute hot path allocates nothing.
//!
//! The core is `no_std` without `alloc`, so the compiler already proves it
//! cannot allocate; this test checks the same from the outside with a
//! counting global allocator (counting per thread, so that the test
//! harness's own threads do not interfere).

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;
use std::alloc::System;

use udah_core::ah::{IB_WC_GRH, IB_WC_WITH_VLAN, IBV_WC_GRH, IbvWc, KernelWc, kernel, libibverbs};
use udah_core::wire::{Evidence, Gid, GrhRepr, Ipv4Repr, NetworkType, Stamp, detect};
use udah_core::{GidEntry, GidTable, GidType, LinkLayer};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call unchanged to the system allocator; the only
// addition is a thread-local counter update, which does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

#[test]
fn wc_to_ah_does_not_allocate() {
    // Build the inputs first (this may allocate; it is not the hot path).
    let mut roce: GidTable<256> = GidTable::new(1, LinkLayer::Ethernet, 256);
    roce.set(3, GidEntry::new(Gid::from_ipv4([192, 168, 1, 10]), GidType::RoceV2)).unwrap();
    roce.set(4, GidEntry::new(Gid::from_ipv4([10, 0, 0, 1]), GidType::RoceV2).with_vlan(100)).unwrap();
    let v6: Gid = "2001:db8::10".parse::<core::net::Ipv6Addr>().unwrap().into();
    roce.set(5, GidEntry::new(v6, GidType::RoceV2)).unwrap();
    let mut ib: GidTable<64> = GidTable::new(1, LinkLayer::Infiniband, 64);
    let ib_gid: Gid = "fe80::2:c903:11:2233".parse::<core::net::Ipv6Addr>().unwrap().into();
    ib.set(0, GidEntry::new(ib_gid, GidType::Ib)).unwrap();

    let mut ip4 = [0u8; 40];
    Ipv4Repr {
        ttl: 64,
        protocol: 17,
        total_len: 60,
        src: [192, 168, 1, 20],
        dst: [192, 168, 1, 10],
        ..Ipv4Repr::default()
    }
    .emit(&mut ip4);
    let mut stamped = ip4;
    detect::stamp(&mut stamped, &Stamp::DEFAULT);
    let mut ip6 = [0u8; 40];
    GrhRepr {
        next_header: 17,
        hop_limit: 64,
        sgid: "2001:db8::20".parse::<core::net::Ipv6Addr>().unwrap().into(),
        dgid: v6,
        ..GrhRepr::default()
    }
    .emit(&mut ip6);
    let mut ibgrh = [0u8; 40];
    GrhRepr { next_header: 0x1b, hop_limit: 1, sgid: ib_gid, dgid: ib_gid, ..GrhRepr::default() }.emit(&mut ibgrh);
    let areas = [ip4, stamped, ip6, ibgrh, [0u8; 40], [0xffu8; 40]];
    let uwc = IbvWc { wc_flags: IBV_WC_GRH, ..IbvWc::default() };
    let kwc = KernelWc { wc_flags: IB_WC_GRH | IB_WC_WITH_VLAN, vlan_id: 100, ..KernelWc::default() };
    let evidence = [Evidence::None, Evidence::Stamped(Stamp::DEFAULT), Evidence::NetworkType(NetworkType::Ipv4)];

    let before = allocs();
    let mut ok = 0u32;
    for _ in 0..1000 {
        for a in &areas {
            for ev in evidence {
                ok += u32::from(libibverbs::init_ah_from_wc_with(&roce, 1, &uwc, Some(a), ev).is_ok());
                ok += u32::from(kernel::init_ah_attr_from_wc_with(&roce, &kwc, Some(a), ev).is_ok());
                ok += u32::from(kernel::init_ah_attr_from_wc_with(&ib, &kwc, Some(a), ev).is_ok());
            }
            ok += u32::from(libibverbs::init_ah_from_wc(&ib, 1, &uwc, Some(a)).is_ok());
        }
        ok += u32::from(libibverbs::init_ah_from_wc(&roce, 1, &uwc, None).is_ok());
    }
    let after = allocs();
    assert_eq!(after - before, 0, "the hot path allocated");
    assert!(ok > 0, "the inputs must exercise successful paths too");
}
