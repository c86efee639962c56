//! A plain if/else version of the libibverbs classifier, for comparison.
//!
//! [`classify`] gives exactly the answer of
//! [`udah_core::ah::libibverbs::classify`] (checked on random and crafted
//! areas below), but the way the C code does it: it computes the checksum
//! only when the first nibble is 6 and the IHL is 5, and it reads only the
//! fields of the branch it takes. It runs fewer instructions; the branch-free
//! classifier runs the same instructions for every packet. Which one is
//! faster depends on how predictable the packet mix is, which is what the
//! benches measure.

use udah_core::ah::libibverbs::{Classified, IbvFailure, IbvResult, Verdict};
use udah_core::ah::{IBV_WC_GRH, IbvAhAttr, IbvGlobalRoute, IbvWc};
use udah_core::wire::{Area, Gid, grh, ipv4};
use udah_core::{GidTable, IbvError};

/// [`udah_core::ah::libibverbs::classify`] with branches.
#[inline]
pub fn classify(area: &Area) -> Classified {
    let h = ipv4::header(area);
    let (is4, is6) = if grh::version(area) != 6 {
        (h[0] >> 4 == 4, false)
    } else if h[0] & 0xf != 5 {
        (false, true)
    } else if ipv4::verify_libibverbs(h) {
        (true, false)
    } else {
        (false, true)
    };
    if is4 {
        let [_, tos, _, _, _, _, _, _, ttl, _, _, _, s0, s1, s2, s3, d0, d1, d2, d3] = *h;
        Classified {
            verdict: if d0 & 0xf0 == 0xe0 { Verdict::Multicast } else { Verdict::Search },
            is_ipv4: true,
            local: Gid::from_ipv4([d0, d1, d2, d3]),
            want_v2: true,
            remote: Gid::from_ipv4([s0, s1, s2, s3]),
            remote_written_early: false,
            hop_limit: ttl,
            traffic_class: tos,
        }
    } else {
        let dgid = grh::dgid(area);
        let nh = grh::next_header(area);
        let mc6 = dgid.is_multicast();
        let verdict = if !is6 {
            Verdict::UnknownVersion
        } else if mc6 {
            Verdict::Multicast
        } else if nh == grh::NEXT_HDR_UDP || nh == grh::NEXT_HDR_IBA {
            Verdict::Search
        } else {
            Verdict::UnknownNextHeader
        };
        Classified {
            verdict,
            is_ipv4: false,
            local: dgid,
            want_v2: nh == grh::NEXT_HDR_UDP,
            remote: grh::sgid(area),
            remote_written_early: is6 && !mc6,
            hop_limit: grh::hop_limit(area),
            traffic_class: grh::traffic_class(area),
        }
    }
}

/// [`udah_core::ah::libibverbs::init_ah_from_wc`] with [`classify`] in place
/// of the branch-free classifier (same result, checked below).
#[inline]
pub fn init_ah_from_wc<const N: usize>(
    table: &GidTable<N>,
    port_num: u8,
    wc: &IbvWc,
    area: Option<&Area>,
) -> IbvResult {
    let Some(area) = area else {
        return Err(IbvFailure { error: IbvError::MissingGrh, attr: IbvAhAttr::default() });
    };
    let mut attr = IbvAhAttr {
        grh: IbvGlobalRoute { flow_label: grh::flow_label(area), ..IbvGlobalRoute::default() },
        dlid: wc.slid,
        sl: wc.sl,
        src_path_bits: wc.dlid_path_bits,
        port_num,
        ..IbvAhAttr::default()
    };
    if wc.wc_flags & IBV_WC_GRH == 0 {
        return Ok(attr);
    }
    attr.is_global = 1;
    let c = classify(area);
    let fail = |error: IbvError, dgid: [u8; 16]| {
        let mut a = attr;
        a.grh.dgid = dgid;
        Err(IbvFailure { error, attr: a })
    };
    let early = if c.remote_written_early { c.remote.0 } else { [0; 16] };
    match c.verdict {
        Verdict::Search => {}
        Verdict::UnknownVersion => return fail(IbvError::UnknownHeaderVersion, [0; 16]),
        Verdict::Multicast => return fail(IbvError::MulticastDestination, [0; 16]),
        Verdict::UnknownNextHeader => return fail(IbvError::UnknownNextHeader(grh::next_header(area)), early),
        Verdict::Ambiguous => return fail(IbvError::AmbiguousHeader, [0; 16]),
    }
    let Some(index) = table.find_libibverbs(port_num, &c.local, c.want_v2) else {
        return fail(IbvError::GidNotFound, early);
    };
    attr.grh.dgid = c.remote.0;
    attr.grh.sgid_index = index as u8;
    attr.grh.hop_limit = c.hop_limit;
    attr.grh.traffic_class = c.traffic_class;
    Ok(attr)
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::{Fixture, Rng, SEED};
    use udah_core::ah::libibverbs;
    use udah_core::wire::Ipv4Repr;

    /// Random areas steered towards the interesting corners: first nibble 6
    /// or 4, IHL 5, valid checksums, multicast bytes, both next headers.
    fn areas(n: usize) -> Vec<Area> {
        let mut rng = Rng::new(7);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let mut a: Area = rng.bytes();
            let knob = rng.byte();
            if knob & 1 != 0 {
                a[0] = 0x60 | (a[0] & 0xf);
            } else if knob & 2 != 0 {
                a[0] = 0x40 | (a[0] & 0xf);
            }
            if knob & 4 != 0 {
                a[20] = 0x45;
            } else if knob & 8 != 0 {
                a[20] = 0x40 | (a[20] & 0xf);
            }
            if knob & 16 != 0 {
                let r = Ipv4Repr {
                    ttl: a[28],
                    tos: a[21],
                    src: [a[32], 1, 2, 3],
                    dst: [a[36], 4, 5, 6],
                    ..Ipv4Repr::default()
                };
                r.emit(&mut a);
            }
            if knob & 32 != 0 {
                a[6] = [grh::NEXT_HDR_IBA, grh::NEXT_HDR_UDP, 6][rng.below(3)];
            }
            if knob & 64 != 0 {
                a[24] = 0xff;
                a[36] = 0xe0 | (a[36] & 0xf);
            }
            out.push(a);
        }
        out
    }

    #[test]
    fn same_answer_as_branch_free() {
        for a in areas(200_000) {
            assert_eq!(classify(&a), libibverbs::classify(&a), "{a:02x?}");
        }
    }

    #[test]
    fn same_attr_as_core() {
        let fx: Fixture<64> = Fixture::new(SEED);
        for c in &fx.cases {
            assert_eq!(
                init_ah_from_wc(&fx.roce, 1, &c.wc, Some(&c.area)),
                libibverbs::init_ah_from_wc(&fx.roce, 1, &c.wc, Some(&c.area))
            );
        }
        let wc = IbvWc { wc_flags: IBV_WC_GRH, ..IbvWc::default() };
        for a in areas(20_000) {
            assert_eq!(
                init_ah_from_wc(&fx.roce, 1, &wc, Some(&a)),
                libibverbs::init_ah_from_wc(&fx.roce, 1, &wc, Some(&a))
            );
        }
    }
}
