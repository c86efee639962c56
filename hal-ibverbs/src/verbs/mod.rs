//! Safe RAII wrappers over the verbs: device list, context, PD, CQ, UD QP,
//! MR, AH. With [`crate::ffi`], the only module with `unsafe`.
//!
//! # Ownership
//!
//! Every object keeps what it was created from alive: a [`Pd`] or [`Cq`]
//! holds its [`Context`], an [`AddressHandle`] or [`Mr`] its [`Pd`], a
//! [`UdQp`] its PD and CQs (all reference-counted handles). C objects are thus
//! always destroyed before their parents, whatever order Rust drops the
//! handles in.
//!
//! # Thread safety
//!
//! libibverbs verbs are thread safe (rdma-core `Documentation/libibverbs.md`:
//! "All verbs are thread safe"), so the handles are `Send + Sync`. A memory
//! region's buffer is written through `&mut Mr` only.
//!
//! # Teardown
//!
//! `Drop` never panics: a failed destroy is counted
//! ([`teardown_failures`]) and otherwise ignored. [`AddressHandle::destroy`]
//! reports the error instead.

#![allow(unsafe_code)]

use core::ffi::CStr;
use core::ffi::{c_int, c_void};
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rdma_mummy_sys as sys;
use udah_core::ah::AhAttr;
use udah_core::wire::Gid;

use crate::enums::{EventType, GidKind, Mtu, PortLinkLayer, PortState, WcOpcode, WcStatus};
use crate::error::{Op, VerbsError, errno, kernel_has_rdma};
use crate::ffi::{
    RawAsyncEvent, ibv_ah, ibv_ah_attr, ibv_context, ibv_cq, ibv_device, ibv_device_attr, ibv_gid, ibv_gid_entry,
    ibv_global_route, ibv_grh, ibv_mr, ibv_pd, ibv_port_attr, ibv_qp, ibv_qp_attr, ibv_qp_cap, ibv_qp_init_attr,
    ibv_recv_wr, ibv_send_wr, ibv_sge, ibv_wc,
};

static TEARDOWN_FAILURES: AtomicU64 = AtomicU64::new(0);

/// How many destroy/close calls run from `Drop` have failed in this process.
pub fn teardown_failures() -> u64 {
    TEARDOWN_FAILURES.load(Ordering::Relaxed)
}

fn count_teardown(ret: c_int) {
    if ret != 0 {
        TEARDOWN_FAILURES.fetch_add(1, Ordering::Relaxed);
    }
}

/// The calling thread's `errno` (`EIO` if the OS reports none).
fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(errno::EIO)
}

/// A verb's return value: 0 is success, a positive value is the errno, -1
/// means "see errno", and any other negative value is a negated errno.
fn check(op: Op, ret: c_int) -> Result<(), VerbsError> {
    match ret {
        0 => Ok(()),
        -1 => Err(VerbsError::verb(op, last_errno())),
        r if r < 0 => Err(VerbsError::verb(op, r.saturating_neg())),
        r => Err(VerbsError::verb(op, r)),
    }
}

/// Whether `libibverbs.so.1` can be loaded and exports `ibv_get_device_list`
/// (the same lookup rdma-mummy-sys does at start-up).
pub fn library_available() -> bool {
    // SAFETY: `dlopen` is called with a NUL-terminated constant name and
    // valid flags; it has no other preconditions. Loading libibverbs runs its
    // constructors, which rdma-mummy-sys has already run in this process.
    let handle = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return false;
    }
    // SAFETY: `handle` is the live handle `dlopen` just returned and the name
    // is NUL-terminated.
    let sym = unsafe { libc::dlsym(handle, c"ibv_get_device_list".as_ptr()) };
    // SAFETY: `handle` came from `dlopen` above and is closed exactly once;
    // `sym` is not used after this.
    unsafe { libc::dlclose(handle) };
    !sym.is_null()
}

mod ah;
mod context;
mod cq;
mod cq_ex;
mod device;
mod pd;
mod qp;

