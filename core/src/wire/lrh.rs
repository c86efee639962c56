//! The 8-byte InfiniBand Local Route Header, the first header of every
//! native InfiniBand packet.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  VL   | LVer  |  SL   |Rsv|LNH|         DLID (dest. LID)      |  bytes 0..4
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Rsv5   |  PktLen (11 bits)   |         SLID (source LID)     |  bytes 4..8
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! (IBA vol. 1 §7.7 "Local Route Header".) `LNH` says what follows: a GRH
//! (`0b11`), the BTH directly (`0b10`), or a raw IPv6/Ethertype datagram
//! (`0b01`/`0b00`). `PktLen` counts 4-byte words from the LRH through the
//! ICRC (the VCRC is not counted).
//!
//! A UD receiver never sees this header, but two completion fields come from
//! it: `wc.slid` (SLID) and `wc.sl` (SL).

/// Length of the LRH.
pub const HEADER_LEN: usize = 8;

/// Byte offsets inside the LRH.
pub mod field {
    use core::ops::Range;
    /// Virtual lane (high nibble) and link version (low nibble).
    pub const VL_LVER: usize = 0;
    /// Service level (high nibble), reserved (2 bits), LNH (low 2 bits).
    pub const SL_LNH: usize = 1;
    /// Destination LID, big-endian.
    pub const DLID: Range<usize> = 2..4;
    /// Reserved (5 bits) and packet length in words (11 bits), big-endian.
    pub const PKT_LEN: Range<usize> = 4..6;
    /// Source LID, big-endian.
    pub const SLID: Range<usize> = 6..8;
}

/// The link next header (`LNH`): what follows the LRH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Lnh {
    /// `0b00`: a raw packet with an Ethertype (no IBA transport).
    Raw = 0,
    /// `0b01`: a raw IPv6 packet (no IBA transport).
    RawIpv6 = 1,
    /// `0b10`: IBA local: the BTH follows.
    IbaLocal = 2,
    /// `0b11`: IBA global: a GRH, then the BTH.
    IbaGlobal = 3,
}

impl Lnh {
    /// The LNH of the low two bits of `v`.
    #[inline]
    pub const fn from_bits(v: u8) -> Lnh {
        match v & 3 {
            0 => Lnh::Raw,
            1 => Lnh::RawIpv6,
            2 => Lnh::IbaLocal,
            _ => Lnh::IbaGlobal,
        }
    }
}

/// The first multicast LID (`0xC000`); LIDs from here to `0xFFFE` are
/// multicast, `0xFFFF` is the permissive LID.
pub const MULTICAST_LID_BASE: u16 = 0xc000;

/// A parsed LRH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LrhRepr {
    /// Virtual lane (4 bits; 15 is the management lane).
    pub vl: u8,
    /// Service level (4 bits).
    pub sl: u8,
    /// What follows the LRH.
    pub lnh: Lnh,
    /// Destination LID.
    pub dlid: u16,
    /// Packet length in 4-byte words, LRH through ICRC (11 bits).
    pub pkt_len: u16,
    /// Source LID.
    pub slid: u16,
}

/// Why a byte string is not a well-formed LRH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LrhMalformed {
    /// Fewer than [`HEADER_LEN`] bytes.
    Truncated {
        /// The length that was given.
        len: usize,
    },
    /// The link version is not 0 (the only version IBA defines).
    Version(u8),
}

impl core::fmt::Display for LrhMalformed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LrhMalformed::Truncated { len } => write!(f, "LRH truncated: {len} bytes, need {HEADER_LEN}"),
            LrhMalformed::Version(v) => write!(f, "LRH link version {v}, expected 0"),
        }
    }
}

impl core::error::Error for LrhMalformed {}

impl LrhRepr {
    /// Parses the first [`HEADER_LEN`] bytes of `buf`; reserved bits are
    /// ignored. The rest of `buf` is not looked at.
    pub fn parse(buf: &[u8]) -> Result<LrhRepr, LrhMalformed> {
        let &[vl_lver, sl_lnh, d0, d1, l0, l1, s0, s1] =
            buf.first_chunk::<HEADER_LEN>().ok_or(LrhMalformed::Truncated { len: buf.len() })?;
        if vl_lver & 0xf != 0 {
            return Err(LrhMalformed::Version(vl_lver & 0xf));
        }
        Ok(LrhRepr {
            vl: vl_lver >> 4,
            sl: sl_lnh >> 4,
            lnh: Lnh::from_bits(sl_lnh),
            dlid: u16::from_be_bytes([d0, d1]),
            pkt_len: u16::from_be_bytes([l0, l1]) & 0x07ff,
            slid: u16::from_be_bytes([s0, s1]),
        })
    }

