//! The probe: a key's hash, its two windows, and the hit's compare-and-swap on a slot.

use super::*;

impl<H, const N: usize> AhTable<H, N> {
    /// Whether `slot` holds `key` (four relaxed loads). `CHAIN`: compare
    /// word by word, a branch each, so that LLVM keeps one slot word live at
    /// a time; else the four differences or-ed and tested once. Which one
    /// is cheaper depends on the code around the compare, so each caller
    /// chooses (`probe::<CHAIN>` and the rest pass it on), from instruction
    /// counts (`benches/benches/ah_table.rs`, `ah_scale.rs`): the chain for
    /// a look-up from an attribute (`AhAttr`, `PreparedAttr`: about 7 and 5
    /// fewer per table hit); the or for words, a responder's form (the chain
    /// costs its `resolve` about 3 and the staged batches up to 2 per
    /// completion, more than it saves on a hit from words), and for a
    /// session's unrolled window scan (the chain costs a session hit about 1
    /// and its batch about 3).
    #[inline(always)]
    pub(super) fn key_matches<const CHAIN: bool>(slot: &Slot, key: &Key) -> bool {
        let [k0, k1, k2, k3] = &slot.key;
        let [w0, w1, w2, w3] = key.0;
        if CHAIN {
            k0.load(Ordering::Relaxed) == w0
                && k1.load(Ordering::Relaxed) == w1
                && k2.load(Ordering::Relaxed) == w2
                && k3.load(Ordering::Relaxed) == w3
        } else {
            ((k0.load(Ordering::Relaxed) ^ w0)
                | (k1.load(Ordering::Relaxed) ^ w1)
                | (k2.load(Ordering::Relaxed) ^ w2)
                | (k3.load(Ordering::Relaxed) ^ w3))
                == 0
        }
    }

    pub(super) fn read_key(slot: &Slot) -> Key {
        let mut k = [0u64; KEY_WORDS];
        for (d, s) in k.iter_mut().zip(&slot.key) {
            *d = s.load(Ordering::Relaxed);
        }
        Key(k)
    }

    /// The slow path's acquire: takes a reference on slot `idx` if it holds
    /// `key` live, starting from the word `m`, retrying (with backoff) as long
    /// as the entry stays live. Not counted as a hit.
    pub(super) fn acquire_at(&self, idx: usize, key: &Key, mut m: u64) -> Probe {
        let Some(slot) = self.slots.get(idx) else { return Probe::Miss };
        let backoff = Backoff::new();
        loop {
            if state(m) != LIVE || !Self::key_matches::<true>(slot, key) {
                return Probe::Miss;
            }
            let token = slot.ah.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if refs(m) == REF_MAX {
                return Probe::Overflow;
            }
            // `Acquire` on failure too, as in `probe`.
            match slot.meta.compare_exchange(m, m.wrapping_add(1) | USED, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => return Probe::Hit(idx as u32, generation(m), token),
                Err(cur) => {
                    m = cur;
                    wait_step(&backoff);
                }
            }
        }
    }

    /// The keyed hash of `key` in this table.
    #[inline(always)]
    pub(super) fn hash(&self, key: &Key) -> u64 {
        key.hash(&self.hash_key)
    }

    /// The hash of a prepared attribute in this table: the one it keeps if
    /// it was prepared for this table's hash key, else computed. The tag is
    /// the hash key's first word, a bijection of the seed (`HashKey::new`),
    /// so two seeds never share it; and a wrong hash could only make a
    /// look-up miss, whose slow path hashes again, never hit another key.
    #[inline(always)]
    pub(super) fn prepared_hash(&self, p: &PreparedAttr) -> u64 {
        if p.keyed == self.hash_key.0[0] { p.hash } else { self.hash(&p.key) }
    }

    /// The hash of `h`'s key `k` in this table: the one it carries if it was
    /// made for this table's hash key, else computed (as
    /// [`prepared_hash`](Self::prepared_hash)).
    #[inline(always)]
    pub(super) fn hashed_hash(&self, h: &Hashed, k: &Key) -> u64 {
        if h.keyed == self.hash_key.0[0] { h.hash } else { self.hash(k) }
    }

    /// Whether a batch should stage its look-ups and
    /// [`prefetch`](Self::prefetch) their slots: the table is larger than
    /// [`PREFETCH_BYTES`], so that a random slot is likely not in the
    /// caches (a smaller table's slots stay there, and the staging would
    /// only cost instructions).
    pub const PREFETCH: bool = N.saturating_mul(core::mem::size_of::<Slot>()) > PREFETCH_BYTES;

    /// From this many entries on (a quarter of the slots),
    /// [`prefetch`](Self::prefetch) loads the first [`NEAR_SLOTS`](Self::NEAR_SLOTS)
    /// slots of a key's first window, not only its first slot.
    const NEAR_PREFETCH: u64 = (N / 4) as u64;

