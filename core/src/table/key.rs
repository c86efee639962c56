//! The table key: an [`AhAttr`] packed into four `u64` words (the C
//! `ibv_ah_attr` is 32 bytes), so that a slot can hold it in four
//! `AtomicU64`s and a reader can compare it with four relaxed loads.

use crate::ah::AhAttr;
#[cfg(test)]
use crate::ah::IbvAhAttr;
use crate::hal::L2Info;

/// Words of a packed key.
pub(crate) const KEY_WORDS: usize = 4;

/// An [`AhAttr`] packed into four words, in the byte layout of the C
/// `struct ibv_ah_attr` ([`IbvAhAttr`], 32 bytes), so that the key of a
/// profile's output is its four words ([`Key::from_words`]). The packing is
/// injective: two keys are equal exactly when the attributes are.
///
/// | word | bits |
/// |---|---|
/// | 0 | `dgid` bytes 0..8 (little-endian), 0 without GRH |
/// | 1 | `dgid` bytes 8..16 (little-endian), 0 without GRH |
/// | 2 | `flow_label` 0..32, `sgid_index` 32..40, `hop_limit` 40..48, `traffic_class` 48..56; 0 without GRH |
/// | 3 | `dlid` 0..16, `sl` 16..24, `src_path_bits` 24..32, `static_rate` 32..40, GRH present 40..48, `port` 48..56 |
///
/// Word 3 is never zero (the port is at least 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key(pub(crate) [u64; KEY_WORDS]);

// The ors are grouped pairwise, which lets LLVM merge the loads of adjacent
// byte fields (`src_path_bits` and `static_rate`, `hop_limit` and
// `traffic_class`): the key is on the hit's critical path (field loads → key
// → hash → slot load → CAS).
#[inline(always)]
fn word3(dlid: u16, sl: u8, src_path_bits: u8, static_rate: u8, global: bool, port: u8) -> u64 {
    ((u64::from(dlid) | u64::from(sl) << 16) | (u64::from(src_path_bits) << 24 | u64::from(static_rate) << 32))
        | (u64::from(global) << 40 | u64::from(port) << 48)
}

#[inline(always)]
fn word2(flow_label: u32, sgid_index: u8, hop_limit: u8, traffic_class: u8) -> u64 {
    (u64::from(flow_label) | u64::from(sgid_index) << 32)
        | (u64::from(hop_limit) << 40 | u64::from(traffic_class) << 48)
}

/// The first window of a key whose [`Key::hash`] is `h`, in a table of
/// `mask + 1` slots (at most 2²⁴): the hash's top 24 bits.
#[inline(always)]
pub(crate) fn home_of(h: u64, mask: usize) -> usize {
    ((h >> 40) as usize) & mask
}

/// The second window of a key whose [`Key::hash`] is `h`: bits 16..40 of
/// the hash, independent of [`home_of`]'s.
#[inline(always)]
pub(crate) fn alt_of(h: u64, mask: usize) -> usize {
    ((h >> 16) as usize) & mask
}

