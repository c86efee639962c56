//! [`AhSlots`]: the backend's AHs in a preallocated array, so that the send
//! path turns a token back into its `ibv_ah` with atomics only (no lock).
//!
//! # The slot word
//!
//! Each slot has one `AtomicU64` state and the AH pointer:
//!
//! ```text
//! bits 63..32  generation (bumped each time the slot is freed)
//! bit  31      RESERVED: a create or destroy owns the slot
//! bit  30      LIVE: the pointer is a live AH; senders may enter
//! bits 29..0   senders inside [`AhSlots::with`] right now
//! ```
//!
//! A token is `generation << 32 | index`. [`AhSlots::with`] enters a slot by
//! one compare-and-swap that checks the generation and `LIVE` and adds one
//! sender; it leaves with one `fetch_sub`. [`AhSlots::remove`] clears `LIVE`
//! (so no new sender enters), waits for the senders already inside to leave
//! (each is inside one `ibv_post_send`, microseconds), and only then hands
//! the pointer to the destroy function. So the pointer a sender uses cannot
//! be destroyed while it uses it: that is the lifetime proof the send path's
//! `unsafe` block relies on. [`AhSlots::insert`] claims a free slot by
//! compare-and-swap, runs the (possibly slow) create outside any lock and
//! publishes the pointer with a release store of `LIVE`.
//!
//! No operation takes a lock; create and destroy never block a sender on
//! another slot, and a sender never blocks anything but the destroy of the
//! very AH it is sending through.
//!
//! A stale token (its AH destroyed, the slot maybe reused) has the wrong
//! generation and is refused. The generation is 32 bits: a token kept across
//! 2^32 reuses of one slot would alias; the AH table never keeps a token
//! past its `destroy_ah`.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

const COUNT_MASK: u64 = (1 << 30) - 1;
const LIVE: u64 = 1 << 30;
const RESERVED: u64 = 1 << 31;
const GEN_SHIFT: u32 = 32;

struct Slot<T> {
    state: AtomicU64,
    raw: AtomicPtr<T>,
}

/// Why a slot operation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotError {
    /// The token names no live entry (never created, destroyed, or stale).
    Unknown,
    /// 2^30 senders at once on one slot (cannot happen in practice).
    Busy,
}

/// A fixed-capacity, lock-free map from tokens to live pointers.
pub(crate) struct AhSlots<T> {
    slots: Box<[Slot<T>]>,
    /// Where the next claim starts scanning (spreads claims, keeps the scan
    /// short when most slots are free).
    hint: AtomicUsize,
    live: AtomicUsize,
}

impl<T> core::fmt::Debug for AhSlots<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AhSlots").field("capacity", &self.slots.len()).field("live", &self.live()).finish()
    }
}

fn split(token: u64) -> (usize, u64) {
    ((token & 0xffff_ffff) as usize, token >> GEN_SHIFT)
}

impl<T> AhSlots<T> {
    /// `capacity` slots (at least 1, at most 2^32).
    pub(crate) fn new(capacity: usize) -> AhSlots<T> {
        let n = capacity.clamp(1, 1 << 32);
        let slots = (0..n).map(|_| Slot { state: AtomicU64::new(0), raw: AtomicPtr::new(core::ptr::null_mut()) });
        AhSlots { slots: slots.collect(), hint: AtomicUsize::new(0), live: AtomicUsize::new(0) }
    }

    /// How many slots.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Live entries.
    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Claims a free slot, runs `create` (outside any lock) and publishes its
    /// pointer; returns the token. On `create`'s error the slot is freed
    /// again and the error returned.
    pub(crate) fn insert<E>(
        &self,
        create: impl FnOnce() -> Result<NonNull<T>, E>,
        full: impl FnOnce() -> E,
    ) -> Result<u64, E> {
        let Some((i, generation)) = self.claim() else { return Err(full()) };
        let slot = &self.slots[i];
        match create() {
            Ok(p) => {
                slot.raw.store(p.as_ptr(), Ordering::Relaxed);
                self.live.fetch_add(1, Ordering::Relaxed);
                // Release: a sender that sees LIVE (acquire) sees the pointer.
                slot.state.store(generation << GEN_SHIFT | LIVE, Ordering::Release);
                Ok(generation << GEN_SHIFT | i as u64)
            }
            Err(e) => {
                slot.state.store(generation << GEN_SHIFT, Ordering::Release);
                Err(e)
            }
        }
    }

