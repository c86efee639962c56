//! Global identifiers (GIDs): 16 bytes in wire order, printed as IPv6 addresses.

use core::fmt;

/// A GID: 16 bytes in wire (network) order.
///
/// InfiniBand GIDs are a 64-bit subnet prefix followed by a 64-bit interface
/// id; RoCE GIDs are IPv6 addresses, or IPv4-mapped IPv6 addresses
/// (`::ffff:a.b.c.d`) for IPv4. The type has alignment 1, so it can be read
/// from any receive buffer; convert to the C `union ibv_gid` (alignment 8) by
/// value, never by casting a pointer.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct Gid(pub [u8; 16]);

/// The prefix of an IPv4-mapped IPv6 address: ten zero bytes, then `ff ff`.
const V4_MAPPED_PREFIX: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

/// Interface id of the InfiniBand SA well-known GUID (`IB_SA_WELL_KNOWN_GUID`,
/// `(1 << 57) | 2`), as GID bytes 8..16.
pub const SA_WELL_KNOWN_INTERFACE_ID: [u8; 8] = [0x02, 0, 0, 0, 0, 0, 0, 0x02];

impl Gid {
    /// The all-zero GID. The kernel never stores it: a slot holding it is empty.
    pub const ZERO: Gid = Gid([0; 16]);

    /// The IPv4-mapped GID `::ffff:a.b.c.d` of an IPv4 address in network order.
    #[inline]
    pub const fn from_ipv4(addr: [u8; 4]) -> Gid {
        let [a, b, c, d] = addr;
        Gid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d])
    }

    /// Whether this is an IPv4-mapped GID (`::ffff:0:0/96`).
    #[inline]
    pub fn is_ipv4_mapped(&self) -> bool {
        let (prefix, _) = split_12(&self.0);
        *prefix == V4_MAPPED_PREFIX
    }

    /// The IPv4 address of an IPv4-mapped GID.
    #[inline]
    pub fn ipv4(&self) -> Option<[u8; 4]> {
        let (_, addr) = split_12(&self.0);
        self.is_ipv4_mapped().then_some(*addr)
    }

    /// Whether the GID is multicast in the sense of both C implementations'
    /// explicit checks: byte 0 is `0xff` (`ff00::/8`).
    #[inline]
    pub const fn is_multicast(&self) -> bool {
        self.0[0] == 0xff
    }

    /// Whether the GID is multicast in the sense of the kernel's
    /// `rdma_is_multicast_addr`: `ff00::/8`, or IPv4-mapped in `224.0.0.0/4`.
    #[inline]
    pub fn is_multicast_any(&self) -> bool {
        self.is_multicast() || (self.is_ipv4_mapped() && self.0[12] & 0xf0 == 0xe0)
    }

    /// Whether the GID is link-local in the kernel's narrow sense
    /// (`rdma_link_local_addr`): bytes 0..8 are exactly `fe80:0:0:0`.
    #[inline]
    pub fn is_link_local(&self) -> bool {
        let (prefix, _) = split_8(&self.0);
        *prefix == [0xfe, 0x80, 0, 0, 0, 0, 0, 0]
    }

    /// The 64-bit subnet prefix (bytes 0..8), big-endian.
    #[inline]
    pub fn subnet_prefix(&self) -> u64 {
        let (prefix, _) = split_8(&self.0);
        u64::from_be_bytes(*prefix)
    }

    /// The interface id (bytes 8..16), in wire order.
    #[inline]
    pub fn interface_id(&self) -> [u8; 8] {
        let (_, iid) = split_8(&self.0);
        *iid
    }

    /// The MAC address the kernel derives from a link-local GID
    /// (`rdma_get_ll_mac`): bytes 8, 9, 10, 13, 14, 15 with bit 1 of the first
    /// inverted (the modified EUI-64 reversal; bytes 11..13 are not checked).
    #[inline]
    pub const fn link_local_mac(&self) -> [u8; 6] {
        let g = &self.0;
        [g[8] ^ 0x02, g[9], g[10], g[13], g[14], g[15]]
    }

    /// The link-local GID of a MAC address (modified EUI-64).
    #[inline]
    pub const fn link_local_from_mac(mac: [u8; 6]) -> Gid {
        let [m0, m1, m2, m3, m4, m5] = mac;
        Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, m0 ^ 0x02, m1, m2, 0xff, 0xfe, m3, m4, m5])
    }

    /// The GID word form: bytes 0..8 and 8..16, each read as a
    /// little-endian `u64` (so that a word's bytes in memory order are the
    /// GID's). The GID-table snapshot, the profiles' hot paths and the
    /// attribute's [word form](crate::attr::AttrWords) all hold GIDs so.
    #[inline(always)]
    pub const fn to_words(self) -> (u64, u64) {
        let v = u128::from_le_bytes(self.0);
        (v as u64, (v >> 64) as u64)
    }

    /// The GID of its [word form](Self::to_words).
    #[inline(always)]
    pub const fn from_words(w0: u64, w1: u64) -> Gid {
        Gid(((w1 as u128) << 64 | w0 as u128).to_le_bytes())
    }

    /// The GID as a 128-bit big-endian integer.
    #[inline]
    pub const fn to_u128(self) -> u128 {
        u128::from_be_bytes(self.0)
    }

    /// The GID of a 128-bit big-endian integer.
    #[inline]
    pub const fn from_u128(v: u128) -> Gid {
        Gid(v.to_be_bytes())
    }
}

