//! A software extended CQ for the `*_from_cq_ex` tests and benchmark (no
//! device): an `ibv_cq_ex` whose read functions return the fields of one
//! `struct ibv_wc`, as a provider's readers are indirect calls of a few
//! loads each. Included with `#[path]` by `tests/cq_ex.rs` and
//! `benches/cq_ex.rs`.

use udah::cq_ex::ibv_cq_ex;
use udah::ffi::ibv_wc;

/// A software CQ: the `ibv_cq_ex` first (repr(C)), then the completion its
/// readers return.
#[repr(C)]
pub(crate) struct SoftCq {
    pub(crate) ex: ibv_cq_ex,
    pub(crate) cur: ibv_wc,
}

/// A software CQ holding `wc`, with every reader the `*_from_cq_ex` forms
/// use set.
pub(crate) fn soft(wc: ibv_wc) -> Box<SoftCq> {
    let mut ex = ibv_cq_ex::zeroed();
    ex.read_wc_flags = Some(flags);
    ex.read_slid = Some(slid);
    ex.read_sl = Some(sl);
    ex.read_dlid_path_bits = Some(dlid_path_bits);
    ex.read_src_qp = Some(src_qp);
    Box::new(SoftCq { ex, cur: wc })
}

fn cur(cq: *mut ibv_cq_ex) -> &'static ibv_wc {
    // SAFETY: these readers are only set on the `ex` of a live `SoftCq`
    // (its first field, repr(C)), alive during the call.
    unsafe { &(*cq.cast::<SoftCq>()).cur }
}

pub(crate) unsafe extern "C" fn flags(cq: *mut ibv_cq_ex) -> u32 {
    cur(cq).wc_flags
}

pub(crate) unsafe extern "C" fn slid(cq: *mut ibv_cq_ex) -> u32 {
    u32::from(cur(cq).slid)
}

pub(crate) unsafe extern "C" fn sl(cq: *mut ibv_cq_ex) -> u8 {
    cur(cq).sl
}

pub(crate) unsafe extern "C" fn dlid_path_bits(cq: *mut ibv_cq_ex) -> u8 {
    cur(cq).dlid_path_bits
}

pub(crate) unsafe extern "C" fn src_qp(cq: *mut ibv_cq_ex) -> u32 {
    cur(cq).src_qp
}
