//! Extended completion queues (`ibv_create_cq_ex`) and the poll cursor over
//! them (`ibv_start_poll` / `ibv_next_poll` / `ibv_end_poll`, fields read
//! with the `ibv_wc_read_*` functions).
//!
//! One completion per `ibv_start_poll` / `ibv_end_poll` pair: the cursor
//! never calls `ibv_next_poll`. Soft-RoCE's provider (rdma-core 44) ends the
//! poll inside `ibv_next_poll` when it returns ENOENT (it stores the consumer
//! index and unlocks), so the documented `next_poll` loop followed by
//! `ibv_end_poll` advances its consumer index twice there (a phantom
//! all-zero completion, then garbage, and a double unlock), while mlx5 needs
//! that `ibv_end_poll`. One completion per pair is right on both.
//!
//! The read functions are the CQ's function pointers; a provider leaves the
//! pointer of a field the CQ was not created with NULL (rdma-core's
//! providers allocate the CQ zeroed and set only the requested readers), so
//! every read here checks it and reports a missing field as `None` instead
//! of calling through NULL as the `static inline` `ibv_wc_read_*` would.

use super::*;
use crate::ffi::{ibv_cq_ex, ibv_cq_init_attr_ex, ibv_poll_cq_attr};

/// `IBV_WC_EX_WITH_BYTE_LEN`.
pub const WC_EX_WITH_BYTE_LEN: u64 = 1 << 0;
/// `IBV_WC_EX_WITH_QP_NUM`.
pub const WC_EX_WITH_QP_NUM: u64 = 1 << 2;
/// `IBV_WC_EX_WITH_SRC_QP`.
pub const WC_EX_WITH_SRC_QP: u64 = 1 << 3;
/// `IBV_WC_EX_WITH_SLID`.
pub const WC_EX_WITH_SLID: u64 = 1 << 4;
/// `IBV_WC_EX_WITH_SL`.
pub const WC_EX_WITH_SL: u64 = 1 << 5;
/// `IBV_WC_EX_WITH_DLID_PATH_BITS`.
pub const WC_EX_WITH_DLID_PATH_BITS: u64 = 1 << 6;
/// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP` (device clock ticks).
pub const WC_EX_WITH_COMPLETION_TIMESTAMP: u64 = 1 << 7;
/// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK` (nanoseconds, converted
/// by the provider).
pub const WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK: u64 = 1 << 11;

/// The fields a UD responder needs: what `ibv_init_ah_from_wc` reads (SLID,
/// SL, DLID path bits; the GRH flag comes with every CQ's `wc_flags`), the
/// reply's destination QPN, the receive length and the local QPN.
pub const WC_EX_UD_FIELDS: u64 = WC_EX_WITH_BYTE_LEN
    | WC_EX_WITH_QP_NUM
    | WC_EX_WITH_SRC_QP
    | WC_EX_WITH_SLID
    | WC_EX_WITH_SL
    | WC_EX_WITH_DLID_PATH_BITS;

/// The flag sets [`Context::create_cq_ex_best`] tries, in order.
pub const WC_EX_TRIES: [u64; 3] = [
    WC_EX_UD_FIELDS | WC_EX_WITH_COMPLETION_TIMESTAMP | WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
    WC_EX_UD_FIELDS | WC_EX_WITH_COMPLETION_TIMESTAMP,
    WC_EX_UD_FIELDS,
];

#[derive(Debug)]
struct CqExRaw(NonNull<ibv_cq_ex>);

// SAFETY: the pointer is only dereferenced through `&mut CqEx` (polling) or
// to read constant function pointers; the CQ itself is owned by `CqInner`.
unsafe impl Send for CqExRaw {}
// SAFETY: as above; shared references only read the creation flags.
unsafe impl Sync for CqExRaw {}

/// An extended completion queue. Its [`Cq`] (for [`UdQp::create`]) is
/// [`CqEx::cq`]; polling takes `&mut self`, so one cursor at a time.
#[derive(Debug)]
pub struct CqEx {
    cq: Cq,
    ex: CqExRaw,
    wc_flags: u64,
}

