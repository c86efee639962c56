//! One table slot: a lifecycle word, the packed key, the AH token and a hit
//! counter on one cache line, plus a cold part for invalidation.
//!
//! # The lifecycle word
//!
//! ```text
//!  63                        24 23 22   20 19               0
//! +----------------------------+--+-------+------------------+
//! |        generation (40)     |U | state |   refcount (20)  |
//! +----------------------------+--+-------+------------------+
//! ```
//!
//! `U` is the CLOCK "recently used" bit, set by every hit. The word is the
//! slot's seqlock stamp *and* its refcount: a reader validates what it read
//! and takes its reference in one compare-and-swap from the value it loaded
//! before reading (see [`super`] for the proof).
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
const GEN_SHIFT: u32 = 24;
/// Generations are 40 bits wide.
pub(crate) const GEN_MASK: u64 = (1 << 40) - 1;

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
pub(crate) const fn generation(m: u64) -> u64 {
    m >> GEN_SHIFT
}

/// A lifecycle word (`used` is the CLOCK bit).
#[inline]
pub(crate) const fn pack(generation: u64, state: u64, used: bool, refs: u64) -> u64 {
    let used = if used { USED } else { 0 };
    ((generation & GEN_MASK) << GEN_SHIFT) | ((state << STATE_SHIFT) & STATE_MASK) | used | (refs & REF_MAX)
}

/// `m` with `state` (refcount, generation and CLOCK bit kept).
#[inline]
pub(crate) const fn with_state(m: u64, state: u64) -> u64 {
    (m & !STATE_MASK) | ((state << STATE_SHIFT) & STATE_MASK)
}

/// The next generation after `m`'s.
#[inline]
pub(crate) const fn next_generation(m: u64) -> u64 {
    generation(m).wrapping_add(1) & GEN_MASK
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
    /// Hits on this slot (summed by `stats`).
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
        for g in [0, 1, GEN_MASK] {
            for s in [FREE, BUSY, CREATING, LIVE, RETIRED] {
                for u in [false, true] {
                    for r in [0, 1, REF_MAX] {
                        let m = pack(g, s, u, r);
                        assert_eq!((generation(m), state(m), m & USED != 0, refs(m)), (g, s, u, r));
                        assert_eq!(state(with_state(m, LIVE)), LIVE);
                        assert_eq!(refs(with_state(m, LIVE)), r);
                    }
                }
            }
        }
        assert_eq!(next_generation(pack(GEN_MASK, LIVE, false, 0)), 0);
    }
}
