//! The InfiniBand Base Transport Header (BTH, 12 bytes) and the Datagram
//! Extended Transport Header (DETH, 8 bytes) that follows it on UD packets.
//! Both are the same on native InfiniBand, RoCE v1 and RoCE v2.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    OpCode     |S|M|Pad| TVer  |          Partition Key        |  BTH 0..4
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |F|B|  Resv6    |          Destination QP (24 bits)             |  BTH 4..8
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |A|   Resv7     |       Packet Sequence Number (24 bits)        |  BTH 8..12
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       Queue Key (Q_Key)                       |  DETH 0..4
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    Reserved   |          Source QP (24 bits)                  |  DETH 4..8
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! (IBA vol. 1 §9.2 "Base Transport Header", §9.3.3 "Datagram Extended
//! Transport Header"; `F`/`B` are FECN/BECN, Annex A10.)
//!
//! The opcode's top three bits name the transport and the low five the
//! operation. Only UD `SEND only` (0x64) and `SEND only with immediate`
//! (0x65) reach a UD receive queue; reliable-datagram packets (0x40..0x5F)
//! also carry a DETH (after an RDETH) but are not UD.

/// Length of the BTH.
pub const HEADER_LEN: usize = 12;
/// Length of the DETH.
pub const DETH_LEN: usize = 8;

/// Byte offsets inside the BTH.
pub mod field {
    use core::ops::Range;
    /// Opcode.
    pub const OPCODE: usize = 0;
    /// Solicited event, migration request, pad count, transport version.
    pub const FLAGS_TVER: usize = 1;
    /// Partition key, big-endian.
    pub const PKEY: Range<usize> = 2..4;
    /// FECN, BECN, reserved.
    pub const FECN_BECN: usize = 4;
    /// Destination QP, big-endian, 24 bits.
    pub const DEST_QP: Range<usize> = 5..8;
    /// Acknowledge request and reserved.
    pub const ACK_REQ: usize = 8;
    /// Packet sequence number, big-endian, 24 bits.
    pub const PSN: Range<usize> = 9..12;
}

/// Byte offsets inside the DETH.
pub mod deth_field {
    use core::ops::Range;
    /// Queue key, big-endian.
    pub const QKEY: Range<usize> = 0..4;
    /// Reserved.
    pub const RESERVED: usize = 4;
    /// Source QP, big-endian, 24 bits.
    pub const SRC_QP: Range<usize> = 5..8;
}

/// BTH opcodes that matter here.
pub mod opcode {
    /// UD `SEND only`.
    pub const UD_SEND_ONLY: u8 = 0x64;
    /// UD `SEND only with immediate`.
    pub const UD_SEND_ONLY_IMM: u8 = 0x65;
}

/// The transport named by the top three bits of an opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Transport {
    /// Reliable connection (`000`).
    Rc = 0,
    /// Unreliable connection (`001`).
    Uc = 1,
    /// Reliable datagram (`010`): carries an RDETH and a DETH.
    Rd = 2,
    /// Unreliable datagram (`011`): carries a DETH.
    Ud = 3,
    /// Congestion notification packet (`100`).
    Cnp = 4,
    /// Extended reliable connection (`101`).
    Xrc = 5,
    /// Manufacturer-specific (`110`, `111`).
    Vendor = 6,
}

impl Transport {
    /// The transport of `opcode`.
    #[inline]
    pub const fn of(opcode: u8) -> Transport {
        match opcode >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            5 => Transport::Xrc,
            _ => Transport::Vendor,
        }
    }
}

/// A parsed BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BthRepr {
    /// Opcode.
    pub opcode: u8,
    /// Solicited event.
    pub solicited: bool,
    /// Migration request.
    pub mig_req: bool,
    /// Pad count: bytes of padding at the end of the payload (2 bits).
    pub pad_count: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification.
    pub fecn: bool,
    /// Backward explicit congestion notification.
    pub becn: bool,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

/// Why a byte string is not a well-formed BTH or DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BthMalformed {
    /// Fewer bytes than the header needs.
    Truncated {
        /// The length that was given.
        len: usize,
        /// The length the header needs.
        need: usize,
    },
    /// The transport version is not 0 (the only version IBA defines).
    Version(u8),
}

