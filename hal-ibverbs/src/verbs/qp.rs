//! UD queue pairs: creation, state transitions, posting and the UD destination.

use super::*;

/// Work-queue sizes of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCaps {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
}

/// A range of a memory region to send from or receive into.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    /// The region.
    pub mr: &'a Mr,
    /// Offset in the region.
    pub offset: usize,
    /// Length.
    pub len: u32,
}

impl Segment<'_> {
    fn sge(&self) -> Result<ibv_sge, VerbsError> {
        Ok(ibv_sge { addr: self.mr.addr(self.offset, self.len as usize)?, length: self.len, lkey: self.mr.lkey() })
    }
}

/// The destination QP of a UD send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest {
    /// Remote QP number.
    pub qpn: u32,
    /// Remote Q_Key.
    pub qkey: u32,
}

/// An unreliable-datagram QP.
#[derive(Debug)]
pub struct UdQp {
    pub(super) raw: NonNull<ibv_qp>,
    pub(super) pd: Pd,
    pub(super) _send_cq: Cq,
    pub(super) _recv_cq: Cq,
}

// SAFETY: QPs may be posted to and modified from any thread (providers lock).
unsafe impl Send for UdQp {}
// SAFETY: as above.
unsafe impl Sync for UdQp {}

impl Drop for UdQp {
    fn drop(&mut self) {
        // SAFETY: created by `ibv_create_qp` and destroyed once, before the
        // CQs and PD it holds references to.
        count_teardown(unsafe { sys::ibv_destroy_qp(self.raw.as_ptr()) });
    }
}