    fn claim(&self) -> Option<(usize, u64)> {
        let n = self.slots.len();
        let start = self.hint.fetch_add(1, Ordering::Relaxed) % n;
        for k in 0..n {
            let i = (start + k) % n;
            let slot = &self.slots[i];
            let s = slot.state.load(Ordering::Relaxed);
            if s & (LIVE | RESERVED | COUNT_MASK) != 0 {
                continue;
            }
            if slot.state.compare_exchange(s, s | RESERVED, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return Some((i, s >> GEN_SHIFT));
            }
        }
        None
    }

    /// Runs `f` with the live pointer of `token`; the entry cannot be
    /// removed (its pointer destroyed) until `f` returns.
    pub(crate) fn with<R>(&self, token: u64, f: impl FnOnce(NonNull<T>) -> R) -> Result<R, SlotError> {
        let (i, generation) = split(token);
        let slot = self.slots.get(i).ok_or(SlotError::Unknown)?;
        let mut s = slot.state.load(Ordering::Relaxed);
        loop {
            if s >> GEN_SHIFT != generation || s & LIVE == 0 {
                return Err(SlotError::Unknown);
            }
            if s & COUNT_MASK == COUNT_MASK {
                return Err(SlotError::Busy);
            }
            // Acquire pairs with `insert`'s release store of LIVE.
            match slot.state.compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        let guard = Leave(&slot.state);
        let p = NonNull::new(slot.raw.load(Ordering::Relaxed));
        let r = p.map(f);
        drop(guard);
        r.ok_or(SlotError::Unknown)
    }

    /// Removes `token`'s entry: no new [`with`](Self::with) enters, the ones
    /// inside finish, then `destroy` gets the pointer (and the slot is free
    /// again, under a new generation, once it returns).
    pub(crate) fn remove<R>(&self, token: u64, destroy: impl FnOnce(NonNull<T>) -> R) -> Result<R, SlotError> {
        let (i, generation) = split(token);
        let slot = self.slots.get(i).ok_or(SlotError::Unknown)?;
        let mut s = slot.state.load(Ordering::Relaxed);
        loop {
            if s >> GEN_SHIFT != generation || s & LIVE == 0 {
                return Err(SlotError::Unknown);
            }
            match slot.state.compare_exchange_weak(s, (s & !LIVE) | RESERVED, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        // Wait for the senders inside (each is one post, microseconds).
        let mut spins = 0u32;
        // Acquire pairs with each sender's release `fetch_sub`: their use of
        // the pointer happens before the destroy below.
        while slot.state.load(Ordering::Acquire) & COUNT_MASK != 0 {
            spins = spins.saturating_add(1);
            if spins < 64 {
                core::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let p = slot.raw.swap(core::ptr::null_mut(), Ordering::Relaxed);
        let r = NonNull::new(p).map(destroy);
        self.live.fetch_sub(1, Ordering::Relaxed);
        slot.state.store(generation.wrapping_add(1) << GEN_SHIFT, Ordering::Release);
        r.ok_or(SlotError::Unknown)
    }

    /// Every live token (for teardown).
    pub(crate) fn tokens(&self) -> Vec<u64> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let st = s.state.load(Ordering::Acquire);
                (st & LIVE != 0).then_some((st >> GEN_SHIFT) << GEN_SHIFT | i as u64)
            })
            .collect()
    }
}

/// Leaves a slot entered by `with` (also on unwind).
struct Leave<'a>(&'a AtomicU64);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        // Release: the sender's use of the pointer happens before a remover
        // that sees the count drop.
        self.0.fetch_sub(1, Ordering::Release);
    }
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;
    use core::time::Duration;
    use std::sync::mpsc;
    use std::sync::{Arc, Barrier};

    /// How long a deadlock detector waits before calling it a deadlock (not
    /// a timing assertion: a correct run needs no waiting at all).
    const DEADLOCK: Duration = Duration::from_secs(60);

    fn boxed<E>(v: u64) -> Result<NonNull<u64>, E> {
        Ok(NonNull::from(Box::leak(Box::new(v))))
    }

    fn free(p: NonNull<u64>) -> u64 {
        // SAFETY: every pointer in these tests is a leaked `Box<u64>`, freed
        // once by the single `remove` that got it.
        *unsafe { Box::from_raw(p.as_ptr()) }
    }

    fn read(p: NonNull<u64>) -> u64 {
        // SAFETY: `with` guarantees the pointer is live (not yet freed by
        // `remove`) while the closure runs.
        unsafe { *p.as_ptr() }
    }

    #[test]
    fn insert_with_remove_and_stale_tokens() {
        let s = AhSlots::<u64>::new(2);
        let a = s.insert(|| boxed(10), || "full").unwrap();
        let b = s.insert(|| boxed(20), || "full").unwrap();
        assert_ne!(a, b);
        assert_eq!(s.insert(|| boxed(30), || "full"), Err("full"));
        assert_eq!((s.with(a, read), s.with(b, read)), (Ok(10), Ok(20)));
        assert_eq!(s.live(), 2);
        assert_eq!(s.remove(a, free), Ok(10));
        assert_eq!(s.with(a, read), Err(SlotError::Unknown), "destroyed");
        assert_eq!(s.remove(a, free), Err(SlotError::Unknown), "destroyed twice");
        let c = s.insert(|| boxed(40), || "full").unwrap();
        assert_eq!(c & 0xffff_ffff, a & 0xffff_ffff, "the freed slot is reused");
        assert_ne!(c, a, "under a new generation");
        assert_eq!(s.with(a, read), Err(SlotError::Unknown), "the stale token does not reach the new AH");
        assert_eq!(s.with(c, read), Ok(40));
        assert_eq!(s.with(u64::MAX, read), Err(SlotError::Unknown), "index out of range");
        // A failed create frees the slot again.
        assert_eq!(s.remove(b, free), Ok(20));
        assert_eq!(s.insert(|| Err::<NonNull<u64>, _>("EINVAL"), || "full"), Err("EINVAL"));
        let d = s.insert(|| boxed(50), || "full").unwrap();
        let mut toks = s.tokens();
        toks.sort_unstable();
        let mut want = vec![c, d];
        want.sort_unstable();
        assert_eq!(toks, want);
        for t in toks {
            s.remove(t, free).unwrap();
        }
        assert_eq!(s.live(), 0);
    }

    /// The lock the old backend held across every `ibv_post_send`: with it,
    /// only one sender can be inside the send at a time, and this test
    /// deadlocks (the barrier inside the send needs all `N` senders there
    /// at once) and fails after `DEADLOCK`. It also needs a create and a
    /// destroy of other AHs to complete while the `N` senders are parked
    /// inside their sends, which fails if create or destroy shares a lock
    /// with the send path.
    #[test]
    fn senders_are_inside_the_send_together_and_do_not_block_create_or_destroy() {
        const N: usize = 8;
        let s = Arc::new(AhSlots::<u64>::new(64));
        let shared = s.insert(|| boxed(7), || ()).unwrap();
        let victim = s.insert(|| boxed(8), || ()).unwrap();
        let inside = Arc::new(Barrier::new(N + 1));
        let release = Arc::new(Barrier::new(N + 1));
        let (done_tx, done_rx) = mpsc::channel();
        for _ in 0..N {
            let (s, inside, release, done_tx) = (s.clone(), inside.clone(), release.clone(), done_tx.clone());
            std::thread::spawn(move || {
                let r = s.with(shared, |p| {
                    inside.wait();
                    release.wait();
                    read(p)
                });
                done_tx.send(r).unwrap();
            });
        }
        let (ctl_tx, ctl_rx) = mpsc::channel();
        {
            let (s, inside) = (s.clone(), inside.clone());
            std::thread::spawn(move || {
                inside.wait(); // all N senders are inside `with` now
                let t = s.insert(|| boxed(9), || ()).unwrap();
                let a = s.with(t, read).unwrap();
                let b = s.remove(victim, free).unwrap();
                let c = s.remove(t, free).unwrap();
                ctl_tx.send((a, b, c)).unwrap();
            });
        }
        let ctl = ctl_rx.recv_timeout(DEADLOCK).expect("create/destroy blocked behind senders: a shared lock");
        assert_eq!(ctl, (9, 8, 9));
        release.wait();
        for _ in 0..N {
            assert_eq!(done_rx.recv_timeout(DEADLOCK).expect("a sender never finished"), Ok(7));
        }
        assert_eq!(s.remove(shared, free), Ok(7));
    }

    /// A slow create (a RoCE `ibv_create_ah` can take milliseconds) holds no
    /// lock: sends through other AHs proceed while it is parked.
    #[test]
    fn a_create_in_progress_does_not_block_senders() {
        let s = Arc::new(AhSlots::<u64>::new(4));
        let t = s.insert(|| boxed(1), || ()).unwrap();
        let (in_create, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        let creator = {
            let (s, in_create, release) = (s.clone(), in_create.clone(), release.clone());
            std::thread::spawn(move || {
                s.insert(
                    || {
                        in_create.wait();
                        release.wait();
                        boxed(2)
                    },
                    || (),
                )
            })
        };
        in_create.wait();
        let (tx, rx) = mpsc::channel();
        let sender = {
            let s = s.clone();
            std::thread::spawn(move || tx.send(s.with(t, read)).unwrap())
        };
        assert_eq!(rx.recv_timeout(DEADLOCK).expect("a send waited for a create"), Ok(1));
        release.wait();
        let t2 = creator.join().unwrap().unwrap();
        sender.join().unwrap();
        assert_eq!(s.with(t2, read), Ok(2));
        for tok in s.tokens() {
            s.remove(tok, free).unwrap();
        }
    }

    /// Destroy waits for the senders inside and only then frees: N threads
    /// hammer one token while the main thread keeps re-creating and
    /// destroying it; every successful read sees the live value (a
    /// use-after-free reads freed, maybe reused memory; Miri or ASan see it
    /// every time, the value check most times).
    #[test]
    fn remove_never_frees_under_a_sender() {
        const N: usize = 4;
        const READS: u64 = 2000;
        let s = Arc::new(AhSlots::<u64>::new(8));
        let tok = Arc::new(AtomicU64::new(s.insert(|| boxed(0xabcd), || ()).unwrap()));
        let (stop, reads) = (Arc::new(core::sync::atomic::AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let mut hs = Vec::new();
        for _ in 0..N {
            let (s, tok, stop, reads) = (s.clone(), tok.clone(), stop.clone(), reads.clone());
            hs.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match s.with(tok.load(Ordering::Relaxed), read) {
                        Ok(v) => {
                            assert_eq!(v, 0xabcd);
                            reads.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(SlotError::Unknown) => {}
                        Err(e) => panic!("{e:?}"),
                    }
                }
            }));
        }
        // Until the senders have read through churning tokens often enough
        // (bounded: a run that never gets there fails below).
        let mut rounds = 0u64;
        while reads.load(Ordering::Relaxed) < READS && rounds < 10_000_000 {
            let old = tok.load(Ordering::Relaxed);
            let new = s.insert(|| boxed(0xabcd), || ()).unwrap();
            tok.store(new, Ordering::Relaxed);
            assert_eq!(s.remove(old, free), Ok(0xabcd));
            rounds += 1;
        }
        stop.store(true, Ordering::Relaxed);
        for h in hs {
            h.join().unwrap();
        }
        assert!(reads.load(Ordering::Relaxed) >= READS, "the senders ran during {rounds} rounds of churn");
        s.remove(tok.load(Ordering::Relaxed), free).unwrap();
        assert_eq!(s.live(), 0);
    }
}
