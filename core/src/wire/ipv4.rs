//! The RoCE v2 IPv4 header as it sits in bytes 20..40 of the GRH area, and
//! the two IPv4 header checksums.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version|  IHL  |      TOS      |          Total Length         |  area[20..24]
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Identification        |Flags|      Fragment Offset    |  area[24..28]
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |      TTL      |    Protocol   |         Header Checksum       |  area[28..32]
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       Source Address                          |  area[32..36]
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Destination Address                        |  area[36..40]
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! (RFC 791 §3.1; RoCE v2 is IBA vol. 1 Annex A17. RoCE v2 headers carry no
//! options, so the header is exactly 20 bytes.) The 20 bytes in front of it
//! are undefined: the NIC does not write them.

use super::Area;

/// Length of the IPv4 header in the GRH area.
pub const HEADER_LEN: usize = 20;
/// Offset of the IPv4 header in the GRH area.
pub const OFFSET: usize = 20;

/// Byte offsets inside the IPv4 header (not the area).
pub mod field {
    /// Version (high nibble) and IHL (low nibble).
    pub const VER_IHL: usize = 0;
    /// Type of service (DSCP and ECN).
    pub const TOS: usize = 1;
    /// Total length, big-endian.
    pub const LENGTH: core::ops::Range<usize> = 2..4;
    /// Identification.
    pub const IDENT: core::ops::Range<usize> = 4..6;
    /// Flags and fragment offset.
    pub const FLG_OFF: core::ops::Range<usize> = 6..8;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol (17 = UDP for RoCE v2).
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: core::ops::Range<usize> = 10..12;
    /// Source address.
    pub const SRC_ADDR: core::ops::Range<usize> = 12..16;
    /// Destination address.
    pub const DST_ADDR: core::ops::Range<usize> = 16..20;
}

const _: () = {
    // The header ends the area, and the field table tiles it in the order
    // that `Ipv4Repr::parse`/`emit` and the checksums destructure it: a
    // range that drifts stops the build.
    assert!(OFFSET + HEADER_LEN == super::AREA_LEN);
    assert!(field::VER_IHL == 0 && field::TOS == 1 && field::LENGTH.start == 2 && field::LENGTH.end == 4);
    assert!(field::IDENT.start == 4 && field::IDENT.end == 6 && field::FLG_OFF.start == 6 && field::FLG_OFF.end == 8);
    assert!(field::TTL == 8 && field::PROTOCOL == 9 && field::CHECKSUM.start == 10 && field::CHECKSUM.end == 12);
    assert!(field::SRC_ADDR.start == 12 && field::SRC_ADDR.end == 16);
    assert!(field::DST_ADDR.start == 16 && field::DST_ADDR.end == HEADER_LEN);
};

/// The IPv4 header bytes of a GRH area (`area[20..40]`).
#[inline]
pub fn header(area: &Area) -> &[u8; HEADER_LEN] {
    // The last `HEADER_LEN` bytes: `OFFSET..AREA_LEN` (asserted below).
    let [_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, rest @ ..] = area;
    rest
}

/// The IPv4 header bytes of a GRH area, mutable.
#[inline]
pub fn header_mut(area: &mut Area) -> &mut [u8; HEADER_LEN] {
    let [_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, rest @ ..] = area;
    rest
}

#[inline]
fn be16(h: &[u8; HEADER_LEN], at: usize) -> u16 {
    let hi = h.get(at).copied().unwrap_or(0);
    let lo = h.get(at.wrapping_add(1)).copied().unwrap_or(0);
    u16::from_be_bytes([hi, lo])
}

#[inline]
fn words_be(h: &[u8; HEADER_LEN]) -> [u16; 10] {
    let [a0, a1, b0, b1, c0, c1, d0, d1, e0, e1, f0, f1, g0, g1, h0, h1, i0, i1, j0, j1] = *h;
    [
        u16::from_be_bytes([a0, a1]),
        u16::from_be_bytes([b0, b1]),
        u16::from_be_bytes([c0, c1]),
        u16::from_be_bytes([d0, d1]),
        u16::from_be_bytes([e0, e1]),
        u16::from_be_bytes([f0, f1]),
        u16::from_be_bytes([g0, g1]),
        u16::from_be_bytes([h0, h1]),
        u16::from_be_bytes([i0, i1]),
        u16::from_be_bytes([j0, j1]),
    ]
}

/// The RFC 1071 header checksum of `h` with its checksum field taken as zero:
/// the one's complement of the fully folded one's-complement sum of the ten
/// big-endian words. This is what the kernel's `ip_fast_csum` computes.
///
/// Computed as `ip_fast_csum` does, on wide little-endian loads: the
/// one's-complement sum does not depend on how the bytes are grouped into
/// words (2¹⁶ ≡ 1 modulo 0xffff) nor on their byte order (swapping the
/// bytes of every addend swaps the bytes of the sum), and every fold keeps
/// a non-zero sum non-zero, so the fully folded sum of the five 32-bit
/// little-endian words is the byte swap of that of the ten big-endian
/// 16-bit words, bit for bit (including 0x0000 against 0xffff).
#[inline]
pub fn checksum_rfc1071(h: &[u8; HEADER_LEN]) -> u16 {
    let [a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, _, _, d0, d1, d2, d3, e0, e1, e2, e3] = *h;
    let word = |w: [u8; 4]| u64::from(u32::from_le_bytes(w));
    // The checksum field (bytes 10..12) counts as zero.
    // Five addends below 2^32: no wrap (the sum is below 2^35).
    let sum = (word([a0, a1, a2, a3]).wrapping_add(word([b0, b1, b2, b3])))
        .wrapping_add(word([c0, c1, 0, 0]).wrapping_add(word([d0, d1, d2, d3])))
        .wrapping_add(word([e0, e1, e2, e3]));
    // Three folds bring a sum below 2^35 below 2^16.
    let fold = |s: u64| (s & 0xffff).wrapping_add(s >> 16);
    let sum = fold(fold(fold(sum)));
    !(sum as u16).swap_bytes()
}

/// libibverbs' `ipv4_calc_hdr_csum` on x86-64: the ten words read as
/// **little-endian** `u16`, checksum field as zero, summed into 32 bits,
/// folded **once**, complemented and truncated. The result is compared with
/// the checksum field read little-endian too. When the single fold carries
/// (SEMANTICS §2.3) this differs from the RFC checksum by one, so libibverbs
/// rejects some valid headers and accepts some invalid ones.
#[inline]
pub fn checksum_libibverbs(h: &[u8; HEADER_LEN]) -> u16 {
    let w = words_be(h);
    let mut sum: u32 = 0;
    for (i, x) in w.iter().enumerate() {
        sum = sum.wrapping_add(u32::from(x.swap_bytes()) & 0u32.wrapping_sub(u32::from(i != 5)));
    }
    let folded = (sum & 0xffff).wrapping_add(sum >> 16);
    !(folded as u16)
}

/// The checksum field as stored, read big-endian.
#[inline]
pub fn stored_checksum(h: &[u8; HEADER_LEN]) -> u16 {
    be16(h, field::CHECKSUM.start)
}

/// Whether the stored checksum equals the RFC 1071 value, bit-exactly
/// (`0xffff` for a correct `0x0000` is rejected, as both C implementations do).
#[inline]
pub fn verify_rfc1071(h: &[u8; HEADER_LEN]) -> bool {
    checksum_rfc1071(h) == stored_checksum(h)
}

/// Whether the stored checksum equals libibverbs' single-fold value
/// (both read little-endian, as libibverbs does on x86-64).
#[inline]
pub fn verify_libibverbs(h: &[u8; HEADER_LEN]) -> bool {
    checksum_libibverbs(h) == stored_checksum(h).swap_bytes()
}

/// A parsed RoCE v2 IPv4 header (the fields that matter for an AH, plus the
/// rest so that [`Ipv4Repr::emit`] writes a complete header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ipv4Repr {
    /// Type of service (DSCP << 2 | ECN).
    pub tos: u8,
    /// Total length.
    pub total_len: u16,
    /// Identification.
    pub ident: u16,
    /// Flags and fragment offset (0x4000 = don't fragment).
    pub flags_frag: u16,
    /// Time to live.
    pub ttl: u8,
    /// Protocol (17 for RoCE v2).
    pub protocol: u8,
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
}

