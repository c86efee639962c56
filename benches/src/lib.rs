//! Benchmark fixtures and performance gates for udah.
//!
//! * GID tables of 4, 64 and 256 entries ([`Fixture`]) that look like real
//!   ports: link-local RoCE v1/v2 pairs, IPv4-mapped and IPv6 global pairs,
//!   some of them on VLANs, and an InfiniBand table with alias GIDs;
//! * packet builders for the four families of the foundation issue
//!   ([`Family`]), written with `udah_core::wire::{GrhRepr, Ipv4Repr}`;
//! * mixed input sets in a repeating and a seeded random order
//!   ([`Fixture::mixed`]);
//! * a loader for the public libibverbs corpus ([`corpus`], feature `corpus`);
//! * the real-libibverbs oracle's `--bench` ([`oracle`]), for the ratio;
//! * a plain if/else classifier ([`branchy`]) to show what branch-free code
//!   costs and saves;
//! * `#[no_mangle]` wrappers for the codegen audit ([`asm`]).
//!
//! Everything is deterministic: the same seed gives the same tables and
//! packets on every machine.

pub mod asm;
pub mod branchy;
pub mod callgrind;
#[cfg(feature = "corpus")]
pub mod corpus;
pub mod oracle;
pub mod report;
pub mod scale;

use udah_core::ah::{IB_WC_GRH, IB_WC_WITH_VLAN, IBV_WC_GRH, IBV_WC_WITH_IMM, IbvWc, KernelWc};
use udah_core::wire::{Area, GrhRepr, Ipv4Repr, grh};
use udah_core::{Gid, GidEntry, GidTable, GidType, LinkLayer};

/// The port number of every fixture table.
pub const PORT: u8 = 1;

/// The table sizes of the foundation issue.
pub const TABLE_SIZES: [usize; 3] = [4, 64, 256];

/// Cases per family in a fixture (a power of two, so that benches can cycle
/// with a mask).
pub const CASES_PER_FAMILY: usize = 64;

/// Length of the mixed input streams of the benches ([`Fixture::stream`]):
/// long enough that a random one has no learnable cycle.
pub const STREAM_LEN: usize = 1 << 16;

/// A small, seeded, deterministic generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator with this seed.
    pub const fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A random byte.
    pub fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }

    /// Random bytes.
    pub fn bytes<const L: usize>(&mut self) -> [u8; L] {
        let mut out = [0u8; L];
        for b in &mut out {
            *b = self.byte();
        }
        out
    }

    /// Shuffles `v` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// The four packet families of the foundation issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// InfiniBand without GRH (`IBV_WC_GRH` clear: no header, no search).
    IbNoGrh,
    /// RoCE v1: a GRH with next header `0x1B`.
    RoceV1,
    /// RoCE v2 over IPv6: next header 17.
    RoceV2Ipv6,
    /// RoCE v2 over IPv4: 20 undefined bytes, then an IPv4 header.
    RoceV2Ipv4,
}

impl Family {
    /// All four, in the order of the issue.
    pub const ALL: [Family; 4] = [Family::IbNoGrh, Family::RoceV1, Family::RoceV2Ipv6, Family::RoceV2Ipv4];

    /// A short name for bench ids and tables.
    pub const fn name(self) -> &'static str {
        match self {
            Family::IbNoGrh => "ib-nogrh",
            Family::RoceV1 => "rocev1",
            Family::RoceV2Ipv6 => "rocev2-ipv6",
            Family::RoceV2Ipv4 => "rocev2-ipv4",
        }
    }
}

/// One benchmark input: a completion for both profiles and its receive area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    /// The packet family.
    pub family: Family,
    /// The userspace completion (libibverbs profile).
    pub wc: IbvWc,
    /// The kernel completion (kernel profile).
    pub kwc: KernelWc,
    /// The 40-byte receive area.
    pub area: Area,
    /// The GID index the search must return (`None` for [`Family::IbNoGrh`]).
    pub index: Option<u32>,
}

/// One entry of a fixture table, as built (kept so that packets can aim at it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Table index.
    pub index: u32,
    /// The entry.
    pub entry: GidEntry,
}

