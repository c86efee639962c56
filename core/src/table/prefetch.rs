//! The one `unsafe` of the crate: a prefetch hint for a table slot.

#![allow(unsafe_code)]

use super::slot::Slot;

/// Starts loading `slot` into the cache (all levels) without waiting for
/// it: a hint, with no effect on what any thread reads. Nothing on other
/// targets, under Miri and under loom.
#[inline(always)]
pub(super) fn slot(slot: &Slot) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse", not(miri), not(loom)))]
    // SAFETY: `_mm_prefetch` is `unsafe` because it takes a raw pointer and
    // needs SSE: PREFETCHT0 reads nothing the program observes and never
    // faults, whatever the address (here a live reference's), and this is
    // compiled only where SSE is enabled (the x86_64 baseline; not on
    // x86_64-unknown-none, which then goes without the hint).
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>((slot as *const Slot).cast());
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse", not(miri), not(loom))))]
    let _ = slot;
}
