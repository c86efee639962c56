//! The responder of `serve --hal ibverbs`: core's pipeline (GID snapshot,
//! libibverbs profile, AH table), generic over the backend.

use udah_core::hal::{AhToken, Hal};
use udah_core::{
    ah::{IbvWc, PortNum, ProfileError},
    responder::{Config, EvidenceSource, ResolveError, Responder},
    table::{AhHandle, AhTable, Shared},
    wire::{Area, Stamp},
};

pub(crate) const GIDS: usize = 1024;
pub(crate) use super::table_box::AHS;

/// The pipeline of `serve --hal ibverbs`: core's [`Responder`] (GID
/// snapshot, libibverbs profile, AH table) on one port of a backend it
/// borrows, so that the backend (its PD and context) outlives every AH and
/// handle of the pipeline. Boxed by [`pipeline_in`]: it holds two snapshots of
/// [`GIDS`] entries. Its AH table has `N` slots.
pub(crate) type Pipeline<'h, H, const N: usize = AHS> = Responder<Shared<&'h H, Box<AhTable<H, N>>>, GIDS>;

/// serve's configuration: the libibverbs profile, its own header-type
/// heuristic, or the stamp the receive areas were pre-stamped with
/// (`--stamp`); every completion admitted.
pub(crate) fn config(stamp: Option<Stamp>) -> Config {
    Config { evidence: stamp.map_or(EvidenceSource::None, EvidenceSource::Stamp), ..Config::default() }
}

/// The pipeline on `port` of `hal`, with a first GID snapshot and an AH
/// table of [`AHS`] slots keyed with [`table_seed`].
#[cfg(test)]
pub(crate) fn pipeline<H: Hal>(hal: &H, port: PortNum, stamp: Option<Stamp>) -> Result<Box<Pipeline<'_, H>>, H::Error>
where
    H::Ah: AhToken,
{
    pipeline_in(hal, port, stamp, Box::new(AhTable::with_seed(table_seed())))
}

/// A random AH-table seed: serve answers whoever writes to it, and a
/// sender who knew the seed could craft source GIDs that all land in the
/// same windows and push the other peers out ([`AhTable::with_seed`]).
/// (`RandomState`'s keys come from the OS's random source.)
pub(crate) fn table_seed() -> u64 {
    use core::hash::BuildHasher;
    std::hash::RandomState::new().hash_one(0x7564_6168_u64)
}

/// The pipeline on `port` of `hal`, with a first GID snapshot, over an AH
/// table of `N` slots the caller built (empty, keyed with [`table_seed`]).
pub(crate) fn pipeline_in<H: Hal, const N: usize>(
    hal: &H,
    port: PortNum,
    stamp: Option<Stamp>,
    table: Box<AhTable<H, N>>,
) -> Result<Box<Pipeline<'_, H, N>>, H::Error>
where
    H::Ah: AhToken,
{
    Responder::new(Shared::new(hal, table), port, config(stamp)).map(Box::new)
}

/// Why a request got no reply AH.
#[derive(Debug)]
pub(crate) enum ReplyError<E> {
    /// The backend's GID generation moved and re-taking the snapshot failed
    /// (the previous snapshot stays; the next request tries again).
    Snapshot(E),
    /// The pipeline refused or failed: the libibverbs profile (header type,
    /// GID search), or the AH table or backend (an invalid attribute
    /// included).
    Resolve(ResolveError<E>),
}

impl<E: core::fmt::Debug + core::fmt::Display> core::fmt::Display for ReplyError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReplyError::Snapshot(e) => write!(f, "GID snapshot: {e}"),
            // As serve has always said it.
            ReplyError::Resolve(ResolveError::Profile(ProfileError::Libibverbs(e))) => write!(f, "AH attribute: {e}"),
            ReplyError::Resolve(e) => core::fmt::Display::fmt(e, f),
        }
    }
}

impl<E: core::fmt::Debug + core::fmt::Display> core::error::Error for ReplyError<E> {}

#[cfg(test)]
/// The AH to answer a completion with: the GID snapshot re-taken first if
/// the backend's GID generation moved (retiring the AHs built on changed
/// entries), then the pipeline. The handle holds a reference: give it back
/// with [`release`]. (The poll loop answers its completions in groups:
/// [`reply_ahs`].)
pub(crate) fn reply_ah<H: Hal, const N: usize>(
    p: &mut Pipeline<'_, H, N>,
    wc: &IbvWc,
    area: &Area,
) -> Result<AhHandle<H::Ah>, ReplyError<H::Error>>
where
    H::Ah: AhToken,
{
    p.refresh().map_err(ReplyError::Snapshot)?;
    p.resolve(wc, area).map_err(ReplyError::Resolve)
}

