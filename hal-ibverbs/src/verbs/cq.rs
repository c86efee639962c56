//! Completion queues and the work completions polled from them.

use super::*;

#[derive(Debug)]
pub(super) struct CqInner {
    pub(super) raw: NonNull<ibv_cq>,
    pub(super) ctx: Context,
}

// SAFETY: CQs may be polled from any thread (providers lock internally).
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: created by `ibv_create_cq`; QPs using it hold an `Arc`, so
        // they are destroyed; destroyed once while the context is open.
        count_teardown(unsafe { sys::ibv_destroy_cq(self.raw.as_ptr()) });
    }
}

/// A completion queue. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Cq(pub(super) Arc<CqInner>);

/// A work completion (`struct ibv_wc`), with its enums converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkCompletion {
    /// The work request id.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// Opcode.
    pub opcode: WcOpcode,
    /// Vendor error.
    pub vendor_err: u32,
    /// Bytes received (GRH area included for UD receives).
    pub byte_len: u32,
    /// Local QP number.
    pub qp_num: u32,
    /// Remote QP number.
    pub src_qp: u32,
    /// `ibv_wc_flags`.
    pub wc_flags: u32,
    /// P_Key index.
    pub pkey_index: u16,
    /// Source LID.
    pub slid: u16,
    /// Service level (mlx5 reports packet-type bits here on RoCE).
    pub sl: u8,
    /// DLID path bits.
    pub dlid_path_bits: u8,
}

impl WorkCompletion {
    /// The fields the core's libibverbs profile reads.
    pub fn ibv(&self) -> udah_core::ah::IbvWc {
        udah_core::ah::IbvWc {
            wc_flags: self.wc_flags,
            slid: self.slid,
            sl: self.sl,
            dlid_path_bits: self.dlid_path_bits,
            src_qp: self.src_qp,
            pkey_index: self.pkey_index,
        }
    }
}

impl WorkCompletion {
    /// Back to the C struct (the fields this type keeps; the rest zero).
    pub(super) fn to_c(self) -> ibv_wc {
        // SAFETY: `ibv_wc` is integers and a union of integers; all-zero is
        // a valid value.
        let mut w: ibv_wc = unsafe { core::mem::zeroed() };
        w.wr_id = self.wr_id;
        w.status = self.status.into();
        w.opcode = self.opcode.into();
        w.vendor_err = self.vendor_err;
        w.byte_len = self.byte_len;
        w.qp_num = self.qp_num;
        w.src_qp = self.src_qp;
        w.wc_flags = self.wc_flags;
        w.pkey_index = self.pkey_index;
        w.slid = self.slid;
        w.sl = self.sl;
        w.dlid_path_bits = self.dlid_path_bits;
        w
    }
}

impl From<&ibv_wc> for WorkCompletion {
    fn from(w: &ibv_wc) -> WorkCompletion {
        WorkCompletion {
            wr_id: w.wr_id,
            status: WcStatus::from(w.status),
            opcode: WcOpcode::from(w.opcode),
            vendor_err: w.vendor_err,
            byte_len: w.byte_len,
            qp_num: w.qp_num,
            src_qp: w.src_qp,
            wc_flags: w.wc_flags,
            pkey_index: w.pkey_index,
            slid: w.slid,
            sl: w.sl,
            dlid_path_bits: w.dlid_path_bits,
        }
    }
}

impl Cq {
    /// Polls up to 16 completions, appending them to `out`; returns how many.
    pub fn poll(&self, out: &mut Vec<WorkCompletion>) -> Result<usize, VerbsError> {
        // SAFETY: `ibv_wc` is integers and a union of integers; all-zero is
        // a valid value.
        let mut wcs: [ibv_wc; 16] = unsafe { core::mem::zeroed() };
        // SAFETY: the CQ is alive; `wcs` has room for the 16 entries the call
        // may write (layout of `ibv_wc` pinned in `ffi`). The provider's
        // `poll_cq` op is always set for a CQ it created.
        let n = unsafe { sys::ibv_poll_cq(self.0.raw.as_ptr(), 16, wcs.as_mut_ptr()) };
        let n = usize::try_from(n).map_err(|_| VerbsError::verb(Op::PollCq, n.saturating_neg()))?;
        out.extend(wcs.iter().take(n).map(WorkCompletion::from));
        Ok(n)
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.0.ctx
    }
}
