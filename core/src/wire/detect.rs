//! Which header is in the 40-byte area: IB/RoCE v1 GRH, RoCE v2 IPv6, or
//! RoCE v2 IPv4 (20 undefined bytes, then the IPv4 header).
//!
//! The NIC does not say which, so the consumer has to find out. This module
//! offers the information sources that exist in practice:
//!
//! * **nothing** — the heuristics of the C implementations, reproduced
//!   bit-exactly: [`version_libibverbs`] (`get_grh_header_version`, with its
//!   single-fold checksum) and [`version_kernel`] (`ib_get_rdma_header_version`,
//!   RFC checksum, "neither" is not an error);
//! * a **network type reported with the completion** ([`NetworkType`]): the
//!   kernel's `IB_WC_WITH_NETWORK_HDR_TYPE`, or the packet-type bits the mlx5
//!   provider leaves in `wc.sl` for RoCE UD receives
//!   ([`NetworkType::from_mlx5_sl`]);
//! * a **pre-stamped receive area** ([`Stamp`]): the consumer writes a known
//!   pattern into bytes 0..20 before posting the receive. The NIC overwrites
//!   them with a GRH or IPv6 header and leaves them alone for IPv4, so an
//!   intact stamp identifies IPv4 exactly. Some NICs write all 40 bytes for
//!   IPv4 too, zeroing the front (Soft-RoCE, `rdma_rxe`, Linux 6.1): an
//!   all-zero front cannot be a GRH or IPv6 header (their version nibble is
//!   6, never 0), so under a stamp it counts as IPv4 evidence just like an
//!   intact stamp (see [`detect`]).
//!
//! [`detect`] combines the evidence with the bytes and, where they contradict
//! each other (or, without evidence, where the bytes fit two headers), answers
//! [`Detection::Ambiguous`] instead of guessing.
//!
//! Everything here is straight-line code: every comparison is turned into a
//! mask or a `select_unpredictable`, never into a conditional jump, so the
//! time taken does not depend on the packet and the branch predictor has
//! nothing to mispredict.

use core::hint::select_unpredictable;

use super::{Area, grh, ipv4};

/// The header version the C heuristics report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum HeaderVersion {
    /// Neither: libibverbs fails with `EPROTONOSUPPORT`; the kernel returns 0
    /// and falls through to the next-header test.
    Neither = 0,
    /// IPv4 (RoCE v2 over IPv4).
    Ipv4 = 4,
    /// IPv6 or IB GRH.
    Ipv6 = 6,
}

impl HeaderVersion {
    #[inline]
    fn from_flags(is4: bool, is6: bool) -> HeaderVersion {
        select_unpredictable(
            is4,
            HeaderVersion::Ipv4,
            select_unpredictable(is6, HeaderVersion::Ipv6, HeaderVersion::Neither),
        )
    }
}

/// `(is IPv4, is IPv6)` of the C heuristics, from the version nibble's
/// test, the IPv4 header's first byte and the checksum verdict.
#[inline(always)]
fn heuristic_flags(six: bool, ver_ihl: u8, csum_ok: bool) -> (bool, bool) {
    // Both nibbles against `0x45` with one xor.
    let d = ver_ihl ^ 0x45;
    let v4nib = d & 0xf0 == 0;
    let ihl5 = d & 0x0f == 0;
    let by_csum = ihl5 & csum_ok;
    let is4 = (!six & v4nib) | (six & by_csum);
    let is6 = six & !by_csum;
    (is4, is6)
}

#[inline]
fn version_with(area: &Area, csum_ok: bool) -> HeaderVersion {
    let (is4, is6) = heuristic_flags(grh::version(area) == 6, ipv4::header(area)[ipv4::field::VER_IHL], csum_ok);
    HeaderVersion::from_flags(is4, is6)
}

/// libibverbs' `get_grh_header_version` (SEMANTICS §2.2), bit-exact on x86-64.
#[inline]
pub fn version_libibverbs(area: &Area) -> HeaderVersion {
    version_with(area, ipv4::verify_libibverbs(ipv4::header(area)))
}

/// The kernel's `ib_get_rdma_header_version` (SEMANTICS §2.4).
#[inline]
pub fn version_kernel(area: &Area) -> HeaderVersion {
    version_with(area, ipv4::verify_rfc1071(ipv4::header(area)))
}

/// Which C heuristic decides the header type where there is no evidence
/// ([`flags`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Heuristic {
    /// libibverbs' [`version_libibverbs`] (single-fold checksum).
    Libibverbs,
    /// The kernel's [`version_kernel`] (RFC 1071 checksum).
    Kernel,
}

