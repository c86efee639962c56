//! Occupancy: the table stays at least 90 % full before its first eviction
//! whatever the address distribution (a single 8-slot window per key would
//! evict first at 19–41 % load with scrambled addresses). Distinct keys, one `get_or_create` + `release`
//! each, until the backend sees the first destroy; for several seeds.
//! `benches/benches/ah_scale.rs` prints the same curve up to 2²⁰ slots.

mod common;

use core::sync::atomic::{AtomicU64, Ordering};

use udah_core::ah::{AhAttr, PortNum};
use udah_core::hal::{ErrorKind, ErrorType, Hal, L2Info, PortInfo};
use udah_core::table::AhTable;
use udah_core::wire::Gid;
use udah_core::{GidTable, LinkLayer};

/// A backend that counts creates and destroys (any key, GRH or not).
#[derive(Default)]
struct Counter {
    creates: AtomicU64,
    destroys: AtomicU64,
}

impl ErrorType for Counter {
    type Error = ErrorKind;
}

impl Hal for Counter {
    type Ah = u64;
    fn port_info(&self, p: PortNum) -> Result<PortInfo, ErrorKind> {
        Ok(PortInfo::new(p.get(), LinkLayer::Ethernet, 16))
    }
    fn snapshot_gids<const M: usize>(&self, _: PortNum, _: &mut GidTable<M>) -> Result<(), ErrorKind> {
        Ok(())
    }
    fn gid_generation(&self, _: PortNum) -> u64 {
        0
    }
    fn resolve_l2(&self, _: &AhAttr) -> Result<Option<L2Info>, ErrorKind> {
        Ok(None)
    }
    fn create_ah(&self, _: &AhAttr, _: Option<&L2Info>) -> Result<u64, ErrorKind> {
        Ok(self.creates.fetch_add(1, Ordering::Relaxed))
    }
    fn destroy_ah(&self, _: u64) -> Result<(), ErrorKind> {
        self.destroys.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

const N: usize = if cfg!(miri) { 256 } else { 1 << 13 };

/// SplitMix64's first output: a bijection of `x`.
fn scramble(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A RoCE peer in `fe80::/64` with interface identifier `id`.
fn link_local(id: u64) -> AhAttr {
    let mut g = [0u8; 16];
    g[..2].copy_from_slice(&[0xfe, 0x80]);
    g[8..].copy_from_slice(&id.to_be_bytes());
    let base = common::attr(0);
    AhAttr { grh: base.grh.map(|r| udah_core::ah::GlobalRoute { dgid: Gid(g), ..r }), ..base }
}

/// An InfiniBand peer without GRH: LID `i`, SL and path bits from `i`'s
/// high bits (at most 2¹⁶ · 16 · 8 distinct keys).
fn infiniband(i: u64) -> AhAttr {
    AhAttr {
        dlid: i as u16,
        sl: udah_core::ah::Sl::new((i >> 16) as u8 & 15).unwrap(),
        src_path_bits: (i >> 20) as u8 & 7,
        grh: None,
        ..common::attr(0)
    }
}

/// The load factor at which a table seeded `seed` first evicts.
fn first_eviction(seed: u64, key: impl Fn(u64) -> AhAttr) -> f64 {
    let hal = Counter::default();
    let table: Box<AhTable<Counter, N>> = Box::new(AhTable::with_seed(seed));
    let mut cached = 0usize;
    for i in 0..N as u64 {
        let h = table.get_or_create(&hal, &key(i)).expect("a slot, by eviction if need be");
        table.release(&hal, h).unwrap();
        if hal.destroys.load(Ordering::Relaxed) > 0 {
            break;
        }
        cached += 1;
    }
    let st = table.stats();
    assert_eq!(st.evictions, hal.destroys.load(Ordering::Relaxed));
    cached as f64 / N as f64
}

#[test]
fn at_least_90_percent_full_before_the_first_eviction() {
    let kinds: [(&str, &dyn Fn(u64) -> AhAttr); 5] = [
        ("consecutive IPv4 (10.x.y.z)", &|i| common::attr(i as u32)),
        ("consecutive link-local", &link_local),
        ("scrambled link-local", &|i| link_local(scramble(i))),
        ("strided link-local (i << 20)", &|i| link_local(i << 20)),
        ("InfiniBand LIDs", &infiniband),
    ];
    for seed in [0, 1, 0xdead_beef] {
        for (name, key) in kinds {
            let load = first_eviction(seed, key);
            eprintln!("{N} slots, seed {seed:#x}, {name}: first eviction at {:.1} %", 100.0 * load);
            assert!(load >= 0.90, "{name}, seed {seed:#x}: first eviction at {:.1} % load", 100.0 * load);
        }
    }
}