pub use ah::AddressHandle;
pub(crate) use ah::ah_attr_to_c;
use context::ContextInner;
pub use context::{AsyncEvent, Context, DeviceAttr, GidRecord, PortAttr};
use cq::CqInner;
pub use cq::{Cq, WorkCompletion};
pub use cq_ex::{
    CqEx, CqExCreated, ExCompletion, ExPoll, WC_EX_TRIES, WC_EX_UD_FIELDS, WC_EX_WITH_BYTE_LEN,
    WC_EX_WITH_COMPLETION_TIMESTAMP, WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, WC_EX_WITH_DLID_PATH_BITS,
    WC_EX_WITH_QP_NUM, WC_EX_WITH_SL, WC_EX_WITH_SLID, WC_EX_WITH_SRC_QP,
};
pub use device::{Device, DeviceList};
use pd::PdInner;
pub use pd::{Mr, Pd};
pub use qp::{QpCaps, Segment, UdDest, UdQp};

#[cfg(test)]
mod tests {
    use super::*;
    use udah_core::ah::{FlowLabel, GlobalRoute, PortNum, Sl};

    #[test]
    fn check_conventions() {
        assert!(check(Op::ModifyQp, 0).is_ok());
        assert_eq!(check(Op::ModifyQp, 22).unwrap_err().errno(), Some(22));
        assert_eq!(check(Op::QueryGidTable, -95).unwrap_err().errno(), Some(95));
    }

    #[test]
    fn ah_attr_by_value() {
        let a = AhAttr {
            port: PortNum::new(2).unwrap(),
            dlid: 0x1234,
            sl: Sl::new(5).unwrap(),
            src_path_bits: 1,
            static_rate: 3,
            grh: Some(GlobalRoute {
                dgid: Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]),
                flow_label: FlowLabel::new(0xabcde).unwrap(),
                sgid_index: 3,
                hop_limit: 64,
                traffic_class: 0x20,
            }),
        };
        let c = ah_attr_to_c(&a);
        // SAFETY: reading the byte view of a union written through `raw`.
        let dgid = unsafe { c.grh.dgid.raw };
        assert_eq!(dgid, a.grh.unwrap().dgid.0);
        assert_eq!((c.dlid, c.sl, c.src_path_bits, c.static_rate, c.is_global, c.port_num), (0x1234, 5, 1, 3, 1, 2));
        assert_eq!((c.grh.flow_label, c.grh.sgid_index, c.grh.hop_limit, c.grh.traffic_class), (0xabcde, 3, 64, 0x20));
        let no_grh = ah_attr_to_c(&AhAttr { grh: None, ..a });
        assert_eq!(no_grh.is_global, 0);
    }

    #[test]
    fn work_completion_from_c_keeps_unknown_values() {
        // SAFETY: `ibv_wc` is integers and a union of integers; all-zero is
        // a valid value.
        let mut w: ibv_wc = unsafe { core::mem::zeroed() };
        w.wr_id = 9;
        w.status = 77;
        w.opcode = 200;
        w.byte_len = 104;
        w.src_qp = 0x12;
        w.wc_flags = 1;
        w.slid = 5;
        w.sl = 3;
        let c = WorkCompletion::from(&w);
        assert_eq!((c.status, c.opcode), (WcStatus::Unknown(77), WcOpcode::Unknown(200)));
        assert_eq!((c.wr_id, c.byte_len, c.src_qp, c.slid, c.sl), (9, 104, 0x12, 5, 3));
        let ibv = c.ibv();
        assert_eq!((ibv.wc_flags, ibv.src_qp, ibv.slid, ibv.sl), (1, 0x12, 5, 3));
        w.status = 0;
        w.opcode = 128;
        let ok = WorkCompletion::from(&w);
        assert_eq!((ok.status, ok.opcode), (WcStatus::Success, WcOpcode::Recv));
    }

    #[test]
    fn gid_record_from_c() {
        let e =
            ibv_gid_entry { gid: ibv_gid { raw: [0xab; 16] }, gid_index: 7, port_num: 1, gid_type: 9, ndev_ifindex: 3 };
        let r = GidRecord::from(&e);
        assert_eq!(r, GidRecord { gid: Gid([0xab; 16]), index: 7, port: 1, kind: GidKind::Unknown(9), ifindex: 3 });
    }
}