impl core::fmt::Display for BthMalformed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BthMalformed::Truncated { len, need } => write!(f, "transport header truncated: {len} bytes, need {need}"),
            BthMalformed::Version(v) => write!(f, "BTH transport version {v}, expected 0"),
        }
    }
}

impl core::error::Error for BthMalformed {}

#[inline]
const fn be24(a: u8, b: u8, c: u8) -> u32 {
    u32::from_be_bytes([0, a, b, c])
}

#[inline]
const fn to_be24(v: u32) -> [u8; 3] {
    let [_, a, b, c] = v.to_be_bytes();
    [a, b, c]
}

impl BthRepr {
    /// Parses the first [`HEADER_LEN`] bytes of `buf`; reserved bits are
    /// ignored, the transport version must be 0.
    pub fn parse(buf: &[u8]) -> Result<BthRepr, BthMalformed> {
        let &[op, flags, p0, p1, fb, q0, q1, q2, a, s0, s1, s2] =
            buf.first_chunk::<HEADER_LEN>().ok_or(BthMalformed::Truncated { len: buf.len(), need: HEADER_LEN })?;
        if flags & 0xf != 0 {
            return Err(BthMalformed::Version(flags & 0xf));
        }
        Ok(BthRepr {
            opcode: op,
            solicited: flags & 0x80 != 0,
            mig_req: flags & 0x40 != 0,
            pad_count: (flags >> 4) & 3,
            pkey: u16::from_be_bytes([p0, p1]),
            fecn: fb & 0x80 != 0,
            becn: fb & 0x40 != 0,
            dest_qp: be24(q0, q1, q2),
            ack_req: a & 0x80 != 0,
            psn: be24(s0, s1, s2),
        })
    }

    /// Writes the header; reserved bits and the transport version are zero,
    /// `dest_qp` and `psn` are truncated to 24 bits.
    pub fn emit(&self, out: &mut [u8; HEADER_LEN]) {
        let flags = (u8::from(self.solicited) << 7) | (u8::from(self.mig_req) << 6) | ((self.pad_count & 3) << 4);
        let [p0, p1] = self.pkey.to_be_bytes();
        let fb = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6);
        let [q0, q1, q2] = to_be24(self.dest_qp);
        let [s0, s1, s2] = to_be24(self.psn);
        *out = [self.opcode, flags, p0, p1, fb, q0, q1, q2, u8::from(self.ack_req) << 7, s0, s1, s2];
    }

    /// The transport of the opcode.
    #[inline]
    pub const fn transport(&self) -> Transport {
        Transport::of(self.opcode)
    }

    /// Whether this is a packet a UD receive queue accepts: `SEND only`
    /// (0x64) or `SEND only with immediate` (0x65). Other UD opcodes are
    /// reserved; RD packets carry a DETH too but are not UD.
    #[inline]
    pub const fn is_ud_send(&self) -> bool {
        matches!(self.opcode, opcode::UD_SEND_ONLY | opcode::UD_SEND_ONLY_IMM)
    }

    /// Whether the opcode carries immediate data (an `ImmDt` after the DETH
    /// on UD), for the UD opcodes.
    #[inline]
    pub const fn ud_with_immediate(&self) -> bool {
        self.opcode == opcode::UD_SEND_ONLY_IMM
    }
}

/// A parsed DETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DethRepr {
    /// Queue key.
    pub qkey: u32,
    /// Source QP (24 bits): the completion's `src_qp`.
    pub src_qp: u32,
}

impl DethRepr {
    /// Parses the first [`DETH_LEN`] bytes of `buf`; the reserved byte is
    /// ignored.
    pub fn parse(buf: &[u8]) -> Result<DethRepr, BthMalformed> {
        let &[k0, k1, k2, k3, _, q0, q1, q2] =
            buf.first_chunk::<DETH_LEN>().ok_or(BthMalformed::Truncated { len: buf.len(), need: DETH_LEN })?;
        Ok(DethRepr { qkey: u32::from_be_bytes([k0, k1, k2, k3]), src_qp: be24(q0, q1, q2) })
    }

    /// Writes the header; the reserved byte is zero and `src_qp` is
    /// truncated to 24 bits.
    pub fn emit(&self, out: &mut [u8; DETH_LEN]) {
        let [k0, k1, k2, k3] = self.qkey.to_be_bytes();
        let [q0, q1, q2] = to_be24(self.src_qp);
        *out = [k0, k1, k2, k3, 0, q0, q1, q2];
    }
}

