//! A source address a device reports in the completion instead of the
//! 40-byte area (EFA's `efadv_wc_read_sgid`), and the area it stands for.
//!
//! The profiles read the area; a completion-borne address becomes the area
//! they already read ([`SourceAddress::to_area`]), in the responder's shared
//! front end ([`crate::ah::Completion::source`]), so that no profile has a
//! second code path.

use super::{Area, Gid, GrhRepr, Ipv4Repr, NetworkType};

/// The hop limit (IPv4 TTL) written into an area made from a completion's
/// address: the header fields the device did not report are constants.
pub const SOURCE_HOP_LIMIT: u8 = 64;

/// A receive's addresses as the completion reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceAddress {
    /// The sender's GID.
    pub sgid: Gid,
    /// The GID the packet was sent to (ours).
    pub dgid: Gid,
    /// The header the packet had.
    pub network: NetworkType,
}

impl SourceAddress {
    /// The 40-byte area of a packet with these addresses, as a NIC that
    /// writes the area would have written it: for RoCE v2/IPv4 20 zero
    /// bytes and an IPv4 header (valid checksum, UDP), else a GRH (next
    /// header UDP for RoCE v2/IPv6, 0x1b for IB and RoCE v1). Traffic class
    /// and flow label, which the completion does not carry, are 0; the hop
    /// limit is [`SOURCE_HOP_LIMIT`]. An IPv4 type with a GID that is not
    /// IPv4-mapped writes the GRH instead (what such a packet would be).
    pub fn to_area(&self) -> Area {
        let mut area = [0u8; 40];
        match (self.network, self.sgid.ipv4(), self.dgid.ipv4()) {
            (NetworkType::Ipv4, Some(src), Some(dst)) => Ipv4Repr {
                tos: 0,
                total_len: 0,
                ident: 0,
                flags_frag: 0x4000,
                ttl: SOURCE_HOP_LIMIT,
                protocol: 17,
                src,
                dst,
            }
            .emit(&mut area),
            (network, ..) => GrhRepr {
                next_header: if matches!(network, NetworkType::Ipv4 | NetworkType::Ipv6) { 17 } else { 0x1b },
                hop_limit: SOURCE_HOP_LIMIT,
                sgid: self.sgid,
                dgid: self.dgid,
                ..GrhRepr::default()
            }
            .emit(&mut area),
        }
        area
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::grh;

    #[test]
    fn areas_read_back_as_their_addresses() {
        let a = Gid::from_ipv4([10, 0, 0, 2]);
        let b = Gid::from_ipv4([10, 0, 0, 1]);
        let v4 = SourceAddress { sgid: a, dgid: b, network: NetworkType::Ipv4 }.to_area();
        assert_eq!(&v4[..20], &[0u8; 20]);
        assert_eq!((&v4[32..36], &v4[36..40]), (&[10, 0, 0, 2][..], &[10, 0, 0, 1][..]));
        let h: [u8; 20] = v4[20..].try_into().unwrap();
        let sum = crate::wire::ipv4::checksum_rfc1071(&h);
        assert!(sum != 0 && sum.to_be_bytes() == [h[10], h[11]], "a valid checksum");
        let x = Gid([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        let y = Gid([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        for (net, nh) in [(NetworkType::Ipv6, 17), (NetworkType::Ib, 0x1b), (NetworkType::RoceV1, 0x1b)] {
            let g = SourceAddress { sgid: x, dgid: y, network: net }.to_area();
            assert_eq!((grh::sgid(&g), grh::dgid(&g), grh::next_header(&g), g[0] >> 4), (x, y, nh, 6));
        }
        // IPv4 type with non-mapped GIDs: a GRH, not garbage.
        let g = SourceAddress { sgid: x, dgid: y, network: NetworkType::Ipv4 }.to_area();
        assert_eq!(grh::sgid(&g), x);
    }
}