/// What [`Context::create_cq_ex_best`] made, and what it was refused.
#[derive(Debug)]
pub struct CqExCreated {
    /// The CQ, with the richest flag set the device accepted.
    pub cq: CqEx,
    /// Each richer flag set tried first, with the error it got.
    pub refused: Vec<(u64, VerbsError)>,
}

impl Context {
    /// Creates an extended CQ of at least `cqe` entries whose completions
    /// carry the `IBV_WC_EX_WITH_*` fields of `wc_flags`.
    pub fn create_cq_ex(&self, cqe: u32, wc_flags: u64) -> Result<CqEx, VerbsError> {
        // SAFETY: `ibv_cq_init_attr_ex` is integers and pointers; all-zero
        // (no channel, no parent domain, no comp_mask) is valid.
        let mut attr: ibv_cq_init_attr_ex = unsafe { core::mem::zeroed() };
        attr.cqe = cqe;
        attr.wc_flags = wc_flags;
        // SAFETY: the context is open and `attr` is a valid, initialised
        // attribute; rdma-mummy-sys returns NULL with EOPNOTSUPP when the
        // provider has no `create_cq_ex`. The CQ is owned by the returned
        // `CqEx` and destroyed once (through `CqInner`).
        let raw = unsafe { sys::ibv_create_cq_ex(self.ptr(), &raw mut attr) };
        let ex =
            NonNull::new(raw).ok_or_else(|| VerbsError::verb(Op::CreateCqEx, last_errno()).on_device(self.name()))?;
        // `struct ibv_cq_ex` begins with the fields of `struct ibv_cq`
        // (`ibv_cq_ex_to_cq` is this cast); `ibv_destroy_cq` takes it.
        let cq = Cq(Arc::new(CqInner { raw: ex.cast::<ibv_cq>(), ctx: self.clone() }));
        Ok(CqEx { cq, ex: CqExRaw(ex), wc_flags })
    }

    /// [`Context::create_cq_ex`] with the first of [`WC_EX_TRIES`] the
    /// device accepts (Soft-RoCE, for one, refuses the timestamp flags).
    /// Fails with the last attempt's error when every set is refused.
    pub fn create_cq_ex_best(&self, cqe: u32) -> Result<CqExCreated, VerbsError> {
        let mut refused = Vec::new();
        for flags in WC_EX_TRIES {
            match self.create_cq_ex(cqe, flags) {
                Ok(cq) => return Ok(CqExCreated { cq, refused }),
                Err(e) => refused.push((flags, e)),
            }
        }
        match refused.pop() {
            Some((_, e)) => Err(e),
            None => Err(VerbsError::verb(Op::CreateCqEx, errno::EIO)),
        }
    }
}

impl Context {
    /// The device's free-running clock now (`ibv_query_rt_values_ex`,
    /// `IBV_VALUES_MASK_RAW_CLOCK`), in the ticks of
    /// `ibv_wc_read_completion_ts` (as providers return it: seconds times
    /// 10^9 plus the `tv_nsec` field, which holds the cycles).
    pub fn device_clock(&self) -> Result<u64, VerbsError> {
        // SAFETY: integers and a timespec; all-zero is valid.
        let mut v: sys::ibv_values_ex = unsafe { core::mem::zeroed() };
        v.comp_mask = sys::ibv_values_mask::IBV_VALUES_MASK_RAW_CLOCK.0;
        // SAFETY: the context is open and `v` is valid for writes; the
        // wrapper returns EOPNOTSUPP when the provider lacks the verb.
        let ret = unsafe { sys::ibv_query_rt_values_ex(self.ptr(), &raw mut v) };
        check(Op::QueryDevice, ret)?;
        let (s, ns) = (v.raw_clock.tv_sec, v.raw_clock.tv_nsec);
        Ok((s as u64).wrapping_mul(1_000_000_000).wrapping_add(ns as u64))
    }

