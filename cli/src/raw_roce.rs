//! RoCE v2 UD SEND frames built byte by byte, as a NIC puts them on the wire:
//! Ethernet, IPv4, UDP (port 4791), BTH, DETH, payload and the invariant CRC
//! (ICRC) that the receiving NIC (Soft-RoCE included) checks before it
//! accepts the packet.
//!
//! `udah raw-send` writes such frames from many source addresses through an
//! `AF_PACKET` socket: more distinct senders than a host's GID table can
//! hold, for `udah serve` at scale on a real (or Soft-RoCE) receiver.
//!
//! The ICRC follows the InfiniBand spec's RoCE v2 annex (A17.4.1, "ICRC"):
//! CRC-32 (the Ethernet polynomial, as `crc32fast` computes it) over eight
//! bytes of ones standing for the LRH, then the IPv4 header with its Type
//! of Service, Time to Live and header checksum set to ones, the UDP header
//! with its checksum set to ones, and the BTH (its reserved byte set to
//! ones) through the end of the payload; stored little-endian after the
//! payload.

use core::fmt;

/// The RoCE v2 UDP destination port.
pub const ROCE_V2_PORT: u16 = 4791;
/// BTH opcode of a UD SEND Only.
pub const OPCODE_UD_SEND_ONLY: u8 = 0x64;
/// Bytes of Ethernet (untagged) + IPv4 + UDP + BTH + DETH in front of the
/// payload.
pub const HEADERS_LEN: usize = 14 + 20 + 8 + 12 + 8;
/// Bytes of the ICRC after the payload.
pub const ICRC_LEN: usize = 4;
/// The largest payload [`UdSendV4::build`] takes: a frame within a
/// 4096-byte RoCE MTU, and an IPv4 total length that fits 16 bits.
pub const MAX_PAYLOAD: usize = 4096;

/// The fields of one RoCE v2 (IPv4) UD SEND Only frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdSendV4 {
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Source IPv4 address (the receiver sees it as the source GID
    /// `::ffff:a.b.c.d`).
    pub src_ip: [u8; 4],
    /// Destination IPv4 address (the receiver's RoCE v2 GID).
    pub dst_ip: [u8; 4],
    /// IPv4 Type of Service (DSCP and ECN; the receiver's traffic class).
    pub tos: u8,
    /// IPv4 Time to Live (the receiver's hop limit).
    pub ttl: u8,
    /// IPv4 identification.
    pub ip_id: u16,
    /// UDP source port (RoCE v2 uses it for flow entropy).
    pub udp_src: u16,
    /// BTH MigReq bit (ConnectX sets it on UD; rxe ignores it).
    pub mig_req: bool,
    /// BTH partition key.
    pub pkey: u16,
    /// BTH destination QP.
    pub dst_qpn: u32,
    /// BTH packet sequence number (24 bits).
    pub psn: u32,
    /// DETH Q_Key.
    pub qkey: u32,
    /// DETH source QP (24 bits).
    pub src_qpn: u32,
}

/// Why a frame was not built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildError {
    /// The payload is longer than [`MAX_PAYLOAD`].
    PayloadTooLong(usize),
    /// A QP number or PSN does not fit 24 bits.
    Not24Bits(u32),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::PayloadTooLong(n) => write!(f, "payload of {n} bytes is above {MAX_PAYLOAD}"),
            BuildError::Not24Bits(v) => write!(f, "{v:#x} does not fit 24 bits"),
        }
    }
}

impl core::error::Error for BuildError {}

