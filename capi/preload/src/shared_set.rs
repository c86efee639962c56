//! The addresses of the shared AHs, readable without a lock.
//!
//! `ibv_destroy_ah` is called for every AH of the program, most of which the
//! preload did not make. It asks this set first: an AH that is not in it is
//! forwarded to the real library without taking the preload's lock. The set
//! is a fixed table of `AtomicUsize` with open addressing (linear probing);
//! insertions and removals happen only under the lock that guards the shared
//! AH maps (they take a `&mut` of its live count as the proof), lookups from
//! any thread at any time.
//!
//! A lookup of an address that is in the set always finds it: the address is
//! stored before the AH is returned to the program (so any destroy of it
//! happens after), a removed slot becomes a tombstone, and a tombstone is
//! turned back into an empty slot only when the slot after it is empty, i.e.
//! when no probe sequence runs through it to a stored address.

use core::sync::atomic::{AtomicUsize, Ordering};

/// Slots in the table (a power of two).
pub(crate) const SLOTS: usize = 1 << 14;
/// At most this many addresses are stored, so that probe sequences stay
/// short; past it a new AH is not shared (it gets its own kernel AH, and its
/// destroy is forwarded).
pub(crate) const MAX_LIVE: usize = SLOTS / 2;

const EMPTY: usize = 0;
const GONE: usize = usize::MAX;

pub(crate) struct AhSet {
    slots: [AtomicUsize; SLOTS],
}

fn home(addr: usize) -> usize {
    // Fibonacci hashing of the address without its alignment bits.
    let h = ((addr >> 4) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> (64 - SLOTS.trailing_zeros())) as usize
}

impl AhSet {
    pub(crate) const fn new() -> Self {
        Self { slots: [const { AtomicUsize::new(EMPTY) }; SLOTS] }
    }

    fn slot(&self, i: usize) -> &AtomicUsize {
        &self.slots[i & (SLOTS - 1)]
    }

    /// Whether `addr` is stored. Lock-free.
    pub(crate) fn contains(&self, addr: usize) -> bool {
        if addr == EMPTY || addr == GONE {
            return false;
        }
        let h = home(addr);
        for i in h..h + SLOTS {
            match self.slot(i).load(Ordering::Acquire) {
                v if v == addr => return true,
                EMPTY => return false,
                _ => {}
            }
        }
        false
    }

    /// Stores `addr` (not already stored); `false` when the set is full.
    /// `live` is the count kept under the caller's lock.
    pub(crate) fn insert(&self, live: &mut usize, addr: usize) -> bool {
        if addr == EMPTY || addr == GONE || *live >= MAX_LIVE {
            return false;
        }
        let h = home(addr);
        for i in h..h + SLOTS {
            let s = self.slot(i);
            if matches!(s.load(Ordering::Relaxed), EMPTY | GONE) {
                s.store(addr, Ordering::Release);
                *live += 1;
                return true;
            }
        }
        false
    }

    /// Removes `addr` if stored. `live` as in [`AhSet::insert`].
    pub(crate) fn remove(&self, live: &mut usize, addr: usize) {
        let h = home(addr);
        let Some(at) = (h..h + SLOTS).find(|&i| self.slot(i).load(Ordering::Relaxed) == addr) else {
            return;
        };
        self.slot(at).store(GONE, Ordering::Release);
        *live -= 1;
        // Tombstones directly before an empty slot end no probe sequence
        // that leads to a stored address: they become empty again.
        let mut i = at;
        while self.slot(i + 1).load(Ordering::Relaxed) == EMPTY && self.slot(i).load(Ordering::Relaxed) == GONE {
            self.slot(i).store(EMPTY, Ordering::Release);
            i = i.wrapping_sub(1);
        }
    }

    /// Non-empty slots (stored addresses and tombstones).
    #[cfg(test)]
    pub(crate) fn occupied(&self) -> usize {
        self.slots.iter().filter(|s| s.load(Ordering::Relaxed) != EMPTY).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove_with_collisions_and_tombstone_cleanup() {
        let set = Box::new(AhSet::new());
        let mut live = 0;
        // Addresses with the same home slot collide into one probe run.
        let base = 0x7f00_0000_1000usize;
        let same: Vec<usize> =
            (0..1usize << 20).map(|k| base + (k << 4)).filter(|&a| home(a) == home(base)).take(3).collect();
        let others: Vec<usize> = (1..200usize).map(|k| base + (k << 20)).collect();
        for &a in same.iter().chain(&others) {
            assert!(set.insert(&mut live, a));
        }
        assert_eq!(live, same.len() + others.len());
        assert!(same.iter().chain(&others).all(|&a| set.contains(a)));
        assert!(!set.contains(base + 8) && !set.contains(0) && !set.contains(usize::MAX));
        // Removing the first of a run keeps the later ones reachable.
        set.remove(&mut live, same[0]);
        assert!(!set.contains(same[0]) && set.contains(same[1]) && set.contains(same[2]));
        set.remove(&mut live, same[2]);
        set.remove(&mut live, same[1]);
        for &a in &others {
            set.remove(&mut live, a);
        }
        assert_eq!(live, 0);
        assert_eq!(set.occupied(), 0, "every tombstone was cleared");
    }

    #[test]
    fn a_full_set_refuses() {
        let set = Box::new(AhSet::new());
        let mut live = 0;
        for k in 1..=MAX_LIVE {
            assert!(set.insert(&mut live, k << 4));
        }
        assert!(!set.insert(&mut live, (MAX_LIVE + 1) << 4));
        set.remove(&mut live, 1 << 4);
        assert!(set.insert(&mut live, (MAX_LIVE + 1) << 4));
        assert!(set.contains((MAX_LIVE + 1) << 4) && !set.contains(1 << 4));
    }
}