    /// The device clock's frequency in kHz (`hca_core_clock` of
    /// `ibv_query_device_ex`), 0 when the device does not report it.
    pub fn core_clock_khz(&self) -> Result<u64, VerbsError> {
        // SAFETY: integers and nested integer structs; all-zero is valid.
        let mut a: sys::ibv_device_attr_ex = unsafe { core::mem::zeroed() };
        // SAFETY: the context is open, no input (NULL is allowed), `a` is
        // valid for writes of its full size (the wrapper passes it).
        let ret = unsafe { sys::ibv_query_device_ex(self.ptr(), core::ptr::null(), &raw mut a) };
        check(Op::QueryDevice, ret)?;
        Ok(a.hca_core_clock)
    }
}

impl CqEx {
    /// The CQ as a plain CQ (to create a QP on).
    pub fn cq(&self) -> &Cq {
        &self.cq
    }

    /// The `IBV_WC_EX_WITH_*` flags it was created with.
    pub fn wc_flags(&self) -> u64 {
        self.wc_flags
    }

    /// Whether completions carry a device-clock timestamp.
    pub fn has_completion_ts(&self) -> bool {
        self.wc_flags & WC_EX_WITH_COMPLETION_TIMESTAMP != 0
    }

    /// Whether completions carry a wall-clock timestamp (ns).
    pub fn has_wallclock(&self) -> bool {
        self.wc_flags & WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK != 0
    }

    /// Starts a poll: `Ok(None)` when the CQ is empty, else a cursor on the
    /// first completion. The poll ends when the cursor is dropped or runs
    /// out ([`ExPoll::advance`]).
    pub fn start_poll(&mut self) -> Result<Option<ExPoll<'_>>, VerbsError> {
        let mut attr = ibv_poll_cq_attr { comp_mask: 0 };
        let cq = self.ex.0.as_ptr();
        // SAFETY: the CQ is alive (owned by `self.cq`); `start_poll` is set
        // by every provider that creates extended CQs (checked, not
        // assumed); `&mut self` keeps any other poll of this CQ out until
        // the cursor is gone.
        let ret = match unsafe { (*cq).start_poll } {
            // SAFETY: as above, with a valid attribute.
            Some(f) => unsafe { f(cq, &raw mut attr) },
            None => errno::EOPNOTSUPP,
        };
        match ret {
            0 => Ok(Some(ExPoll { cq: self })),
            // Empty: `ibv_end_poll` must not be called.
            errno::ENOENT => Ok(None),
            e => Err(VerbsError::verb(Op::PollCqEx, if e < 0 { e.saturating_neg() } else { e })),
        }
    }

    /// Polls every completion available now, appending each (with its
    /// timestamps) to `out`; returns how many.
    pub fn poll_into(&mut self, out: &mut Vec<ExCompletion>) -> Result<usize, VerbsError> {
        let mut n = 0;
        let mut cur = self.start_poll()?;
        while let Some(c) = cur {
            out.push(c.read());
            n += 1;
            cur = c.advance()?;
        }
        Ok(n)
    }
}

/// One completion read off an extended CQ: its [`WorkCompletion`] (the
/// fields an `ibv_wc` has, `pkey_index` 0: extended CQs have no reader for
/// it) and its timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExCompletion {
    /// The fields of `struct ibv_wc`.
    pub wc: WorkCompletion,
    /// `ibv_wc_read_completion_ts` (device clock ticks), when requested.
    pub completion_ts: Option<u64>,
    /// `ibv_wc_read_completion_wallclock_ns`, when requested.
    pub wallclock_ns: Option<u64>,
}

/// A poll of an extended CQ positioned on a completion (between
/// `ibv_start_poll` and `ibv_end_poll`). It borrows the CQ mutably, so the
/// poll cannot outlive it nor overlap another; dropping it ends the poll.
#[derive(Debug)]
pub struct ExPoll<'a> {
    cq: &'a mut CqEx,
}

