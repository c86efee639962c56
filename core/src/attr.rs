//! The validated address-handle attribute, [`AhAttr`], and its word form,
//! [`AttrWords`]: the vocabulary shared by the profiles ([`crate::ah`]), which
//! make attributes, the AH cache ([`crate::table`]), which keys on their
//! words, and the backends ([`crate::hal`]), which create AHs from them.
//!
//! # The word form
//!
//! [`AttrWords`] is the attribute as the 32-byte memory image of the C
//! `struct ibv_ah_attr` on x86-64, read as four little-endian `u64` words.
//! This module is the one place that knows where each field sits in them:
//! the libibverbs profile writes its output straight into words, the kernel
//! profile packs its validated attribute into them, the C mirror
//! [`IbvAhAttr`](crate::ah::IbvAhAttr) converts through them, and the table's
//! key is the canonical words themselves.
//!
//! | word | bits |
//! |---|---|
//! | 0 | `dgid` bytes 0..8 (little-endian) |
//! | 1 | `dgid` bytes 8..16 (little-endian) |
//! | 2 | `flow_label` 0..32, `sgid_index` 32..40, `hop_limit` 40..48, `traffic_class` 48..56, padding 56..64 |
//! | 3 | `dlid` 0..16, `sl` 16..24, `src_path_bits` 24..32, `static_rate` 32..40, `is_global` 40..48, `port_num` 48..56, padding 56..64 |
//!
//! The *canonical* words of an attribute ([`AttrWords::from_attr`],
//! [`AttrWords::canonical`]) have zero GRH words without a GRH, zero padding,
//! `is_global` 0 or 1, an SL ≤ 15, a 20-bit flow label and a port ≥ 1: two
//! canonical word forms are equal exactly when the attributes are.
//!
//! ```
//! use udah_core::attr::{AhAttr, AttrWords, PortNum, Sl};
//!
//! let a = AhAttr { port: PortNum::new(1).unwrap(), dlid: 7, sl: Sl::new(3).unwrap(),
//!                  src_path_bits: 0, static_rate: 0, grh: None };
//! let w = AttrWords::from_attr(&a);
//! assert_eq!(w.raw(), [0, 0, 0, 7 | 3 << 16 | 1 << 48]);
//! assert_eq!(w.to_attr(), Ok(a));
//! // libibverbs writes the flow label also without a GRH: not part of the identity.
//! assert_eq!(AttrWords::from_raw([0, 0, 0x12345, w.raw()[3]]).canonical(), Some(w));
//! ```

use core::num::NonZeroU8;

use crate::wire::Gid;

/// Bit offsets of the fields in word 2 (see the [module docs](self)).
pub(crate) mod w2 {
    pub(crate) const SGID_INDEX: u32 = 32;
    pub(crate) const HOP_LIMIT: u32 = 40;
    pub(crate) const TRAFFIC_CLASS: u32 = 48;
    pub(crate) const RESERVED: u32 = 56;
}

/// Bit offsets of the fields in word 3 (see the [module docs](self)).
pub(crate) mod w3 {
    pub(crate) const SL: u32 = 16;
    pub(crate) const SRC_PATH_BITS: u32 = 24;
    pub(crate) const STATIC_RATE: u32 = 32;
    pub(crate) const IS_GLOBAL: u32 = 40;
    pub(crate) const PORT: u32 = 48;
    pub(crate) const RESERVED: u32 = 56;
}

/// Word 2 of a global attribute (padding zero).
// The ors are grouped so that LLVM can merge the loads of adjacent fields
// (`hop_limit` and `traffic_class` here; in `word3`, `dlid`, `sl` and
// `src_path_bits`, one 32-bit load from an `AhAttr`, whose fields are laid
// out in this order for it, and from an `IbvWc`): the key is on a table
// hit's critical path.
#[inline(always)]
pub(crate) const fn word2(flow_label: u32, sgid_index: u8, hop_limit: u8, traffic_class: u8) -> u64 {
    (flow_label as u64 | (sgid_index as u64) << w2::SGID_INDEX)
        | ((hop_limit as u64) << w2::HOP_LIMIT | (traffic_class as u64) << w2::TRAFFIC_CLASS)
}