/// How a profile decides the header type of an area ([`flags`]): its C
/// heuristic, unless there is evidence. [`View::read`](super::View::read)
/// takes it where the completion says that the area holds a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classifier {
    /// The heuristic for [`Evidence::None`].
    pub heuristic: Heuristic,
    /// What the caller knows besides the bytes.
    pub evidence: Evidence,
}

/// The header type as a profile acts on it, `(is IPv4, is GRH or IPv6)`:
/// without evidence, `heuristic`'s [`HeaderVersion`] (both false for
/// `Neither`); with evidence, the answer of [`detect`] (both false for
/// `Ambiguous` and `Unrecognized`; a GRH and an IPv6 header differ in the
/// next header). [`View::read`](super::View::read) takes it with the fields.
///
/// Straight-line code for constant `heuristic` and `evidence` (they fold
/// away); the area's bytes are read once, in the order of the files that
/// know them: the stamp, the GRH fields, the IPv4 header.
#[inline(always)]
pub fn flags(area: &Area, heuristic: Heuristic, evidence: Evidence) -> (bool, bool) {
    let allowed = allowed(area, evidence);
    let six = grh::version(area) == 6;
    let nh = grh::next_header(area);
    let h = ipv4::header(area);
    let rfc_ok = ipv4::verify_rfc1071(h);
    let heuristic_ok = match heuristic {
        Heuristic::Libibverbs => ipv4::verify_libibverbs(h),
        Heuristic::Kernel => rfc_ok,
    };
    let ver_ihl = h[ipv4::field::VER_IHL];
    if matches!(evidence, Evidence::None) {
        heuristic_flags(six, ver_ihl, heuristic_ok)
    } else {
        let d = strict(six, nh, ver_ihl, rfc_ok, evidence, allowed);
        (d == Detection::Ipv4, (d == Detection::Grh) | (d == Detection::Ipv6))
    }
}

/// `enum rdma_network_type` (Linux ≥ 5.10 numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NetworkType {
    /// InfiniBand GRH.
    Ib = 0,
    /// RoCE v1 GRH.
    RoceV1 = 1,
    /// RoCE v2 over IPv4.
    Ipv4 = 2,
    /// RoCE v2 over IPv6.
    Ipv6 = 3,
}

impl NetworkType {
    /// The type of a raw `rdma_network_type` value; `None` above 3.
    #[inline]
    pub const fn from_raw(v: u8) -> Option<NetworkType> {
        match v {
            0 => Some(NetworkType::Ib),
            1 => Some(NetworkType::RoceV1),
            2 => Some(NetworkType::Ipv4),
            3 => Some(NetworkType::Ipv6),
            _ => None,
        }
    }

    /// The packet type that the mlx5 provider leaves in `wc.sl` of a RoCE UD
    /// receive completion: it copies `(cqe.flags_rqpn >> 24) & 0xf` into `sl`,
    /// and the low two bits of that are the CQE's RoCE L3 header type
    /// (0 = GRH, i.e. RoCE v1; 1 = IPv6; 2 = IPv4; 3 is reserved → `None`).
    /// Only meaningful for RoCE ports of mlx5 devices.
    #[inline]
    pub const fn from_mlx5_sl(sl: u8) -> Option<NetworkType> {
        match sl & 3 {
            0 => Some(NetworkType::RoceV1),
            1 => Some(NetworkType::Ipv6),
            2 => Some(NetworkType::Ipv4),
            _ => None,
        }
    }
}

/// A pattern for bytes 0..20 of a receive area, written before the receive is
/// posted (see [`stamp`]). Its first nibble is never 6, so no GRH or IPv6
/// header written by the NIC can leave it intact by accident.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp([u8; 20]);

impl Stamp {
    /// The default stamp, `"udah:ipv4-unwritten"` plus a zero byte.
    pub const DEFAULT: Stamp = Stamp(*b"udah:ipv4-unwritten\0");

    /// Twenty zero bytes: what rxe leaves in front of an IPv4 header (as a
    /// stamp it tells nothing apart on such a NIC; [`detect`] treats a
    /// zeroed front under any stamp as IPv4 evidence).
    pub const ZERO: Stamp = Stamp([0; 20]);

    /// A stamp with these bytes; `None` when the first nibble is 6.
    pub const fn new(bytes: [u8; 20]) -> Option<Stamp> {
        if bytes[0] >> 4 == 6 { None } else { Some(Stamp(bytes)) }
    }

    /// The stamp's bytes.
    pub const fn bytes(&self) -> &[u8; 20] {
        &self.0
    }

