//! A counting global allocator, so that `udah demo` can report the heap
//! allocations of its hot path (there must be none).
//!
//! The binary installs [`Counting`] as its `#[global_allocator]`; the counts
//! are per thread, so a worker measures only its own allocations.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;
use std::alloc::System;

/// The system allocator, counting allocations per thread.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every method forwards its arguments unchanged to `System`, which
// upholds the `GlobalAlloc` contract; the counter update is a const-initialised
// thread-local `Cell` write, which neither allocates nor unwinds.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get().wrapping_add(1)));
        // SAFETY: the caller upholds `alloc`'s contract (non-zero size), which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get().wrapping_add(1)));
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get().wrapping_add(1)));
        // SAFETY: the caller guarantees `ptr` came from this allocator with `layout`
        // and `new_size` is valid; `System` allocated it, since we only forward.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Allocations made by the current thread so far (0 unless [`Counting`] is
/// the global allocator).
pub fn thread_allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}