/// The 128-bit product of `a` and `b`, its halves xor-ed.
#[inline(always)]
const fn folded_mul(a: u64, b: u64) -> u64 {
    let p = (a as u128).wrapping_mul(b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// A table's hash key: four words drawn from the table's seed
/// ([`crate::table::AhTable::with_seed`]). Without it a sender could craft
/// source GIDs whose keys all land in the same two windows and evict the
/// other peers; with it, where a key lands depends on words it does not
/// know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HashKey(pub(crate) [u64; KEY_WORDS]);

impl HashKey {
    /// The hash key of `seed` (SplitMix64's outputs from it: any seed,
    /// including 0, gives four well-mixed words).
    pub(crate) const fn new(seed: u64) -> HashKey {
        const fn mix(x: u64) -> u64 {
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        const G: u64 = 0x9e37_79b9_7f4a_7c15;
        let out = [
            mix(seed.wrapping_add(G)),
            mix(seed.wrapping_add(G.wrapping_mul(2))),
            mix(seed.wrapping_add(G.wrapping_mul(3))),
            mix(seed.wrapping_add(G.wrapping_mul(4))),
        ];
        HashKey(out)
    }
}

impl Key {
    /// Packs `a`.
    #[inline(always)]
    pub(crate) fn new(a: &AhAttr) -> Key {
        let w3 = word3(a.dlid, a.sl.get(), a.src_path_bits, a.static_rate, a.grh.is_some(), a.port.get());
        match a.grh {
            Some(g) => {
                let d = u128::from_le_bytes(g.dgid.0);
                Key([
                    d as u64,
                    (d >> 64) as u64,
                    word2(g.flow_label.get(), g.sgid_index, g.hop_limit, g.traffic_class),
                    w3,
                ])
            }
            None => Key([0, 0, 0, w3]),
        }
    }

    /// The key of `AhAttr::try_from(c)` (tests; the table uses
    /// [`from_words`](Self::from_words)).
    #[cfg(test)]
    pub(crate) fn from_ibv(c: &IbvAhAttr) -> Option<Key> {
        Key::from_words(c.to_words())
    }

    /// The key of `AhAttr::try_from(c)` for the C attribute `c` whose memory
    /// image is `w` ([`IbvAhAttr::to_words`]), without building the
    /// `AhAttr`: the last two words are the C struct's bytes 16..32 as they
    /// are. `None` when `c` is not in canonical form (SL above 15, port 0, a
    /// 20-bit-overflowing flow label, `is_global` other than 0 or 1,
    /// non-zero padding): the caller then converts it the slow way, which
    /// gives the same key or the conversion's error.
    #[inline(always)]
    pub(crate) fn from_words(w: [u64; 4]) -> Option<Key> {
        let [w0, w1, w2, w3] = w;
        // SL ≤ 15, is_global ≤ 1, padding 0, port ≠ 0.
        const NOT_CANONICAL_3: u64 = 0xff00_fe00_00f0_0000;
        // With a GRH: flow label ≤ 0xfffff, padding 0.
        const NOT_CANONICAL_2: u64 = 0xff00_0000_fff0_0000;
        let global = w3 >> 40 & 1;
        let mask = global.wrapping_neg();
        if (w3 & NOT_CANONICAL_3) | (w2 & NOT_CANONICAL_2 & mask) != 0 || w3 >> 48 == 0 {
            return None;
        }
        Some(Key([w0 & mask, w1 & mask, w2 & mask, w3]))
    }

    /// The keyed hash of this key (`k`: the table's [`HashKey`]): the
    /// folded multiplies of the two pairs of key words, each word xor-ed with
    /// a word of `k` (foldhash's construction), so that no linear relation
    /// between crafted addresses survives into the hash, folded once more
    /// with a Fibonacci constant. Without that last multiply a key that
    /// differs in one word only (InfiniBand LIDs: word 3) would get two
    /// windows that are both linear in that word, and the cuckoo placement
    /// would degrade to one long window (first eviction at 84 % instead of
    /// 99 %, `tests/table_occupancy.rs`). [`home_of`] and [`alt_of`] reduce
    /// it to the key's two windows.
    #[inline(always)]
    pub(crate) fn hash(&self, k: &HashKey) -> u64 {
        const FIB: u64 = 0x9e37_79b9_7f4a_7c15;
        let [w0, w1, w2, w3] = self.0;
        let [k0, k1, k2, k3] = k.0;
        folded_mul(folded_mul(w0 ^ k0, w1 ^ k1) ^ folded_mul(w2 ^ k2, w3 ^ k3), FIB)
    }

    /// The port.
    #[inline]
    pub(crate) fn port(&self) -> u8 {
        (self.0[3] >> 48) as u8
    }

    /// The local GID index, when the attribute has a GRH.
    #[inline]
    pub(crate) fn sgid_index(&self) -> Option<u8> {
        (self.0[3] & 1 << 40 != 0).then_some((self.0[2] >> 32) as u8)
    }
}

/// `L2Info` packed into two words; `[0, 0]` is "none" (word 0 has bit 63 set
/// otherwise).
pub(crate) fn pack_l2(l2: Option<&L2Info>) -> [u64; 2] {
    let Some(l2) = l2 else { return [0, 0] };
    let mut mac = [0u8; 8];
    if let Some(dst) = mac.get_mut(2..) {
        dst.copy_from_slice(&l2.dmac);
    }
    let w0 = u64::from_be_bytes(mac)
        | 1 << 63
        | u64::from(l2.vlan_tag.is_some()) << 48
        | u64::from(l2.hop_limit.is_some()) << 49;
    let w1 = u64::from(l2.vlan_tag.unwrap_or(0)) | u64::from(l2.hop_limit.unwrap_or(0)) << 16;
    [w0, w1]
}

/// The inverse of [`pack_l2`].
pub(crate) fn unpack_l2(w: [u64; 2]) -> Option<L2Info> {
    let [w0, w1] = w;
    if w0 & 1 << 63 == 0 {
        return None;
    }
    let b = (w0 & 0xffff_ffff_ffff).to_be_bytes();
    let [_, _, m0, m1, m2, m3, m4, m5] = b;
    Some(L2Info {
        dmac: [m0, m1, m2, m3, m4, m5],
        vlan_tag: (w0 & 1 << 48 != 0).then_some(w1 as u16),
        hop_limit: (w0 & 1 << 49 != 0).then_some((w1 >> 16) as u8),
    })
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::ah::{FlowLabel, GlobalRoute, PortNum, Sl};
    use crate::wire::Gid;

    fn attr(i: u8, grh: bool) -> AhAttr {
        AhAttr {
            port: PortNum::new(1).unwrap(),
            dlid: u16::from(i),
            sl: Sl::new(i & 15).unwrap(),
            src_path_bits: 0,
            static_rate: 0,
            grh: grh.then_some(GlobalRoute {
                dgid: Gid([i; 16]),
                flow_label: FlowLabel::new(u32::from(i) << 12).unwrap(),
                sgid_index: i,
                hop_limit: 64,
                traffic_class: i,
            }),
        }
    }

    #[test]
    fn injective_on_samples() {
        let mut keys = std::vec::Vec::new();
        for i in (0..=255u8).step_by(if cfg!(miri) { 37 } else { 1 }) {
            for g in [false, true] {
                keys.push((attr(i, g), Key::new(&attr(i, g))));
            }
        }
        for (a, ka) in &keys {
            for (b, kb) in &keys {
                assert_eq!(a == b, ka == kb);
            }
            assert_eq!(ka.port(), 1);
            assert_eq!(ka.sgid_index(), a.grh.map(|g| g.sgid_index));
            assert!(home_of(ka.hash(&HashKey::new(1)), 63) < 64);
            // The C mirror of an attribute has the same key.
            assert_eq!(Key::from_ibv(&IbvAhAttr::from(a)), Some(*ka));
        }
    }

    #[test]
    fn from_ibv_canonicalises_and_validates() {
        let a = attr(5, false);
        let mut c = IbvAhAttr::from(&a);
        // libibverbs writes the flow label (and C leaves GRH bytes) also
        // without IBV_WC_GRH: they are not part of a non-global identity.
        c.grh.flow_label = 0x12345;
        c.grh.dgid = [9; 16];
        assert_eq!(Key::from_ibv(&c), Some(Key::new(&a)));
        let g = IbvAhAttr::from(&attr(5, true));
        // Not canonical: the fast form refuses, the slow conversion decides.
        assert_eq!(Key::from_ibv(&IbvAhAttr { is_global: 7, ..g }), None);
        assert_eq!(Key::from_ibv(&IbvAhAttr { reserved: 1, ..g }), None);
        for bad in [
            IbvAhAttr { sl: 16, ..g },
            IbvAhAttr { port_num: 0, ..g },
            IbvAhAttr { grh: crate::ah::IbvGlobalRoute { flow_label: 0x10_0000, ..g.grh }, ..g },
        ] {
            assert_eq!(Key::from_ibv(&bad), None);
            assert!(AhAttr::try_from(&bad).is_err());
        }
    }

    #[test]
    fn l2_round_trip() {
        assert_eq!(unpack_l2(pack_l2(None)), None);
        for l2 in [
            L2Info::default(),
            L2Info { dmac: [1, 2, 3, 4, 5, 6], vlan_tag: Some(0xa064), hop_limit: Some(64) },
            L2Info { dmac: [0xff; 6], vlan_tag: None, hop_limit: Some(0) },
        ] {
            assert_eq!(unpack_l2(pack_l2(Some(&l2))), Some(l2));
        }
    }
}