/// GID tables of capacity and length `N` (every slot valid) and the cases
/// built against them.
#[derive(Debug, Clone)]
pub struct Fixture<const N: usize> {
    /// The Ethernet (RoCE) port's table.
    pub roce: GidTable<N>,
    /// The InfiniBand port's table (kernel profile, [`Family::IbNoGrh`]).
    pub ib: GidTable<N>,
    /// The RoCE table's entries.
    pub roce_slots: Vec<Slot>,
    /// [`CASES_PER_FAMILY`] cases per family, grouped by family in the order
    /// of [`Family::ALL`].
    pub cases: Vec<Case>,
}

/// The order of a mixed input set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Families in a fixed round-robin cycle (IB, v1, v2-IPv6, v2-IPv4, IB, …):
    /// the branch predictor learns it.
    Repeating,
    /// The same inputs shuffled with a fixed seed: nothing to learn.
    Random,
}

impl Order {
    /// A short name for bench ids.
    pub const fn name(self) -> &'static str {
        match self {
            Order::Repeating => "repeating",
            Order::Random => "random",
        }
    }
}

/// The MAC-derived interface id of our NIC.
const OUR_IID: [u8; 8] = [0x02, 0x1b, 0x21, 0xff, 0xfe, 0x5a, 0x3c, 0x10];

fn gid_from(prefix: [u8; 8], iid: [u8; 8]) -> Gid {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&prefix);
    g[8..].copy_from_slice(&iid);
    Gid(g)
}

/// The `k`-th GID of a RoCE table after the link-local pair: alternately an
/// IPv4-mapped address and a global IPv6 address.
fn roce_gid(k: usize) -> Gid {
    let k16 = k as u16;
    if k.is_multiple_of(2) {
        Gid::from_ipv4([10, (k / 250) as u8, (k % 250) as u8 + 1, 10])
    } else {
        let [a, b] = k16.to_be_bytes();
        gid_from([0x20, 0x01, 0x0d, 0xb8, 0x00, 0x10, a, b], OUR_IID)
    }
}

impl<const N: usize> Fixture<N> {
    /// Builds the tables and [`CASES_PER_FAMILY`] cases per family from `seed`.
    ///
    /// The RoCE table holds `N / 2` (GID, VLAN) pairs, each as RoCE v1 at an
    /// even index and RoCE v2 at the next one: the link-local GID first, then
    /// IPv4-mapped and IPv6 global addresses in turn, every third pair on a
    /// VLAN. The IB table holds the port GID at index 0 and alias GIDs with
    /// other subnet prefixes after it. Search targets are spread uniformly
    /// over the table, so a linear scan would pay on average half the table.
    pub fn new(seed: u64) -> Fixture<N> {
        assert!(N >= 4 && N.is_multiple_of(2), "fixture tables need an even size of at least 4");
        let len = N as u32;
        let mut roce = GidTable::new(PORT, LinkLayer::Ethernet, len);
        let mut ib = GidTable::new(PORT, LinkLayer::Infiniband, len);
        let mut roce_slots = Vec::with_capacity(N);
        for pair in 0..N / 2 {
            let gid = if pair == 0 { gid_from([0xfe, 0x80, 0, 0, 0, 0, 0, 0], OUR_IID) } else { roce_gid(pair - 1) };
            let vlan = (pair % 3 == 2).then_some(100 + pair as u16);
            for (off, ty) in [(0u32, GidType::RoceV1), (1, GidType::RoceV2)] {
                let mut entry = GidEntry::new(gid, ty).with_ifindex(2 + u32::from(vlan.is_some()));
                if let Some(v) = vlan {
                    entry = entry.with_vlan(v);
                }
                let index = 2 * pair as u32 + off;
                roce.set(index, entry).expect("fixture RoCE entry");
                roce_slots.push(Slot { index, entry });
            }
        }
        for i in 0..N {
            let prefix =
                if i == 0 { [0xfe, 0x80, 0, 0, 0, 0, 0, 0] } else { [0xfe, 0xc0, 0, 0, 0, 0, (i >> 8) as u8, i as u8] };
            ib.set(i as u32, GidEntry::new(gid_from(prefix, OUR_IID), GidType::Ib)).expect("fixture IB entry");
        }
        let mut rng = Rng::new(seed);
        let mut cases = Vec::with_capacity(4 * CASES_PER_FAMILY);
        for family in Family::ALL {
            for _ in 0..CASES_PER_FAMILY {
                cases.push(build_case(family, &roce_slots, &mut rng));
            }
        }
        Fixture { roce, ib, roce_slots, cases }
    }