#[inline]
fn split_12(b: &[u8; 16]) -> (&[u8; 12], &[u8; 4]) {
    let (head, tail) = b.split_first_chunk::<12>().unwrap_or((&[0; 12], &[]));
    (head, tail.first_chunk::<4>().unwrap_or(&[0; 4]))
}

#[inline]
fn split_8(b: &[u8; 16]) -> (&[u8; 8], &[u8; 8]) {
    let (head, tail) = b.split_first_chunk::<8>().unwrap_or((&[0; 8], &[]));
    (head, tail.first_chunk::<8>().unwrap_or(&[0; 8]))
}

impl From<[u8; 16]> for Gid {
    fn from(b: [u8; 16]) -> Gid {
        Gid(b)
    }
}

impl From<Gid> for [u8; 16] {
    fn from(g: Gid) -> [u8; 16] {
        g.0
    }
}

impl From<core::net::Ipv6Addr> for Gid {
    fn from(a: core::net::Ipv6Addr) -> Gid {
        Gid(a.octets())
    }
}

impl From<Gid> for core::net::Ipv6Addr {
    fn from(g: Gid) -> core::net::Ipv6Addr {
        core::net::Ipv6Addr::from(g.0)
    }
}

impl From<core::net::Ipv4Addr> for Gid {
    fn from(a: core::net::Ipv4Addr) -> Gid {
        Gid::from_ipv4(a.octets())
    }
}

impl fmt::Display for Gid {
    /// Formats as an IPv6 address (`fe80::2:c903:11:2233`, `::ffff:192.168.1.10`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&core::net::Ipv6Addr::from(self.0), f)
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use std::format;

    #[test]
    fn ipv4_mapped_round_trip() {
        let g = Gid::from_ipv4([192, 168, 1, 10]);
        assert!(g.is_ipv4_mapped());
        assert_eq!(g.ipv4(), Some([192, 168, 1, 10]));
        assert_eq!(format!("{g}"), "::ffff:192.168.1.10");
        assert_eq!(Gid::ZERO.ipv4(), None);
    }

    #[test]
    fn multicast_and_link_local() {
        let mut g = Gid::ZERO;
        g.0[0] = 0xff;
        assert!(g.is_multicast());
        assert!(Gid::from_ipv4([239, 1, 1, 1]).is_multicast_any());
        assert!(!Gid::from_ipv4([239, 1, 1, 1]).is_multicast());
        let ll = Gid::link_local_from_mac([0x00, 0x02, 0xc9, 0x44, 0x55, 0x66]);
        assert!(ll.is_link_local());
        assert_eq!(format!("{ll}"), "fe80::202:c9ff:fe44:5566");
        assert_eq!(ll.link_local_mac(), [0x00, 0x02, 0xc9, 0x44, 0x55, 0x66]);
        let mut not_ll = ll;
        not_ll.0[7] = 1;
        assert!(!not_ll.is_link_local());
    }

    #[test]
    fn u128_round_trip() {
        let g = Gid::from_ipv4([10, 0, 0, 1]);
        assert_eq!(Gid::from_u128(g.to_u128()), g);
        assert_eq!(g.interface_id(), [0, 0, 0xff, 0xff, 10, 0, 0, 1]);
    }
}
