//! The table key: an [`AhAttr`] packed into four `u64` words (the C
//! `ibv_ah_attr` is 32 bytes), so that a slot can hold it in four
//! `AtomicU64`s and a reader can compare it with four relaxed loads.

use crate::attr::{AhAttr, AttrWords};
use crate::hal::L2Info;

/// Words of a packed key.
pub(crate) const KEY_WORDS: usize = 4;

/// An [`AhAttr`] packed into four words: its canonical [`AttrWords`] (the
/// byte layout of the C `struct ibv_ah_attr`, documented in
/// [`crate::attr`]), so that the key of a profile's output is its words
/// ([`Key::from_words`]). The packing is injective: two keys are equal
/// exactly when the attributes are. Word 3 is never zero (the port is at
/// least 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key(pub(crate) [u64; KEY_WORDS]);

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
        Key(AttrWords::from_attr(a).raw())
    }

    /// The key of `w.to_attr()` without building the attribute: the
    /// canonical words ([`AttrWords::canonical`]), `None` when `w` is not in
    /// canonical form (the caller then converts it the slow way, which gives
    /// the same key or the conversion's error).
    #[inline(always)]
    pub(crate) fn from_words(w: AttrWords) -> Option<Key> {
        w.canonical().map(|w| Key(w.raw()))
    }

    /// The keyed hash of this key (`k`: the table's [`HashKey`]): the
    /// folded multiplies of the two pairs of key words, each word xor-ed with
    /// a word of `k` (foldhash's construction), so that no linear relation
    /// between crafted addresses survives into the hash, then multiplied by
    /// a Fibonacci constant (the product's low half: [`home_of`] takes its
    /// top bits, which depend on every bit before it, and [`alt_of`] bits
    /// 16..40; folding this product as well cost a table hit 1.5
    /// instructions more, with the same occupancy in
    /// `tests/table_occupancy.rs`). Without that last multiply a key that
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
        (folded_mul(w0 ^ k0, w1 ^ k1) ^ folded_mul(w2 ^ k2, w3 ^ k3)).wrapping_mul(FIB)
    }

    /// The port.
    #[inline]
    pub(crate) fn port(&self) -> u8 {
        AttrWords::from_raw(self.0).port()
    }

    /// The local GID index, when the attribute has a GRH.
    #[inline]
    pub(crate) fn sgid_index(&self) -> Option<u8> {
        AttrWords::from_raw(self.0).sgid_index()
    }
}

/// `L2Info` packed into a slot's `l2` word and the low [`L2_STAMP_BITS`]
/// bits of its stamp word (`slot.rs`): the destination MAC and the VLAN tag
/// fill the first (MAC in bits 0..48, tag in 48..64); the hop limit and three
/// presence bits (facts, tag, hop limit) the second. `(0, 0)` is "none".
pub(crate) fn pack_l2(l2: Option<&L2Info>) -> (u64, u64) {
    let Some(l2) = l2 else { return (0, 0) };
    let mut mac = [0u8; 8];
    if let Some(dst) = mac.get_mut(2..) {
        dst.copy_from_slice(&l2.dmac);
    }
    let w0 = u64::from_be_bytes(mac) | u64::from(l2.vlan_tag.unwrap_or(0)) << 48;
    let w1 = u64::from(l2.hop_limit.unwrap_or(0))
        | L2_SOME
        | u64::from(l2.vlan_tag.is_some()) << 9
        | u64::from(l2.hop_limit.is_some()) << 10;
    (w0, w1)
}

/// The bits of a slot's stamp word that [`pack_l2`] uses.
pub(crate) const L2_STAMP_BITS: u32 = 11;
/// "Layer-2 facts present" in the stamp word.
const L2_SOME: u64 = 1 << 8;

/// The inverse of [`pack_l2`] (`w1`: the stamp word; its bits above
/// [`L2_STAMP_BITS`] are ignored).
pub(crate) fn unpack_l2(w0: u64, w1: u64) -> Option<L2Info> {
    if w1 & L2_SOME == 0 {
        return None;
    }
    let b = (w0 & 0xffff_ffff_ffff).to_be_bytes();
    let [_, _, m0, m1, m2, m3, m4, m5] = b;
    Some(L2Info {
        dmac: [m0, m1, m2, m3, m4, m5],
        vlan_tag: (w1 & 1 << 9 != 0).then_some((w0 >> 48) as u16),
        hop_limit: (w1 & 1 << 10 != 0).then_some(w1 as u8),
    })
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::attr::test::attr;

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
            // The canonical words are the key (the C mirror's words are
            // checked in `attr`).
            assert_eq!(Key::from_words(AttrWords::from_attr(a)), Some(*ka));
        }
    }

    #[test]
    fn l2_round_trip() {
        let (a, b) = pack_l2(None);
        assert_eq!(unpack_l2(a, b), None);
        for l2 in [
            L2Info::default(),
            L2Info { dmac: [1, 2, 3, 4, 5, 6], vlan_tag: Some(0xa064), hop_limit: Some(64) },
            L2Info { dmac: [0xff; 6], vlan_tag: None, hop_limit: Some(0) },
            L2Info { dmac: [0xff; 6], vlan_tag: Some(0xffff), hop_limit: Some(0xff) },
        ] {
            let (a, b) = pack_l2(Some(&l2));
            assert!(b < 1 << L2_STAMP_BITS);
            // The stamp's other bits do not disturb the facts.
            assert_eq!(unpack_l2(a, b | !0 << L2_STAMP_BITS), Some(l2));
            assert_eq!(unpack_l2(a, b), Some(l2));
        }
    }
}
