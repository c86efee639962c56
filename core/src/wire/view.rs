//! The area read once: every field a profile takes from the 40 bytes, as
//! values in registers, loaded at constant offsets, and the header type
//! ([`View::read`]).
//!
//! A profile reads the area only through a [`View`], once per completion,
//! so that a completion's walk enters [`wire`](super) once and leaves it
//! with everything it needs: nothing of the profile calls back into
//! `wire` with the area afterwards. GIDs are in
//! their word form ([`Gid::to_words`](super::Gid::to_words)): bytes 0..8 and 8..16, each a
//! little-endian `u64`, which is how the GID-table snapshot and the
//! attribute's [word form](crate::attr::AttrWords) hold them.
//!
//! ```
//! use udah_core::wire::{Classifier, Evidence, Gid, GrhRepr, Heuristic, View};
//!
//! let (s, d) = (Gid::from_ipv4([10, 0, 0, 2]), Gid::from_ipv4([10, 0, 0, 1]));
//! let mut area = [0u8; 40];
//! GrhRepr { sgid: s, dgid: d, flow_label: 7, traffic_class: 3, next_header: 17, ..GrhRepr::default() }
//!     .emit(&mut area);
//! let v = View::read(&area, Some(Classifier { heuristic: Heuristic::Libibverbs, evidence: Evidence::None }));
//! assert_eq!((v.is4, v.is6), (false, true));
//! assert_eq!((v.sgid, v.dgid), (s.to_words(), d.to_words()));
//! assert_eq!((v.flow_label(), v.traffic_class(), v.next_header), (7, 3, 17));
//! ```

use super::detect::{self, Classifier};
use super::{Area, grh, ipv4, le64, octet};

/// Bytes 8..12 of an IPv4-mapped GID (`00 00 ff ff`) as the lower half of
/// the second GID word; the address is its upper half.
const V4_MAPPED_LO: u64 = 0xffff_0000;
/// The upper half of a word (its bytes 4..8 in memory order).
const HIGH32: u64 = 0xffff_ffff_0000_0000;
/// The first GID word of a link-local GID (`fe80:0:0:0`).
const LINK_LOCAL_W0: u64 = u64::from_le_bytes([0xfe, 0x80, 0, 0, 0, 0, 0, 0]);

/// The area's fields, both readings (GRH/IPv6 and IPv4) side by side, and
/// the header type ([`detect::flags`]) by which the profile selects between
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct View {
    /// `W0`, big-endian: version, traffic class, flow label
    /// ([`grh::field::VER_TC_FLOW`]; for IPv4 the undefined front).
    pub w0: u32,
    /// The GRH next header.
    pub next_header: u8,
    /// The GRH hop limit.
    pub hop_limit: u8,
    /// The GRH source GID, word form.
    pub sgid: (u64, u64),
    /// The GRH destination GID, word form.
    pub dgid: (u64, u64),
    /// The IPv4 type of service.
    pub tos: u8,
    /// The IPv4 time to live.
    pub ttl: u8,
    /// The IPv4 source address as an IPv4-mapped GID, word form.
    pub src4: (u64, u64),
    /// The IPv4 destination address as an IPv4-mapped GID, word form.
    pub dst4: (u64, u64),
    /// The header is IPv4 (RoCE v2 over IPv4), by the evidence or the
    /// heuristic ([`detect::flags`]).
    pub is4: bool,
    /// The header is a GRH or an IPv6 header (which, by the next header).
    /// Neither flag: the heuristic's "neither", or evidence that
    /// contradicts the bytes.
    pub is6: bool,
}

impl View {
    /// Reads every field with constant offsets: no branch, no check left
    /// (the field offsets are those of [`grh::field`] and
    /// [`ipv4::field`]), and, with a `classifier`, the header type as
    /// [`detect::flags`] decides it (without one, where the completion
    /// says that the area holds no header or the profile does not look,
    /// neither flag is set and no checksum is computed). A caller's unused
    /// fields cost nothing once inlined, and a constant classifier folds
    /// away.
    #[inline(always)]
    pub fn read(area: &Area, classifier: Option<Classifier>) -> View {
        let (is4, is6) = match classifier {
            Some(c) => detect::flags(area, c.heuristic, c.evidence),
            None => (false, false),
        };
        let w0 = le64(area, grh::field::VER_TC_FLOW.start);
        // The IPv4 source is the lower half, the destination the upper half,
        // of the word at 32 (which is also the second half of the DGID).
        let w32 = le64(area, grh::field::DGID.start + 8);
        // Single bytes, not wider loads: the checksum's loads of the IPv4
        // header stay as they are.
        let tos = octet(area, ipv4::OFFSET + ipv4::field::TOS);
        let ttl = octet(area, ipv4::OFFSET + ipv4::field::TTL);
        let (sgid, dgid_hi) = (
            (le64(area, grh::field::SGID.start), le64(area, grh::field::SGID.start + 8)),
            le64(area, grh::field::DGID.start),
        );
        View {
            w0: (w0 as u32).swap_bytes(),
            next_header: octet(area, grh::field::NEXT_HEADER),
            hop_limit: octet(area, grh::field::HOP_LIMIT),
            sgid,
            dgid: (dgid_hi, w32),
            tos,
            ttl,
            src4: (0, (w32 << 32) | V4_MAPPED_LO),
            dst4: (0, (w32 & HIGH32) | V4_MAPPED_LO),
            is4,
            is6,
        }
    }