/// Why a byte string is not a well-formed RoCE v2 IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ipv4Malformed {
    /// The version nibble is not 4.
    Version(u8),
    /// The IHL is not 5 (RoCE v2 carries no IPv4 options).
    HeaderLength(u8),
    /// The stored checksum is not the RFC 1071 checksum.
    Checksum {
        /// The stored value.
        stored: u16,
        /// The correct value.
        computed: u16,
    },
}

impl Ipv4Repr {
    /// Parses `area[20..40]` strictly: version 4, IHL 5, valid RFC checksum.
    pub fn parse(area: &Area) -> Result<Ipv4Repr, Ipv4Malformed> {
        let h = header(area);
        let [ver_ihl, tos, l0, l1, i0, i1, f0, f1, ttl, protocol, _, _, s0, s1, s2, s3, d0, d1, d2, d3] = *h;
        if ver_ihl >> 4 != 4 {
            return Err(Ipv4Malformed::Version(ver_ihl >> 4));
        }
        if ver_ihl & 0xf != 5 {
            return Err(Ipv4Malformed::HeaderLength(ver_ihl & 0xf));
        }
        if !verify_rfc1071(h) {
            return Err(Ipv4Malformed::Checksum { stored: stored_checksum(h), computed: checksum_rfc1071(h) });
        }
        Ok(Ipv4Repr {
            tos,
            total_len: u16::from_be_bytes([l0, l1]),
            ident: u16::from_be_bytes([i0, i1]),
            flags_frag: u16::from_be_bytes([f0, f1]),
            ttl,
            protocol,
            src: [s0, s1, s2, s3],
            dst: [d0, d1, d2, d3],
        })
    }

