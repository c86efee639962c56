//! AH tables on the heap, at a capacity chosen at run time (feature `std`).
//!
//! [`AhTable`]'s capacity is a const parameter, so a program that takes it
//! from a flag or a configuration struct picks one of a small set of
//! instantiations: [`AH_SLOTS`], with [`with_ah_slots!`](crate::with_ah_slots)
//! to go from the number to the type, and [`boxed_table`] to build the table
//! where it lives. `udah serve --ah-slots`, `udah demo` and libudah's
//! `udah_config.ah_slots` all go through here.
#![allow(unsafe_code)]

use std::boxed::Box;

use crate::table::AhTable;

/// The AH-table capacities offered at run time: each is its own
/// instantiation of the table (and of the code over it), so the set is
/// small. From 2¹⁰ (64 KiB of slots) to 2²¹ (128 MiB), in steps of four
/// up to 2²⁰.
pub const AH_SLOTS: [usize; 7] = [1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 21];

/// The smallest of [`AH_SLOTS`] that holds `n` slots, or `None` above the
/// largest.
pub fn ah_slots_at_least(n: usize) -> Option<usize> {
    AH_SLOTS.into_iter().find(|&s| s >= n)
}

/// Evaluates `$body` with the const `$n` bound to `$slots` when `$slots`
/// is one of [`AH_SLOTS`](crate::heap::AH_SLOTS): `Some($body)`, else
/// `None`. The one place that turns a run-time capacity into a table type.
///
/// ```
/// use udah_core::table::AhTable;
/// fn capacity<const N: usize>() -> usize { N }
/// assert_eq!(udah_core::with_ah_slots!(4096, N => capacity::<N>()), Some(4096));
/// assert_eq!(udah_core::with_ah_slots!(5000, N => capacity::<N>()), None);
/// # let _ = AhTable::<(), 4>::new();
/// ```
#[macro_export]
macro_rules! with_ah_slots {
    ($slots:expr, $n:ident => $body:expr) => {
        match $slots {
            0x400 => Some({
                const $n: usize = 0x400;
                $body
            }),
            0x1000 => Some({
                const $n: usize = 0x1000;
                $body
            }),
            0x4000 => Some({
                const $n: usize = 0x4000;
                $body
            }),
            0x1_0000 => Some({
                const $n: usize = 0x1_0000;
                $body
            }),
            0x4_0000 => Some({
                const $n: usize = 0x4_0000;
                $body
            }),
            0x10_0000 => Some({
                const $n: usize = 0x10_0000;
                $body
            }),
            0x20_0000 => Some({
                const $n: usize = 0x20_0000;
                $body
            }),
            _ => None,
        }
    };
}

/// Why an AH table could not be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum TableBoxError {
    /// The thread that builds the AH table could not start.
    Thread(std::io::Error),
    /// The thread that builds the AH table panicked.
    Panicked,
}

impl core::fmt::Display for TableBoxError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TableBoxError::Thread(e) => write!(f, "cannot start the thread that builds the AH table: {e}"),
            TableBoxError::Panicked => f.write_str("building the AH table failed"),
        }
    }
}

impl core::error::Error for TableBoxError {}

/// Tables up to this size are built on the caller's stack (a 2¹⁰-slot
/// table is 64 KiB).
const SMALL: usize = 256 << 10;

/// An empty AH table of `N` slots keyed with `seed`, on the heap. The value
/// passes through [`AhTable::with_seed`]'s return on the stack in
/// unoptimised builds (128 MiB at 2²¹ slots), so a table above 256 KiB is
/// built on a thread whose stack has room for it; the stack is gone once
/// the table is boxed.
///
/// Its memory is asked for in transparent huge pages before it is written
/// (`madvise(MADV_HUGEPAGE)`): a table past the caches is read at random, and with
/// 4 KiB pages nearly every look-up also misses the TLB.
pub fn boxed_table<H: 'static, const N: usize>(seed: u64) -> Result<Box<AhTable<H, N>>, TableBoxError>
where
    AhTable<H, N>: Send,
{
    let bytes = core::mem::size_of::<AhTable<H, N>>();
    if bytes <= SMALL {
        return Ok(small_table(seed));
    }
    std::thread::Builder::new()
        .name("ah-table".into())
        .stack_size(bytes.saturating_mul(4).saturating_add(1 << 20))
        .spawn(move || {
            let mut b = Box::<AhTable<H, N>>::new_uninit();
            huge_pages(b.as_mut_ptr().cast(), bytes);
            Box::write(b, AhTable::with_seed(seed))
        })
        .map_err(TableBoxError::Thread)?
        .join()
        .map_err(|_| TableBoxError::Panicked)
}

/// A table of at most [`SMALL`] bytes, built on this thread's stack. Its
/// own function: an unoptimised build sizes a frame for every local of the
/// function, taken branch or not, and `boxed_table`'s would then hold the
/// table at every capacity.
#[inline(never)]
fn small_table<H, const N: usize>(seed: u64) -> Box<AhTable<H, N>> {
    Box::new(AhTable::with_seed(seed))
}

/// Asks the kernel to back the 2 MiB-aligned part of `len` bytes at `ptr`
/// (an allocation not written yet) with transparent huge pages, where the
/// system leaves them to `madvise`; a hint, nothing happens if it is refused.
/// Regions under 4 MiB are left alone.
#[cfg(target_os = "linux")]
fn huge_pages(ptr: *mut u8, len: usize) {
    const HUGE: usize = 2 << 20;
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize).saturating_add(len) & !(HUGE - 1);
    if len < 2 * HUGE || end <= start {
        return;
    }
    // SAFETY: madvise only changes how the kernel backs pages of this
    // process's own allocation (`start..end` lies inside it); MADV_HUGEPAGE
    // changes no content and no Rust-visible state.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end.wrapping_sub(start), libc::MADV_HUGEPAGE);
    }
}

/// Transparent huge pages are a Linux hint; elsewhere nothing is asked.
#[cfg(not(target_os = "linux"))]
fn huge_pages(_ptr: *mut u8, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn capacity<const N: usize>() -> usize {
        N
    }

    #[test]
    fn every_offered_capacity_dispatches_to_itself() {
        for n in AH_SLOTS {
            assert_eq!(with_ah_slots!(n, N => capacity::<N>()), Some(n));
            assert_eq!(ah_slots_at_least(n), Some(n));
            assert_eq!(with_ah_slots!(n + 1, N => capacity::<N>()), None);
        }
        assert_eq!(ah_slots_at_least(1), Some(1024));
        assert_eq!(ah_slots_at_least(5000), Some(1 << 14));
        assert_eq!(ah_slots_at_least((1 << 21) + 1), None);
    }

    #[test]
    fn a_boxed_table_is_empty_with_its_capacity() {
        let t = boxed_table::<(), 4096>(7).unwrap();
        assert_eq!(t.capacity(), 4096);
        assert_eq!(t.stats().live, 0);
    }
}
