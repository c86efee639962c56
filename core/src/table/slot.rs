//! One table slot: a lifecycle word, the packed key, the AH token and a hit
//! carry counter on one cache line, plus a cold part for invalidation.
//!
//! # The lifecycle word
//!
//! ```text
//!  63      56 55                    24 23 22   20 19               0
//! +----------+------------------------+--+-------+------------------+
//! | hits (8) |    generation (32)     |U | state |   refcount (20)  |
//! +----------+------------------------+--+-------+------------------+
//! ```
//!
//! `U` is the CLOCK "recently used" bit, set by every hit. The word is the
//! slot's seqlock stamp *and* its refcount: a reader validates what it read
//! and takes its reference in one compare-and-swap from the value it loaded
//! before reading (see [`super`] for the proof).
//!
//! `hits` is the low 8 bits of the slot's hit count, counted by the hit's own
//! compare-and-swap (`m` → `m + 1 + HIT_ONE`, so that a hit is one locked
//! instruction). The field is at the top so that its carry falls off the
//! word; the hit whose CAS wraps it to 0 adds 256 to the slot's `hits`
//! counter ([`HIT_CARRY`]), so the slot's hit count is that counter plus the
//! field (`AhTable::stats` sums both). Every other transition keeps the field
//! as it is (all of them start from the word they replace: [`with_state`],
//! [`rebuild`]), whatever the state, across generations: it belongs to the
//! slot, not to an incarnation.
//!
//! | state | key, AH | who may change the word |
//! |---|---|---|
//! | `FREE` | stale | a claimer holding the writer lock |
//! | `BUSY` | being written or destroyed | only the thread that moved it to `BUSY` |
//! | `CREATING` | key valid, AH not yet | only the creating thread |
//! | `LIVE` | valid; refcount ≥ 0 (0 = cached) | CAS by anyone: hit (+1), release (−1), eviction/retirement |
//! | `RETIRED` | valid; refcount ≥ 1; invisible to look-ups | CAS by releasers; the last one destroys |

use super::key::KEY_WORDS;
use crate::sync::{AtomicU64, maybe_const_fn};

pub(crate) const REF_BITS: u32 = 20;
/// The largest refcount.
pub(crate) const REF_MAX: u64 = (1 << REF_BITS) - 1;
const STATE_SHIFT: u32 = REF_BITS;
/// The state bits.
pub(crate) const STATE_MASK: u64 = 0b111 << STATE_SHIFT;
/// CLOCK reference bit.
pub(crate) const USED: u64 = 1 << 23;
/// Generations are the 32 bits from here.
const GEN_SHIFT: u32 = 24;
/// The generation bits.
pub(crate) const GEN_BITS: u64 = (u32::MAX as u64) << GEN_SHIFT;
const HIT_SHIFT: u32 = 56;
/// One hit in the hit field.
pub(crate) const HIT_ONE: u64 = 1 << HIT_SHIFT;
/// The hit field (the low 8 bits of the slot's hit count).
pub(crate) const HIT_MASK: u64 = !0 << HIT_SHIFT;
/// What the hit that wraps the hit field adds to the slot's `hits`.
pub(crate) const HIT_CARRY: u64 = 1 << (64 - HIT_SHIFT);
/// What a hit adds to the word: one reference, one hit (`USED` is or-ed in).
pub(crate) const HIT_STEP: u64 = HIT_ONE + 1;

pub(crate) const FREE: u64 = 0;
pub(crate) const BUSY: u64 = 1;
pub(crate) const CREATING: u64 = 2;
pub(crate) const LIVE: u64 = 3;
pub(crate) const RETIRED: u64 = 4;
/// `LIVE` in place in the word.
pub(crate) const LIVE_BITS: u64 = LIVE << STATE_SHIFT;

/// The refcount of `m`.
#[inline]
pub(crate) const fn refs(m: u64) -> u64 {
    m & REF_MAX
}

/// The state of `m`.
#[inline]
pub(crate) const fn state(m: u64) -> u64 {
    (m & STATE_MASK) >> STATE_SHIFT
}

/// The generation of `m`.
#[inline]
pub(crate) const fn generation(m: u64) -> u32 {
    (m >> GEN_SHIFT) as u32
}

/// The generation and state bits of a `LIVE` word of `generation`.
#[inline]
pub(crate) const fn live_bits(generation: u32) -> u64 {
    ((generation as u64) << GEN_SHIFT) | LIVE_BITS
}

/// The hit field of `m` (hits on the slot modulo 256, not yet carried).
#[inline]
pub(crate) const fn hit_field(m: u64) -> u64 {
    m >> HIT_SHIFT
}