    /// The cases of one family.
    pub fn family(&self, family: Family) -> &[Case] {
        let k = Family::ALL.iter().position(|f| *f == family).unwrap_or(0);
        &self.cases[k * CASES_PER_FAMILY..(k + 1) * CASES_PER_FAMILY]
    }

    /// All cases mixed: round-robin over the families ([`Order::Repeating`])
    /// or the same list shuffled with `seed` ([`Order::Random`]).
    pub fn mixed(&self, order: Order, seed: u64) -> Vec<Case> {
        let mut out = Vec::with_capacity(self.cases.len());
        for i in 0..CASES_PER_FAMILY {
            for f in Family::ALL {
                out.push(self.family(f)[i]);
            }
        }
        if order == Order::Random {
            Rng::new(seed).shuffle(&mut out);
        }
        out
    }

    /// An input stream over the cases of [`Fixture::mixed`]`(Repeating, _)`:
    /// `len` indices into that list. [`Order::Repeating`] walks the list
    /// round and round (a cycle of 256 whose families repeat every 4);
    /// [`Order::Random`] draws every index uniformly with `seed`, so that no
    /// cycle shorter than `len` exists for the branch predictor to learn
    /// (a shuffled list of 256, cycled, could be learnt).
    pub fn stream(&self, order: Order, len: usize, seed: u64) -> Vec<u16> {
        let n = self.cases.len();
        let mut rng = Rng::new(seed);
        (0..len)
            .map(|i| match order {
                Order::Repeating => (i % n) as u16,
                Order::Random => rng.below(n) as u16,
            })
            .collect()
    }

    /// The table the kernel profile uses for a case: IB for
    /// [`Family::IbNoGrh`], else RoCE.
    pub fn kernel_table(&self, family: Family) -> &GidTable<N> {
        if family == Family::IbNoGrh { &self.ib } else { &self.roce }
    }
}

/// A remote address of the same kind as `local` (IPv4-mapped, link-local or
/// global IPv6), so that the kernel profile sees no family mismatch.
fn remote_for(local: &Gid, rng: &mut Rng) -> Gid {
    if let Some([a, b, _, _]) = local.ipv4() {
        Gid::from_ipv4([a, b, rng.byte() | 1, rng.byte().max(2)])
    } else {
        let mut g = local.0;
        g[8..].copy_from_slice(&rng.bytes::<8>());
        Gid(g)
    }
}

