//! Retirement and eviction: sweeps that hide changed entries from new look-ups, the CLOCK eviction, and the destroy of an incarnation's AH by the one thread that owns it.

use super::*;

impl<H, const N: usize> AhTable<H, N> {
    /// Every slot: `LIVE` entries for which `judge` says so are retired.
    /// Returns how many were retired.
    pub(super) fn sweep(&self, hal: &H, judge: impl Fn(&Key, u64, u64) -> Verdict) -> usize
    where
        H: Hal,
        H::Ah: AhToken,
    {
        // No entry moves between windows while this sweep runs (claims check
        // under the lock, and this is counted under it), so none passes it by.
        let _sweep = Self::TWO.then(|| {
            let _guard = self.lock();
            self.sweeping.fetch_add(1, Ordering::AcqRel);
            SweepGuard(&self.sweeping)
        });
        let mut retired = 0usize;
        for (idx, slot) in self.slots.iter().enumerate() {
            let mut m = slot.meta.load(Ordering::Acquire);
            while state(m) == LIVE {
                let key = Self::read_key(slot);
                let st = slot.stamp.load(Ordering::Relaxed);
                let verdict = judge(&key, st, slot.l2.load(Ordering::Relaxed));
                fence(Ordering::Acquire);
                match verdict {
                    Verdict::Keep => break,
                    Verdict::Restamp(g) => {
                        if slot.meta.load(Ordering::Relaxed) == m {
                            slot.stamp.store(restamp(st, g), Ordering::Relaxed);
                        }
                        break;
                    }
                    Verdict::Retire => {}
                }
                let unreferenced = refs(m) == 0;
                let new = if unreferenced { with_state(m & !USED, BUSY) } else { with_state(m, RETIRED) };
                match slot.meta.compare_exchange(m, new, Ordering::Acquire, Ordering::Acquire) {
                    Ok(_) => {
                        bump(&self.counters.retirements);
                        retired = retired.wrapping_add(1);
                        if unreferenced {
                            let token = slot.ah.load(Ordering::Relaxed);
                            let _ = self.destroy_and_free(hal, idx, m, token);
                        }
                        break;
                    }
                    Err(cur) => m = cur,
                }
            }
        }
        if retired > 0 {
            // Sessions give back their leases of retired entries at their
            // next operation, so that the last release destroys the AH.
            self.reclaim.fetch_add(1, Ordering::Relaxed);
        }
        retired
    }
}