    /// Slots [`prefetch`](Self::prefetch) loads from a key's first slot on
    /// from [`NEAR_PREFETCH`](Self::NEAR_PREFETCH) entries (not beyond the
    /// window).
    const NEAR_SLOTS: usize = if Self::WINDOW < 2 { Self::WINDOW } else { 2 };

    /// From this many entries on (half the slots), [`prefetch`](Self::prefetch)
    /// loads both of a key's windows.
    const DEEP_PREFETCH: u64 = (N / 2) as u64;

    /// `words` hashed for this table ([`Hashed`]), and the slots its
    /// look-up is likely to read starting to load into the cache (prefetch
    /// hints, `table/prefetch.rs`), so that the look-ups a batch stages miss
    /// on the table side by side instead of one after the other. Changes
    /// nothing that any thread reads.
    ///
    /// Which slots depends on how full the table is. Below a quarter full,
    /// a key is nearly always in the first slot of its first window (95 % at
    /// a tenth full, 88 % at a quarter: `position_histogram` in the table's
    /// tests), and only that slot is loaded. From a quarter to half full,
    /// the first two slots are: at 48 % full 76 % of the keys are in the
    /// first slot and 14 % in the second, and loading the first slot only
    /// left one look-up in four to wait for its second slot (`udah demo
    /// --peers 1000000`, 10⁶ peers in 2²¹ slots: 15.5-16.6 against
    /// 12.0-14.1 M completions/s, p50 55-57 against 63-76 ns, three
    /// interleaved pairs; benches/RESULTS.md). From half full on, every slot
    /// of both windows is: at 95 % full only half the keys are in the first
    /// slot and a fifth are in the second window, behind eight slots of the
    /// first (a look-up reads 3.3 slots on average), and loading just the
    /// first slot left most of the look-up's misses to wait for
    /// (benches/RESULTS.md, batches of completions, both windows loaded
    /// against the first slot only: at 10⁶ peers in 2²⁰ slots, 95 % full,
    /// 0.58-0.66x the time in uniform order, 0.72-0.93x in Zipf order; at
    /// 5·10⁵, 48 % full, 0.86-0.95x uniform but 1.0-1.19x Zipf; at 10⁵, a
    /// tenth full, 1.18-1.55x: hence half full.)
    ///
    /// (A relaxed atomic load of the slot instead of the hint bought
    /// 0.86-1.0 of the plain batch's time at 10⁶ peers: a load waits in the
    /// reorder buffer for its data, and the ~150 instructions of each
    /// completion's profile between two loads fill that buffer, so only
    /// about two misses were in flight; the hint retires at once.)
    #[inline(always)]
    pub fn prefetch(&self, words: CanonicalWords) -> Hashed {
        let k = Key(words.words().raw());
        let hash = self.hash(&k);
        let home = home_of(hash, Self::MASK);
        let entries = self.counters.entries.load(Ordering::Relaxed);
        if entries >= Self::DEEP_PREFETCH {
            self.prefetch_window(home);
            if Self::TWO {
                self.prefetch_window(alt_of(hash, Self::MASK));
            }
        } else if entries >= Self::NEAR_PREFETCH {
            self.prefetch_slots(home, Self::NEAR_SLOTS);
        } else if let Some(slot) = self.slots.get(home) {
            prefetch::slot(slot);
        }
        Hashed { words, hash, keyed: self.hash_key.0[0] }
    }

    /// Prefetch hints for the window that starts at `start`.
    #[inline(always)]
    pub(super) fn prefetch_window(&self, start: usize) {
        self.prefetch_slots(start, Self::WINDOW);
    }

    /// Prefetch hints for the first `n` (at most [`WINDOW`](Self::WINDOW))
    /// slots of the window that starts at `start`.
    #[inline(always)]
    fn prefetch_slots(&self, start: usize, n: usize) {
        match self.slots.get(start..start.wrapping_add(n)) {
            Some(window) => window.iter().for_each(prefetch::slot),
            // The window wraps around the end of the table.
            None => Self::window_slots(start, start).take(n).for_each(|i| {
                if let Some(slot) = self.slots.get(i) {
                    prefetch::slot(slot);
                }
            }),
        }
    }

    /// `attr` prepared for this table's hash ([`PreparedAttr`]).
    #[inline]
    pub fn prepare(&self, attr: &AhAttr) -> PreparedAttr {
        PreparedAttr::keyed(attr, &self.hash_key)
    }

    /// The lock-free probe of `key`'s windows.
    #[inline(always)]
    pub(super) fn probe<const CHAIN: bool>(&self, key: &Key) -> Probe {
        self.probe_from::<CHAIN>(key, self.hash(key), 0)
    }