/// A lifecycle word (`used` is the CLOCK bit) with the hit field of `prev`,
/// the word it replaces (hits are never dropped).
#[inline]
pub(crate) const fn rebuild(prev: u64, generation: u32, state: u64, used: bool, refs: u64) -> u64 {
    let used = if used { USED } else { 0 };
    (prev & HIT_MASK)
        | ((generation as u64) << GEN_SHIFT)
        | ((state << STATE_SHIFT) & STATE_MASK)
        | used
        | (refs & REF_MAX)
}

/// `m` with `state` (refcount, generation and CLOCK bit kept).
#[inline]
pub(crate) const fn with_state(m: u64, state: u64) -> u64 {
    (m & !STATE_MASK) | ((state << STATE_SHIFT) & STATE_MASK)
}

/// The next generation after `m`'s. Never 0, which marks a slot never used
/// (see `AhTable::seed`): a slot cycles through 2³² − 1 generations.
#[inline]
pub(crate) const fn next_generation(m: u64) -> u32 {
    match generation(m).wrapping_add(1) {
        0 => 1,
        g => g,
    }
}

/// The hot part of a slot: exactly one 64-byte cache line.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct HotSlot {
    /// The lifecycle word.
    pub(crate) meta: AtomicU64,
    /// The packed key ([`super::key::Key`]).
    pub(crate) key: [AtomicU64; KEY_WORDS],
    /// The AH token ([`crate::hal::AhToken`]).
    pub(crate) ah: AtomicU64,
    /// Hits on this slot, in steps of [`HIT_CARRY`]: the rest is the word's
    /// hit field ([`hit_field`]). `stats` sums both.
    pub(crate) hits: AtomicU64,
}

impl HotSlot {
    maybe_const_fn! {
        /// An empty slot.
        pub(crate) fn new() -> HotSlot {
            HotSlot {
                meta: AtomicU64::new(0),
                key: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
                ah: AtomicU64::new(0),
                hits: AtomicU64::new(0),
            }
        }
    }
}

/// The cold part of a slot, read by invalidation only.
#[derive(Debug)]
pub(crate) struct ColdSlot {
    /// Packed [`crate::hal::L2Info`] the backend resolved.
    pub(crate) l2: [AtomicU64; 2],
    /// The table clock when the entry was created.
    pub(crate) born: AtomicU64,
    /// The backend's GID generation of the port when the entry was created.
    pub(crate) gid_generation: AtomicU64,
}

impl ColdSlot {
    maybe_const_fn! {
        /// An empty slot.
        pub(crate) fn new() -> ColdSlot {
            ColdSlot {
                l2: [AtomicU64::new(0), AtomicU64::new(0)],
                born: AtomicU64::new(0),
                gid_generation: AtomicU64::new(0),
            }
        }
    }
}

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<HotSlot>() == 64);

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn packing() {
        for h in [0, 1, 0xff] {
            for g in [0, 1, u32::MAX] {
                for s in [FREE, BUSY, CREATING, LIVE, RETIRED] {
                    for u in [false, true] {
                        for r in [0, 1, REF_MAX] {
                            let m = rebuild(h << 56, g, s, u, r);
                            assert_eq!(
                                (hit_field(m), generation(m), state(m), m & USED != 0, refs(m)),
                                (h, g, s, u, r)
                            );
                            for n in [with_state(m, LIVE), rebuild(m, g ^ 1, BUSY, !u, 0)] {
                                assert_eq!(hit_field(n), h, "a transition keeps the hit field");
                            }
                            assert_eq!(state(with_state(m, LIVE)), LIVE);
                            assert_eq!(m & (GEN_BITS | STATE_MASK) == live_bits(g), s == LIVE);
                            assert_eq!((refs(with_state(m, LIVE)), generation(with_state(m, LIVE))), (r, g));
                            if r < REF_MAX {
                                // A hit: one reference, one hit, nothing else
                                // changes (the hit field wraps off the top).
                                let n = m.wrapping_add(HIT_STEP) | USED;
                                assert_eq!(
                                    (hit_field(n), generation(n), state(n), refs(n)),
                                    ((h + 1) & 0xff, g, s, r + 1)
                                );
                                assert_eq!(n < HIT_STEP, h == 0xff, "the wrap test");
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(HIT_CARRY, 256);
        assert_eq!(next_generation(rebuild(0, u32::MAX, LIVE, false, 0)), 1);
        assert_eq!(next_generation(rebuild(0, 7, LIVE, false, 0)), 8);
    }
}
