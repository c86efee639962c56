use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::*;
use crate::ah::{AhAttr, IBV_WC_GRH, IbvWc, KernelWc, kernel};
use crate::gid_table::{GidEntry, GidType};
use crate::hal::{ErrorKind, L2Info, PortInfo};
use crate::table::{AhTable, Prefetch};
use crate::wire::{GrhRepr, Ipv4Repr};

/// A backend with one port whose GID table the test edits.
struct Port {
    gids: Mutex<GidTable<8>>,
    generation: AtomicU64,
    next: AtomicU64,
}

impl Port {
    fn new(link_layer: LinkLayer, entries: &[(u32, GidEntry)]) -> Port {
        let mut gids = GidTable::new(1, link_layer, 8);
        for &(i, e) in entries {
            gids.set(i, e).unwrap();
        }
        Port { gids: Mutex::new(gids), generation: AtomicU64::new(1), next: AtomicU64::new(1) }
    }
    fn set(&self, i: u32, e: GidEntry) {
        self.gids.lock().unwrap().set(i, e).unwrap();
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}

impl ErrorType for Port {
    type Error = ErrorKind;
}

impl Hal for Port {
    type Ah = u64;
    fn port_info(&self, port: PortNum) -> Result<PortInfo, ErrorKind> {
        Ok(PortInfo::new(port.get(), self.gids.lock().unwrap().link_layer(), 8))
    }
    fn snapshot_gids<const M: usize>(&self, port: PortNum, t: &mut GidTable<M>) -> Result<(), ErrorKind> {
        let src = self.gids.lock().unwrap();
        if port.get() != 1 {
            return Err(ErrorKind::NotFound);
        }
        *t = GidTable::new(port.get(), src.link_layer(), src.len());
        for (i, e) in src.iter() {
            t.set(i, e).map_err(|_| ErrorKind::OutOfResources)?;
        }
        t.set_generation(self.generation.load(Ordering::Relaxed));
        Ok(())
    }
    fn gid_generation(&self, _: PortNum) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }
    fn resolve_l2(&self, _: &AhAttr) -> Result<Option<L2Info>, ErrorKind> {
        Ok(None)
    }
    fn create_ah(&self, _: &AhAttr, _: Option<&L2Info>) -> Result<u64, ErrorKind> {
        Ok(self.next.fetch_add(1, Ordering::Relaxed))
    }
    fn destroy_ah(&self, _: u64) -> Result<(), ErrorKind> {
        Ok(())
    }
}

const OURS_V4: [u8; 4] = [192, 168, 1, 10];

fn roce_port() -> Port {
    Port::new(LinkLayer::Ethernet, &[(3, GidEntry::new(Gid::from_ipv4(OURS_V4), GidType::RoceV2))])
}

/// A RoCE v2 / IPv4 request from `src` to us.
fn v4_area(src: [u8; 4]) -> Area {
    let mut area = [0u8; 40];
    Ipv4Repr { ttl: 64, protocol: 17, src, dst: OURS_V4, ..Default::default() }.emit(&mut area);
    area
}

fn wc() -> IbvWc {
    IbvWc { wc_flags: IBV_WC_GRH, ..IbvWc::default() }
}

type T8 = AhTable<Port, 8>;

/// The AHs (released) or errors of a batch.
fn drain<C: AhCache<Backend = Port>>(
    r: &mut Responder<C, 8>,
    out: impl IntoIterator<Item = Option<ResolveResult<C>>>,
) -> std::vec::Vec<Result<u64, ResolveError<ErrorKind>>> {
    out.into_iter()
        .flatten()
        .map(|x| {
            x.map(|h| {
                let ah = h.ah();
                r.release(h).unwrap();
                ah
            })
        })
        .collect()
}