    /// Whether `area[0..20]` still holds this stamp.
    #[inline]
    pub fn is_intact(&self, area: &Area) -> bool {
        let [front @ .., _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _] = *area;
        // Compare as integers: no early exit, no branch.
        let a = u128::from_ne_bytes(first16(&front)) ^ u128::from_ne_bytes(first16(&self.0));
        let b = u32::from_ne_bytes(last4(&front)) ^ u32::from_ne_bytes(last4(&self.0));
        (a | u128::from(b)) == 0
    }
}

impl Default for Stamp {
    fn default() -> Stamp {
        Stamp::DEFAULT
    }
}

#[inline]
fn first16(b: &[u8; 20]) -> [u8; 16] {
    let [x @ .., _, _, _, _] = *b;
    x
}

#[inline]
fn last4(b: &[u8; 20]) -> [u8; 4] {
    let [_, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, x @ ..] = *b;
    x
}

/// Writes `stamp` into bytes 0..20 of a receive area. Call it on every area
/// before (re)posting its receive; bytes 20..40 are left alone.
#[inline]
pub fn stamp(area: &mut Area, stamp: &Stamp) {
    let [front @ .., _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _] = area;
    *front = stamp.0;
}

/// What the caller knows about the area besides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Evidence {
    /// Nothing: use the profile's heuristic (bit-exact with the C code).
    #[default]
    None,
    /// The network type was reported with the completion.
    NetworkType(NetworkType),
    /// Bytes 0..20 were stamped with this pattern before the receive was posted.
    Stamped(Stamp),
}

/// The answer of [`detect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Detection {
    /// An IB or RoCE v1 GRH (version 6, next header `0x1B`).
    Grh = 1,
    /// A RoCE v2 IPv6 header (version 6, next header 17).
    Ipv6 = 2,
    /// A RoCE v2 IPv4 header in bytes 20..40 (version 4, IHL 5, valid checksum).
    Ipv4 = 3,
    /// The bytes fit two headers and nothing decides between them, or the
    /// evidence contradicts the bytes.
    Ambiguous = 4,
    /// The bytes fit no header and there is no evidence.
    Unrecognized = 5,
}

/// Classifies the area strictly, using `evidence` (see the module docs).
///
/// | evidence | answer |
/// |---|---|
/// | none | the one header the bytes fit; `Ambiguous` if a GRH/IPv6 header and a valid IPv4 header both fit; `Unrecognized` if none does |
/// | network type | that header if the bytes fit it, else `Ambiguous` |
/// | stamp intact | `Ipv4` if bytes 20..40 have the shape of an IPv4 header, else `Ambiguous` |
/// | stamp overwritten with zeros | the same as intact (rxe zeroes the front of an IPv4 area; a GRH or IPv6 header never starts with a zero nibble) |
/// | stamp overwritten otherwise | `Grh`/`Ipv6` if the bytes are one, else `Ambiguous` |
///
/// "Fits": a GRH has version 6 and next header `0x1B`; an IPv6 header version
/// 6 and next header 17; an IPv4 header version 4 and IHL 5 (the first byte
/// is `0x45`) and, when there is no evidence, a correct RFC 1071 checksum.
/// With evidence the checksum is not required: the NIC has validated the
/// packet, and irdma (and rxe on its loopback path) writes the header with
/// a zero checksum field.
///
/// Inlined always, so that a caller with constant evidence (the usual case:
/// one kind per queue) keeps no dispatch on the evidence kind.
#[inline(always)]
pub fn detect(area: &Area, evidence: Evidence) -> Detection {
    let allowed = allowed(area, evidence);
    let (six, nh) = (grh::version(area) == 6, grh::next_header(area));
    let h = ipv4::header(area);
    strict(six, nh, h[ipv4::field::VER_IHL], ipv4::verify_rfc1071(h), evidence, allowed)
}

/// The candidates that the evidence allows: (IPv4, GRH, IPv6).
#[inline(always)]
fn allowed(area: &Area, evidence: Evidence) -> (bool, bool, bool) {
    match evidence {
        Evidence::None => (true, true, true),
        Evidence::NetworkType(t) => {
            (t == NetworkType::Ipv4, matches!(t, NetworkType::Ib | NetworkType::RoceV1), t == NetworkType::Ipv6)
        }
        Evidence::Stamped(s) => {
            let intact = s.is_intact(area);
            // A zeroed front was written by the NIC but is no GRH/IPv6
            // header (version nibble 0): IPv4 evidence, as an intact stamp.
            (intact | Stamp::ZERO.is_intact(area), !intact, !intact)
        }
    }
}