#[cfg(test)]
mod test {
    use super::*;

    // BTH + DETH of an RDMA-CM MAD from the RoCE v2 capture: UD SEND only,
    // M set, P_Key 0xffff, to QP 1, PSN 9; Q_Key 0x80010000 from QP 1.
    static PACKET_BYTES: [u8; 20] = [
        0x64, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x09, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x01,
    ];

    // An RC SEND only with every flag set and reserved bits set.
    static RC_BYTES: [u8; 12] = [0x04, 0xf0, 0x12, 0x34, 0xff, 0xab, 0xcd, 0xef, 0xff, 0x01, 0x02, 0x03];

    #[test]
    fn test_parse() {
        let b = BthRepr::parse(&PACKET_BYTES).unwrap();
        assert_eq!(
            b,
            BthRepr {
                opcode: 0x64,
                solicited: false,
                mig_req: true,
                pad_count: 0,
                pkey: 0xffff,
                fecn: false,
                becn: false,
                dest_qp: 1,
                ack_req: false,
                psn: 9,
            }
        );
        assert!(b.is_ud_send() && !b.ud_with_immediate());
        assert_eq!(b.transport(), Transport::Ud);
        let d = DethRepr::parse(&PACKET_BYTES[HEADER_LEN..]).unwrap();
        assert_eq!(d, DethRepr { qkey: 0x8001_0000, src_qp: 1 });

        let rc = BthRepr::parse(&RC_BYTES).unwrap();
        assert_eq!((rc.opcode, rc.solicited, rc.mig_req, rc.pad_count), (0x04, true, true, 3));
        assert_eq!(
            (rc.pkey, rc.fecn, rc.becn, rc.dest_qp, rc.ack_req, rc.psn),
            (0x1234, true, true, 0xabcdef, true, 0x010203)
        );
        assert_eq!(rc.transport(), Transport::Rc);
        assert!(!rc.is_ud_send());
    }

    #[test]
    fn test_emit() {
        let b = BthRepr::parse(&PACKET_BYTES).unwrap();
        let mut out = [0x55u8; HEADER_LEN];
        b.emit(&mut out);
        assert_eq!(&out[..], &PACKET_BYTES[..HEADER_LEN]);
        let d = DethRepr::parse(&PACKET_BYTES[HEADER_LEN..]).unwrap();
        let mut dout = [0x55u8; DETH_LEN];
        d.emit(&mut dout);
        assert_eq!(&dout[..], &PACKET_BYTES[HEADER_LEN..]);
        // Reserved bits come back as zero.
        BthRepr::parse(&RC_BYTES).unwrap().emit(&mut out);
        assert_eq!(out, [0x04, 0xf0, 0x12, 0x34, 0xc0, 0xab, 0xcd, 0xef, 0x80, 0x01, 0x02, 0x03]);
    }

    #[test]
    fn test_transports() {
        assert_eq!(Transport::of(0x24), Transport::Uc);
        assert_eq!(Transport::of(0x44), Transport::Rd);
        assert_eq!(Transport::of(0x81), Transport::Cnp);
        assert_eq!(Transport::of(0xa4), Transport::Xrc);
        assert_eq!(Transport::of(0xe0), Transport::Vendor);
        // RD SEND only carries a DETH but is not UD; other UD opcodes are reserved.
        for op in [0x44u8, 0x60, 0x66, 0x7f] {
            let mut b = PACKET_BYTES;
            b[0] = op;
            assert!(!BthRepr::parse(&b).unwrap().is_ud_send(), "{op:#x}");
        }
        let mut b = PACKET_BYTES;
        b[0] = 0x65;
        assert!(BthRepr::parse(&b).unwrap().ud_with_immediate());
    }

    #[test]
    fn test_malformed() {
        assert_eq!(BthRepr::parse(&PACKET_BYTES[..11]), Err(BthMalformed::Truncated { len: 11, need: 12 }));
        assert_eq!(DethRepr::parse(&PACKET_BYTES[12..19]), Err(BthMalformed::Truncated { len: 7, need: 8 }));
        let mut b = PACKET_BYTES;
        b[1] = 0x41;
        assert_eq!(BthRepr::parse(&b), Err(BthMalformed::Version(1)));
    }
}
