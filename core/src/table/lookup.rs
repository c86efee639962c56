//! The look-up path: hits, the slow path that creates once per key, and the reference operations on handles (release, retain, currency, L2 facts).

use super::*;

impl<H: Hal, const N: usize> AhTable<H, N>
where
    H::Ah: AhToken,
{
    #[inline]
    pub(super) fn handle(slot: u32, generation: u32, token: u64) -> AhHandle<H::Ah> {
        AhHandle { ah: H::Ah::from_token(token), slot, generation }
    }

    /// A lock-free look-up that never creates: a reference to the live AH for
    /// `key` (an [`AhAttr`], a [`PreparedAttr`] or an attribute's
    /// [`AttrWords`]), or `None` when there is none, when it is being
    /// created, when the probe lost [`MAX_READ_RETRIES`] races in a row (or
    /// the refcount is at its maximum), or when `key` is not a valid
    /// attribute. Never waits, never calls the backend, never allocates.
    #[inline]
    pub fn get(&self, key: &impl Lookup) -> Option<AhHandle<H::Ah>> {
        key.table_get(self)
    }

    /// The probe of `key` (from its hash `hash` when known), as `get`.
    #[inline(always)]
    pub(super) fn get_key<const CHAIN: bool>(&self, key: &Key, hash: Option<u64>) -> Option<AhHandle<H::Ah>> {
        let h = match hash {
            Some(h) => h,
            None => self.hash(key),
        };
        match self.probe_from::<CHAIN>(key, h, 0) {
            Probe::Hit(s, g, t) => Some(Self::handle(s, g, t)),
            _ => None,
        }
    }

    /// A reference to the AH for `key` (an [`AhAttr`], a [`PreparedAttr`]
    /// or an attribute's [`AttrWords`]), created by `hal` on a miss.
    ///
    /// A hit is lock-free (see the module docs): it starts at the probe for a
    /// [`PreparedAttr`] and for canonical words (their key is the words),
    /// after packing the key for an [`AhAttr`]. A miss takes the writer lock
    /// to claim a slot, then creates the AH with no lock held; concurrent
    /// misses on the same key wait for that one create (spinning with
    /// [`Backoff`]) and share its AH. If the backend is out of AH resources,
    /// unreferenced entries are evicted and the create is retried. Words that
    /// are not a valid attribute give [`TableError::InvalidAttr`].
    #[inline]
    pub fn get_or_create(&self, hal: &H, key: &impl Lookup) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        key.table_lookup(self, hal, true)
    }

    /// [`get_or_create`](Self::get_or_create), but returns
    /// [`TableError::Pending`] instead of waiting for another thread's create
    /// of the same AH. A miss with no create in progress still creates (and so
    /// waits for the backend).
    #[inline]
    pub fn try_get_or_create(&self, hal: &H, key: &impl Lookup) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        key.table_lookup(self, hal, false)
    }

    /// A look-up that missed (`probed`: what the probe found), or of words
    /// not in canonical form (`None`: not probed yet): the attribute
    /// converted, then the slow path.
    #[inline(never)]
    pub(super) fn lookup_converted(
        &self,
        hal: &H,
        key: &AttrWords,
        block: bool,
        probed: Option<Probe>,
    ) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        let attr = key.to_attr().map_err(TableError::InvalidAttr)?;
        match probed {
            Some(p) => self.lookup_slow(hal, &attr, block, p),
            None => self.lookup(hal, &Key::new(&attr), &attr, block),
        }
    }

    // The look-ups of the shared table merge their fast and slow paths as
    // `Result`s, which LLVM may do through memory (narrow stores, then one
    // wide load: a store-forwarding stall). Measured, that costs a hit here
    // nothing (the CAS drains the store buffer anyway) and the register
    // version below costs 5 instructions; a `Session`'s lease hit, which has
    // no locked instruction, went from 9.2 to 3.2 ns with it.
    #[inline(always)]
    pub(super) fn lookup<X: From<TableError<H::Error>>>(
        &self,
        hal: &H,
        key: &Key,
        attr: &AhAttr,
        block: bool,
    ) -> Result<AhHandle<H::Ah>, X> {
        match self.probe::<true>(key) {
            Probe::Hit(s, g, t) => Ok(Self::handle(s, g, t)),
            Probe::Overflow => Err(TableError::RefcountOverflow.into()),
            p => self.lookup_slow(hal, attr, block, p).map_err(X::from),
        }
    }

    /// The handle of a [`RawHandle`], or the error the slow path left in
    /// `err`: where a [`Session`]'s fast and slow paths meet, in registers.
    /// (Merging two `Result`s, LLVM built the fast one in memory with narrow
    /// stores and copied it with a wide load, a store-forwarding stall of
    /// several nanoseconds per lease hit.)
    #[inline(always)]
    pub(super) fn finish<X>(t: u64, sg: u64, err: Option<X>) -> Result<AhHandle<H::Ah>, X> {
        match err {
            Some(e) => Err(e),
            None => Ok(Self::handle(sg as u32, (sg >> 32) as u32, t)),
        }
    }

    /// `r` as a [`RawHandle`], its error (if any) in `err`.
    #[inline]
    pub(super) fn to_raw<X>(r: Result<AhHandle<H::Ah>, X>, err: &mut Option<X>) -> RawHandle {
        match r {
            Ok(h) => raw(h.slot, h.generation, h.ah.into_token()),
            Err(e) => {
                *err = Some(e);
                (0, 0)
            }
        }
    }

    #[inline(never)]
    pub(super) fn lookup_slow(
        &self,
        hal: &H,
        attr: &AhAttr,
        block: bool,
        first: Probe,
    ) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        bump(&self.counters.misses);
        self.lookup_slow_uncounted(hal, attr, block, first)
    }

    /// [`lookup_slow`](Self::lookup_slow) without counting the miss (a
    /// [`Session`]'s second try of a look-up already counted).
    pub(super) fn lookup_slow_uncounted(
        &self,
        hal: &H,
        attr: &AhAttr,
        block: bool,
        first: Probe,
    ) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        // Recomputed here so that the fast path keeps the key in registers.
        let key = &Key::new(attr);
        if let Probe::Pending(idx, m) = first {
            bump(&self.counters.pending);
            if !block {
                return Err(TableError::Pending);
            }
            self.wait_change(idx, m);
        }
        for _ in 0..MAX_ROUNDS {
            match self.claim(key) {
                Claim::Existing(idx, m) => match self.acquire_at(idx, key, m) {
                    Probe::Hit(s, g, t) => return Ok(Self::handle(s, g, t)),
                    Probe::Overflow => return Err(TableError::RefcountOverflow),
                    _ => {}
                },
                Claim::Creating(idx, m) => {
                    bump(&self.counters.pending);
                    if !block {
                        return Err(TableError::Pending);
                    }
                    self.wait_change(idx, m);
                }
                Claim::Full => return Err(TableError::Full),
                Claim::Claimed(idx, creating, victim) => {
                    if let Some(token) = victim {
                        let _ = self.destroy(hal, token); // counted in the stats; the AH is gone anyway
                    }
                    return self.create(hal, idx, creating, attr);
                }
            }
        }
        Err(TableError::Contended)
    }

    /// Slot `idx` is `CREATING` with the word `creating` and ours: creates the
    /// AH (no lock held) and publishes it with one reference.
    pub(super) fn create(
        &self,
        hal: &H,
        idx: usize,
        creating: u64,
        attr: &AhAttr,
    ) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        let Some(slot) = self.slots.get(idx) else {
            return Err(TableError::Full);
        };
        // Frees the slot on every way out but success, including a backend
        // that panics (and unwinds) inside `resolve_l2` or `create_ah`:
        // waiters on the same key then find the slot free and retry instead
        // of waiting for a create that will never finish.
        let guard = FreeOnDrop { meta: &slot.meta, entries: &self.counters.entries, creating };
        let fail = |e: H::Error| {
            bump(&self.counters.backend_failures);
            Err(TableError::Backend(e))
        };
        let port = attr.port;
        let gid_generation = hal.gid_generation(port);
        let l2 = match hal.resolve_l2(attr) {
            Ok(l2) => l2,
            Err(e) => return fail(e),
        };
        // A backend out of AHs (ENOMEM: the device's AH limit) is retried
        // once per idle entry the CLOCK hand evicts, which frees its AH; when
        // nothing idle is left the error is the caller's. So a create fails
        // with `OutOfResources` only when every AH of this table is held
        // (`tests/table_model.rs`), whatever the limit, and each retry is paid
        // for by a destroy. Neither create nor the eviction's destroy runs
        // under a lock: look-ups, releases and other creates go on meanwhile,
        // and the eviction takes only an unreferenced entry (its refcount is
        // 0 in the CAS that claims it), never one a handle or lease holds.
        let mut evictions_left = N;
        let ah = loop {
            match hal.create_ah(attr, l2.as_ref()) {
                Ok(ah) => break ah,
                Err(e) if e.kind() == ErrorKind::OutOfResources && evictions_left > 0 => {
                    evictions_left = evictions_left.wrapping_sub(1);
                    if !self.evict_one(hal) {
                        return fail(e);
                    }
                    bump(&self.counters.backend_failures);
                }
                Err(e) => return fail(e),
            }
        };
        bump(&self.counters.creates);
        let token = ah.into_token();
        slot.ah.store(token, Ordering::Relaxed);
        let (l0, l1) = pack_l2(l2.as_ref());
        slot.l2.store(l0, Ordering::Relaxed);
        slot.stamp.store(stamp(l1, gid_generation, self.clock.load(Ordering::Relaxed)), Ordering::Relaxed);
        let generation = generation(creating);
        let live = rebuild(creating, Gen(generation), LIVE, Clock::Used, Refs(1));
        core::mem::forget(guard);
        slot.meta.store(live, Ordering::Release);
        if hal.gid_generation(port) != gid_generation {
            // The GIDs changed while we created: a sweep may have missed this
            // entry. Retire it now; our handle stays valid.
            self.retire_slot(hal, idx, live);
        }
        Ok(Self::handle(idx as u32, generation, token))
    }

    /// Gives a reference back. A live entry whose refcount reaches zero stays
    /// cached; the last release of a retired entry destroys its AH (the
    /// returned error is then the backend's, and the AH is gone anyway).
    ///
    /// Lock-free. A handle that does not hold a reference of this table gives
    /// [`TableError::StaleHandle`] and changes nothing.
    pub fn release(&self, hal: &H, handle: AhHandle<H::Ah>) -> Result<(), TableError<H::Error>> {
        let idx = handle.slot as usize;
        let Some(slot) = self.slots.get(idx) else { return Err(TableError::StaleHandle) };
        // The common case, a live entry of the handle's incarnation, in one
        // compare of the word's generation and state; anything else (a
        // retired entry, a stale handle) goes to `release_slow`.
        let live = live_bits(handle.generation);
        let mut m = slot.meta.load(Ordering::Relaxed);
        loop {
            if m & (GEN_BITS | STATE_MASK) != live || refs(m) == 0 {
                return self.release_slow(hal, idx, handle.generation, m, 1, 0);
            }
            match slot.meta.compare_exchange_weak(m, m.wrapping_sub(1), Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(cur) => m = cur,
            }
        }
    }

    /// [`release`](Self::release) of `n` ≥ 1 references to slot `idx`,
    /// generation `generation`, from the word `m`, in every case, or'ing
    /// `used` ([`USED`] or 0) into the word unless it was the last reference
    /// of a retired entry. (`n` > 1, `used` = [`USED`]: a [`Session`] giving
    /// back a lease, and the CLOCK credit for the hits it served.)
    #[inline(never)]
    pub(super) fn release_slow(
        &self,
        hal: &H,
        idx: usize,
        generation: u32,
        mut m: u64,
        n: u64,
        used: u64,
    ) -> Result<(), TableError<H::Error>> {
        let Some(slot) = self.slots.get(idx) else { return Err(TableError::StaleHandle) };
        loop {
            let st = state(m);
            if self::generation(m) != generation || (st != LIVE && st != RETIRED) || refs(m) < n.max(1) {
                return Err(TableError::StaleHandle);
            }
            let last = st == RETIRED && refs(m) == n;
            let new =
                if last { rebuild(m, Gen(generation), BUSY, Clock::Clear, Refs(0)) } else { m.wrapping_sub(n) | used };
            match slot.meta.compare_exchange_weak(m, new, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) if last => {
                    let token = slot.ah.load(Ordering::Relaxed);
                    return self.destroy_and_free(hal, idx, m, token).map_err(TableError::Backend);
                }
                Ok(_) => return Ok(()),
                Err(cur) => m = cur,
            }
        }
    }

    /// Another reference to the entry of `handle` (live or retired).
    /// Lock-free.
    pub fn retain(&self, handle: &AhHandle<H::Ah>) -> Result<AhHandle<H::Ah>, TableError<H::Error>> {
        let Some(slot) = self.slots.get(handle.slot as usize) else { return Err(TableError::StaleHandle) };
        let mut m = slot.meta.load(Ordering::Relaxed);
        loop {
            let st = state(m);
            if generation(m) != handle.generation || (st != LIVE && st != RETIRED) || refs(m) == 0 {
                return Err(TableError::StaleHandle);
            }
            if refs(m) == REF_MAX {
                return Err(TableError::RefcountOverflow);
            }
            match slot.meta.compare_exchange_weak(m, m.wrapping_add(1), Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Ok(AhHandle { ah: handle.ah, slot: handle.slot, generation: handle.generation }),
                Err(cur) => m = cur,
            }
        }
    }

    /// Whether `handle` is still the table's entry for its attribute: `false`
    /// once the entry was retired (a GID, neighbour or age change) or the
    /// handle is stale. A retired handle stays valid to send with until it
    /// is released; a holder that sees `false` re-resolves to get the
    /// current AH.
    pub fn is_current(&self, handle: &AhHandle<H::Ah>) -> bool {
        self.slots.get(handle.slot as usize).is_some_and(|slot| {
            let m = slot.meta.load(Ordering::Acquire);
            generation(m) == handle.generation && state(m) == LIVE
        })
    }

    /// The layer-2 facts the backend resolved for the entry of `handle`
    /// (`Ok(None)` on InfiniBand).
    pub fn l2(&self, handle: &AhHandle<H::Ah>) -> Result<Option<L2Info>, TableError<H::Error>> {
        let idx = handle.slot as usize;
        let Some(slot) = self.slots.get(idx) else {
            return Err(TableError::StaleHandle);
        };
        let m = slot.meta.load(Ordering::Acquire);
        let st = state(m);
        if generation(m) != handle.generation || (st != LIVE && st != RETIRED) || refs(m) == 0 {
            return Err(TableError::StaleHandle);
        }
        // Stable: the handle's reference keeps the slot from being reused.
        Ok(unpack_l2(slot.l2.load(Ordering::Relaxed), slot.stamp.load(Ordering::Relaxed)))
    }
}
