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

/// The home slot of a key whose [`Key::hash`] is `h`, in a table of
/// `mask + 1` slots.
#[inline(always)]
pub(crate) fn home_of(h: u64, mask: usize) -> usize {
    ((h >> 40) as usize) & mask
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

    /// The home slot of this key in a table of `mask + 1` slots (a power of
    /// two, at most 2²⁴): the words folded, multiplied by a Fibonacci
    /// constant, top 24 bits.
    #[inline(always)]
    pub(crate) fn home(&self, mask: usize) -> usize {
        home_of(self.hash(), mask)
    }

    /// The hash [`home`](Self::home) reduces (independent of the table's
    /// size, so that a [`super::PreparedAttr`] can keep it).
    #[inline(always)]
    pub(crate) fn hash(&self) -> u64 {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let [w0, w1, w2, w3] = self.0;
        ((w0 ^ w1.rotate_left(32)) ^ (w2 ^ w3)).wrapping_mul(K)
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
    use crate::attr::{FlowLabel, GlobalRoute, PortNum, Sl};
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
            assert!(ka.home(63) < 64);
            // The canonical words are the key (the C mirror's words are
            // checked in `attr`).
            assert_eq!(Key::from_words(AttrWords::from_attr(a)), Some(*ka));
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