/// [`detect`] on the bytes it looks at: the version nibble's test, the next
/// header, the IPv4 header's first byte and its RFC 1071 checksum verdict.
#[inline(always)]
fn strict(six: bool, nh: u8, ver_ihl: u8, rfc_ok: bool, evidence: Evidence, allowed: (bool, bool, bool)) -> Detection {
    let (allow4, allow_grh, allow_ip6) = allowed;
    let has_evidence = !matches!(evidence, Evidence::None);
    let grh_fits = six & (nh == grh::NEXT_HDR_IBA);
    let ip6_fits = six & (nh == grh::NEXT_HDR_UDP);
    // With evidence, an IPv4 header need only have the right shape: the NIC
    // validated the packet, and some NICs (irdma) zero the checksum field.
    // Without evidence the checksum is what makes a guess safe.
    let ip4_shape = ver_ihl == 0x45;
    let ip4_fits = ip4_shape & rfc_ok;
    let six_fits = grh_fits | ip6_fits;
    let six = select_unpredictable(grh_fits, Detection::Grh, Detection::Ipv6);

    let c4 = select_unpredictable(has_evidence, ip4_shape, ip4_fits) & allow4;
    let c6 = (grh_fits & allow_grh) | (ip6_fits & allow_ip6);
    let none_fits = !c4 & !c6;
    // With evidence, "no candidate" is a contradiction; without, it is garbage.
    let nothing =
        select_unpredictable(has_evidence | six_fits | ip4_fits, Detection::Ambiguous, Detection::Unrecognized);
    let one = select_unpredictable(c4, Detection::Ipv4, six);
    let answer = select_unpredictable(c4 & c6, Detection::Ambiguous, one);
    select_unpredictable(none_fits, nothing, answer)
}

#[cfg(test)]
mod test {
    use super::*;

    fn ipv4_area(prefix: &[u8; 20]) -> Area {
        let mut a = [0u8; 40];
        a[..20].copy_from_slice(prefix);
        a[20..].copy_from_slice(&[
            0x45, 0, 0, 0x3c, 0, 0, 0x40, 0, 0x40, 0x11, 0xb7, 0x42, 192, 168, 1, 20, 192, 168, 1, 10,
        ]);
        a
    }

    fn v6_area(nh: u8) -> Area {
        let mut a = [0u8; 40];
        a[0] = 0x60;
        a[6] = nh;
        a[8] = 0x20;
        a[39] = 1;
        a
    }

    #[test]
    fn heuristics() {
        let a = ipv4_area(&[0; 20]);
        assert_eq!(version_libibverbs(&a), HeaderVersion::Ipv4);
        assert_eq!(version_kernel(&a), HeaderVersion::Ipv4);
        let mut stale6 = [0u8; 20];
        stale6[0] = 0x60;
        let b = ipv4_area(&stale6);
        assert_eq!(version_libibverbs(&b), HeaderVersion::Ipv4);
        let mut c = b;
        c[31] ^= 1; // bad checksum with a 6 prefix: IPv6
        assert_eq!(version_libibverbs(&c), HeaderVersion::Ipv6);
        assert_eq!(version_kernel(&c), HeaderVersion::Ipv6);
        let mut d = [0u8; 40];
        d[20] = 0x65;
        assert_eq!(version_libibverbs(&d), HeaderVersion::Neither);
        assert_eq!(version_kernel(&d), HeaderVersion::Neither);
    }

    #[test]
    fn strict_without_evidence() {
        assert_eq!(detect(&ipv4_area(&[0; 20]), Evidence::None), Detection::Ipv4);
        assert_eq!(detect(&v6_area(0x1b), Evidence::None), Detection::Grh);
        assert_eq!(detect(&v6_area(17), Evidence::None), Detection::Ipv6);
        assert_eq!(detect(&v6_area(6), Evidence::None), Detection::Unrecognized);
        assert_eq!(detect(&[0; 40], Evidence::None), Detection::Unrecognized);
        // Stale IPv6 prefix in front of a valid IPv4 header: both fit.
        let mut stale = [0u8; 20];
        stale[0] = 0x60;
        stale[6] = 17;
        assert_eq!(detect(&ipv4_area(&stale), Evidence::None), Detection::Ambiguous);
    }