macro_rules! reader {
    ($(#[$m:meta])* $name:ident, $field:ident, $t:ty) => {
        $(#[$m])*
        #[inline]
        pub fn $name(&self) -> Option<$t> {
            let cq = self.raw();
            // SAFETY: the cursor holds a current completion (start or next
            // returned 0 and the poll has not ended); the pointer is read,
            // not assumed, and called only when the provider set it.
            let f = unsafe { (*cq).$field }?;
            // SAFETY: as above.
            Some(unsafe { f(cq) })
        }
    };
}

impl<'a> ExPoll<'a> {
    fn raw(&self) -> *mut ibv_cq_ex {
        self.cq.ex.0.as_ptr()
    }

    /// Moves to the next completion: ends this poll (`ibv_end_poll`) and
    /// starts another (see the module docs for why not `ibv_next_poll`);
    /// `Ok(None)` when the CQ is empty.
    pub fn advance(self) -> Result<Option<ExPoll<'a>>, VerbsError> {
        self.end().start_poll()
    }

    /// Ends the poll (`ibv_end_poll`), giving the CQ back.
    fn end(self) -> &'a mut CqEx {
        let this = ManuallyDrop::new(self);
        end_poll(this.raw());
        // SAFETY: `this` is never dropped nor used again, so the `&mut`
        // read out of it is the only one (moved, not duplicated).
        unsafe { core::ptr::read(&raw const this.cq) }
    }

    /// `cq->wr_id`.
    pub fn wr_id(&self) -> u64 {
        // SAFETY: a current completion: the provider wrote the field.
        unsafe { (*self.raw()).wr_id }
    }

    /// `cq->status`.
    pub fn status(&self) -> WcStatus {
        // SAFETY: as for `wr_id`.
        WcStatus::from(unsafe { (*self.raw()).status })
    }

    /// The `IBV_WC_EX_WITH_*` flags of the CQ.
    pub fn cq_wc_flags(&self) -> u64 {
        self.cq.wc_flags
    }

    reader!(
        /// `ibv_wc_read_opcode`.
        opcode_raw, read_opcode, u32
    );
    reader!(
        /// `ibv_wc_read_vendor_err`.
        vendor_err, read_vendor_err, u32
    );
    reader!(
        /// `ibv_wc_read_byte_len` (needs `IBV_WC_EX_WITH_BYTE_LEN`).
        byte_len, read_byte_len, u32
    );
    reader!(
        /// `ibv_wc_read_qp_num` (needs `IBV_WC_EX_WITH_QP_NUM`).
        qp_num, read_qp_num, u32
    );
    reader!(
        /// `ibv_wc_read_src_qp` (needs `IBV_WC_EX_WITH_SRC_QP`).
        src_qp, read_src_qp, u32
    );
    reader!(
        /// `ibv_wc_read_wc_flags` (`ibv_wc_flags` bits; always available).
        wc_flags, read_wc_flags, u32
    );
    reader!(
        /// `ibv_wc_read_slid` (needs `IBV_WC_EX_WITH_SLID`).
        slid, read_slid, u32
    );
    reader!(
        /// `ibv_wc_read_sl` (needs `IBV_WC_EX_WITH_SL`).
        sl, read_sl, u8
    );
    reader!(
        /// `ibv_wc_read_dlid_path_bits` (needs `IBV_WC_EX_WITH_DLID_PATH_BITS`).
        dlid_path_bits, read_dlid_path_bits, u8
    );
    reader!(
        /// `ibv_wc_read_completion_ts` (needs
        /// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`).
        completion_ts_raw, read_completion_ts, u64
    );
    reader!(
        /// `ibv_wc_read_completion_wallclock_ns` (needs
        /// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK`).
        wallclock_ns_raw, read_completion_wallclock_ns, u64
    );

    /// The device-clock timestamp, when the CQ was created with it.
    pub fn completion_ts(&self) -> Option<u64> {
        if self.cq.has_completion_ts() { self.completion_ts_raw() } else { None }
    }

    /// The wall-clock timestamp (ns), when the CQ was created with it.
    pub fn wallclock_ns(&self) -> Option<u64> {
        if self.cq.has_wallclock() { self.wallclock_ns_raw() } else { None }
    }

    /// The current completion as a [`WorkCompletion`] and its timestamps.
    /// For a failed completion only `wr_id`, `status` and `vendor_err` are
    /// read (the others are not valid then) and the rest is zero.
    pub fn read(&self) -> ExCompletion {
        let status = self.status();
        let mut wc = WorkCompletion {
            wr_id: self.wr_id(),
            status,
            opcode: WcOpcode::from(0),
            vendor_err: self.vendor_err().unwrap_or(0),
            byte_len: 0,
            qp_num: 0,
            src_qp: 0,
            wc_flags: 0,
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
        };
        if status != WcStatus::Success {
            return ExCompletion { wc, completion_ts: None, wallclock_ns: None };
        }
        wc.opcode = WcOpcode::from(self.opcode_raw().unwrap_or(0));
        wc.byte_len = self.byte_len().unwrap_or(0);
        wc.qp_num = self.qp_num().unwrap_or(0);
        let ibv = udah_core::ah::Completion::ibv(self);
        (wc.src_qp, wc.wc_flags, wc.slid, wc.sl, wc.dlid_path_bits) =
            (ibv.src_qp, ibv.wc_flags, ibv.slid, ibv.sl, ibv.dlid_path_bits);
        ExCompletion { wc, completion_ts: self.completion_ts(), wallclock_ns: self.wallclock_ns() }
    }
}

