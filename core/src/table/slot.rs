//! One table slot, one 64-byte cache line and all the table keeps per entry:
//! a lifecycle word, the packed key, the AH token, and the layer-2 facts,
//! GID generation and birth time for invalidation (the `l2` and `stamp`
//! words).
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
//! word; the hit whose CAS wraps it to 0 adds 256 to the table's hit counter
//! ([`HIT_CARRY`]), so the table's hit count is that counter plus every
//! slot's field (`AhTable::stats` reads the counter alone, in O(1);
//! `AhTable::stats_exact` adds the fields). Every other transition keeps the field
//! as it is (all of them start from the word they replace: [`with_state`],
//! [`rebuild`]), whatever the state, across generations: it belongs to the
//! slot, not to an incarnation.
//!
//! Each field has its own type ([`State`], [`Gen`], [`Refs`], [`Clock`],
//! [`Hits`]), and [`rebuild`], the one constructor of a whole word, takes one
//! of each: a swapped argument does not compile.
//!
//! | state | key, AH | who may change the word |
//! |---|---|---|
//! | `FREE` | stale | a claimer holding the writer lock |
//! | `BUSY` | being written or destroyed | only the thread that moved it to `BUSY` |
//! | `CREATING` | key valid, AH not yet | only the creating thread |
//! | `LIVE` | valid; refcount ≥ 0 (0 = cached) | CAS by anyone: hit (+1), release (−1), eviction/retirement |
//! | `RETIRED` | valid; refcount ≥ 1; invisible to look-ups | CAS by releasers; the last one destroys |

use super::key::{KEY_WORDS, L2_STAMP_BITS};
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
/// What the hit that wraps the hit field adds to the table's hit counter.
pub(crate) const HIT_CARRY: u64 = 1 << (64 - HIT_SHIFT);
/// What a hit adds to the word: one reference, one hit (`USED` is or-ed in).
pub(crate) const HIT_STEP: u64 = HIT_ONE + 1;

// The lifecycle word's fields as types (sharded-slab's `Pack` idea): the
// constructor of a word, `rebuild`, takes one type per field, so that a
// swapped argument is a compile error rather than a corrupted word.

/// A slot state (the word's state field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State(u64);

/// A slot generation (the word's 32-bit generation field): which incarnation
/// of the slot a word or a handle names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gen(pub(crate) u32);

/// A refcount (the word's 20-bit refcount field; larger values are cut to
/// it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refs(pub(crate) u64);

/// The CLOCK "recently used" bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Clock {
    /// Not used since the hand last passed.
    Clear,
    /// Used since the hand last passed.
    Used,
}

/// The word's hit field: hits on the slot modulo 256, not yet carried into
/// the table's counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hits(pub(crate) u64);

pub(crate) const FREE: State = State(0);
pub(crate) const BUSY: State = State(1);
pub(crate) const CREATING: State = State(2);
pub(crate) const LIVE: State = State(3);
pub(crate) const RETIRED: State = State(4);
/// `LIVE` in place in the word.
pub(crate) const LIVE_BITS: u64 = LIVE.0 << STATE_SHIFT;

/// The refcount of `m`.
#[inline]
pub(crate) const fn refs(m: u64) -> u64 {
    m & REF_MAX
}

