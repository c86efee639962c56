//! Placement: the writer lock, claiming a slot in a key's two windows, and the cuckoo moves that make room before an eviction.

use super::*;

impl<H, const N: usize> AhTable<H, N> {
    pub(super) fn lock(&self) -> WriterGuard<'_> {
        let backoff = Backoff::new();
        loop {
            if self.writer.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return WriterGuard(&self.writer);
            }
            while self.writer.load(Ordering::Relaxed) {
                wait_step(&backoff);
            }
        }
    }

    /// The slots of the windows that start at `a` and `b` (`b`'s only when
    /// the table has two windows per key).
    #[inline]
    pub(super) fn window_slots(a: usize, b: usize) -> impl Iterator<Item = usize> {
        let ways = if Self::TWO { 2 } else { 1 };
        [a, b].into_iter().take(ways).flat_map(|w| (0..Self::WINDOW).map(move |i| w.wrapping_add(i) & Self::MASK))
    }

    /// Under the writer lock: finds `key` in its windows, or claims a free
    /// slot for it there, making one by moving an unreferenced entry to its
    /// other window (cuckoo displacement, paths of up to two moves), or by
    /// evicting an unreferenced entry (CLOCK).
    pub(super) fn claim(&self, key: &Key) -> Claim {
        let _guard = self.lock();
        let h = self.hash(key);
        let (a, b) = (home_of(h, Self::MASK), alt_of(h, Self::MASK));
        let mut free = None;
        // Key words change only under this lock (claims), so they are stable here.
        for idx in Self::window_slots(a, b) {
            let Some(slot) = self.slots.get(idx) else { continue };
            let m = slot.meta.load(Ordering::Acquire);
            match state(m) {
                LIVE if Self::key_matches::<true>(slot, key) => return Claim::Existing(idx, m),
                CREATING if Self::key_matches::<true>(slot, key) => return Claim::Creating(idx, m),
                FREE if free.is_none() => free = Some(idx),
                _ => {}
            }
        }
        let free = match free {
            Some(idx) => Some(idx),
            None if Self::TWO && self.sweeping.load(Ordering::Acquire) == 0 => self.make_room(a, b),
            None => None,
        };
        if let Some(idx) = free
            && let Some(slot) = self.slots.get(idx)
        {
            let m = slot.meta.load(Ordering::Acquire);
            // Only claimers, which hold the lock, leave FREE: this cannot fail.
            if state(m) == FREE
                && slot.meta.compare_exchange(m, with_state(m, BUSY), Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return self.publish_claim(idx, m, key, None);
            }
        }
        // CLOCK over the windows: the first sweep gives recently used entries
        // a second chance, the second takes any unreferenced entry.
        for sweep in 0..2 {
            for idx in Self::window_slots(a, b) {
                let Some(slot) = self.slots.get(idx) else { continue };
                let m = slot.meta.load(Ordering::Acquire);
                if state(m) != LIVE || refs(m) != 0 {
                    continue;
                }
                if sweep == 0 && m & USED != 0 {
                    let _ = slot.meta.compare_exchange(m, m & !USED, Ordering::Relaxed, Ordering::Relaxed);
                    continue;
                }
                if slot
                    .meta
                    .compare_exchange(m, with_state(m & !USED, BUSY), Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    let token = slot.ah.load(Ordering::Relaxed);
                    bump(&self.counters.evictions);
                    return self.publish_claim(idx, m, key, Some(token));
                }
            }
        }
        // Sessions may be pinning cached entries: ask them to give them back.
        self.reclaim.fetch_add(1, Ordering::Relaxed);
        Claim::Full
    }

    /// Under the writer lock, no sweep running, both windows (at `a`, `b`)
    /// full: frees a slot in them by moving the unreferenced entry there to
    /// a free slot of its other window, or, one level deeper, by first
    /// moving an unreferenced entry of that window to its own other window.
    /// Returns the freed slot.
    pub(super) fn make_room(&self, a: usize, b: usize) -> Option<usize> {
        // One move: an entry of our windows to a free slot of its other one.
        for src in Self::window_slots(a, b) {
            let Some(other) = self.movable_other(src) else { continue };
            for dst in Self::window_slots(other, other).take(Self::WINDOW) {
                if self.is_free(dst) && self.relocate(src, dst) {
                    return Some(src);
                }
            }
        }
        // Two moves: make room in that other window first.
        for src in Self::window_slots(a, b) {
            let Some(other) = self.movable_other(src) else { continue };
            for mid in Self::window_slots(other, other).take(Self::WINDOW) {
                let Some(far) = self.movable_other(mid) else { continue };
                for dst in Self::window_slots(far, far).take(Self::WINDOW) {
                    if self.is_free(dst) && self.relocate(mid, dst) {
                        if self.relocate(src, mid) {
                            return Some(src);
                        }
                        // `src` was taken meanwhile (a hit): `mid` stays free
                        // for a later claim; try the next candidate.
                        break;
                    }
                }
            }
        }
        None
    }

    /// Whether slot `idx` is `FREE`.
    pub(super) fn is_free(&self, idx: usize) -> bool {
        self.slots.get(idx).is_some_and(|s| state(s.meta.load(Ordering::Acquire)) == FREE)
    }

    /// Under the writer lock: the start of the other window of the entry in
    /// slot `idx`, if it is live and unreferenced (the only entries that
    /// move: no handle or lease names their slot).
    pub(super) fn movable_other(&self, idx: usize) -> Option<usize> {
        let slot = self.slots.get(idx)?;
        let m = slot.meta.load(Ordering::Acquire);
        if state(m) != LIVE || refs(m) != 0 {
            return None;
        }
        let h = self.hash(&Self::read_key(slot));
        let first = home_of(h, Self::MASK);
        let in_first = idx.wrapping_sub(first) & Self::MASK < Self::WINDOW;
        Some(if in_first { alt_of(h, Self::MASK) } else { first })
    }

    /// Under the writer lock: moves the unreferenced live entry of slot
    /// `src` to the free slot `dst` (key, AH, L2 facts and stamps; the hit counts stay
    /// with the slots). `src` is `BUSY` before `dst` is `LIVE`, so at most
    /// one live entry has the key at any time; a reader that looks while
    /// the entry moves misses and takes the slow path, which waits for this
    /// lock. `false` (and nothing changed) if `src` is no longer live and
    /// unreferenced.
    pub(super) fn relocate(&self, src: usize, dst: usize) -> bool {
        let (Some(s), Some(d)) = (self.slots.get(src), self.slots.get(dst)) else {
            return false;
        };
        let m = s.meta.load(Ordering::Acquire);
        let md = d.meta.load(Ordering::Acquire);
        if src == dst || state(m) != LIVE || refs(m) != 0 || state(md) != FREE {
            return false;
        }
        if s.meta.compare_exchange(m, with_state(m, BUSY), Ordering::Acquire, Ordering::Relaxed).is_err() {
            return false;
        }
        // Only claimers, which hold the lock, leave FREE: this cannot fail.
        if d.meta.compare_exchange(md, with_state(md, BUSY), Ordering::Acquire, Ordering::Relaxed).is_err() {
            // The same word again: a reader's CAS from it is still right, as
            // nothing it could have read changed.
            s.meta.store(m, Ordering::Release);
            return false;
        }
        let generation = if generation(md) == 0 { Gen(self.seed()) } else { next_generation(md) };
        // Orders the BUSY CAS before the stores (the seqlock write side).
        fence(Ordering::Release);
        for (to, from) in d.key.iter().zip(&s.key) {
            to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        d.ah.store(s.ah.load(Ordering::Relaxed), Ordering::Relaxed);
        d.l2.store(s.l2.load(Ordering::Relaxed), Ordering::Relaxed);
        d.stamp.store(s.stamp.load(Ordering::Relaxed), Ordering::Relaxed);
        d.meta.store(rebuild(md, generation, LIVE, clock(m), Refs(0)), Ordering::Release);
        s.meta.store(rebuild(m, Gen(self::generation(m)), FREE, Clock::Clear, Refs(0)), Ordering::Release);
        bump(&self.counters.relocations);
        true
    }

    /// The first generation of a never-used slot, drawn once per table (under
    /// the writer lock) from a process-wide counter, so that the handles of
    /// two tables differ in generation, not only by chance.
    pub(super) fn seed(&self) -> u32 {
        let s = self.seed.load(Ordering::Relaxed);
        if s != 0 {
            return s as u32;
        }
        let n = crate::sync::TABLE_SEEDS.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        let s = ((n.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32).max(1);
        self.seed.store(u64::from(s), Ordering::Relaxed);
        s
    }

    /// Slot `idx` is `BUSY` (from the word `m`) and ours: writes `key` and
    /// publishes it as `CREATING` with the next generation.
    pub(super) fn publish_claim(&self, idx: usize, m: u64, key: &Key, victim: Option<u64>) -> Claim {
        let Some(slot) = self.slots.get(idx) else { return Claim::Full };
        let generation = if generation(m) == 0 { Gen(self.seed()) } else { next_generation(m) };
        if victim.is_none() {
            // A free slot becomes an entry (an evicted one stays one).
            bump(&self.counters.entries);
        }
        // Orders the BUSY CAS before the key stores (the seqlock write side).
        fence(Ordering::Release);
        for (d, w) in slot.key.iter().zip(key.0) {
            d.store(w, Ordering::Relaxed);
        }
        // The BUSY word kept `m`'s hit field, and so does this one.
        let creating = rebuild(m, generation, CREATING, Clock::Clear, Refs(0));
        slot.meta.store(creating, Ordering::Release);
        Claim::Claimed(idx, creating, victim)
    }
}
