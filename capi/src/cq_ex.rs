//! The extended-CQ forms: `udah_init_ah_from_cq_ex` and
//! `udah_create_ah_from_cq_ex` read the completion an `ibv_cq_ex` holds
//! (between `ibv_start_poll` and `ibv_end_poll`) through its read functions
//! into the `struct ibv_wc` fields the `ibv_wc` forms read, then run the
//! same code as those forms.
//!
//! `struct ibv_cq_ex` has no record of the `wc_flags` it was created with;
//! what tells is its read functions: rdma-core's providers set only the
//! readers of the fields requested (the others stay NULL), so a NULL reader
//! of a needed field is the EINVAL below.

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};

use udah_core::ah::IbvWc;

use super::{fail_int_msg, fail_null, fail_null_msg, guard, ibv_ah, ibv_ah_attr, ibv_grh, opt, resp, udah_responder};

symbol_versions!("UDAH_0.1": udah_init_ah_from_cq_ex, udah_create_ah_from_cq_ex);

type ReadU32 = Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>;
type ReadU8 = Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>;
type ReadU64 = Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u64>;

/// `struct ibv_cq_ex` (rdma-core 44 `verbs.h`, 64-bit Linux): the fields up
/// to `wr_id` kept opaque, then the function table the `ibv_wc_read_*`
/// inlines call. `tests/c/cq_ex_check.c` asserts the offsets against the
/// installed header.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_cq_ex {
    /// `context` … `comp_mask` (the `struct ibv_cq` part and more).
    _head: [u8; 132],
    /// `enum ibv_wc_status` of the current completion.
    pub status: u32,
    /// `wr_id` of the current completion.
    pub wr_id: u64,
    /// `start_poll`.
    pub start_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex, *mut c_void) -> c_int>,
    /// `next_poll`.
    pub next_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int>,
    /// `end_poll`.
    pub end_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex)>,
    /// `read_opcode`.
    pub read_opcode: ReadU32,
    /// `read_vendor_err`.
    pub read_vendor_err: ReadU32,
    /// `read_byte_len`.
    pub read_byte_len: ReadU32,
    /// `read_imm_data`.
    pub read_imm_data: ReadU32,
    /// `read_qp_num`.
    pub read_qp_num: ReadU32,
    /// `read_src_qp`.
    pub read_src_qp: ReadU32,
    /// `read_wc_flags`.
    pub read_wc_flags: ReadU32,
    /// `read_slid`.
    pub read_slid: ReadU32,
    /// `read_sl`.
    pub read_sl: ReadU8,
    /// `read_dlid_path_bits`.
    pub read_dlid_path_bits: ReadU8,
    /// `read_completion_ts`.
    pub read_completion_ts: ReadU64,
    /// `read_cvlan`, `read_flow_tag`, `read_tm_info` (not read here).
    _more: [usize; 3],
    /// `read_completion_wallclock_ns`.
    pub read_completion_wallclock_ns: ReadU64,
}

impl ibv_cq_ex {
    /// An all-zero CQ (no functions): for a caller that fills in its own
    /// read functions (tests, benchmarks).
    #[doc(hidden)]
    pub const fn zeroed() -> ibv_cq_ex {
        ibv_cq_ex {
            _head: [0; 132],
            status: 0,
            wr_id: 0,
            start_poll: None,
            next_poll: None,
            end_poll: None,
            read_opcode: None,
            read_vendor_err: None,
            read_byte_len: None,
            read_imm_data: None,
            read_qp_num: None,
            read_src_qp: None,
            read_wc_flags: None,
            read_slid: None,
            read_sl: None,
            read_dlid_path_bits: None,
            read_completion_ts: None,
            _more: [0; 3],
            read_completion_wallclock_ns: None,
        }
    }
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(size_of::<ibv_cq_ex>() == 288);
    assert!(offset_of!(ibv_cq_ex, status) == 132 && offset_of!(ibv_cq_ex, wr_id) == 136);
    assert!(offset_of!(ibv_cq_ex, start_poll) == 144 && offset_of!(ibv_cq_ex, read_wc_flags) == 216);
    assert!(offset_of!(ibv_cq_ex, read_slid) == 224 && offset_of!(ibv_cq_ex, read_dlid_path_bits) == 240);
    assert!(offset_of!(ibv_cq_ex, read_completion_wallclock_ns) == 280);
};

/// The `udah_last_error` sentence for a CQ without the reader of `field`.
#[cold]
fn missing(field: &str) -> String {
    format!("the CQ has no {field} reader: {NEEDS}")
}

/// The sentence's requirement.
const NEEDS: &str = "the extended CQ must be created with wc_flags IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | \
                     IBV_WC_EX_WITH_DLID_PATH_BITS (IBV_WC_EX_WITH_SRC_QP optional)";