/// Word 3 (padding zero).
#[inline(always)]
pub(crate) const fn word3(dlid: u16, sl: u8, src_path_bits: u8, static_rate: u8, global: bool, port: u8) -> u64 {
    // The low half as one `u32`: LLVM merges loads only into a whole
    // power-of-two width, and `is_global` is not in memory next to the rest.
    let low = dlid as u32 | (sl as u32) << w3::SL | (src_path_bits as u32) << w3::SRC_PATH_BITS;
    low as u64
        | (static_rate as u64) << w3::STATIC_RATE
        | ((global as u64) << w3::IS_GLOBAL | (port as u64) << w3::PORT)
}

/// An attribute as the four little-endian words of the C `struct
/// ibv_ah_attr`'s memory image (layout in the [module docs](self)): what the
/// profiles produce and the AH cache keys on. Not necessarily canonical
/// (a profile writes what the C code writes: an SL above 15, a flow label
/// without a GRH); [`canonical`](Self::canonical) and
/// [`to_attr`](Self::to_attr) decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AttrWords([u64; 4]);

/// [`AttrWords`] known to be canonical ([`AttrWords::canonical`]): the AH
/// cache's key as it is, with no check left. A profile's hot path makes them
/// where it has proven the form (its fixed fields are canonical by
/// construction, and it tests the SL and the port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CanonicalWords(AttrWords);

impl CanonicalWords {
    /// `w` when it is canonical.
    #[inline]
    pub fn new(w: AttrWords) -> Option<CanonicalWords> {
        w.canonical().map(CanonicalWords)
    }

    /// Words whose canonical form the caller has proven (word 2 zero
    /// without a GRH, padding zero, `is_global` 0 or 1, SL ≤ 15, a 20-bit
    /// flow label, port ≥ 1).
    #[inline(always)]
    pub(crate) const fn proven(w: [u64; 4]) -> CanonicalWords {
        CanonicalWords(AttrWords(w))
    }

    /// The words.
    #[inline(always)]
    pub const fn words(self) -> AttrWords {
        self.0
    }
}

impl AttrWords {
    /// The words `w`.
    #[inline(always)]
    pub const fn from_raw(w: [u64; 4]) -> AttrWords {
        AttrWords(w)
    }

    /// The four words.
    #[inline(always)]
    pub const fn raw(self) -> [u64; 4] {
        self.0
    }

    /// The canonical words of `a`.
    #[inline(always)]
    pub fn from_attr(a: &AhAttr) -> AttrWords {
        let w3 = word3(a.dlid, a.sl.get(), a.src_path_bits, a.static_rate, a.grh.is_some(), a.port.get());
        match a.grh {
            Some(g) => {
                let (d0, d1) = g.dgid.to_words();
                AttrWords([d0, d1, word2(g.flow_label.get(), g.sgid_index, g.hop_limit, g.traffic_class), w3])
            }
            None => AttrWords([0, 0, 0, w3]),
        }
    }

    /// The canonical words of `self.to_attr()`, without building the
    /// attribute: the GRH words masked off when `is_global` is 0. `None` when
    /// the words are not an attribute's in canonical form (SL above 15, port
    /// 0, a flow label above 20 bits with a GRH, `is_global` other than 0 or
    /// 1, non-zero padding): [`to_attr`](Self::to_attr) then gives the same
    /// canonical attribute or its error.
    #[inline(always)]
    pub fn canonical(self) -> Option<AttrWords> {
        let [w0, w1, w2, w3] = self.0;
        // SL ≤ 15, is_global ≤ 1, padding 0, port ≠ 0.
        const NOT_CANONICAL_3: u64 = 0xff00_fe00_00f0_0000;
        // With a GRH: flow label ≤ 0xfffff, padding 0.
        const NOT_CANONICAL_2: u64 = 0xff00_0000_fff0_0000;
        let global = w3 >> w3::IS_GLOBAL & 1;
        let mask = global.wrapping_neg();
        if (w3 & NOT_CANONICAL_3) | (w2 & NOT_CANONICAL_2 & mask) != 0 || w3 >> w3::PORT == 0 {
            return None;
        }
        Some(AttrWords([w0 & mask, w1 & mask, w2 & mask, w3]))
    }