/// Completions of a poll answered together by [`reply_ahs`].
pub(crate) const REPLY_BATCH: usize = 64;

/// The answer to one completion of a [`reply_ahs`] group.
pub(crate) type Reply<H> = Result<AhHandle<<H as Hal>::Ah>, ResolveError<<H as udah_core::hal::ErrorType>::Error>>;

/// The AH for each of a group of polled completions: the GID snapshot
/// re-taken once if the backend's GID generation moved, then the group
/// through the pipeline's staged batch ([`Responder::resolve_batch`]: past
/// the cache, the group's table slots are prefetched side by side);
/// `out[i]` is the answer to the `i`-th completion. Returns how many were
/// answered (the group, up to `out.len()`); a failed snapshot answers none.
pub(crate) fn reply_ahs<'a, H: Hal, const N: usize>(
    p: &mut Pipeline<'_, H, N>,
    group: impl IntoIterator<Item = (&'a IbvWc, &'a Area)>,
    out: &mut [Option<Reply<H>>],
) -> Result<usize, H::Error>
where
    H::Ah: AhToken,
{
    p.refresh()?;
    Ok(p.resolve_batch(group, out))
}

/// Gives a handle back to the pipeline.
pub(crate) fn release<H: Hal, const N: usize>(p: &mut Pipeline<'_, H, N>, h: AhHandle<H::Ah>)
where
    H::Ah: AhToken,
{
    // A stale handle can only come from a bug here; nothing to do then.
    let _ = p.release(h);
}

/// The end of serving: gives back the handles still held (replies in
/// flight), then retires every AH in the table, so that none is left when
/// the device is closed. Returns how many entries were retired.
pub(crate) fn shutdown<H: Hal, const N: usize>(
    p: &mut Pipeline<'_, H, N>,
    held: impl IntoIterator<Item = AhHandle<H::Ah>>,
) -> usize
where
    H::Ah: AhToken,
{
    for h in held {
        release(p, h);
    }
    p.cache().table().retire_all(p.backend())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use core::cell::Cell;
    use udah_core::ah::AhAttr;
    #[cfg(feature = "ibverbs")]
    use udah_core::ah::IbvAhAttr;
    use udah_core::ah::libibverbs;
    use udah_core::hal::{ErrorKind, ErrorType, L2Info, PortInfo};
    use udah_core::wire::{AREA_LEN, Gid};
    use udah_core::{GidEntry, GidTable, GidType, LinkLayer};
    #[cfg(feature = "ibverbs")]
    use udah_hal_ibverbs::VerbsError;

    /// A backend with one RoCE v2 GID whose value can change.
    #[derive(Debug, Default)]
    struct OneGid {
        generation: Cell<u64>,
        ip: Cell<[u8; 4]>,
        creates: Cell<u64>,
        destroys: Cell<u64>,
        /// Makes `snapshot_gids` fail.
        fail_snapshot: Cell<bool>,
    }

    impl ErrorType for OneGid {
        type Error = ErrorKind;
    }

    impl Hal for OneGid {
        type Ah = u64;
        fn port_info(&self, port: PortNum) -> Result<PortInfo, ErrorKind> {
            Ok(PortInfo::new(port.get(), LinkLayer::Ethernet, 4))
        }
        fn snapshot_gids<const N: usize>(&self, port: PortNum, t: &mut GidTable<N>) -> Result<(), ErrorKind> {
            if self.fail_snapshot.get() {
                return Err(ErrorKind::Other);
            }
            *t = GidTable::new(port.get(), LinkLayer::Ethernet, 4);
            t.set(1, GidEntry::new(Gid::from_ipv4(self.ip.get()), GidType::RoceV2)).map_err(|_| ErrorKind::Other)?;
            t.set_generation(self.generation.get());
            Ok(())
        }
        fn gid_generation(&self, _: PortNum) -> u64 {
            self.generation.get()
        }
        fn resolve_l2(&self, _: &AhAttr) -> Result<Option<L2Info>, ErrorKind> {
            Ok(None)
        }
        fn create_ah(&self, _: &AhAttr, _: Option<&L2Info>) -> Result<u64, ErrorKind> {
            self.creates.set(self.creates.get() + 1);
            Ok(self.creates.get())
        }
        fn destroy_ah(&self, _: u64) -> Result<(), ErrorKind> {
            self.destroys.set(self.destroys.get() + 1);
            Ok(())
        }
    }

    pub(crate) fn v4_area(src: [u8; 4], dst: [u8; 4]) -> Area {
        let mut h = [0x45, 0, 0, 0x3c, 0, 0, 0x40, 0, 0x40, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        h[12..16].copy_from_slice(&src);
        h[16..20].copy_from_slice(&dst);
        let mut sum = 0u32;
        for c in h.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        let mut area = [0u8; AREA_LEN];
        area[20..].copy_from_slice(&h);
        area
    }

    fn p1() -> PortNum {
        PortNum::new(1).unwrap()
    }

    #[test]
    fn pipeline_resolves_caches_and_retires_on_gid_change() {
        let hal = OneGid { generation: Cell::new(1), ip: Cell::new([10, 0, 0, 1]), ..OneGid::default() };
        for stamp in [None, Some(Stamp::DEFAULT)] {
            let mut p = pipeline(&hal, p1(), stamp).unwrap();
            let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, src_qp: 7, ..IbvWc::default() };
            let mut area = v4_area([10, 0, 0, 9], [10, 0, 0, 1]);
            if let Some(s) = stamp {
                area[..20].copy_from_slice(s.bytes());
            }
            let creates = hal.creates.get();
            let h1 = reply_ah(&mut p, &wc, &area).unwrap();
            release(&mut p, h1);
            let h2 = reply_ah(&mut p, &wc, &area).unwrap();
            release(&mut p, h2);
            assert_eq!(hal.creates.get(), creates + 1, "second request hits the table");
            assert!(p.cache().table().stats_exact().hits >= 1);
            // The local address moves: new generation, the old AH is retired.
            hal.ip.set([10, 0, 0, 2]);
            hal.generation.set(hal.generation.get() + 1);
            let err = reply_ah(&mut p, &wc, &area).unwrap_err();
            assert!(
                matches!(
                    err,
                    ReplyError::Resolve(ResolveError::Profile(ProfileError::Libibverbs(libibverbs::IbvFailure {
                        error: udah_core::IbvError::GidNotFound,
                        ..
                    })))
                ),
                "{err:?}"
            );
            assert_eq!((p.stats().resnapshots, p.stats().retired), (1, 1));
            let area2 = {
                let mut a = v4_area([10, 0, 0, 9], [10, 0, 0, 2]);
                if let Some(s) = stamp {
                    a[..20].copy_from_slice(s.bytes());
                }
                a
            };
            let h3 = reply_ah(&mut p, &wc, &area2).unwrap();
            release(&mut p, h3);
            assert_eq!(hal.creates.get(), creates + 2);
            assert_eq!(p.gids().generation(), hal.generation.get());
            hal.ip.set([10, 0, 0, 1]);
            hal.generation.set(hal.generation.get() + 1);
        }
    }

    /// A group goes through the staged batch with the answers that one
    /// completion at a time gets; a failed re-snapshot answers none of it.
    #[test]
    fn a_group_is_answered_like_its_completions_one_by_one() {
        let hal = OneGid { generation: Cell::new(1), ip: Cell::new([10, 0, 0, 1]), ..OneGid::default() };
        let mut p = pipeline(&hal, p1(), None).unwrap();
        let wc = |qp| IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, src_qp: qp, ..IbvWc::default() };
        let (a, b) = (v4_area([10, 0, 0, 9], [10, 0, 0, 1]), v4_area([10, 0, 0, 8], [10, 0, 0, 1]));
        // The third is for an address the port does not have.
        let bad = v4_area([10, 0, 0, 8], [10, 0, 0, 7]);
        let group = [(wc(7), a), (wc(8), b), (wc(7), a), (wc(9), bad)];
        let mut out: Vec<Option<Reply<OneGid>>> = (0..REPLY_BATCH).map(|_| None).collect();
        let n = reply_ahs(&mut p, group.iter().map(|(w, a)| (w, a)), &mut out).unwrap();
        assert_eq!(n, group.len());
        let mut ahs = Vec::new();
        for ((w, area), o) in group.iter().zip(out.iter_mut()) {
            let one = reply_ah(&mut p, w, area).map(|h| {
                let ah = h.ah();
                release(&mut p, h);
                ah
            });
            match (o.take(), one) {
                (Some(Ok(h)), Ok(ah)) => {
                    assert_eq!(h.ah(), ah);
                    ahs.push(ah);
                    release(&mut p, h);
                }
                (Some(Err(e)), Err(ReplyError::Resolve(f))) => assert_eq!(format!("{e:?}"), format!("{f:?}")),
                (got, want) => panic!("{got:?} against {want:?}"),
            }
        }
        assert_eq!(ahs.len(), 3);
        assert_eq!(ahs[0], ahs[2], "one AH per sender");
        assert_eq!(hal.creates.get(), 2);
        hal.fail_snapshot.set(true);
        hal.generation.set(2);
        assert_eq!(reply_ahs(&mut p, group.iter().map(|(w, a)| (w, a)), &mut out).map_err(|_| ()), Err(()));
        assert!(out.iter().all(Option::is_none));
    }

    /// A failed re-snapshot answers nothing (the request is counted as not
    /// answered, with the backend's error) and keeps the previous snapshot;
    /// the next request tries again.
    #[test]
    fn a_failed_snapshot_refuses_the_request_and_retries() {
        let hal = OneGid { generation: Cell::new(1), ip: Cell::new([10, 0, 0, 1]), ..OneGid::default() };
        let mut p = pipeline(&hal, p1(), None).unwrap();
        let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, src_qp: 7, ..IbvWc::default() };
        let area = v4_area([10, 0, 0, 9], [10, 0, 0, 1]);
        hal.fail_snapshot.set(true);
        hal.generation.set(2);
        let err = reply_ah(&mut p, &wc, &area).unwrap_err();
        assert!(matches!(err, ReplyError::Snapshot(ErrorKind::Other)), "{err:?}");
        assert_eq!((p.gids().generation(), p.stats().resnapshots, hal.creates.get()), (1, 0, 0));
        hal.fail_snapshot.set(false);
        let h = reply_ah(&mut p, &wc, &area).unwrap();
        release(&mut p, h);
        assert_eq!((p.gids().generation(), p.stats().resnapshots, hal.creates.get()), (2, 1, 1));
    }

    /// The fault/exit path: handles still in flight are given back and
    /// every AH in the table is destroyed, so none is left when the device
    /// is closed.
    #[test]
    fn pipeline_shutdown_destroys_every_ah() {
        let hal = OneGid { generation: Cell::new(1), ip: Cell::new([10, 0, 0, 1]), ..OneGid::default() };
        let mut p = pipeline(&hal, p1(), None).unwrap();
        let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, src_qp: 7, ..IbvWc::default() };
        let idle = reply_ah(&mut p, &wc, &v4_area([10, 0, 0, 9], [10, 0, 0, 1])).unwrap();
        release(&mut p, idle);
        let held: Vec<_> = [[10, 0, 0, 10], [10, 0, 0, 11]]
            .map(|src| reply_ah(&mut p, &wc, &v4_area(src, [10, 0, 0, 1])).unwrap())
            .into();
        assert_eq!((hal.creates.get(), hal.destroys.get()), (3, 0));
        assert_eq!(shutdown(&mut p, held), 3);
        assert_eq!(hal.destroys.get(), 3, "every AH destroyed");
        assert_eq!(p.cache().table().stats().live, 0);
        // Nothing left to retire a second time.
        assert_eq!(shutdown(&mut p, Vec::new()), 0);
        assert_eq!(hal.destroys.get(), 3);
    }

    /// The reasons serve prints for an unanswered request.
    #[test]
    #[cfg(feature = "ibverbs")]
    fn reply_errors_read_as_before() {
        let fail = libibverbs::IbvFailure { error: udah_core::IbvError::GidNotFound, attr: IbvAhAttr::default() };
        let profile = ReplyError::<VerbsError>::Resolve(ResolveError::Profile(ProfileError::Libibverbs(fail)));
        assert_eq!(profile.to_string(), format!("AH attribute: {}", udah_core::IbvError::GidNotFound));
        let table = ReplyError::<VerbsError>::Resolve(ResolveError::Table(udah_core::table::TableError::Full));
        assert_eq!(table.to_string(), "AH table: AH table window full of referenced entries");
        let snapshot = ReplyError::Snapshot(VerbsError::UnknownAh(7));
        assert_eq!(snapshot.to_string(), format!("GID snapshot: {}", VerbsError::UnknownAh(7)));
    }
}
