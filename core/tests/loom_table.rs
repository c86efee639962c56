//! loom models of the AH table's protocol (every atomic of the table goes
//! through `udah_core`'s `sync` module, which is loom's under `cfg(loom)`).
//!
//! ```text
//! RUSTFLAGS="--cfg loom -C debug-assertions=on" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test -p udah-core --release --test loom_table
//! ```
//!
//! The backend records its live AHs in a bit mask, so each model can check
//! that no handle ever holds a destroyed AH or another key's AH, that nothing
//! is destroyed twice, and that `creates − destroys` is the number of live
//! backend AHs at the end; and that the table counted every hit exactly
//! (the hit count lives partly in the lifecycle word).

// Put in a module instead of using #![cfg(..)] to work around a rustc/cargo
// bug (as crossbeam-epoch's tests/loom.rs does).
#[cfg(loom)]
mod tests {
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicU64, Ordering};
    use loom::thread;

    use udah_core::GidTable;
    use udah_core::ah::{AhAttr, PortNum, Sl};
    use udah_core::hal::{ErrorKind, ErrorType, Hal, L2Info, PortInfo};
    use udah_core::table::{AhTable, Session, TableError};

    /// The models' backend. Tokens come from a counter (1..8, the default:
    /// `dlids` keeps each token's DLID, 8 bits per token) or, with
    /// [`by_dlid`](Self::by_dlid), are the key's DLID itself (< 64, so a
    /// second live AH for one key shows). `live` has bit t set while AH t
    /// exists; `bad` counts a create of a live token and a destroy of a dead one.
    #[derive(Default)]
    struct LoomHal {
        by_dlid: bool,
        next: AtomicU64,
        live: AtomicU64,
        dlids: AtomicU64,
        creates: AtomicU64,
        destroys: AtomicU64,
        bad: AtomicU64,
    }

    impl ErrorType for LoomHal {
        type Error = ErrorKind;
    }

    impl Hal for LoomHal {
        type Ah = u64;
        fn port_info(&self, port: PortNum) -> Result<PortInfo, ErrorKind> {
            Ok(PortInfo::new(port.get(), udah_core::LinkLayer::Infiniband, 1))
        }
        fn snapshot_gids<const N: usize>(&self, _: PortNum, _: &mut GidTable<N>) -> Result<(), ErrorKind> {
            Ok(())
        }
        fn gid_generation(&self, _: PortNum) -> u64 {
            0
        }
        fn resolve_l2(&self, _: &AhAttr) -> Result<Option<L2Info>, ErrorKind> {
            Ok(None)
        }
        fn create_ah(&self, attr: &AhAttr, _: Option<&L2Info>) -> Result<u64, ErrorKind> {
            let t = if self.by_dlid {
                let t = u64::from(attr.dlid);
                assert!(t < 64);
                t
            } else {
                let t = self.next.fetch_add(1, Ordering::Relaxed) + 1;
                assert!(t < 8);
                self.dlids.fetch_or(u64::from(attr.dlid as u8) << (8 * t), Ordering::Relaxed);
                t
            };
            if self.live.fetch_or(1 << t, Ordering::AcqRel) & (1 << t) != 0 {
                self.bad.fetch_add(1, Ordering::Relaxed);
            }
            self.creates.fetch_add(1, Ordering::Relaxed);
            Ok(t)
        }
        fn destroy_ah(&self, t: u64) -> Result<(), ErrorKind> {
            if self.live.fetch_and(!(1 << t), Ordering::AcqRel) & (1 << t) == 0 {
                self.bad.fetch_add(1, Ordering::Relaxed);
            }
            self.destroys.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    impl LoomHal {
        /// A backend whose token is the key's DLID.
        fn by_dlid() -> LoomHal {
            LoomHal { by_dlid: true, ..LoomHal::default() }
        }
        fn alive(&self, t: u64) -> bool {
            self.live.load(Ordering::Acquire) & (1 << t) != 0
        }
        fn dlid_of(&self, t: u64) -> u16 {
            if self.by_dlid {
                return t as u16;
            }
            ((self.dlids.load(Ordering::Relaxed) >> (8 * t)) & 0xff) as u16
        }
        fn check_end<const N: usize>(&self, table: &AhTable<LoomHal, N>) {
            let live = u64::from(self.live.load(Ordering::Acquire).count_ones());
            let (c, d) = (self.creates.load(Ordering::Relaxed), self.destroys.load(Ordering::Relaxed));
            assert_eq!(self.bad.load(Ordering::Relaxed), 0, "double or unknown destroy");
            assert_eq!(c - d, live);
            let s = table.stats_exact();
            assert_eq!((s.creates, s.destroys, s.live), (c, d, live));
        }
    }

    fn attr(dlid: u16) -> AhAttr {
        AhAttr {
            port: PortNum::new(1).unwrap(),
            dlid,
            sl: Sl::new(0).unwrap(),
            src_path_bits: 0,
            static_rate: 0,
            grh: None,
        }
    }

    type Shared<const N: usize> = Arc<(AhTable<LoomHal, N>, LoomHal)>;

    /// `loom::model` with room for the sequential hits of [`prime`] (every
    /// atomic load is a branch point to loom, even with no thread running).
    fn primed_model(f: impl Fn() + Sync + Send + 'static) {
        let mut b = loom::model::Builder::new();
        b.max_branches = 20_000;
        b.check(f);
    }

    /// `n` sequential hits (each released) on key `dlid`, before the model's
    /// threads start: brings the slot's 8-bit hit field in the lifecycle word
    /// up to where the racing hits carry it into the slot's counter.
    fn prime<const N: usize>(s: &Shared<N>, dlid: u16, n: u64) {
        let (t, hal) = &**s;
        for _ in 0..n {
            let h = t.get(&attr(dlid)).unwrap();
            t.release(hal, h).unwrap();
        }
        assert_eq!(t.stats_exact().hits, n);
    }

    /// A `get` and its release; returns whether it hit.
    fn reader<const N: usize>(s: &Shared<N>, dlid: u16) -> bool {
        let (t, hal) = &**s;
        if let Some(h) = t.get(&attr(dlid)) {
            assert!(hal.alive(h.ah()), "hit on a destroyed AH");
            assert_eq!(hal.dlid_of(h.ah()), dlid, "hit on another key's AH");
            t.release(hal, h).unwrap();
            return true;
        }
        false
    }

    /// Two readers hit key 1 while a writer inserts key 2 into the only slot,
    /// which it can take only by evicting key 1 when unreferenced.
    #[test]
    fn two_readers_and_a_writer_inserting() {
        loom::model(|| {
            let s: Shared<1> = Arc::new((AhTable::new(), LoomHal::default()));
            {
                let (t, hal) = &*s;
                let h = t.get_or_create(hal, &attr(1)).unwrap();
                t.release(hal, h).unwrap();
            }
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let s = s.clone();
                    thread::spawn(move || reader(&s, 1))
                })
                .collect();
            {
                let (t, hal) = &*s;
                match t.get_or_create(hal, &attr(2)) {
                    Ok(h) => {
                        assert!(hal.alive(h.ah()));
                        assert_eq!(hal.dlid_of(h.ah()), 2);
                        t.release(hal, h).unwrap();
                    }
                    Err(TableError::Full) => {}
                    Err(e) => panic!("{e:?}"),
                }
            }
            let hits: u64 = readers.into_iter().map(|r| u64::from(r.join().unwrap())).sum();
            assert_eq!(s.0.stats_exact().hits, hits, "every hit counted once");
            s.1.check_end(&s.0);
        });
    }

    /// The last reference of key 1 is released while a miss on key 2 tries to
    /// evict it from the only slot.
    #[test]
    fn release_racing_eviction() {
        loom::model(|| {
            let s: Shared<1> = Arc::new((AhTable::new(), LoomHal::default()));
            let h = s.0.get_or_create(&s.1, &attr(1)).unwrap();
            let t1 = {
                let s = s.clone();
                thread::spawn(move || {
                    assert!(s.1.alive(h.ah()), "referenced entry destroyed");
                    s.0.release(&s.1, h).unwrap();
                })
            };
            let r = s.0.get_or_create(&s.1, &attr(2));
            t1.join().unwrap();
            assert_eq!((s.0.stats_exact().hits, s.0.stats_exact().misses), (0, 2));
            match r {
                Ok(h2) => {
                    assert_eq!(s.1.dlid_of(h2.ah()), 2);
                    assert_eq!(s.0.stats_exact().evictions, 1);
                    s.0.release(&s.1, h2).unwrap();
                }
                Err(TableError::Full) => assert_eq!(s.0.stats_exact().evictions, 0),
                Err(e) => panic!("{e:?}"),
            }
            s.1.check_end(&s.0);
        });
    }

    /// Two threads miss on the same key at once: one create, one shared AH.
    #[test]
    fn two_concurrent_misses_same_key() {
        loom::model(|| {
            let s: Shared<2> = Arc::new((AhTable::new(), LoomHal::default()));
            let t1 = {
                let s = s.clone();
                thread::spawn(move || s.0.get_or_create(&s.1, &attr(1)).unwrap())
            };
            let a = s.0.get_or_create(&s.1, &attr(1)).unwrap();
            let b = t1.join().unwrap();
            assert_eq!(a.ah(), b.ah());
            assert_eq!(s.1.creates.load(Ordering::Relaxed), 1);
            let st = s.0.stats_exact();
            assert!(st.misses >= 1, "someone created");
            assert_eq!(st.hits + st.misses, 2, "every look-up is one hit or one miss");
            s.0.release(&s.1, a).unwrap();
            s.0.release(&s.1, b).unwrap();
            s.1.check_end(&s.0);
        });
    }

    /// A hit on a cached entry races its retirement: the hit either misses or
    /// gets the AH, which stays alive until released; it is destroyed once.
    /// The slot has seen 255 hits, so a hit wraps the word's hit field.
    #[test]
    fn retirement_racing_a_hit() {
        primed_model(|| {
            let s: Shared<2> = Arc::new((AhTable::new(), LoomHal::default()));
            let h = s.0.get_or_create(&s.1, &attr(1)).unwrap();
            let t0 = h.ah();
            s.0.release(&s.1, h).unwrap();
            prime(&s, 1, 255);
            let t1 = {
                let s = s.clone();
                thread::spawn(move || reader(&s, 1))
            };
            assert_eq!(s.0.retire_all(&s.1), 1);
            let hit = t1.join().unwrap();
            assert_eq!(s.0.stats_exact().hits, 255 + u64::from(hit));
            assert!(!s.1.alive(t0), "retired, unreferenced AH must be gone");
            assert!(s.0.get(&attr(1)).is_none());
            s.1.check_end(&s.0);
        });
    }

    /// A session's two look-ups of key 1 (the first takes a lease, the
    /// second is served from it unless the entry was retired meanwhile)
    /// race the entry's retirement: every handle holds a live AH of key 1,
    /// the retired AH is destroyed exactly once, when the session's last
    /// reference goes back, and no reference is lost.
    #[test]
    fn session_lease_racing_retirement() {
        loom::model(|| {
            let s: Shared<2> = Arc::new((AhTable::new(), LoomHal::default()));
            let h = s.0.get_or_create(&s.1, &attr(1)).unwrap();
            let t0 = h.ah();
            s.0.release(&s.1, h).unwrap();
            let t1 = {
                let s = s.clone();
                thread::spawn(move || {
                    let mut sess: Session<'_, LoomHal, 2, 2> = Session::new(&s.0, &s.1);
                    let a = sess.get_or_create(&attr(1)).unwrap();
                    let b = sess.get_or_create(&attr(1)).unwrap();
                    for h in [&a, &b] {
                        assert!(s.1.alive(h.ah()), "a session handle on a destroyed AH");
                        assert_eq!(s.1.dlid_of(h.ah()), 1, "a session handle on another key's AH");
                    }
                    sess.release(a).unwrap();
                    sess.release(b).unwrap();
                })
            };
            let retired = s.0.retire_all(&s.1);
            t1.join().unwrap();
            assert!(retired <= 2);
            assert!(!s.1.alive(t0), "retired AH still alive after every reference went back");
            let st = s.0.stats_exact();
            assert_eq!(st.hits + st.misses, 3, "every look-up counted once");
            // Whatever the session created after the retirement is cached.
            s.0.retire_all(&s.1);
            assert_eq!(s.1.live.load(Ordering::Acquire), 0, "a reference was lost");
            s.1.check_end(&s.0);
        });
    }

    /// A session holds a lease on key 1, in the only slot, while a miss on
    /// key 2 needs that slot: the miss gets `Full` (and asks for leases back)
    /// or evicts key 1 after the session gave its references back, never
    /// while a session handle is out.
    #[test]
    fn session_lease_racing_eviction() {
        loom::model(|| {
            let s: Shared<1> = Arc::new((AhTable::new(), LoomHal::default()));
            let h = s.0.get_or_create(&s.1, &attr(1)).unwrap();
            s.0.release(&s.1, h).unwrap();
            let t1 = {
                let s = s.clone();
                thread::spawn(move || {
                    let mut sess: Session<'_, LoomHal, 1, 2> = Session::new(&s.0, &s.1);
                    if let Ok(h) = sess.try_get_or_create(&attr(1)) {
                        assert!(s.1.alive(h.ah()), "referenced entry destroyed");
                        assert_eq!(s.1.dlid_of(h.ah()), 1);
                        sess.release(h).unwrap();
                    }
                })
            };
            let r = s.0.try_get_or_create(&s.1, &attr(2));
            t1.join().unwrap();
            match r {
                Ok(h2) => {
                    assert_eq!(s.1.dlid_of(h2.ah()), 2);
                    s.0.release(&s.1, h2).unwrap();
                }
                Err(TableError::Full | TableError::Pending) => {}
                Err(e) => panic!("{e:?}"),
            }
            s.0.retire_all(&s.1);
            assert_eq!(s.1.live.load(Ordering::Acquire), 0, "a reference was lost");
            s.1.check_end(&s.0);
        });
    }

    /// Slots of the move model's table: two windows of 8 per key.
    const MOVE_SLOTS: usize = 16;
    /// Keys (DLIDs 1..=15) put in the table before the race: one slot is left free.
    const MOVE_FILL: u16 = 15;

    type MoveTable = AhTable<LoomHal, MOVE_SLOTS>;

    /// The table of the move model before its threads start: keys
    /// 1..=`MOVE_FILL` created and released (cached, unreferenced).
    fn filled() -> Arc<(MoveTable, LoomHal)> {
        let s = Arc::new((MoveTable::new(), LoomHal::by_dlid()));
        for d in 1..=MOVE_FILL {
            let h = s.0.get_or_create(&s.1, &attr(d)).unwrap();
            s.0.release(&s.1, h).unwrap();
        }
        s
    }

    /// The slot of key `dlid` (a `get` and its release), if it is in the table.
    fn slot_of(s: &(MoveTable, LoomHal), dlid: u16) -> Option<usize> {
        let h = s.0.get(&attr(dlid))?;
        let slot = h.slot();
        s.0.release(&s.1, h).unwrap();
        Some(slot)
    }

    /// Finds (sequentially, in a one-thread model: the hash is the seed-0
    /// table's, fixed) a new key whose insertion into [`filled`] moves
    /// exactly one entry to its other window, and that entry's key.
    fn find_move() -> (u16, u16) {
        let found = std::sync::Arc::new(std::sync::Mutex::new(None));
        let out = found.clone();
        let mut b = loom::model::Builder::new();
        b.max_branches = 1_000_000;
        b.check(move || {
            for k in MOVE_FILL + 1..64 {
                let s = filled();
                let before: Vec<_> = (1..=MOVE_FILL).map(|d| slot_of(&s, d)).collect();
                // (Filling may have moved entries already.)
                let moves = s.0.stats().relocations;
                let h = s.0.get_or_create(&s.1, &attr(k)).unwrap();
                s.0.release(&s.1, h).unwrap();
                let st = s.0.stats();
                if (st.relocations - moves, st.evictions) != (1, 0) {
                    continue;
                }
                let moved: Vec<u16> =
                    (1..=MOVE_FILL).filter(|&d| slot_of(&s, d) != before[usize::from(d - 1)]).collect();
                assert_eq!(moved.len(), 1, "one relocation moves one entry");
                *out.lock().unwrap() = Some((k, moved[0]));
                return;
            }
        });
        let r = found.lock().unwrap().expect("some key's insertion moves an entry");
        r
    }

    /// A cuckoo move racing a hit: a miss on a new key finds both its
    /// windows full and moves an unreferenced entry (key `e`) to the free
    /// slot of that entry's other window, while another thread looks `e`
    /// up. The hit either takes its reference before the move (the entry,
    /// referenced, then does not move: the claim finds another way or
    /// evicts) or misses while the entry is `BUSY`; it never returns another
    /// key's AH or a destroyed one, `e` is never created twice, and after
    /// both threads at most one slot holds each key (every AH is destroyed
    /// exactly once by `retire_all`).
    #[test]
    fn cuckoo_move_racing_a_hit() {
        let (k, e) = find_move();
        static MOVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        static HIT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let mut b = loom::model::Builder::new();
        b.max_branches = 100_000;
        b.check(move || {
            let s = filled();
            let moves = s.0.stats().relocations;
            let reader = {
                let s = s.clone();
                thread::spawn(move || {
                    let Some(h) = s.0.get(&attr(e)) else { return false };
                    assert_eq!(h.ah(), u64::from(e), "hit on another key's AH");
                    assert!(s.1.alive(u64::from(e)), "hit on a destroyed AH");
                    s.0.release(&s.1, h).unwrap();
                    true
                })
            };
            let h = s.0.get_or_create(&s.1, &attr(k)).unwrap();
            assert_eq!(h.ah(), u64::from(k));
            let hit = reader.join().unwrap();
            let st = s.0.stats_exact();
            if st.relocations > moves {
                MOVED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            if hit {
                HIT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            assert_eq!(st.hits + st.misses, u64::from(MOVE_FILL) + 1 + u64::from(hit), "every look-up counted once");
            assert_eq!(s.1.creates.load(Ordering::Relaxed), u64::from(MOVE_FILL) + 1, "no key created twice");
            if st.evictions == 0 {
                // Nothing left the table: every key, moved or not, is found
                // with its own AH.
                for d in (1..=MOVE_FILL).chain([k]) {
                    let g = s.0.get(&attr(d)).expect("every key still cached");
                    assert_eq!(g.ah(), u64::from(d));
                    s.0.release(&s.1, g).unwrap();
                }
            }
            s.0.release(&s.1, h).unwrap();
            s.0.retire_all(&s.1);
            assert_eq!(s.1.bad.load(Ordering::Relaxed), 0, "an AH created twice or destroyed twice");
            assert_eq!(s.1.live.load(Ordering::Acquire), 0, "an AH left after retire_all");
            let st = s.0.stats();
            assert_eq!((st.entries, st.live), (0, 0));
        });
        assert!(MOVED.load(std::sync::atomic::Ordering::Relaxed) > 0, "some execution moved the entry");
        assert!(HIT.load(std::sync::atomic::Ordering::Relaxed) > 0, "some execution hit it");
    }
}