/// The ones' complement checksum of an IPv4 header (its checksum field
/// zero or not: the result is what the field must hold).
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum = 0u32;
    for (i, c) in h.chunks(2).enumerate() {
        if i != 5 {
            sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl UdSendV4 {
    /// The frame for `payload`, written over `out` (cleared first):
    /// [`HEADERS_LEN`] + `payload.len()` + [`ICRC_LEN`] bytes, the pad
    /// count 0 (the payload is not padded to 4 bytes: rxe takes any
    /// length), the IPv4 checksum and the ICRC computed, the UDP checksum
    /// zero (not used, as RoCE v2 allows).
    pub fn build(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), BuildError> {
        if payload.len() > MAX_PAYLOAD {
            return Err(BuildError::PayloadTooLong(payload.len()));
        }
        for v in [self.dst_qpn, self.psn, self.src_qpn] {
            if v >> 24 != 0 {
                return Err(BuildError::Not24Bits(v));
            }
        }
        out.clear();
        out.reserve(HEADERS_LEN + payload.len() + ICRC_LEN);
        // Ethernet.
        out.extend_from_slice(&self.dst_mac);
        out.extend_from_slice(&self.src_mac);
        out.extend_from_slice(&0x0800u16.to_be_bytes());
        // IPv4: 20 bytes, Don't Fragment, UDP. Lengths fit: the payload is bounded above.
        let udp_len = (8 + 12 + 8 + payload.len() + ICRC_LEN) as u16;
        let ip_start = out.len();
        out.extend_from_slice(&[0x45, self.tos]);
        out.extend_from_slice(&(20 + udp_len).to_be_bytes());
        out.extend_from_slice(&self.ip_id.to_be_bytes());
        out.extend_from_slice(&[0x40, 0x00, self.ttl, 17, 0, 0]);
        out.extend_from_slice(&self.src_ip);
        out.extend_from_slice(&self.dst_ip);
        let sum = ipv4_checksum(&out[ip_start..ip_start + 20]);
        out[ip_start + 10..ip_start + 12].copy_from_slice(&sum.to_be_bytes());
        // UDP.
        out.extend_from_slice(&self.udp_src.to_be_bytes());
        out.extend_from_slice(&ROCE_V2_PORT.to_be_bytes());
        out.extend_from_slice(&udp_len.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        // BTH: opcode, SE 0 / MigReq / pad 0 / TVer 0, P_Key, reserved,
        // destination QP, AckReq 0 + PSN.
        out.extend_from_slice(&[OPCODE_UD_SEND_ONLY, u8::from(self.mig_req) << 6]);
        out.extend_from_slice(&self.pkey.to_be_bytes());
        out.extend_from_slice(&self.dst_qpn.to_be_bytes());
        out.extend_from_slice(&self.psn.to_be_bytes());
        // DETH: Q_Key, reserved, source QP.
        out.extend_from_slice(&self.qkey.to_be_bytes());
        out.extend_from_slice(&self.src_qpn.to_be_bytes());
        out.extend_from_slice(payload);
        let icrc = icrc_ipv4(out).unwrap_or_default();
        out.extend_from_slice(&icrc.to_le_bytes());
        Ok(())
    }
}

/// The ICRC of an untagged Ethernet frame holding a RoCE v2 packet over
/// IPv4 that is followed by no ICRC yet (`frame` ends with the payload):
/// what the four bytes after it must be, read little-endian. `None` when
/// `frame` is not IPv4 with a 20-byte header and room for the UDP header
/// and a BTH.
pub fn icrc_ipv4(frame: &[u8]) -> Option<u32> {
    let ip = frame.get(14..)?;
    if frame.get(12..14)? != [0x08, 0x00] || ip.first()? != &0x45 || ip.len() < 20 + 8 + 12 {
        return None;
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&[0xff; 8]);
    let mut iph = [0u8; 20];
    iph.copy_from_slice(&ip[..20]);
    iph[1] = 0xff; // Type of Service
    iph[8] = 0xff; // Time to Live
    iph[10] = 0xff; // header checksum
    iph[11] = 0xff;
    h.update(&iph);
    let mut udp = [0u8; 8];
    udp.copy_from_slice(&ip[20..28]);
    udp[6] = 0xff; // checksum
    udp[7] = 0xff;
    h.update(&udp);
    let mut bth = [0u8; 12];
    bth.copy_from_slice(&ip[28..40]);
    bth[4] = 0xff; // reserved
    h.update(&bth);
    h.update(&ip[40..]);
    Some(h.finalize())
}

/// Whether `frame` (untagged Ethernet, RoCE v2 over IPv4, ending with its
/// ICRC) carries the ICRC its bytes call for.
pub fn icrc_ok(frame: &[u8]) -> bool {
    let Some(split) = frame.len().checked_sub(ICRC_LEN) else { return false };
    let (body, icrc) = frame.split_at(split);
    icrc_ipv4(body).is_some_and(|c| icrc == c.to_le_bytes())
}

/// The `i`-th source address of `count` from `base` on (wrapping within
/// IPv4's 32 bits).
pub fn nth_source(base: [u8; 4], i: u32) -> [u8; 4] {
    u32::from_be_bytes(base).wrapping_add(i).to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frame of [`built_frame_parses_back_with_its_fields`] and its
    /// ICRC, computed apart from this module (Python's `zlib.crc32` over
    /// the masked pseudo-packet of the spec's rules, which reproduce the
    /// ICRCs of a ConnectX capture: `cli/tests/raw_roce.rs`).
    const HELLO: &str = "525400da0001525400da00020800450000390007400040116a480a4d0005c6120001c00112b70025\
                         00006400ffff00000011001234561111111100abcdef68656c6c6f";
    const HELLO_ICRC: [u8; 4] = [0xf7, 0xd7, 0xc5, 0xeb];

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn built_frame_parses_back_with_its_fields() {
        let f = UdSendV4 {
            dst_mac: [0x52, 0x54, 0, 0xda, 0, 1],
            src_mac: [0x52, 0x54, 0, 0xda, 0, 2],
            src_ip: [10, 77, 0, 5],
            dst_ip: [198, 18, 0, 1],
            tos: 0,
            ttl: 64,
            ip_id: 7,
            udp_src: 0xc001,
            mig_req: false,
            pkey: 0xffff,
            dst_qpn: 0x11,
            psn: 0x12_3456,
            qkey: 0x1111_1111,
            src_qpn: 0xab_cdef,
        };
        let mut out = Vec::new();
        f.build(b"hello", &mut out).unwrap();
        assert_eq!(out.len(), HEADERS_LEN + 5 + ICRC_LEN);
        assert_eq!(out[..out.len() - 4], hex(HELLO)[..]);
        assert_eq!(out[out.len() - 4..], HELLO_ICRC);
        assert!(icrc_ok(&out));
        // One flipped payload bit, or a changed invariant header field, breaks it.
        for i in [HEADERS_LEN + 3, 14 + 12, 42 + 5, 54] {
            let mut bad = out.clone();
            bad[i] ^= 1;
            assert!(!icrc_ok(&bad), "byte {i}");
        }
        // The variant fields do not count: ToS, TTL, IPv4 and UDP checksums, BTH reserved.
        let mut var = out.clone();
        for i in [14 + 1, 14 + 8, 14 + 10, 14 + 11, 34 + 6, 34 + 7, 42 + 4] {
            var[i] ^= 0x5a;
        }
        assert!(icrc_ok(&var));
        let p = etherparse::SlicedPacket::from_ethernet(&out).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else { panic!("not IPv4") };
        assert_eq!(ip.header().source(), [10, 77, 0, 5]);
        assert_eq!(ip.header().destination(), [198, 18, 0, 1]);
        assert_eq!(ip.header().to_header().calc_header_checksum(), ip.header().header_checksum());
        assert_eq!(usize::from(ip.header().total_len()), out.len() - 14);
        let Some(etherparse::TransportSlice::Udp(udp)) = p.transport else { panic!("not UDP") };
        assert_eq!((udp.destination_port(), usize::from(udp.length())), (ROCE_V2_PORT, out.len() - 34));
        let bth = &out[42..54];
        assert_eq!(bth[0], OPCODE_UD_SEND_ONLY);
        assert_eq!(u32::from_be_bytes([0, bth[5], bth[6], bth[7]]), 0x11);
        assert_eq!(u32::from_be_bytes([0, bth[9], bth[10], bth[11]]), 0x12_3456);
        assert_eq!(&out[54..58], &0x1111_1111u32.to_be_bytes());
        assert_eq!(&out[59..62], &[0xab, 0xcd, 0xef]);
        assert_eq!(&out[62..67], b"hello");
    }

    #[test]
    fn bad_fields_are_refused_not_truncated() {
        let f = UdSendV4 {
            dst_mac: [0; 6],
            src_mac: [0; 6],
            src_ip: [0; 4],
            dst_ip: [0; 4],
            tos: 0,
            ttl: 64,
            ip_id: 0,
            udp_src: 0,
            mig_req: false,
            pkey: 0xffff,
            dst_qpn: 1,
            psn: 0,
            qkey: 0,
            src_qpn: 1 << 24,
        };
        let mut out = vec![1, 2, 3];
        assert_eq!(f.build(b"x", &mut out), Err(BuildError::Not24Bits(1 << 24)));
        let f = UdSendV4 { src_qpn: 1, ..f };
        assert_eq!(f.build(&[0; MAX_PAYLOAD + 1], &mut out), Err(BuildError::PayloadTooLong(MAX_PAYLOAD + 1)));
        f.build(&[0; MAX_PAYLOAD], &mut out).unwrap();
        assert!(icrc_ok(&out));
        // Not IPv4, too short: no ICRC, never a panic.
        assert_eq!(icrc_ipv4(&out[..20]), None);
        assert!(!icrc_ok(&[]));
        let mut v6 = out.clone();
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert!(!icrc_ok(&v6));
    }

    #[test]
    fn sources_count_up_from_the_base() {
        assert_eq!(nth_source([10, 77, 0, 0], 0), [10, 77, 0, 0]);
        assert_eq!(nth_source([10, 77, 0, 0], 300), [10, 77, 1, 44]);
        assert_eq!(nth_source([255, 255, 255, 255], 1), [0, 0, 0, 0]);
    }
}