#[test]
fn resolve_and_batch_through_both_caches() {
    let hal = roce_port();
    let t = T8::new();
    let p1 = PortNum::new(1).unwrap();
    let area = v4_area([192, 168, 1, 20]);
    let (wc, bad_sl, no_gid) = (wc(), IbvWc { sl: 16, ..wc() }, [0u8; 40]);
    let mut shared: Responder<_, 8> = Responder::new(t.shared(&hal), p1, Config::default()).unwrap();
    assert_eq!(shared.port(), 1);
    let a = shared.resolve(&wc, &area).unwrap();
    assert_eq!(shared.words(&wc, &area).unwrap().dgid(), Some(Gid::from_ipv4([192, 168, 1, 20])));
    let try_config = Config { wait: Wait::Try, ..Config::default() };
    let mut session: Responder<_, 8> = Responder::new(t.session(&hal), p1, try_config).unwrap();
    let batch = [(&wc, &area), (&bad_sl, &area), (&wc, &no_gid), (&wc, &area)];
    for shared_first in [true, false] {
        // One result per completion in order, no more than fit; the rest is left.
        let mut it = batch.into_iter();
        let mut out = [const { None }; 3];
        let got = if shared_first {
            assert_eq!(shared.resolve_batch(it.by_ref(), &mut out), 3);
            drain(&mut shared, out)
        } else {
            assert_eq!(session.resolve_batch(it.by_ref(), &mut out), 3);
            drain(&mut session, out)
        };
        assert_eq!(it.len(), 1, "a full batch must not swallow the next completion");
        assert_eq!(got[0], Ok(a.ah()));
        assert_eq!(got[1], Err(ResolveError::Table(TableError::InvalidAttr(crate::attr::AttrError::InvalidSl(16)))));
        assert!(matches!(got[2], Err(ResolveError::Profile(ProfileError::Libibverbs(_)))));
    }
    for _ in 0..100 {
        let h = session.resolve(&wc, &area).unwrap();
        assert_eq!(h.ah(), a.ah());
        session.release(h).unwrap();
    }
    drop(session);
    shared.release(a).unwrap();
    let st = t.stats_exact();
    // The invalid SL never reaches the probe: 1 + 2 × 1 + 100 look-ups.
    assert_eq!((st.creates, st.hits + st.misses), (1, 103));
}

/// The staged batch (hot path and prefetch for a group, then the
/// look-ups) gives, completion for completion, what `resolve` gives one
/// at a time, through the shared table and through a session, for any
/// batch length, and takes no completion it has no room for.
#[test]
fn a_staged_batch_resolves_as_one_at_a_time() {
    let areas: std::vec::Vec<Area> = (0..40u8).map(|i| v4_area([10, 0, i % 13, i])).collect();
    let (no_grh, bad_sl, no_gid) = (IbvWc::default(), IbvWc { sl: 16, ..wc() }, [0u8; 40]);
    let good = wc();
    // Hits, misses, an SL the attribute refuses, a local address not in
    // the table and a completion without a GRH, mixed.
    let mut batch: std::vec::Vec<(&IbvWc, &Area)> = areas.iter().map(|a| (&good, a)).collect();
    for (i, odd) in [(3, (&bad_sl, &areas[1])), (9, (&good, &no_gid)), (17, (&no_grh, &areas[2]))] {
        batch.insert(i, odd);
    }
    let repeat: std::vec::Vec<_> = batch.iter().chain(batch.iter().rev()).copied().collect();
    // Every completion through `r`'s batches of `out_len`, released.
    fn batched<C: AhCache<Backend = Port>>(
        r: &mut Responder<C, 8>,
        all: &[(&IbvWc, &Area)],
        out_len: usize,
    ) -> std::vec::Vec<Result<u64, ResolveError<ErrorKind>>> {
        let (mut got, mut it) = (std::vec::Vec::new(), all.iter().copied());
        loop {
            let mut out: std::vec::Vec<_> = (0..out_len).map(|_| None).collect();
            let n = r.resolve_batch(it.by_ref(), &mut out);
            assert!(n <= out_len && out[n..].iter().all(Option::is_none));
            got.extend(drain(r, out));
            if n < out_len {
                assert_eq!(it.len(), 0, "a short batch means the completions ended");
                return got;
            }
        }
    }
    // The same one at a time.
    fn single<C: AhCache<Backend = Port>>(
        r: &mut Responder<C, 8>,
        all: &[(&IbvWc, &Area)],
    ) -> std::vec::Vec<Result<u64, ResolveError<ErrorKind>>> {
        let mut want = std::vec::Vec::new();
        for (w, a) in all {
            let one = r.resolve(*w, a);
            want.extend(drain(r, [Some(one)]));
        }
        want
    }
    let p1 = PortNum::new(1).unwrap();
    let config = Config::default();
    // Shorter than a group, a group and one either side, several groups.
    for out_len in [1usize, 3, STAGE - 1, STAGE, STAGE + 1, 4 * STAGE] {
        for session in [false, true] {
            let (hal_one, hal_staged) = (roce_port(), roce_port());
            let (t_one, t_staged) = (AhTable::<Port, 64>::with_seed(7), AhTable::<Port, 64>::with_seed(7));
            let (got, want) = if session {
                let mut staged = Responder::new(Prefetch::<_, true>(t_staged.session(&hal_staged)), p1, config);
                let mut one = Responder::new(t_one.session(&hal_one), p1, config).unwrap();
                (batched(staged.as_mut().unwrap(), &repeat, out_len), single(&mut one, &repeat))
            } else {
                let mut staged = Responder::new(Prefetch::<_, true>(t_staged.shared(&hal_staged)), p1, config);
                let mut one = Responder::new(t_one.shared(&hal_one), p1, config).unwrap();
                (batched(staged.as_mut().unwrap(), &repeat, out_len), single(&mut one, &repeat))
            };
            assert_eq!(got.len(), repeat.len());
            assert_eq!(got, want, "out_len {out_len}, session {session}");
            let (a, b) = (t_one.stats_exact(), t_staged.stats_exact());
            assert_eq!((a.hits, a.misses, a.creates), (b.hits, b.misses, b.creates));
        }
    }
}