    /// The validated attribute, as `AhAttr::try_from(&IbvAhAttr)` of the C
    /// struct whose image these words are: a GRH when `is_global` is not 0;
    /// padding ignored.
    pub fn to_attr(self) -> Result<AhAttr, AttrError> {
        let [w0, w1, w2, w3] = self.0;
        let grh = if (w3 >> w3::IS_GLOBAL) as u8 != 0 {
            let fl = w2 as u32;
            Some(GlobalRoute {
                dgid: Gid::from_words(w0, w1),
                flow_label: FlowLabel::new(fl).ok_or(AttrError::InvalidFlowLabel(fl))?,
                sgid_index: (w2 >> w2::SGID_INDEX) as u8,
                hop_limit: (w2 >> w2::HOP_LIMIT) as u8,
                traffic_class: (w2 >> w2::TRAFFIC_CLASS) as u8,
            })
        } else {
            None
        };
        let sl = (w3 >> w3::SL) as u8;
        Ok(AhAttr {
            port: PortNum::new(self.port()).ok_or(AttrError::InvalidPort)?,
            dlid: w3 as u16,
            sl: Sl::new(sl).ok_or(AttrError::InvalidSl(sl))?,
            src_path_bits: (w3 >> w3::SRC_PATH_BITS) as u8,
            static_rate: (w3 >> w3::STATIC_RATE) as u8,
            grh,
        })
    }

    /// The port number field.
    #[inline]
    pub const fn port(self) -> u8 {
        (self.0[3] >> w3::PORT) as u8
    }

    /// Whether the GRH part is valid (`is_global` not 0).
    #[inline]
    pub const fn is_global(self) -> bool {
        (self.0[3] >> w3::IS_GLOBAL) as u8 != 0
    }

    /// The local GID index, when the attribute has a GRH.
    #[inline]
    pub const fn sgid_index(self) -> Option<u8> {
        if self.is_global() { Some((self.0[2] >> w2::SGID_INDEX) as u8) } else { None }
    }

    /// The remote GID (`dgid`), when the attribute has a GRH.
    #[inline]
    pub const fn dgid(self) -> Option<Gid> {
        if self.is_global() { Some(Gid::from_words(self.0[0], self.0[1])) } else { None }
    }
}

/// A service level, 0..=15.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Sl(u8);

impl Sl {
    /// `Some` when `v <= 15`.
    pub const fn new(v: u8) -> Option<Sl> {
        if v <= 15 { Some(Sl(v)) } else { None }
    }
    /// The value.
    pub const fn get(self) -> u8 {
        self.0
    }
}

/// A flow label, 0..=0xFFFFF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FlowLabel(u32);

impl FlowLabel {
    /// `Some` when `v <= 0xFFFFF`.
    pub const fn new(v: u32) -> Option<FlowLabel> {
        if v <= 0xf_ffff { Some(FlowLabel(v)) } else { None }
    }
    /// The value.
    pub const fn get(self) -> u32 {
        self.0
    }
    /// The RoCE v2 UDP source port derived from a non-zero flow label
    /// (`ibv_flow_label_to_udp_sport`); `None` for 0.
    pub const fn udp_sport(self) -> Option<u16> {
        let fl = self.0;
        if fl == 0 {
            return None;
        }
        Some((((fl & 0x3fff) ^ ((fl & 0xfc000) >> 14)) | 0xc000) as u16)
    }
}

/// A port number, 1..=255.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortNum(NonZeroU8);

impl PortNum {
    /// `Some` when `v >= 1`.
    pub const fn new(v: u8) -> Option<PortNum> {
        match NonZeroU8::new(v) {
            Some(n) => Some(PortNum(n)),
            None => None,
        }
    }
    /// The value.
    pub const fn get(self) -> u8 {
        self.0.get()
    }
}

/// The GRH part of a validated [`AhAttr`]. `repr(C)`, its fields in the
/// order of their bytes in [`AttrWords`] (words 0 to 2), like [`AhAttr`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct GlobalRoute {
    /// Remote GID.
    pub dgid: Gid,
    /// Flow label.
    pub flow_label: FlowLabel,
    /// Local GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
}

/// Validated AH attributes: what a backend creates an AH from, and what the
/// AH table deduplicates on.
///
/// `repr(C)`, its fields in the order of their bytes in word 3 of
/// [`AttrWords`], so that packing a table key loads `dlid`, `sl` and
/// `src_path_bits` as one `u32` (about 4 instructions off a table hit).
/// The layout is not part of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct AhAttr {
    /// Destination LID (0 on RoCE).
    pub dlid: u16,
    /// Service level.
    pub sl: Sl,
    /// Source path bits.
    pub src_path_bits: u8,
    /// `enum ibv_rate` (0 = port current rate).
    pub static_rate: u8,
    /// Port.
    pub port: PortNum,
    /// Global route, if any.
    pub grh: Option<GlobalRoute>,
}

