//! The table key: an [`AhAttr`] packed into four `u64` words (the C
//! `ibv_ah_attr` is 32 bytes), so that a slot can hold it in four
//! `AtomicU64`s and a reader can compare it with four relaxed loads.

use crate::ah::AhAttr;
use crate::hal::L2Info;

/// Words of a packed key.
pub(crate) const KEY_WORDS: usize = 4;

/// An [`AhAttr`] packed into four words. The packing is injective: two keys
/// are equal exactly when the attributes are.
///
/// | word | bits |
/// |---|---|
/// | 0 | `dgid` bytes 0..8 (big-endian), 0 without GRH |
/// | 1 | `dgid` bytes 8..16 (big-endian), 0 without GRH |
/// | 2 | `port` 0..8, `dlid` 8..24, `sl` 24..28, `src_path_bits` 32..40, `static_rate` 40..48, GRH present 48 |
/// | 3 | `flow_label` 0..20, `sgid_index` 20..28, `hop_limit` 28..36, `traffic_class` 36..44, 0 without GRH |
///
/// Word 2 is never zero (the port is at least 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key(pub(crate) [u64; KEY_WORDS]);

const GRH_BIT: u64 = 1 << 48;

impl Key {
    /// Packs `a`.
    #[inline]
    pub(crate) fn new(a: &AhAttr) -> Key {
        let w2 = u64::from(a.port.get())
            | u64::from(a.dlid) << 8
            | u64::from(a.sl.get()) << 24
            | u64::from(a.src_path_bits) << 32
            | u64::from(a.static_rate) << 40;
        match a.grh {
            Some(g) => {
                let d = g.dgid.to_u128();
                Key([
                    (d >> 64) as u64,
                    d as u64,
                    w2 | GRH_BIT,
                    u64::from(g.flow_label.get())
                        | u64::from(g.sgid_index) << 20
                        | u64::from(g.hop_limit) << 28
                        | u64::from(g.traffic_class) << 36,
                ])
            }
            None => Key([0, 0, w2, 0]),
        }
    }

    /// The home slot of this key in a table of `mask + 1` slots (a power of
    /// two): a multiply-xorshift mix of the four words, top bits first.
    #[inline]
    pub(crate) fn home(&self, mask: usize) -> usize {
        const K0: u64 = 0x9e37_79b9_7f4a_7c15;
        const K1: u64 = 0xc2b2_ae3d_27d4_eb4f;
        let [w0, w1, w2, w3] = self.0;
        let a = (w0 ^ w2).wrapping_mul(K0);
        let b = (w1 ^ w3.rotate_left(32)).wrapping_mul(K1);
        let h = (a ^ b.rotate_left(29)).wrapping_mul(K0);
        ((h >> 32) as usize) & mask
    }

    /// The port.
    #[inline]
    pub(crate) fn port(&self) -> u8 {
        self.0[2] as u8
    }

    /// The local GID index, when the attribute has a GRH.
    #[inline]
    pub(crate) fn sgid_index(&self) -> Option<u8> {
        (self.0[2] & GRH_BIT != 0).then_some((self.0[3] >> 20) as u8)
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
            assert!(ka.home(63) < 64);
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