    /// The lock-free probe of `key`'s two windows (`h`: its hash); a hit
    /// takes `1 + extra` references (`extra` > 0: a [`Session`]'s lease).
    /// The first window inline, the second out of line: a key goes to its
    /// second window only when the first is full.
    #[inline(always)]
    pub(super) fn probe_from<const CHAIN: bool>(&self, key: &Key, h: u64, extra: u64) -> Probe {
        match self.probe_window::<CHAIN>(key, home_of(h, Self::MASK), extra) {
            // A copy of the key for the out-of-line call, made here: its
            // stores stay on this cold path (through `key` itself, the key
            // went to memory on every look-up, 4 stores).
            Probe::Miss if Self::TWO => {
                let k = *key;
                self.probe_alt::<CHAIN>(&k, extra)
            }
            p => p,
        }
    }

    /// [`probe_window`](Self::probe_window) of the second window. It hashes
    /// the key again: the hash is not kept live (spilled) on the hit path
    /// for this rare one.
    #[inline(never)]
    pub(super) fn probe_alt<const CHAIN: bool>(&self, key: &Key, extra: u64) -> Probe {
        self.probe_window::<CHAIN>(key, alt_of(self.hash(key), Self::MASK), extra)
    }

    /// The lock-free probe of every slot of the window that starts at
    /// `home`. (A straight-line try of the first slot before this loop
    /// made a table hit 4 instructions cheaper, 96.2 -> 92.1 with the old
    /// counting loops, but read the first slot twice whenever the try
    /// failed, and the loom models of `tests/loom_table.rs` then ran for
    /// over 25 minutes instead of a few: not kept.)
    #[inline(always)]
    pub(super) fn probe_window<const CHAIN: bool>(&self, key: &Key, home: usize, extra: u64) -> Probe {
        // The slot's byte offset steps, not its index (from `home + i` each
        // time, the first slot cost a reload and an add more; from the
        // index, a mask, a copy and a shift per slot where the offset needs
        // a mask: `(h >> 34) & 0x3fc0` for the first at 256 slots).
        const SIZE: usize = core::mem::size_of::<Slot>();
        let mut next_off = (home & Self::MASK).wrapping_mul(SIZE);
        for _ in 0..Self::WINDOW {
            let idx = next_off / SIZE;
            next_off = next_off.wrapping_add(SIZE) & Self::MASK.wrapping_mul(SIZE);
            let Some(slot) = self.slots.get(idx) else { continue };
            let mut m = slot.meta.load(Ordering::Acquire);
            let mut tries = 0u32;
            loop {
                // The key first (these loads follow the `Acquire` load of `m`
                // whatever the order of the tests), so that the state test on
                // the hit path is a single compare.
                if !Self::key_matches::<CHAIN>(slot, key) {
                    break;
                }
                // One more reference and one more hit (the hit field wraps
                // off the top of the word; `slot.rs`).
                let next = m.wrapping_add(HIT_STEP.wrapping_add(extra));
                // `LIVE` and no refcount overflow, in one test.
                if !live_with_room(next, extra) {
                    if m & STATE_MASK != LIVE_BITS {
                        if not_live_is_creating(m) {
                            return Probe::Pending(idx, m);
                        }
                        break;
                    }
                    return Probe::Overflow;
                }
                let token = slot.ah.load(Ordering::Relaxed);
                fence(Ordering::Acquire);
                // `Acquire` on failure too: the retry reads the key and token
                // again on the strength of `cur` (loom found the `Relaxed`
                // version returning a stale token).
                match slot.meta.compare_exchange(m, next | USED, Ordering::Acquire, Ordering::Acquire) {
                    Ok(_) => {
                        // This hit wrapped the hit field (refcount ≥ 1, so the
                        // word is below `HIT_STEP` exactly when the field is
                        // 0): carry 256 into the table's counter, once per 256
                        // hits.
                        if next < HIT_STEP {
                            self.hits.fetch_add(HIT_CARRY, Ordering::Relaxed);
                        }
                        return Probe::Hit(idx as u32, generation(m), token);
                    }
                    Err(cur) => {
                        tries = tries.wrapping_add(1);
                        if tries >= MAX_READ_RETRIES {
                            return Probe::Miss;
                        }
                        m = cur;
                    }
                }
            }
        }
        Probe::Miss
    }

    /// Waits until slot `idx` no longer has the word `m`.
    pub(super) fn wait_change(&self, idx: usize, m: u64) {
        let Some(slot) = self.slots.get(idx) else { return };
        let backoff = Backoff::new();
        while slot.meta.load(Ordering::Acquire) == m {
            wait_step(&backoff);
        }
    }
}