    /// Writes the header into `area[20..40]` with a correct RFC 1071 checksum.
    /// `area[0..20]` (undefined on the wire) is left as it is.
    pub fn emit(&self, area: &mut Area) {
        let h = header_mut(area);
        let [l0, l1] = self.total_len.to_be_bytes();
        let [i0, i1] = self.ident.to_be_bytes();
        let [f0, f1] = self.flags_frag.to_be_bytes();
        let [s0, s1, s2, s3] = self.src;
        let [d0, d1, d2, d3] = self.dst;
        *h = [0x45, self.tos, l0, l1, i0, i1, f0, f1, self.ttl, self.protocol, 0, 0, s0, s1, s2, s3, d0, d1, d2, d3];
        let [c0, c1] = checksum_rfc1071(h).to_be_bytes();
        if let Some(c) = h.get_mut(field::CHECKSUM) {
            c.copy_from_slice(&[c0, c1]);
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // A valid RoCE v2 header: 192.168.1.20 -> 192.168.1.10, TTL 64, UDP.
    static PACKET_BYTES: [u8; 20] = [
        0x45, 0x00, 0x00, 0x3c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb7, 0x42, 0xc0, 0xa8, 0x01, 0x14, 0xc0, 0xa8,
        0x01, 0x0a,
    ];

    fn area_with(h: &[u8; 20]) -> Area {
        let mut a = [0u8; 40];
        a[20..].copy_from_slice(h);
        a
    }

    #[test]
    fn test_checksums_agree_on_ordinary_header() {
        assert_eq!(checksum_rfc1071(&PACKET_BYTES), 0xb742);
        assert!(verify_rfc1071(&PACKET_BYTES));
        assert!(verify_libibverbs(&PACKET_BYTES));
    }

    #[test]
    fn test_single_fold_quirk() {
        // SEMANTICS §2.3 worked example: valid header rejected by libibverbs.
        let h = [
            0x45, 0x00, 0x00, 0x3c, 0xb8, 0x42, 0x40, 0x00, 0x40, 0x11, 0xfe, 0xff, 0xc0, 0xa8, 0x01, 0x14, 0xc0, 0xa8,
            0x01, 0x0a,
        ];
        assert!(verify_rfc1071(&h));
        assert!(!verify_libibverbs(&h));
        assert_eq!(checksum_libibverbs(&h), 0xffff);
    }

    #[test]
    fn test_zero_vs_ffff() {
        // Vectors 50/51: the correct checksum 0x0000 is accepted, its 0xffff encoding is not.
        let mut h = [
            0x45, 0x00, 0x00, 0x3c, 0xb7, 0x42, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x14, 0xc0, 0xa8,
            0x01, 0x0a,
        ];
        assert!(verify_rfc1071(&h));
        assert!(verify_libibverbs(&h));
        h[10] = 0xff;
        h[11] = 0xff;
        assert!(!verify_rfc1071(&h));
        assert!(!verify_libibverbs(&h));
    }

    #[test]
    fn test_parse_emit_round_trip() {
        let a = area_with(&PACKET_BYTES);
        let r = Ipv4Repr::parse(&a).unwrap();
        assert_eq!(r.src, [192, 168, 1, 20]);
        assert_eq!(r.dst, [192, 168, 1, 10]);
        assert_eq!((r.ttl, r.protocol, r.total_len), (64, 17, 60));
        let mut b = [0xaau8; 40];
        r.emit(&mut b);
        assert_eq!(header(&b), &PACKET_BYTES);
        assert_eq!(&b[..20], &[0xaa; 20]);
    }

    #[test]
    fn test_parse_bad() {
        let mut h = PACKET_BYTES;
        h[11] ^= 1;
        assert!(matches!(Ipv4Repr::parse(&area_with(&h)), Err(Ipv4Malformed::Checksum { .. })));
        let mut h = PACKET_BYTES;
        h[0] = 0x46;
        assert_eq!(Ipv4Repr::parse(&area_with(&h)), Err(Ipv4Malformed::HeaderLength(6)));
        let mut h = PACKET_BYTES;
        h[0] = 0x65;
        assert_eq!(Ipv4Repr::parse(&area_with(&h)), Err(Ipv4Malformed::Version(6)));
    }
}