fn build_case(family: Family, slots: &[Slot], rng: &mut Rng) -> Case {
    let slid = rng.next_u64() as u16 | 1;
    let sl = rng.byte() & 0xf;
    let mut wc = IbvWc {
        wc_flags: IBV_WC_GRH,
        slid,
        sl,
        dlid_path_bits: 0,
        src_qp: rng.next_u64() as u32 & 0xff_ffff,
        pkey_index: 0,
    };
    let mut kwc = KernelWc { wc_flags: IB_WC_GRH, slid: u32::from(slid), sl, src_qp: wc.src_qp, ..KernelWc::default() };
    let want_v2 = matches!(family, Family::RoceV2Ipv6 | Family::RoceV2Ipv4);
    // Targets of the right class and address kind, anywhere in the table.
    let candidates: Vec<&Slot> = slots
        .iter()
        .filter(|s| (s.entry.gid_type == GidType::RoceV2) == want_v2)
        .filter(|s| match family {
            Family::RoceV2Ipv4 => s.entry.gid.is_ipv4_mapped(),
            Family::RoceV2Ipv6 => !s.entry.gid.is_ipv4_mapped(),
            _ => true,
        })
        .collect();
    let mut area = [0u8; 40];
    let mut index = None;
    match family {
        Family::IbNoGrh => {
            // No GRH: the area holds whatever the buffer held before.
            area = rng.bytes::<40>();
            wc.wc_flags = IBV_WC_WITH_IMM * u32::from(rng.byte() & 1);
            wc.dlid_path_bits = rng.byte() & 0x7;
            kwc.wc_flags = 0;
            kwc.dlid_path_bits = wc.dlid_path_bits;
        }
        Family::RoceV1 | Family::RoceV2Ipv6 | Family::RoceV2Ipv4 => {
            let target = candidates[rng.below(candidates.len())];
            index = Some(target.index);
            let local = target.entry.gid;
            let remote = remote_for(&local, rng);
            if let Some(v) = target.entry.vlan {
                kwc.wc_flags |= IB_WC_WITH_VLAN;
                kwc.vlan_id = v;
            }
            if family == Family::RoceV2Ipv4 {
                let (Some(dst), Some(src)) = (local.ipv4(), remote.ipv4()) else { unreachable!("IPv4 target") };
                let mut repr = Ipv4Repr {
                    tos: rng.byte() & 0xfc,
                    total_len: 28 + 12 + 256,
                    ident: rng.next_u64() as u16,
                    flags_frag: 0x4000,
                    ttl: 64,
                    protocol: 17,
                    src,
                    dst,
                };
                loop {
                    // The undefined front: stale bytes, a quarter of them
                    // from an earlier GRH (first nibble 6, so libibverbs
                    // decides by its checksum).
                    area = rng.bytes::<40>();
                    let hi = [0x60, 0x00, 0x40, 0xa0][rng.below(4)];
                    area[0] = hi | (area[0] & 0xf);
                    repr.emit(&mut area);
                    let c = udah_core::ah::libibverbs::classify(&area);
                    let k = udah_core::ah::kernel::net_type_by_grh(&area);
                    if c.is_ipv4 && k == udah_core::wire::NetworkType::Ipv4 {
                        break;
                    }
                    repr.ident = repr.ident.wrapping_add(1);
                }
            } else {
                let repr = GrhRepr {
                    traffic_class: rng.byte() & 0xfc,
                    flow_label: rng.next_u64() as u32 & 0xf_ffff,
                    payload_len: 12 + 256 + 4,
                    next_header: if family == Family::RoceV1 { grh::NEXT_HDR_IBA } else { grh::NEXT_HDR_UDP },
                    hop_limit: if family == Family::RoceV1 { 1 } else { 64 },
                    sgid: remote,
                    dgid: local,
                };
                repr.emit(&mut area);
            }
        }
    }
    Case { family, wc, kwc, area, index }
}

/// The 4-, 64- and 256-entry fixtures with the default seed.
pub fn fixtures() -> (Fixture<4>, Fixture<64>, Fixture<256>) {
    (Fixture::new(SEED), Fixture::new(SEED), Fixture::new(SEED))
}

/// The default seed of every fixture.
pub const SEED: u64 = 0x5eed_0dab;

#[cfg(test)]
mod test {
    use super::*;
    use udah_core::ah::{AttrWords, Profile, kernel, libibverbs};
    use udah_core::wire::Evidence;

    fn check<const N: usize>() {
        let fx: Fixture<N> = Fixture::new(SEED);
        assert_eq!(fx.roce.entries() as usize, N);
        for c in &fx.cases {
            let a = libibverbs::init_ah_from_wc(&fx.roce, PORT, &c.wc, Some(&c.area)).expect("libibverbs hit");
            match c.index {
                None => assert_eq!(a.is_global, 0),
                Some(i) => assert_eq!(u32::from(a.grh.sgid_index), i % 256, "{:?}", c.family),
            }
            let k = kernel::init_ah_attr_from_wc(fx.kernel_table(c.family), &c.kwc, Some(&c.area)).expect("kernel hit");
            if let Some(i) = c.index {
                assert_eq!(k.grh.sgid_attr_index, Some(i), "{:?}", c.family);
            }
            // The word path (the kernel profile's hot path) is the C mirror's words.
            let table = fx.kernel_table(c.family);
            let words = Profile::Kernel.words(table, &c.kwc, &c.area, Evidence::None, 64);
            assert_eq!(words, Ok(AttrWords::from_attr(&k.to_ah_attr(64).expect("valid"))), "{:?}", c.family);
        }
        let rep = fx.mixed(Order::Repeating, 1);
        let rnd = fx.mixed(Order::Random, 1);
        assert_eq!(rep.len(), rnd.len());
        assert_ne!(rep, rnd);
        assert_eq!(rep[1].family, Family::RoceV1);
    }

    #[test]
    fn fixtures_hit_in_both_profiles() {
        check::<4>();
        check::<64>();
        check::<256>();
    }
}