impl UdQp {
    /// `ibv_create_qp` of type UD with one scatter/gather entry per request.
    pub fn create(pd: &Pd, send_cq: &Cq, recv_cq: &Cq, caps: QpCaps) -> Result<UdQp, VerbsError> {
        // SAFETY: `ibv_qp_init_attr` is pointers and integers; all-zero (NULL
        // pointers, zero sizes) is a valid value.
        let mut init: ibv_qp_init_attr = unsafe { core::mem::zeroed() };
        init.send_cq = send_cq.0.raw.as_ptr();
        init.recv_cq = recv_cq.0.raw.as_ptr();
        init.cap = ibv_qp_cap {
            max_send_wr: caps.max_send_wr,
            max_recv_wr: caps.max_recv_wr,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        init.qp_type = sys::ibv_qp_type::IBV_QPT_UD;
        // SAFETY: the PD and both CQs are alive (and kept alive by the QP);
        // `init` is a valid `ibv_qp_init_attr`; the QP is destroyed once.
        let raw = unsafe { sys::ibv_create_qp(pd.0.raw.as_ptr(), &mut init) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| VerbsError::verb(Op::CreateQp, last_errno()).on_device(pd.context().name()))?;
        Ok(UdQp { raw, pd: pd.clone(), _send_cq: send_cq.clone(), _recv_cq: recv_cq.clone() })
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: reading a plain field of the live `ibv_qp`.
        unsafe { (*self.raw.as_ptr()).qp_num }
    }

    fn modify(&self, attr: &mut ibv_qp_attr, mask: sys::ibv_qp_attr_mask, port: u8) -> Result<(), VerbsError> {
        let mask = c_int::try_from(mask.0).unwrap_or(0);
        // SAFETY: the QP is alive and `attr` is a valid `ibv_qp_attr` with the
        // fields named in `mask` set.
        let ret = unsafe { sys::ibv_modify_qp(self.raw.as_ptr(), attr, mask) };
        check(Op::ModifyQp, ret).map_err(|e| e.on_device(self.pd.context().name()).on_port(port))
    }

    /// RESET → INIT (port, P_Key index, Q_Key) → RTR → RTS (SQ PSN 0).
    pub fn to_rts(&self, port: u8, pkey_index: u16, qkey: u32) -> Result<(), VerbsError> {
        use sys::ibv_qp_attr_mask as m;
        use sys::ibv_qp_state as s;
        // SAFETY: `ibv_qp_attr` is integers and `ibv_ah_attr`s (integers and
        // a byte union); all-zero is a valid value.
        let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
        a.qp_state = s::IBV_QPS_INIT;
        a.pkey_index = pkey_index;
        a.port_num = port;
        a.qkey = qkey;
        self.modify(&mut a, m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_QKEY, port)?;
        a.qp_state = s::IBV_QPS_RTR;
        self.modify(&mut a, m::IBV_QP_STATE, port)?;
        a.qp_state = s::IBV_QPS_RTS;
        a.sq_psn = 0;
        self.modify(&mut a, m::IBV_QP_STATE | m::IBV_QP_SQ_PSN, port)
    }

    /// Moves the QP to the error state (`ibv_modify_qp` to `IBV_QPS_ERR`):
    /// the provider flushes its posted work requests (completions with
    /// [`WcStatus::WrFlushErr`]), as after a
    /// failure it detects itself. For fault tests (`udah serve
    /// --fault-qp-after`).
    pub fn to_error(&self, port: u8) -> Result<(), VerbsError> {
        // SAFETY: as in `to_rts`: all-zero is a valid `ibv_qp_attr`.
        let mut a: ibv_qp_attr = unsafe { core::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_ERR;
        self.modify(&mut a, sys::ibv_qp_attr_mask::IBV_QP_STATE, port)
    }

    /// Posts one receive into `seg` (a UD receive needs 40 bytes in front
    /// of the payload for the GRH area).
    pub fn post_recv(&self, seg: Segment<'_>, wr_id: u64) -> Result<(), VerbsError> {
        let mut sge = seg.sge()?;
        let mut wr = ibv_recv_wr { wr_id, next: core::ptr::null_mut(), sg_list: &mut sge, num_sge: 1 };
        let mut bad: *mut ibv_recv_wr = core::ptr::null_mut();
        // SAFETY: the QP is alive; `wr` is one valid request whose single SGE
        // lies inside the registered region (checked by `addr`); the provider
        // copies the request before returning. The region outlives the
        // receive or is deregistered first (after which the NIC cannot
        // write it).
        let ret = unsafe { sys::ibv_post_recv(self.raw.as_ptr(), &mut wr, &mut bad) };
        check(Op::PostRecv, ret).map_err(|e| e.on_device(self.pd.context().name()))
    }

    /// Posts one signalled UD send of `seg` to `dest` through `ah`.
    pub fn post_send(&self, ah: &AddressHandle, dest: UdDest, seg: Segment<'_>, wr_id: u64) -> Result<(), VerbsError> {
        // SAFETY: `ah` is borrowed for the call, so it is alive and not
        // destroyed until the call returns.
        unsafe { self.post_send_raw(ah.raw, Some(ah.attr.port.get()), dest, seg, wr_id) }
    }

    /// [`post_send`](Self::post_send) through a bare `ibv_ah` pointer
    /// (`port` only labels errors).
    ///
    /// # Safety
    ///
    /// `ah` is a live AH on this QP's PD (or one of the same context) and is
    /// not destroyed before this call returns.
    pub(crate) unsafe fn post_send_raw(
        &self,
        ah: NonNull<ibv_ah>,
        port: Option<u8>,
        dest: UdDest,
        seg: Segment<'_>,
        wr_id: u64,
    ) -> Result<(), VerbsError> {
        let mut sge = seg.sge()?;
        // SAFETY: `ibv_send_wr` is integers, pointers and unions of those;
        // all-zero (NULL pointers) is a valid value.
        let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = sys::ibv_wr_opcode::IBV_WR_SEND;
        wr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
        wr.wr.ud = sys::ud_t { ah: ah.as_ptr(), remote_qpn: dest.qpn, remote_qkey: dest.qkey };
        let mut bad: *mut ibv_send_wr = core::ptr::null_mut();
        // SAFETY: the QP is alive (borrowed) and the AH is alive for the call
        // (the caller's contract); `wr` is one valid UD send whose SGE lies
        // inside the registered region; the provider copies the request (and
        // the AH's address vector) before returning.
        let ret = unsafe { sys::ibv_post_send(self.raw.as_ptr(), &mut wr, &mut bad) };
        check(Op::PostSend, ret).map_err(|e| {
            let e = e.on_device(self.pd.context().name());
            match port {
                Some(p) => e.on_port(p),
                None => e,
            }
        })
    }
}
