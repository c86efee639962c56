//! Every synchronisation primitive of the AH table, from one place (like
//! crossbeam-utils' `primitive` and sharded-slab's `sync.rs`): the
//! `core::sync::atomic` types normally, loom's under `cfg(loom)`, so that the
//! loom models in `tests/loom_table.rs` explore the real code.

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

use crossbeam_utils::Backoff;

/// Draws each table's first slot generation (`AhTable::seed`). A plain
/// `core` atomic also under loom: loom atomics cannot be `static`, and this
/// counter only spreads generations apart, it orders nothing.
pub(crate) static TABLE_SEEDS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// One step of a wait loop (a writer waiting for the writer lock, a blocking
/// miss waiting for another thread's create). Under loom this yields to the
/// model's scheduler, which a spin would starve.
#[inline]
pub(crate) fn wait_step(backoff: &Backoff) {
    #[cfg(loom)]
    {
        let _ = backoff;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    backoff.snooze();
}

/// Defines a constructor that is `const` normally and plain under loom (loom's
/// atomics have no `const fn new`).
macro_rules! maybe_const_fn {
    ($(#[$m:meta])* $vis:vis fn $name:ident() -> $ret:ty $body:block) => {
        #[cfg(not(loom))]
        $(#[$m])*
        $vis const fn $name() -> $ret $body
        #[cfg(loom)]
        $(#[$m])*
        $vis fn $name() -> $ret $body
    };
}
pub(crate) use maybe_const_fn;
