//! AH tables on the heap, at the capacities the CLI's responders offer.

use udah_core::table::AhTable;

/// The AH-table capacity unless `serve --ah-slots` chooses another.
pub(crate) const AHS: usize = 1024;

/// The AH-table capacities `serve --ah-slots` takes (each is its own
/// instantiation of the table and of the loop over it, so the set is small).
pub(crate) const AH_SLOTS: [usize; 7] = [1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 21];

/// Why an AH table could not be built.
#[derive(Debug)]
pub(crate) enum TableBoxError {
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

/// An empty AH table of `N` slots keyed with `seed`, on the heap. The value
/// passes through [`AhTable::with_seed`]'s return on the stack in
/// unoptimised builds (128 MiB at 2²¹ slots), so it is built on a thread
/// whose stack has room for it; the stack is gone once the table is boxed.
///
/// Its memory is asked for in transparent huge pages before it is written
/// ([`huge_pages`]): a table past the caches is read at random, and with
/// 4 KiB pages nearly every look-up also misses the TLB.
pub(crate) fn boxed_table<H: 'static, const N: usize>(seed: u64) -> Result<Box<AhTable<H, N>>, TableBoxError>
where
    AhTable<H, N>: Send,
{
    let bytes = core::mem::size_of::<AhTable<H, N>>();
    std::thread::Builder::new()
        .name("ah-table".into())
        .stack_size(4 * bytes + (1 << 20))
        .spawn(move || {
            let mut b = Box::<AhTable<H, N>>::new_uninit();
            huge_pages(b.as_mut_ptr().cast(), bytes);
            Box::write(b, AhTable::with_seed(seed))
        })
        .map_err(TableBoxError::Thread)?
        .join()
        .map_err(|_| TableBoxError::Panicked)
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
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

/// Transparent huge pages are a Linux hint; elsewhere nothing is asked.
#[cfg(not(target_os = "linux"))]
fn huge_pages(_ptr: *mut u8, _len: usize) {}
