//! The 40-byte InfiniBand Global Route Header, which is also the RoCE v1 GRH
//! and, byte for byte, the IPv6 header of a RoCE v2 packet.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |IPVer=6| TClass        |           Flow Label                  |  area[0..4]
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         PayLen                |  NxtHdr       |   HopLmt      |  area[4..8]
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                  SGID (source GID, 128 bits)                  +  area[8..24]
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                DGID (destination GID, 128 bits)               +  area[24..40]
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! (IBA vol. 1 §8.3 "Global Route Header"; RFC 8200 §3 for IPv6; RoCE v2 is
//! IBA vol. 1 Annex A17.) The next header is `0x1B` (IBA transport) on
//! InfiniBand and RoCE v1, and 17 (UDP) on RoCE v2 over IPv6.

use super::{Area, Gid};

/// Length of the GRH, and of the receive area in front of every UD payload.
pub const HEADER_LEN: usize = 40;

/// Next-header value of the IBA transport (BTH follows): IB and RoCE v1.
pub const NEXT_HDR_IBA: u8 = 0x1b;
/// Next-header value of UDP: RoCE v2 over IPv6.
pub const NEXT_HDR_UDP: u8 = 17;

/// Byte ranges inside the GRH.
pub mod field {
    use core::ops::Range;
    /// Version (4 bits), traffic class (8), flow label (20), big-endian.
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    /// Payload length, big-endian (never read by either C implementation).
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    /// Next header.
    pub const NEXT_HEADER: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source GID.
    pub const SGID: Range<usize> = 8..24;
    /// Destination GID.
    pub const DGID: Range<usize> = 24..40;
}

/// The byte of `area` at `at` (a constant of [`field`]: the check folds
/// away).
#[inline(always)]
fn byte(area: &Area, at: usize) -> u8 {
    area.get(at).copied().unwrap_or(0)
}

// The accessors below read the fields at the offsets of [`field`]: the
// one-byte fields through it, the wider ones with array patterns (which the
// optimiser keeps as plain loads, where a range slice costs the kernel
// profile 40 instructions a call). The patterns' offsets are these
// assertions': a range that drifts from its accessor stops the build.
const _: () = {
    assert!(field::VER_TC_FLOW.start == 0 && field::VER_TC_FLOW.end - field::VER_TC_FLOW.start == 4);
    assert!(field::PAYLOAD_LEN.start == 4 && field::PAYLOAD_LEN.end == 6);
    assert!(field::SGID.start == 8 && field::SGID.end == 24);
    assert!(field::DGID.start == 24 && field::DGID.end == 40);
    assert!(field::DGID.end == HEADER_LEN && field::NEXT_HEADER < HEADER_LEN && field::HOP_LIMIT < HEADER_LEN);
};

/// `W0`: the first 32-bit word of the area, big-endian.
#[inline]
pub fn word0(area: &Area) -> u32 {
    let [a, b, c, d, ..] = *area;
    u32::from_be_bytes([a, b, c, d])
}

/// The version nibble (`area[0] >> 4`).
#[inline]
pub fn version(area: &Area) -> u8 {
    let [a, ..] = *area;
    a >> 4
}

/// The traffic class, `(W0 >> 20) & 0xff`.
#[inline]
pub fn traffic_class(area: &Area) -> u8 {
    (word0(area) >> 20) as u8
}

/// The flow label, `W0 & 0xfffff`.
#[inline]
pub fn flow_label(area: &Area) -> u32 {
    word0(area) & 0x000f_ffff
}

/// The payload length.
#[inline]
pub fn payload_len(area: &Area) -> u16 {
    let [_, _, _, _, a, b, ..] = *area;
    u16::from_be_bytes([a, b])
}

/// The next-header byte.
#[inline]
pub fn next_header(area: &Area) -> u8 {
    byte(area, field::NEXT_HEADER)
}

/// The hop limit.
#[inline]
pub fn hop_limit(area: &Area) -> u8 {
    byte(area, field::HOP_LIMIT)
}

/// The source GID (`area[8..24]`): the remote side of a received packet.
#[inline]
pub fn sgid(area: &Area) -> Gid {
    // A pattern (which the optimiser keeps as two loads) at the offsets
    // of `field::SGID`, asserted above.
    let [_, _, _, _, _, _, _, _, s @ .., _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _] = *area;
    Gid(s)
}

/// The destination GID (`area[24..40]`): our side of a received packet.
#[inline]
pub fn dgid(area: &Area) -> Gid {
    // As `sgid`: the last 16 bytes, `field::DGID`.
    let [_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, d @ ..] = *area;
    Gid(d)
}

/// A parsed GRH (IB, RoCE v1, or RoCE v2 IPv6 header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GrhRepr {
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits; higher bits are ignored by [`GrhRepr::emit`]).
    pub flow_label: u32,
    /// Payload length.
    pub payload_len: u16,
    /// Next header: [`NEXT_HDR_IBA`] or [`NEXT_HDR_UDP`].
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Source GID.
    pub sgid: Gid,
    /// Destination GID.
    pub dgid: Gid,
}