/// The state of `m`.
#[inline]
pub(crate) const fn state(m: u64) -> State {
    State((m & STATE_MASK) >> STATE_SHIFT)
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
pub(crate) const fn hit_field(m: u64) -> Hits {
    Hits(m >> HIT_SHIFT)
}

/// A lifecycle word with the hit field of `prev`, the word it replaces
/// (hits are never dropped).
#[inline]
pub(crate) const fn rebuild(prev: u64, generation: Gen, state: State, clock: Clock, refs: Refs) -> u64 {
    let used = match clock {
        Clock::Used => USED,
        Clock::Clear => 0,
    };
    (prev & HIT_MASK)
        | ((generation.0 as u64) << GEN_SHIFT)
        | ((state.0 << STATE_SHIFT) & STATE_MASK)
        | used
        | (refs.0 & REF_MAX)
}

/// `m` with `state` (refcount, generation and CLOCK bit kept).
#[inline]
pub(crate) const fn with_state(m: u64, state: State) -> u64 {
    (m & !STATE_MASK) | ((state.0 << STATE_SHIFT) & STATE_MASK)
}

/// The CLOCK bit of `m`.
#[inline]
pub(crate) const fn clock(m: u64) -> Clock {
    if m & USED != 0 { Clock::Used } else { Clock::Clear }
}

/// The next generation after `m`'s. Never 0, which marks a slot never used
/// (see `AhTable::seed`): a slot cycles through 2³² − 1 generations.
#[inline]
pub(crate) const fn next_generation(m: u64) -> Gen {
    match generation(m).wrapping_add(1) {
        0 => Gen(1),
        g => Gen(g),
    }
}

// The stamp word (`Slot::stamp`):
//
//  63                32 31                 11 10        0
// +--------------------+---------------------+-----------+
// |     born (32)      | GID generation (21) |  L2 (11)  |
// +--------------------+---------------------+-----------+
//
// The L2 bits are `key::pack_l2`'s (hop limit, presence bits). `born` is the
// table clock at the entry's creation and the GID generation the backend's
// for the port, both cut to their low bits: see `born_age` and `gid_matches`.

const GID_SHIFT: u32 = L2_STAMP_BITS;
/// Bits of the GID generation a slot keeps.
pub(crate) const GID_BITS: u32 = 32 - GID_SHIFT;
const GID_MASK: u64 = ((1 << GID_BITS) - 1) << GID_SHIFT;
const BORN_SHIFT: u32 = 32;

/// A stamp word: the L2 bits `l2` (from `pack_l2`), the GID generation
/// `gid_generation` and the birth time `born` (each cut to its field).
#[inline]
pub(crate) const fn stamp(l2: u64, gid_generation: u64, born: u64) -> u64 {
    (l2 & ((1 << L2_STAMP_BITS) - 1)) | ((gid_generation << GID_SHIFT) & GID_MASK) | (born << BORN_SHIFT)
}

/// `s` with the GID generation `gid_generation`.
#[inline]
pub(crate) const fn restamp(s: u64, gid_generation: u64) -> u64 {
    (s & !GID_MASK) | ((gid_generation << GID_SHIFT) & GID_MASK)
}

/// Whether the GID generation of stamp `s` is `g`, compared in the
/// [`GID_BITS`] low bits: a generation 2²¹ GID changes away looks equal. An
/// invalidation sweep restamps or retires every entry of its port whose
/// generation is not the new one, so an entry's stamp is behind the
/// backend's only by the changes its caller did not sweep for.
#[inline]
pub(crate) const fn gid_matches(s: u64, g: u64) -> bool {
    (s ^ (g << GID_SHIFT)) & GID_MASK == 0
}

/// The age at `now` of an entry of stamp `s`, computed from the low 32 bits
/// of both as a signed difference: exact while the entry's birth is within
/// 2³¹ − 1 clock units of `now`; a birth after `now` (the clock was set
/// back) is age 0.
#[inline]
pub(crate) const fn born_age(s: u64, now: u64) -> u64 {
    let d = (now as u32).wrapping_sub((s >> BORN_SHIFT) as u32) as i32;
    if d < 0 { 0 } else { d as u64 }
}

/// One slot: exactly one 64-byte cache line, everything the table keeps
/// about an entry (64 bytes per cached AH).
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Slot {
    /// The lifecycle word.
    pub(crate) meta: AtomicU64,
    /// The packed key ([`super::key::Key`]).
    pub(crate) key: [AtomicU64; KEY_WORDS],
    /// The AH token ([`crate::hal::AhToken`]).
    pub(crate) ah: AtomicU64,
    /// The MAC and VLAN tag of the [`crate::hal::L2Info`] the backend
    /// resolved (`key::pack_l2`).
    pub(crate) l2: AtomicU64,
    /// The rest of the L2 facts, the GID generation and the birth time
    /// ([`stamp`]).
    pub(crate) stamp: AtomicU64,
}

impl Slot {
    maybe_const_fn! {
        /// An empty slot.
        pub(crate) fn new() -> Slot {
            Slot {
                meta: AtomicU64::new(0),
                key: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
                ah: AtomicU64::new(0),
                l2: AtomicU64::new(0),
                stamp: AtomicU64::new(0),
            }
        }
    }
}

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<Slot>() == 64);

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn packing() {
        for h in [0, 1, 0xff] {
            for g in [0, 1, u32::MAX] {
                for s in [FREE, BUSY, CREATING, LIVE, RETIRED] {
                    for u in [Clock::Clear, Clock::Used] {
                        for r in [0, 1, REF_MAX] {
                            let m = rebuild(h << 56, Gen(g), s, u, Refs(r));
                            assert_eq!(
                                (hit_field(m), generation(m), state(m), clock(m), refs(m)),
                                (Hits(h), g, s, u, r)
                            );
                            let other = if u == Clock::Used { Clock::Clear } else { Clock::Used };
                            for n in [with_state(m, LIVE), rebuild(m, Gen(g ^ 1), BUSY, other, Refs(0))] {
                                assert_eq!(hit_field(n), Hits(h), "a transition keeps the hit field");
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
                                    (Hits((h + 1) & 0xff), g, s, r + 1)
                                );
                                assert_eq!(n < HIT_STEP, h == 0xff, "the wrap test");
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(HIT_CARRY, 256);
        assert_eq!(next_generation(rebuild(0, Gen(u32::MAX), LIVE, Clock::Clear, Refs(0))), Gen(1));
        assert_eq!(next_generation(rebuild(0, Gen(7), LIVE, Clock::Clear, Refs(0))), Gen(8));
    }

    #[test]
    fn stamps() {
        let l2 = (1 << L2_STAMP_BITS) - 1;
        for g in [0u64, 1, 5, (1 << GID_BITS) - 1, u64::MAX] {
            for born in [0u64, 1, 100, u64::from(u32::MAX), u64::MAX] {
                let s = stamp(l2, g, born);
                assert_eq!(s & l2, l2, "the L2 bits are kept");
                assert!(gid_matches(s, g));
                assert!(!gid_matches(s, g.wrapping_add(1)));
                assert!(gid_matches(restamp(s, g.wrapping_add(1)), g.wrapping_add(1)));
                assert_eq!(
                    restamp(s, g.wrapping_add(1)) & !GID_MASK,
                    s & !GID_MASK,
                    "a restamp changes only the GID field"
                );
                assert_eq!(born_age(s, born), 0);
                assert_eq!(born_age(s, born.wrapping_add(60)), 60);
                assert_eq!(born_age(s, born.wrapping_add((1 << 31) - 1)), (1 << 31) - 1);
                assert_eq!(born_age(s, born.wrapping_sub(1)), 0, "a clock set back: age 0");
            }
        }
    }
}