/// The `struct ibv_wc` fields of the current completion of `cq`, read with
/// its read functions, or the name of the field whose reader is missing
/// (see [`missing`]).
///
/// # Safety
/// `cq` must be a live extended CQ holding a current completion (between a
/// successful `ibv_start_poll`/`ibv_next_poll` and `ibv_end_poll`).
#[doc(hidden)]
#[inline]
pub unsafe fn wc_from_cq_ex(cq: *mut ibv_cq_ex) -> Result<IbvWc, &'static str> {
    // SAFETY: `cq` is live (the contract); reading the function table.
    let t = unsafe { &*cq };
    let (Some(flags), Some(slid), Some(sl), Some(dlid_path_bits)) =
        (t.read_wc_flags, t.read_slid, t.read_sl, t.read_dlid_path_bits)
    else {
        return Err(match (t.read_wc_flags, t.read_slid, t.read_sl) {
            (None, ..) => "wc_flags (every extended CQ should have one)",
            (_, None, _) => "SLID (IBV_WC_EX_WITH_SLID)",
            (_, _, None) => "SL (IBV_WC_EX_WITH_SL)",
            _ => "DLID path bits (IBV_WC_EX_WITH_DLID_PATH_BITS)",
        });
    };
    // SAFETY: each reader is the provider's, set for this CQ, and the CQ
    // holds a current completion (the contract).
    let wc_flags = unsafe { flags(cq) };
    // SAFETY: as above.
    let slid = unsafe { slid(cq) };
    // SAFETY: as above.
    let sl = unsafe { sl(cq) };
    // SAFETY: as above.
    let dlid_path_bits = unsafe { dlid_path_bits(cq) };
    // SAFETY: as above; the source QPN is read when requested.
    let src_qp = t.read_src_qp.map(|f| unsafe { f(cq) }).unwrap_or(0);
    Ok(IbvWc {
        wc_flags,
        // `struct ibv_wc` keeps 16 bits of the SLID; the reader widens them.
        slid: slid as u16,
        sl,
        dlid_path_bits,
        src_qp,
        pkey_index: 0,
    })
}

/// `udah_init_ah_from_wc` on the completion an extended CQ holds now:
/// call it between `ibv_start_poll` (or `ibv_next_poll`) returning 0 and
/// `ibv_end_poll`. The fields `struct ibv_wc` would carry are read with
/// `ibv_wc_read_wc_flags`, `_slid`, `_sl`, `_dlid_path_bits` (and `_src_qp`
/// when present), so the result is bit for bit that of
/// `udah_init_ah_from_wc` on the same completion polled with
/// `ibv_poll_cq`.
///
/// The CQ must be created (`ibv_create_cq_ex`) with `wc_flags` including
/// `IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS`;
/// without one of them (its read function is NULL) the call fails with
/// `EINVAL` and `udah_last_error` names the flag.
///
/// Returns 0, or -1 with errno as `udah_init_ah_from_wc`.
///
/// # Safety
/// `r` must be a live responder; `cq` NULL or a live extended CQ with a
/// current completion; `grh` (or NULL) and `ah_attr` valid for reads /
/// writes of their structs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_init_ah_from_cq_ex(
    r: *mut udah_responder,
    cq: *mut ibv_cq_ex,
    grh: *const ibv_grh,
    profile: u32,
    evidence: u32,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    guard(-1, || {
        if cq.is_null() {
            return fail_int_msg(libc::EINVAL, "cq is NULL");
        }
        // SAFETY: `cq` is live with a current completion (the contract).
        match unsafe { wc_from_cq_ex(cq) } {
            // SAFETY: forwarded contract on `r`, `grh`, `ah_attr`.
            Ok(wc) => unsafe { super::init_ah(r, &wc, grh, profile, evidence, ah_attr) },
            Err(field) => fail_int_msg(libc::EINVAL, &missing(field)),
        }
    })
}

/// `udah_create_ah_from_wc` on the completion an extended CQ holds now
/// (call it as `udah_init_ah_from_cq_ex`, with the same `wc_flags`
/// requirement and `EINVAL`): the same deduplicated AH the `ibv_wc` form
/// returns for the same completion. Give it back with `udah_destroy_ah`.
///
/// Returns NULL with errno as `udah_create_ah_from_wc`.
///
/// # Safety
/// `r` must be a live responder; `cq` NULL or a live extended CQ with a
/// current completion; `grh` valid for reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_create_ah_from_cq_ex(
    r: *mut udah_responder,
    cq: *mut ibv_cq_ex,
    grh: *const ibv_grh,
) -> *mut ibv_ah {
    guard(core::ptr::null_mut(), || {
        // SAFETY: `r` is NULL or live (the contract).
        let Some(resp) = (unsafe { resp(r) }) else { return fail_null(libc::EINVAL) };
        if cq.is_null() {
            return fail_null_msg(libc::EINVAL, "cq is NULL");
        }
        // SAFETY: `cq` is live with a current completion (the contract).
        let wc = match unsafe { wc_from_cq_ex(cq) } {
            Ok(wc) => wc,
            Err(field) => return fail_null_msg(libc::EINVAL, &missing(field)),
        };
        // SAFETY: `grh` is NULL or valid for reads (the contract).
        let Some(grh) = (unsafe { opt(grh) }) else { return fail_null(libc::EFAULT) };
        super::ah_result(resp.create_ah_from_wc(&wc, &grh.bytes))
    })
}