    #[test]
    fn strict_with_network_type() {
        let mut stale = [0u8; 20];
        stale[0] = 0x60;
        stale[6] = 17;
        let a = ipv4_area(&stale);
        assert_eq!(detect(&a, Evidence::NetworkType(NetworkType::Ipv4)), Detection::Ipv4);
        assert_eq!(detect(&a, Evidence::NetworkType(NetworkType::Ipv6)), Detection::Ipv6);
        assert_eq!(detect(&a, Evidence::NetworkType(NetworkType::RoceV1)), Detection::Ambiguous);
        assert_eq!(detect(&v6_area(0x1b), Evidence::NetworkType(NetworkType::Ib)), Detection::Grh);
        assert_eq!(detect(&v6_area(0x1b), Evidence::NetworkType(NetworkType::Ipv4)), Detection::Ambiguous);
    }

    #[test]
    fn strict_with_stamp() {
        let s = Stamp::DEFAULT;
        // IPv4: the NIC writes only bytes 20..40, the stamp survives.
        let mut a = ipv4_area(&[0; 20]);
        stamp(&mut a, &s);
        assert!(s.is_intact(&a));
        assert_eq!(detect(&a, Evidence::Stamped(s)), Detection::Ipv4);
        // A GRH overwrites the stamp even if its tail looks like IPv4.
        let mut stale = [0u8; 20];
        stale[0] = 0x60;
        stale[6] = 0x1b;
        let b = ipv4_area(&stale);
        assert_eq!(detect(&b, Evidence::Stamped(s)), Detection::Grh);
        // Intact stamp but garbage IPv4 header: contradiction.
        let mut c = [0u8; 40];
        stamp(&mut c, &s);
        assert_eq!(detect(&c, Evidence::Stamped(s)), Detection::Ambiguous);
        // irdma writes a zero checksum: with a stamp that is still IPv4, without evidence it is not.
        let mut z = ipv4_area(&[0; 20]);
        z[30] = 0;
        z[31] = 0;
        assert_eq!(detect(&z, Evidence::None), Detection::Unrecognized);
        stamp(&mut z, &s);
        assert_eq!(detect(&z, Evidence::Stamped(s)), Detection::Ipv4);
        assert_eq!(detect(&z, Evidence::NetworkType(NetworkType::Ipv4)), Detection::Ipv4);
        assert!(Stamp::new([0x60; 20]).is_none());
    }

    /// rxe (Linux 6.1, loopback) writes all 40 bytes of an IPv4 area: zeros
    /// over the stamp, then the IPv4 header with a zero checksum. A zero
    /// front is no GRH/IPv6 header, so the stamp's answer is IPv4 (not
    /// `Ambiguous`, which would make `serve --stamp` refuse every RoCE
    /// v2/IPv4 request on rxe).
    #[test]
    fn rxe_zeroed_front_under_a_stamp_is_ipv4() {
        let mut a = [0u8; 40];
        a[20..].copy_from_slice(&[
            0x45, 0, 0, 0x74, 0xba, 0x09, 0x40, 0, 0x40, 0x11, 0, 0, 0xc6, 0x12, 0, 1, 0xc6, 0x12, 0, 1,
        ]);
        let s = Stamp::DEFAULT;
        assert!(!s.is_intact(&a), "rxe destroyed the stamp");
        assert_eq!(detect(&a, Evidence::Stamped(s)), Detection::Ipv4);
        // Without evidence the zero checksum still makes it unrecognised
        // (the strict rule), while libibverbs' heuristic says IPv4.
        assert_eq!(detect(&a, Evidence::None), Detection::Unrecognized);
        assert_eq!(version_libibverbs(&a), HeaderVersion::Ipv4);
        // A zero front with no IPv4 header behind it is still a contradiction.
        assert_eq!(detect(&[0; 40], Evidence::Stamped(s)), Detection::Ambiguous);
        // A front overwritten with something else that is not a version-6
        // header stays a contradiction (no guess).
        let mut g = a;
        g[0] = 0x11;
        assert_eq!(detect(&g, Evidence::Stamped(s)), Detection::Ambiguous);
        // A real GRH or IPv6 header over the stamp is unchanged.
        assert_eq!(detect(&v6_area(17), Evidence::Stamped(s)), Detection::Ipv6);
        assert_eq!(detect(&v6_area(0x1b), Evidence::Stamped(s)), Detection::Grh);
        assert_eq!(detect(&a, Evidence::Stamped(Stamp::ZERO)), Detection::Ipv4);
    }

    #[test]
    fn mlx5_bits() {
        assert_eq!(NetworkType::from_mlx5_sl(0x2), Some(NetworkType::Ipv4));
        assert_eq!(NetworkType::from_mlx5_sl(0x5), Some(NetworkType::Ipv6));
        assert_eq!(NetworkType::from_mlx5_sl(0x8), Some(NetworkType::RoceV1));
        assert_eq!(NetworkType::from_mlx5_sl(0x3), None);
    }
}