/// Why an area is not a GRH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GrhMalformed {
    /// The version nibble is not 6.
    Version(u8),
}

impl GrhRepr {
    /// Parses the area as a GRH; the version nibble must be 6.
    pub fn parse(area: &Area) -> Result<GrhRepr, GrhMalformed> {
        if version(area) != 6 {
            return Err(GrhMalformed::Version(version(area)));
        }
        Ok(GrhRepr {
            traffic_class: traffic_class(area),
            flow_label: flow_label(area),
            payload_len: payload_len(area),
            next_header: next_header(area),
            hop_limit: hop_limit(area),
            sgid: sgid(area),
            dgid: dgid(area),
        })
    }

    /// Writes every byte of the area.
    pub fn emit(&self, area: &mut Area) {
        let w0 = (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0x000f_ffff);
        let [a, b, c, d] = w0.to_be_bytes();
        let [p0, p1] = self.payload_len.to_be_bytes();
        let mut out = [0u8; HEADER_LEN];
        let (head, rest) = out.split_at_mut(8);
        head.copy_from_slice(&[a, b, c, d, p0, p1, self.next_header, self.hop_limit]);
        let (s, dg) = rest.split_at_mut(16);
        s.copy_from_slice(&self.sgid.0);
        dg.copy_from_slice(&self.dgid.0);
        *area = out;
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // RoCE v2 / IPv6: tc 0x28, flow 0xabcde, nh 17, hop 63, 2001:db8::20 -> 2001:db8::10.
    static PACKET_BYTES: Area = [
        0x62, 0x8a, 0xbc, 0xde, 0x00, 0x64, 0x11, 0x3f, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20,
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];

    #[test]
    fn test_deconstruct() {
        let a = &PACKET_BYTES;
        assert_eq!(version(a), 6);
        assert_eq!(traffic_class(a), 0x28);
        assert_eq!(flow_label(a), 0xabcde);
        assert_eq!(payload_len(a), 100);
        assert_eq!(next_header(a), NEXT_HDR_UDP);
        assert_eq!(hop_limit(a), 63);
        assert_eq!(sgid(a).0[15], 0x20);
        assert_eq!(dgid(a).0[15], 0x10);
    }

    #[test]
    fn test_parse_emit() {
        let r = GrhRepr::parse(&PACKET_BYTES).unwrap();
        let mut out = [0x55u8; 40];
        r.emit(&mut out);
        assert_eq!(out, PACKET_BYTES);
    }

    #[test]
    fn test_parse_bad_version() {
        let mut a = PACKET_BYTES;
        a[0] = 0x42;
        assert_eq!(GrhRepr::parse(&a), Err(GrhMalformed::Version(4)));
    }
}