impl<H: Hal, const N: usize> AhTable<H, N>
where
    H::Ah: AhToken,
{
    /// Retires slot `idx` if it is still the live incarnation `m0` (any
    /// refcount).
    pub(super) fn retire_slot(&self, hal: &H, idx: usize, m0: u64) {
        let Some(slot) = self.slots.get(idx) else { return };
        let mut m = slot.meta.load(Ordering::Acquire);
        while state(m) == LIVE && generation(m) == generation(m0) {
            let unreferenced = refs(m) == 0;
            let new = if unreferenced { with_state(m & !USED, BUSY) } else { with_state(m, RETIRED) };
            match slot.meta.compare_exchange(m, new, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => {
                    bump(&self.counters.retirements);
                    if unreferenced {
                        let token = slot.ah.load(Ordering::Relaxed);
                        let _ = self.destroy_and_free(hal, idx, m, token);
                    } else {
                        // A session may have leased it already.
                        self.reclaim.fetch_add(1, Ordering::Relaxed);
                    }
                    return;
                }
                Err(cur) => m = cur,
            }
        }
    }

    /// Destroys the AH `token` (the AH is gone even on error).
    pub(super) fn destroy(&self, hal: &H, token: u64) -> Result<(), H::Error> {
        bump(&self.counters.destroys);
        let r = hal.destroy_ah(H::Ah::from_token(token));
        if r.is_err() {
            bump(&self.counters.backend_failures);
        }
        r
    }

    /// Slot `idx` is `BUSY` (from the word `m`, whose hit field it kept) and
    /// ours: destroys its AH and frees it.
    pub(super) fn destroy_and_free(&self, hal: &H, idx: usize, m: u64, token: u64) -> Result<(), H::Error> {
        let r = self.destroy(hal, token);
        if let Some(slot) = self.slots.get(idx) {
            slot.meta.store(rebuild(m, Gen(generation(m)), FREE, Clock::Clear, Refs(0)), Ordering::Release);
            self.counters.entries.fetch_sub(1, Ordering::Relaxed);
        }
        r
    }

    /// Evicts one unreferenced entry anywhere in the table (CLOCK hand).
    pub(super) fn evict_one(&self, hal: &H) -> bool {
        for _ in 0..N.saturating_mul(2) {
            let idx = (self.hand.fetch_add(1, Ordering::Relaxed) as usize) & Self::MASK;
            let Some(slot) = self.slots.get(idx) else { continue };
            let m = slot.meta.load(Ordering::Acquire);
            if state(m) != LIVE || refs(m) != 0 {
                continue;
            }
            if m & USED != 0 {
                let _ = slot.meta.compare_exchange(m, m & !USED, Ordering::Relaxed, Ordering::Relaxed);
                continue;
            }
            if slot.meta.compare_exchange(m, with_state(m, BUSY), Ordering::Acquire, Ordering::Relaxed).is_ok() {
                bump(&self.counters.evictions);
                let token = slot.ah.load(Ordering::Relaxed);
                let _ = self.destroy_and_free(hal, idx, m, token);
                return true;
            }
        }
        self.reclaim.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// After a GID-table change on `new`'s port: retires every entry of that
    /// port built against an older GID generation whose local GID (the
    /// `sgid_index` slot) differs between `old` and `new`. Entries built
    /// against `old`'s generation whose GID did not change, and entries
    /// without a GRH, are re-stamped with `new`'s generation; entries built
    /// against any other older generation are retired. Returns how many
    /// entries were retired.
    pub fn retire_gid_change<const M: usize>(&self, hal: &H, old: &GidTable<M>, new: &GidTable<M>) -> usize {
        let (port, g_old, g_new) = (new.port_num(), old.generation(), new.generation());
        self.sweep(hal, |key, st, _| {
            if key.port() != port || gid_matches(st, g_new) {
                return Verdict::Keep;
            }
            match key.sgid_index() {
                None => Verdict::Restamp(g_new),
                Some(i) if gid_matches(st, g_old) && old.get(u32::from(i)) == new.get(u32::from(i)) => {
                    Verdict::Restamp(g_new)
                }
                Some(_) => Verdict::Retire,
            }
        })
    }

    /// Retires every entry created at least `max_age` ago by the table clock
    /// ([`advance_clock`](Self::advance_clock)): for RoCE, where the resolved
    /// destination MAC can go stale. Returns how many entries were retired.
    pub fn retire_older_than(&self, hal: &H, max_age: u64) -> usize {
        let now = self.clock.load(Ordering::Relaxed);
        self.sweep(hal, |_, st, _| if born_age(st, now) >= max_age { Verdict::Retire } else { Verdict::Keep })
    }

    /// After a neighbour change on RoCE: retires every entry of `port` whose
    /// destination GID is `dgid` and whose resolved destination MAC is not
    /// `dmac` (the address now resolves to another station); entries already
    /// built with `dmac`, entries without resolved layer-2 facts and other
    /// destinations are kept, so a refresh of the same MAC retires nothing.
    /// A retired entry a holder still references stays valid for that
    /// holder and is destroyed at its last release. Returns how many
    /// entries were retired.
    pub fn retire_l2_change(&self, hal: &H, port: u8, dgid: &Gid, dmac: [u8; 6]) -> usize {
        self.sweep(hal, |key, st, l2| {
            let words = AttrWords::from_raw(key.0);
            if key.port() != port || words.dgid().as_ref() != Some(dgid) {
                return Verdict::Keep;
            }
            match unpack_l2(l2, st) {
                Some(info) if info.dmac != dmac => Verdict::Retire,
                _ => Verdict::Keep,
            }
        })
    }

    /// Retires every entry of `port` whose destination GID is `dgid`,
    /// whatever layer-2 facts it was built with: for a backend that does not
    /// record the resolved MAC, after the neighbour table says that address
    /// now resolves to another station. A retired entry a holder still
    /// references stays valid for that holder and is destroyed at its last
    /// release. Returns how many entries were retired.
    pub fn retire_dgid(&self, hal: &H, port: u8, dgid: &Gid) -> usize {
        self.sweep(hal, |key, _, _| {
            let words = AttrWords::from_raw(key.0);
            if key.port() == port && words.dgid().as_ref() == Some(dgid) { Verdict::Retire } else { Verdict::Keep }
        })
    }

    /// Retires every entry. Returns how many entries were retired.
    pub fn retire_all(&self, hal: &H) -> usize {
        self.sweep(hal, |_, _, _| Verdict::Retire)
    }
}
