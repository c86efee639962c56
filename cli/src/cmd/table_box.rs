//! AH tables on the heap, at the capacities the CLI's responders offer
//! (`udah_core::heap`, shared with libudah).

pub(crate) use udah_core::heap::{AH_SLOTS, TableBoxError, boxed_table};

/// The AH-table capacity unless `serve --ah-slots` chooses another.
pub(crate) const AHS: usize = 1024;
