//! The libibverbs structs the C API reads and writes, mirrored with their
//! layouts pinned (rdma-core 44 `verbs.h`, 64-bit Linux). The header does not
//! declare them: it includes `<infiniband/verbs.h>` (see `cbindgen.toml`), so
//! a C caller passes what it already has. `tests/c/vectors.c` checks every
//! size and offset below against the installed header with `_Static_assert`.

use core::ffi::c_void;
use core::mem::{align_of, offset_of, size_of};

use udah_core::ah::IbvAhAttr;

/// `struct ibv_context` (opaque: only passed through to libibverbs).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_context {
    _opaque: [u8; 0],
}

/// `struct ibv_pd` (opaque: only passed through to libibverbs).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_pd {
    _opaque: [u8; 0],
}

/// `struct ibv_ah` (opaque: only passed through to libibverbs).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_ah {
    _opaque: [u8; 0],
}

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_wc {
    /// `wr_id`.
    pub wr_id: u64,
    /// `enum ibv_wc_status`.
    pub status: u32,
    /// `enum ibv_wc_opcode`.
    pub opcode: u32,
    /// `vendor_err`.
    pub vendor_err: u32,
    /// `byte_len`.
    pub byte_len: u32,
    /// `imm_data` / `invalidated_rkey`.
    pub imm_data: u32,
    /// `qp_num`.
    pub qp_num: u32,
    /// `src_qp`.
    pub src_qp: u32,
    /// `wc_flags` (`enum ibv_wc_flags` bits).
    pub wc_flags: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `slid`.
    pub slid: u16,
    /// `sl`.
    pub sl: u8,
    /// `dlid_path_bits`.
    pub dlid_path_bits: u8,
}

/// `struct ibv_grh`: the 40 bytes in front of a UD payload, read as bytes.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct ibv_grh {
    /// The bytes, as received.
    pub bytes: [u8; 40],
}

/// `struct ibv_ah_attr`; written as the core's layout-identical [`IbvAhAttr`].
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct ibv_ah_attr {
    /// The 32 bytes.
    pub attr: IbvAhAttr,
}

/// `union ibv_gid`.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct ibv_gid {
    /// `raw`.
    pub raw: [u8; 16],
}

/// `struct ibv_gid_entry`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_gid_entry {
    /// The GID.
    pub gid: ibv_gid,
    /// Its table index.
    pub gid_index: u32,
    /// Its port.
    pub port_num: u32,
    /// `enum ibv_gid_type` (IB 0, RoCE v1 1, RoCE v2 2).
    pub gid_type: u32,
    /// The netdev's interface index.
    pub ndev_ifindex: u32,
}

/// `struct ibv_async_event`, with `event_type` as the raw integer (a value
/// newer than this mirror must not be undefined behaviour).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_async_event {
    /// `element`: the object pointer or `port_num`.
    pub element: EventElement,
    /// `enum ibv_event_type`.
    pub event_type: u32,
}

/// The `element` union of [`ibv_async_event`].
#[repr(C)]
#[derive(Clone, Copy)]
pub union EventElement {
    /// `cq`, `qp`, `srq` or `wq`.
    pub object: *mut c_void,
    /// `port_num`.
    pub port_num: i32,
}

/// `IBV_EVENT_PORT_ACTIVE`.
pub(crate) const IBV_EVENT_PORT_ACTIVE: u32 = 9;
/// `IBV_EVENT_PORT_ERR`.
pub(crate) const IBV_EVENT_PORT_ERR: u32 = 10;
/// `IBV_EVENT_LID_CHANGE`.
pub(crate) const IBV_EVENT_LID_CHANGE: u32 = 11;
/// `IBV_EVENT_PKEY_CHANGE`.
pub(crate) const IBV_EVENT_PKEY_CHANGE: u32 = 12;
/// `IBV_EVENT_SM_CHANGE`.
pub(crate) const IBV_EVENT_SM_CHANGE: u32 = 13;
/// `IBV_EVENT_CLIENT_REREGISTER`.
pub(crate) const IBV_EVENT_CLIENT_REREGISTER: u32 = 17;
/// `IBV_EVENT_GID_CHANGE`.
pub(crate) const IBV_EVENT_GID_CHANGE: u32 = 18;