    /// Writes the header; reserved bits are zero, and `vl`, `sl` and
    /// `pkt_len` are masked to their widths.
    pub fn emit(&self, out: &mut [u8; HEADER_LEN]) {
        let [d0, d1] = self.dlid.to_be_bytes();
        let [l0, l1] = (self.pkt_len & 0x07ff).to_be_bytes();
        let [s0, s1] = self.slid.to_be_bytes();
        *out = [(self.vl & 0xf) << 4, ((self.sl & 0xf) << 4) | self.lnh as u8, d0, d1, l0, l1, s0, s1];
    }

    /// Whether the destination LID is a multicast LID (`0xC000..=0xFFFE`).
    #[inline]
    pub const fn is_multicast(&self) -> bool {
        self.dlid >= MULTICAST_LID_BASE && self.dlid != 0xffff
    }

    /// The packet length in bytes (LRH through ICRC).
    #[inline]
    pub const fn byte_len(&self) -> usize {
        (self.pkt_len as usize) << 2
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // An IPoIB ARP broadcast as captured: VL 0, SL 0, LNH 3 (GRH), DLID 0xc000,
    // 33 words, SLID 6.
    static PACKET_BYTES: [u8; 8] = [0x00, 0x03, 0xc0, 0x00, 0x00, 0x21, 0x00, 0x06];

    // A CM MAD on VL 15, SL 2, LNH 2 (BTH follows), LID 12 -> 18, with reserved bits set.
    static LOCAL_BYTES: [u8; 8] = [0xf0, 0x2e, 0x00, 0x12, 0xf8, 0x40, 0x00, 0x0c];

    #[test]
    fn test_parse() {
        let r = LrhRepr::parse(&PACKET_BYTES).unwrap();
        assert_eq!(r, LrhRepr { vl: 0, sl: 0, lnh: Lnh::IbaGlobal, dlid: 0xc000, pkt_len: 33, slid: 6 });
        assert!(r.is_multicast());
        assert_eq!(r.byte_len(), 132);
        let l = LrhRepr::parse(&LOCAL_BYTES).unwrap();
        assert_eq!(l, LrhRepr { vl: 15, sl: 2, lnh: Lnh::IbaLocal, dlid: 18, pkt_len: 64, slid: 12 });
        assert!(!l.is_multicast());
    }

    #[test]
    fn test_emit() {
        let r = LrhRepr::parse(&PACKET_BYTES).unwrap();
        let mut out = [0xffu8; 8];
        r.emit(&mut out);
        assert_eq!(out, PACKET_BYTES);
        // Reserved bits come back as zero.
        let l = LrhRepr::parse(&LOCAL_BYTES).unwrap();
        l.emit(&mut out);
        assert_eq!(out, [0xf0, 0x22, 0x00, 0x12, 0x00, 0x40, 0x00, 0x0c]);
    }

    #[test]
    fn test_malformed() {
        assert_eq!(LrhRepr::parse(&PACKET_BYTES[..7]), Err(LrhMalformed::Truncated { len: 7 }));
        assert_eq!(LrhRepr::parse(&[]), Err(LrhMalformed::Truncated { len: 0 }));
        let mut b = PACKET_BYTES;
        b[0] = 0x01;
        assert_eq!(LrhRepr::parse(&b), Err(LrhMalformed::Version(1)));
    }

    #[test]
    fn test_lnh_and_permissive() {
        assert_eq!(Lnh::from_bits(0xfc), Lnh::Raw);
        assert_eq!(Lnh::from_bits(1), Lnh::RawIpv6);
        let mut b = PACKET_BYTES;
        b[2] = 0xff;
        b[3] = 0xff;
        assert!(!LrhRepr::parse(&b).unwrap().is_multicast());
    }
}