    /// The flow label, `W0 & 0xfffff`.
    #[inline(always)]
    pub const fn flow_label(&self) -> u32 {
        self.w0 & 0x000f_ffff
    }

    /// The packet's destination GID, word form: [`dst4`](Self::dst4) if
    /// `is4`, else [`dgid`](Self::dgid), without a jump. The two share the
    /// upper half of their second word (the area's bytes 36..40, which are
    /// the IPv4 destination address), so only the lower half is chosen,
    /// with a mask: fewer instructions than a choice of whole words.
    #[inline(always)]
    pub const fn local(&self, is4: bool) -> (u64, u64) {
        let keep = (is4 as u64).wrapping_sub(1); // all ones unless `is4`
        // The lower half of the second word is the mapped prefix's
        // `00 00 ff ff` for IPv4 (the upper halves are equal).
        let low = ((self.dgid.1 ^ V4_MAPPED_LO) & 0xffff_ffff) & !keep;
        (self.dgid.0 & keep, self.dgid.1 ^ low)
    }

    /// The GRH traffic class, `(W0 >> 20) & 0xff`.
    #[inline(always)]
    pub const fn traffic_class(&self) -> u8 {
        (self.w0 >> 20) as u8
    }
}

/// Whether a GID in word form is IPv4-mapped (`::ffff:0:0/96`).
#[inline(always)]
pub const fn words_ipv4_mapped(g: (u64, u64)) -> bool {
    g.0 == 0 && g.1 as u32 == V4_MAPPED_LO as u32
}

/// Whether a GID in word form is link-local in the kernel's narrow sense
/// ([`Gid::is_link_local`](super::Gid::is_link_local): bytes 0..8 exactly `fe80:0:0:0`).
#[inline(always)]
pub const fn words_link_local(g: (u64, u64)) -> bool {
    g.0 == LINK_LOCAL_W0
}

const _: () = {
    // The view's offsets are the field ranges': a field that moves or
    // changes size stops the build here.
    assert!(grh::field::SGID.end - grh::field::SGID.start == 16);
    assert!(grh::field::DGID.end - grh::field::DGID.start == 16 && grh::field::DGID.end == super::AREA_LEN);
    assert!(grh::field::VER_TC_FLOW.start == 0 && grh::field::VER_TC_FLOW.end == 4);
    assert!(grh::field::NEXT_HEADER < 8 && grh::field::HOP_LIMIT < 8);
    assert!(ipv4::OFFSET + ipv4::field::TTL < super::AREA_LEN);
    assert!(ipv4::OFFSET + ipv4::field::SRC_ADDR.start == grh::field::DGID.start + 8);
    assert!(ipv4::field::DST_ADDR.start == ipv4::field::SRC_ADDR.end && ipv4::field::DST_ADDR.end == ipv4::HEADER_LEN);
};

#[cfg(test)]
mod test {
    use super::*;
    use crate::wire::{Evidence, Gid, GrhRepr, Heuristic, Ipv4Repr};

    #[test]
    fn view_is_the_accessors() {
        let mut area = [0u8; 40];
        for (i, b) in area.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37) ^ 0x5a;
        }
        let v = View::read(&area, None);
        assert_eq!(v.w0, grh::word0(&area));
        assert_eq!((v.flow_label(), v.traffic_class()), (grh::flow_label(&area), grh::traffic_class(&area)));
        assert_eq!((v.next_header, v.hop_limit), (grh::next_header(&area), grh::hop_limit(&area)));
        assert_eq!((v.sgid, v.dgid), (grh::sgid(&area).to_words(), grh::dgid(&area).to_words()));
        let h = ipv4::header(&area);
        assert_eq!((v.tos, v.ttl), (h[ipv4::field::TOS], h[ipv4::field::TTL]));
        assert_eq!(v.src4, Gid::from_ipv4([h[12], h[13], h[14], h[15]]).to_words());
        assert_eq!(v.dst4, Gid::from_ipv4([h[16], h[17], h[18], h[19]]).to_words());

        let mut a = [0u8; 40];
        Ipv4Repr { src: [10, 0, 0, 2], dst: [10, 0, 0, 1], ttl: 9, tos: 4, ..Ipv4Repr::default() }.emit(&mut a);
        let v = View::read(&a, Some(Classifier { heuristic: Heuristic::Kernel, evidence: Evidence::None }));
        assert!(words_ipv4_mapped(v.src4) && words_ipv4_mapped(v.dst4));
        assert_eq!((v.ttl, v.tos), (9, 4));
        let ll = Gid::link_local_from_mac([0, 2, 0xc9, 1, 2, 3]);
        GrhRepr { sgid: ll, ..GrhRepr::default() }.emit(&mut a);
        let v = View::read(&a, Some(Classifier { heuristic: Heuristic::Kernel, evidence: Evidence::None }));
        assert!(words_link_local(v.sgid) && !words_link_local(v.dgid) && !words_ipv4_mapped(v.sgid));
        for g in [Gid::from_ipv4([1, 2, 3, 4]), ll, Gid::ZERO, Gid([0xff; 16])] {
            assert_eq!(words_ipv4_mapped(g.to_words()), g.is_ipv4_mapped());
            assert_eq!(words_link_local(g.to_words()), g.is_link_local());
        }
    }
}