impl udah_core::ah::Completion for ExPoll<'_> {
    /// The fields `ibv_init_ah_from_wc` reads, through the read functions
    /// (a field the CQ was not created with reads 0; `pkey_index` is 0).
    #[inline]
    fn ibv(&self) -> udah_core::ah::IbvWc {
        udah_core::ah::IbvWc {
            wc_flags: self.wc_flags().unwrap_or(0),
            // `ibv_wc.slid` is 16 bits; the reader returns the same value
            // widened.
            slid: self.slid().unwrap_or(0) as u16,
            sl: self.sl().unwrap_or(0),
            dlid_path_bits: self.dlid_path_bits().unwrap_or(0),
            src_qp: self.src_qp().unwrap_or(0),
            pkey_index: 0,
        }
    }

    #[inline]
    fn kernel(&self) -> udah_core::ah::KernelWc {
        udah_core::ah::Completion::kernel(&udah_core::ah::Completion::ibv(self))
    }
}

/// `ibv_end_poll` of an active poll.
fn end_poll(cq: *mut ibv_cq_ex) {
    // SAFETY: called once per poll that `start_poll` began (from `Drop` or
    // from `ExPoll::end`, which does not drop); the CQ is alive.
    if let Some(f) = unsafe { (*cq).end_poll } {
        // SAFETY: as above.
        unsafe { f(cq) };
    }
}

impl Drop for ExPoll<'_> {
    fn drop(&mut self) {
        end_poll(self.raw());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_match_the_bindings() {
        use sys::ibv_create_cq_wc_flags as F;
        let pairs = [
            (WC_EX_WITH_BYTE_LEN, F::IBV_WC_EX_WITH_BYTE_LEN),
            (WC_EX_WITH_QP_NUM, F::IBV_WC_EX_WITH_QP_NUM),
            (WC_EX_WITH_SRC_QP, F::IBV_WC_EX_WITH_SRC_QP),
            (WC_EX_WITH_SLID, F::IBV_WC_EX_WITH_SLID),
            (WC_EX_WITH_SL, F::IBV_WC_EX_WITH_SL),
            (WC_EX_WITH_DLID_PATH_BITS, F::IBV_WC_EX_WITH_DLID_PATH_BITS),
            (WC_EX_WITH_COMPLETION_TIMESTAMP, F::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP),
            (WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, F::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK),
        ];
        for (ours, theirs) in pairs {
            assert_eq!(ours, u64::from(theirs.0));
        }
        assert!(WC_EX_TRIES.windows(2).all(|w| w[0] & w[1] == w[1] && w[0] != w[1]));
    }
}