/// Every layout the API relies on, as (C expression, Rust value), for the C
/// test to assert against the installed `verbs.h`.
pub const LAYOUT: &[(&str, usize)] = &[
    ("sizeof(struct ibv_cq_ex)", size_of::<crate::cq_ex::ibv_cq_ex>()),
    ("offsetof(struct ibv_cq_ex, status)", offset_of!(crate::cq_ex::ibv_cq_ex, status)),
    ("offsetof(struct ibv_cq_ex, wr_id)", offset_of!(crate::cq_ex::ibv_cq_ex, wr_id)),
    ("offsetof(struct ibv_cq_ex, start_poll)", offset_of!(crate::cq_ex::ibv_cq_ex, start_poll)),
    ("offsetof(struct ibv_cq_ex, read_src_qp)", offset_of!(crate::cq_ex::ibv_cq_ex, read_src_qp)),
    ("offsetof(struct ibv_cq_ex, read_wc_flags)", offset_of!(crate::cq_ex::ibv_cq_ex, read_wc_flags)),
    ("offsetof(struct ibv_cq_ex, read_slid)", offset_of!(crate::cq_ex::ibv_cq_ex, read_slid)),
    ("offsetof(struct ibv_cq_ex, read_sl)", offset_of!(crate::cq_ex::ibv_cq_ex, read_sl)),
    ("offsetof(struct ibv_cq_ex, read_dlid_path_bits)", offset_of!(crate::cq_ex::ibv_cq_ex, read_dlid_path_bits)),
    ("offsetof(struct ibv_cq_ex, read_completion_ts)", offset_of!(crate::cq_ex::ibv_cq_ex, read_completion_ts)),
    (
        "offsetof(struct ibv_cq_ex, read_completion_wallclock_ns)",
        offset_of!(crate::cq_ex::ibv_cq_ex, read_completion_wallclock_ns),
    ),
    ("sizeof(struct ibv_wc)", size_of::<ibv_wc>()),
    ("offsetof(struct ibv_wc, status)", offset_of!(ibv_wc, status)),
    ("offsetof(struct ibv_wc, src_qp)", offset_of!(ibv_wc, src_qp)),
    ("offsetof(struct ibv_wc, wc_flags)", offset_of!(ibv_wc, wc_flags)),
    ("offsetof(struct ibv_wc, pkey_index)", offset_of!(ibv_wc, pkey_index)),
    ("offsetof(struct ibv_wc, slid)", offset_of!(ibv_wc, slid)),
    ("offsetof(struct ibv_wc, sl)", offset_of!(ibv_wc, sl)),
    ("offsetof(struct ibv_wc, dlid_path_bits)", offset_of!(ibv_wc, dlid_path_bits)),
    ("sizeof(struct ibv_grh)", size_of::<ibv_grh>()),
    ("_Alignof(struct ibv_grh)", align_of::<ibv_grh>()),
    ("sizeof(struct ibv_ah_attr)", size_of::<ibv_ah_attr>()),
    ("_Alignof(struct ibv_ah_attr)", align_of::<ibv_ah_attr>()),
    ("sizeof(struct ibv_gid_entry)", size_of::<ibv_gid_entry>()),
    ("offsetof(struct ibv_gid_entry, gid_index)", offset_of!(ibv_gid_entry, gid_index)),
    ("offsetof(struct ibv_gid_entry, gid_type)", offset_of!(ibv_gid_entry, gid_type)),
    ("sizeof(struct ibv_async_event)", size_of::<ibv_async_event>()),
    ("offsetof(struct ibv_async_event, event_type)", offset_of!(ibv_async_event, event_type)),
];

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(size_of::<ibv_wc>() == 48 && align_of::<ibv_wc>() == 8);
    assert!(offset_of!(ibv_wc, wc_flags) == 36 && offset_of!(ibv_wc, slid) == 42);
    assert!(size_of::<ibv_grh>() == 40);
    assert!(size_of::<ibv_ah_attr>() == 32 && align_of::<ibv_ah_attr>() == 8);
    assert!(size_of::<ibv_gid_entry>() == 32 && offset_of!(ibv_gid_entry, gid_type) == 24);
    assert!(size_of::<ibv_async_event>() == 16 && offset_of!(ibv_async_event, event_type) == 8);
};

unsafe extern "C" {
    /// `src/shim.c`: `ibv_query_port`; 0 or the errno value.
    pub(crate) fn udah_shim_query_port(
        ctx: *mut ibv_context,
        port: u8,
        gid_tbl_len: *mut u32,
        link_layer: *mut u8,
    ) -> i32;
    /// `src/shim.c`: `ibv_query_gid_ex`; 0, `ENODATA` for an empty slot, or
    /// the errno value.
    pub(crate) fn udah_shim_query_gid(
        ctx: *mut ibv_context,
        port: u8,
        index: u32,
        gid: *mut u8,
        gid_type: *mut u32,
        ifindex: *mut u32,
    ) -> i32;
    /// `src/shim.c`: `ibv_create_ah`.
    pub(crate) fn udah_shim_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah;
    /// `src/shim.c`: `ibv_destroy_ah`.
    pub(crate) fn udah_shim_destroy_ah(ah: *mut ibv_ah) -> i32;
}

impl core::fmt::Debug for EventElement {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("EventElement { .. }")
    }
}