/// A [`Hashed`] made by another table (another seed) still finds its
/// entry: the hash is computed again.
#[test]
fn hashed_words_of_another_table_hash_again() {
    let hal = roce_port();
    let (t, other) = (AhTable::<Port, 64>::with_seed(1), AhTable::<Port, 64>::with_seed(2));
    let p1 = PortNum::new(1).unwrap();
    let mut r: Responder<_, 8> = Responder::new(t.shared(&hal), p1, Config::default()).unwrap();
    let area = v4_area([10, 1, 2, 3]);
    let words = crate::attr::CanonicalWords::new(r.words(&wc(), &area).unwrap()).unwrap();
    let a = r.resolve(&wc(), &area).unwrap();
    let misses = t.stats_exact().misses;
    for h in [other.prefetch(words), Hashed::unhashed(words), t.prefetch(words)] {
        let b = t.shared(&hal).lookup::<_, TableError<ErrorKind>>(h, Wait::Block).unwrap();
        assert_eq!(b.ah(), a.ah());
        t.release(&hal, b).unwrap();
    }
    assert_eq!(t.stats_exact().misses, misses, "a foreign hash is recomputed, not probed");
    r.release(a).unwrap();
}

/// Every profile and evidence source resolves through the same word
/// path, to exactly the attribute of the profile's C-mirror entry point.
#[test]
fn every_profile_and_evidence_takes_the_word_path() {
    let link_local = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0xff, 0xfe, 0, 0, 1]);
    let v6 = Gid([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    let hal = Port::new(
        LinkLayer::Ethernet,
        &[
            (0, GidEntry::new(link_local, GidType::RoceV1)),
            (1, GidEntry::new(link_local, GidType::RoceV2)),
            (2, GidEntry::new(v6, GidType::RoceV2)),
            (3, GidEntry::new(Gid::from_ipv4(OURS_V4), GidType::RoceV2)),
        ],
    );
    let t = T8::new();
    let peer6 = Gid([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    let grh = |nh: u8, sgid: Gid, dgid: Gid| {
        let mut area = [0u8; 40];
        GrhRepr {
            sgid,
            dgid,
            hop_limit: 9,
            next_header: nh,
            flow_label: 0x123,
            traffic_class: 4,
            ..GrhRepr::default()
        }
        .emit(&mut area);
        area
    };
    let areas = [v4_area([192, 168, 1, 20]), grh(17, peer6, v6), grh(0x1b, peer6, link_local), [0; 40]];
    let stamp = Stamp::DEFAULT;
    for profile in [Profile::Libibverbs, Profile::Kernel] {
        for evidence in [EvidenceSource::None, EvidenceSource::Stamp(stamp), EvidenceSource::Mlx5Sl] {
            let config = Config { profile, evidence, ..Config::default() };
            let r: Responder<_, 8> = Responder::new(t.shared(&hal), PortNum::new(1).unwrap(), config).unwrap();
            for area in &areas {
                let mut area = *area;
                if matches!(evidence, EvidenceSource::Stamp(_)) && area[20] >> 4 == 4 {
                    area[..20].copy_from_slice(stamp.bytes());
                }
                let ev = match (evidence, profile) {
                    (EvidenceSource::Stamp(s), _) => Evidence::Stamped(s),
                    // mlx5's bits in `sl` (0 here): libibverbs on RoCE only.
                    (EvidenceSource::Mlx5Sl, Profile::Libibverbs) => {
                        NetworkType::from_mlx5_sl(0).map_or(Evidence::None, Evidence::NetworkType)
                    }
                    _ => Evidence::None,
                };
                let kwc = KernelWc { wc_flags: crate::ah::IB_WC_GRH, ..KernelWc::default() };
                let want = match profile {
                    Profile::Libibverbs => libibverbs::init_ah_from_wc_with(r.gids(), 1, &wc(), Some(&area), ev)
                        .map_err(ProfileError::Libibverbs)
                        .map(|c| c.words()),
                    Profile::Kernel => kernel::init_ah_attr_from_wc_with(r.gids(), &kwc, Some(&area), ev)
                        .map_err(ProfileError::Kernel)
                        .and_then(|a| a.to_ah_attr(64).map_err(ProfileError::Attr))
                        .map(|a| AttrWords::from_attr(&a)),
                };
                let got = match profile {
                    Profile::Libibverbs => r.words(&wc(), &area),
                    Profile::Kernel => r.words(&kwc, &area),
                };
                assert_eq!(got, want, "{profile:?} {evidence:?} {area:?}");
            }
        }
    }
}

#[test]
fn admission_refuses_strangers_before_the_cache() {
    let hal = roce_port();
    let t = AhTable::<Port, 2>::new();
    let admission = Admission::deny_all()
        .allow_ipv4_subnet([192, 168, 1, 0], 24)
        .unwrap()
        .allow_vlan(None)
        .unwrap()
        .allow_pkey_index(0)
        .unwrap();
    let config = Config { admission, ..Config::default() };
    let mut r: Responder<_, 8> = Responder::new(t.shared(&hal), PortNum::new(1).unwrap(), config).unwrap();
    // Two known peers fill the table (2 slots) and stay cached.
    for p in [20, 21] {
        let h = r.resolve(&wc(), &v4_area([192, 168, 1, p])).unwrap();
        r.release(h).unwrap();
    }
    let stranger = v4_area([10, 9, 9, 9]);
    let kwc = |vlan: Option<u16>, pkey_index: u16| KernelWc {
        wc_flags: crate::ah::IB_WC_GRH | vlan.map_or(0, |_| crate::ah::IB_WC_WITH_VLAN),
        vlan_id: vlan.unwrap_or(0),
        pkey_index,
        ..KernelWc::default()
    };
    let known = v4_area([192, 168, 1, 20]);
    let refusals = [
        (r.resolve(&wc(), &stranger).map(|h| h.ah()), Refusal::GidPrefix),
        (r.resolve(&kwc(Some(7), 0), &known).map(|h| h.ah()), Refusal::Vlan),
        (r.resolve(&kwc(None, 3), &known).map(|h| h.ah()), Refusal::PkeyIndex),
    ];
    for (got, why) in refusals {
        assert_eq!(got, Err(ResolveError::Refused(why)));
    }
    for _ in 0..10 {
        assert_eq!(r.resolve(&wc(), &stranger).map(|h| h.ah()), Err(ResolveError::Refused(Refusal::GidPrefix)));
    }
    let c = r.refused();
    assert_eq!((c.gid_prefix, c.vlan, c.pkey_index, c.no_grh, c.total()), (11, 1, 1, 0, 13));
    let st = r.stats().table;
    assert_eq!((st.creates, st.evictions, st.live), (2, 0, 2), "strangers create nothing and evict nothing");
    // No GRH while prefixes are restricted: refused for want of a source.
    let ib = IbvWc { wc_flags: 0, slid: 5, ..IbvWc::default() };
    assert_eq!(r.resolve(&ib, &known).map(|h| h.ah()), Err(ResolveError::Refused(Refusal::NoGrh)));
    // Lifting the dimension admits it; an open policy checks nothing.
    r.set_admission(admission.any_gid());
    assert!(!r.config().admission.is_open());
    assert!(r.resolve(&ib, &known).map(|h| r.release(h)).is_ok());
    assert!(Admission::deny_all().any_gid().any_vlan().any_pkey_index().is_open());
    // Rule building errors are typed.
    assert_eq!(Admission::allow_all().allow_gid_prefix(Gid::ZERO, 129), Err(AdmissionError::PrefixTooLong(129)));
    assert_eq!(Admission::allow_all().allow_ipv4_subnet([10, 0, 0, 0], 33), Err(AdmissionError::PrefixTooLong(33)));
    let mut many = Ok(Admission::deny_all());
    for v in 0..=MAX_RULES as u16 {
        many = many.and_then(|a| a.allow_vlan(Some(v)));
    }
    assert_eq!(many, Err(AdmissionError::TooManyRules));
}

#[test]
fn refresh_leaves_a_port_0_snapshot_alone() {
    let hal = roce_port();
    let t = T8::new();
    let gids = GidTable::new(0, LinkLayer::Ethernet, 8);
    let mut r: Responder<_, 8> = Responder::from_snapshot(t.shared(&hal), gids, Config::default());
    hal.set(5, GidEntry::new(Gid::from_ipv4(OURS_V4), GidType::RoceV2));
    assert_eq!(r.refresh(), Ok(Refreshed::Current));
    assert_eq!((r.port(), r.gids().generation()), (0, 0));
}

#[test]
fn refresh_resnapshots_and_retires_on_a_generation_change() {
    let hal = roce_port();
    let t = T8::new();
    let mut r: Responder<_, 8> = Responder::new(t.shared(&hal), PortNum::new(1).unwrap(), Config::default()).unwrap();
    let area = v4_area([192, 168, 1, 20]);
    let h = r.resolve(&wc(), &area).unwrap();
    r.release(h).unwrap();
    assert_eq!(r.refresh(), Ok(Refreshed::Current));
    // Our address moves from index 3 to index 5: the AH built on 3 goes.
    hal.set(5, GidEntry::new(Gid::from_ipv4(OURS_V4), GidType::RoceV2));
    hal.gids.lock().unwrap().clear(3);
    assert_eq!(r.refresh(), Ok(Refreshed::Resnapshot { retired: 1 }));
    assert_eq!(r.gids().generation(), hal.gid_generation(PortNum::new(1).unwrap()));
    assert_eq!(r.words(&wc(), &area).unwrap().sgid_index(), Some(5));
    let h = r.resolve(&wc(), &area).unwrap();
    r.release(h).unwrap();
    let s = r.stats();
    assert_eq!((s.resnapshots, s.retired, s.table.creates), (1, 1, 2));
    // A failed snapshot keeps the current one.
    let other = Responder::<_, 8>::new(t.shared(&hal), PortNum::new(2).unwrap(), Config::default());
    assert_eq!(other.map(|_| ()), Err(ErrorKind::NotFound));
}

/// The hot path handles no multicast GID in the snapshot: while one is
/// there (and only then, across refreshes) the responder answers through
/// the general path, which refuses a multicast destination as
/// libibverbs does, and still resolves every other packet.
#[test]
fn a_snapshot_with_a_multicast_gid_takes_the_general_path() {
    let hal = roce_port();
    let t = T8::new();
    let mut r: Responder<_, 8> = Responder::new(t.session(&hal), PortNum::new(1).unwrap(), Config::default()).unwrap();
    assert!(r.fast.is_some());
    let mcast = Gid([0xff, 0x0e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    let mut to_mcast = [0u8; 40];
    GrhRepr {
        sgid: Gid([0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]),
        dgid: mcast,
        hop_limit: 1,
        next_header: 17,
        ..GrhRepr::default()
    }
    .emit(&mut to_mcast);
    let unicast = v4_area([192, 168, 1, 20]);
    hal.set(6, GidEntry::new(mcast, GidType::RoceV2));
    assert!(matches!(r.refresh(), Ok(Refreshed::Resnapshot { .. })));
    assert!(r.gids().holds_multicast() && r.fast.is_none());
    let refused = r.resolve(&wc(), &to_mcast).map(|h| h.ah());
    assert_eq!(refused, Err(ResolveError::Profile(r.words(&wc(), &to_mcast).unwrap_err())));
    let h = r.resolve(&wc(), &unicast).unwrap();
    assert_eq!(r.words(&wc(), &unicast).unwrap().dgid(), Some(Gid::from_ipv4([192, 168, 1, 20])));
    r.release(h).unwrap();
    hal.gids.lock().unwrap().clear(6);
    hal.set(7, GidEntry::new(Gid::from_ipv4([10, 9, 9, 9]), GidType::RoceV2));
    assert!(matches!(r.refresh(), Ok(Refreshed::Resnapshot { .. })));
    assert!(r.fast.is_some());
    let h = r.resolve(&wc(), &unicast).unwrap();
    r.release(h).unwrap();
}