impl AhAttr {
    /// A routed attribute (a RoCE destination, or an InfiniBand one reached
    /// through its GID) whose other fields take their zero values: LID 0,
    /// SL 0, no path bits, the port's current rate, flow label 0, traffic
    /// class 0.
    pub const fn routed(port: PortNum, dgid: Gid, sgid_index: u8, hop_limit: u8) -> AhAttr {
        AhAttr {
            dlid: 0,
            sl: Sl(0),
            src_path_bits: 0,
            static_rate: 0,
            port,
            grh: Some(GlobalRoute { dgid, flow_label: FlowLabel(0), sgid_index, hop_limit, traffic_class: 0 }),
        }
    }
}

/// Why a C attribute is not a valid [`AhAttr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AttrError {
    /// SL above 15 (libibverbs copies `wc.sl` unmasked).
    InvalidSl(u8),
    /// Flow label above 0xFFFFF.
    InvalidFlowLabel(u32),
    /// Port 0.
    InvalidPort,
    /// The kernel attribute still needs route resolution (hop limit, MAC),
    /// which only a backend can do.
    Unresolved,
}

impl core::fmt::Display for AttrError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AttrError::InvalidSl(v) => write!(f, "service level {v} is above 15"),
            AttrError::InvalidFlowLabel(v) => write!(f, "flow label {v:#x} is above 0xfffff"),
            AttrError::InvalidPort => f.write_str("port number 0"),
            AttrError::Unresolved => f.write_str("attribute needs route resolution by the backend"),
        }
    }
}

impl core::error::Error for AttrError {}

#[cfg(test)]
pub(crate) mod test {
    use super::*;
    use crate::ah::{IbvAhAttr, IbvGlobalRoute};

    /// A sample attribute, distinct for every `(i, grh)` (also the table
    /// key's tests' sample).
    pub(crate) fn attr(i: u8, grh: bool) -> AhAttr {
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
    fn newtypes() {
        assert!(Sl::new(15).is_some() && Sl::new(16).is_none());
        assert!(FlowLabel::new(0xfffff).is_some() && FlowLabel::new(0x100000).is_none());
        assert!(PortNum::new(0).is_none());
        assert_eq!(FlowLabel::new(0).unwrap().udp_sport(), None);
        assert_eq!(
            FlowLabel::new(0x12345).unwrap().udp_sport(),
            Some((((0x12345u32 & 0x3fff) ^ (0x12345u32 >> 14)) | 0xc000) as u16)
        );
    }

    #[test]
    fn words_of_the_c_mirror_are_the_canonical_words() {
        for i in (0..=255u8).step_by(if cfg!(miri) { 37 } else { 1 }) {
            for g in [false, true] {
                let a = attr(i, g);
                let w = AttrWords::from_attr(&a);
                assert_eq!(IbvAhAttr::from(&a).words(), w);
                assert_eq!(w.canonical(), Some(w));
                assert_eq!(w.to_attr(), Ok(a));
                assert_eq!(
                    (w.port(), w.sgid_index(), w.dgid()),
                    (1, a.grh.map(|g| g.sgid_index), a.grh.map(|g| g.dgid))
                );
                assert_eq!(IbvAhAttr::from_words(w.raw()).to_words(), w.raw());
            }
        }
    }

    #[test]
    fn canonical_canonicalises_and_validates() {
        let a = attr(5, false);
        let mut c = IbvAhAttr::from(&a);
        // libibverbs writes the flow label (and C leaves GRH bytes) also
        // without IBV_WC_GRH: they are not part of a non-global identity.
        c.grh.flow_label = 0x12345;
        c.grh.dgid = [9; 16];
        assert_eq!(c.words().canonical(), Some(AttrWords::from_attr(&a)));
        let g = IbvAhAttr::from(&attr(5, true));
        // Not canonical: the fast form refuses, the slow conversion decides.
        for odd in [IbvAhAttr { is_global: 7, ..g }, IbvAhAttr { reserved: 1, ..g }] {
            assert_eq!(odd.words().canonical(), None);
            assert_eq!(odd.words().to_attr(), Ok(attr(5, true)));
        }
        for (bad, e) in [
            (IbvAhAttr { sl: 16, ..g }, AttrError::InvalidSl(16)),
            (IbvAhAttr { port_num: 0, ..g }, AttrError::InvalidPort),
            (
                IbvAhAttr { grh: IbvGlobalRoute { flow_label: 0x10_0000, ..g.grh }, ..g },
                AttrError::InvalidFlowLabel(0x10_0000),
            ),
        ] {
            assert_eq!(bad.words().canonical(), None);
            assert_eq!(AhAttr::try_from(&bad), Err(e));
        }
    }
}
