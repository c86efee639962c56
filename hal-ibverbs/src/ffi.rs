//! The C side: every libibverbs type this crate reads or writes, with its
//! layout pinned.
//!
//! The functions and most types come from [`rdma_mummy_sys`], which loads
//! `libibverbs.so.1` at run time (`dlopen` in a constructor) and turns the
//! `static inline` verbs (`ibv_poll_cq`, `ibv_post_send`, `ibv_post_recv`,
//! `ibv_query_port`, `ibv_query_gid_ex`, `ibv_query_gid_table`) into Rust
//! functions. A verb whose symbol could not be loaded returns its failure
//! value with `errno = EOPNOTSUPP` (rdma-core-mummy `RETURN_NOT_EXIST`).
//!
//! Two deviations from the bindings, both for soundness:
//!
//! * `struct ibv_async_event` is bound by rdma-mummy-sys with a Rust `enum`
//!   for `event_type`; a kernel newer than the bindings can report a value the
//!   enum lacks, which would be undefined behaviour the moment Rust reads it
//!   (STYLE §4 pitfall 3). `RawAsyncEvent` mirrors the struct with a `u32`
//!   and is passed to the C functions through a pointer cast.
//! * GIDs are converted by value (`ibv_gid { raw }` / `.raw`), never by
//!   casting a `[u8; 16]` to the 8-aligned C union (pitfall 1).
//!
//! Layouts are checked twice: at compile time below (the values of Debian
//! 12's rdma-core 44 headers on 64-bit Linux), and against the installed
//! headers by `tests/layout.rs`, which compiles a C program over
//! [`layout_facts`].

#![allow(unsafe_code)]

use core::ffi::c_int;
use core::mem::{align_of, offset_of, size_of};

pub(crate) use rdma_mummy_sys::{
    ibv_ah, ibv_ah_attr, ibv_async_event, ibv_context, ibv_cq, ibv_cq_ex, ibv_cq_init_attr_ex, ibv_device,
    ibv_device_attr, ibv_gid, ibv_gid_entry, ibv_global_route, ibv_grh, ibv_mr, ibv_pd, ibv_poll_cq_attr,
    ibv_port_attr, ibv_qp, ibv_qp_attr, ibv_qp_cap, ibv_qp_init_attr, ibv_recv_wr, ibv_send_wr, ibv_sge, ibv_wc,
};

/// The `element` union of `struct ibv_async_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) union RawEventElement {
    /// `cq`, `qp`, `srq` or `wq`: the object the event is about.
    pub(crate) object: *mut core::ffi::c_void,
    /// `port_num`, for port events.
    pub(crate) port_num: c_int,
}

/// `struct ibv_async_event` with `event_type` as a plain integer.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct RawAsyncEvent {
    /// What the event is about.
    pub(crate) element: RawEventElement,
    /// `enum ibv_event_type`, as the kernel reported it.
    pub(crate) event_type: u32,
}

impl RawAsyncEvent {
    /// An all-zero event for the C side to fill.
    pub(crate) const fn zeroed() -> RawAsyncEvent {
        RawAsyncEvent { element: RawEventElement { object: core::ptr::null_mut() }, event_type: 0 }
    }
}

// Compile-time layout pins (64-bit Linux, rdma-core 44 headers, checked with
// gcc; SEMANTICS §1.1 for the first five).
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(size_of::<ibv_gid>() == 16 && align_of::<ibv_gid>() == 8);
    assert!(size_of::<ibv_gid_entry>() == 32);
    assert!(offset_of!(ibv_gid_entry, gid_index) == 16);
    assert!(offset_of!(ibv_gid_entry, port_num) == 20);
    assert!(offset_of!(ibv_gid_entry, gid_type) == 24);
    assert!(offset_of!(ibv_gid_entry, ndev_ifindex) == 28);
    assert!(size_of::<ibv_global_route>() == 24 && align_of::<ibv_global_route>() == 8);
    assert!(offset_of!(ibv_global_route, flow_label) == 16);
    assert!(offset_of!(ibv_global_route, sgid_index) == 20);
    assert!(size_of::<ibv_ah_attr>() == 32 && align_of::<ibv_ah_attr>() == 8);
    assert!(offset_of!(ibv_ah_attr, dlid) == 24);
    assert!(offset_of!(ibv_ah_attr, sl) == 26);
    assert!(offset_of!(ibv_ah_attr, is_global) == 29);
    assert!(offset_of!(ibv_ah_attr, port_num) == 30);
    assert!(size_of::<ibv_wc>() == 48 && align_of::<ibv_wc>() == 8);
    assert!(offset_of!(ibv_wc, status) == 8);
    assert!(offset_of!(ibv_wc, byte_len) == 20);
    assert!(offset_of!(ibv_wc, src_qp) == 32);
    assert!(offset_of!(ibv_wc, wc_flags) == 36);
    assert!(offset_of!(ibv_wc, slid) == 42);
    assert!(offset_of!(ibv_wc, sl) == 44);
    assert!(offset_of!(ibv_wc, dlid_path_bits) == 45);
    assert!(size_of::<ibv_sge>() == 16);
    assert!(size_of::<ibv_recv_wr>() == 32);
    assert!(size_of::<ibv_send_wr>() == 128);
    assert!(offset_of!(ibv_send_wr, sg_list) == 16);
    assert!(offset_of!(ibv_send_wr, opcode) == 28);
    assert!(offset_of!(ibv_send_wr, send_flags) == 32);
    assert!(offset_of!(ibv_send_wr, wr) == 40);
    assert!(size_of::<ibv_qp_cap>() == 20);
    assert!(size_of::<ibv_qp_init_attr>() == 64);
    assert!(offset_of!(ibv_qp_init_attr, cap) == 32);
    assert!(offset_of!(ibv_qp_init_attr, qp_type) == 52);
    assert!(size_of::<ibv_qp_attr>() == 144);
    assert!(offset_of!(ibv_qp_attr, qkey) == 16);
    assert!(offset_of!(ibv_qp_attr, sq_psn) == 24);
    assert!(offset_of!(ibv_qp_attr, ah_attr) == 56);
    assert!(offset_of!(ibv_qp_attr, pkey_index) == 120);
    assert!(offset_of!(ibv_qp_attr, port_num) == 129);
    // The bindings' `ibv_port_attr` is newer than rdma-core 44's (52 bytes):
    // it ends in `active_speed_ex`. The provider is told the size and copies
    // what it knows; the fields read here sit at the same offsets.
    assert!(size_of::<ibv_port_attr>() >= 52);
    assert!(offset_of!(ibv_port_attr, active_mtu) == 8);
    assert!(offset_of!(ibv_port_attr, gid_tbl_len) == 12);
    assert!(offset_of!(ibv_port_attr, lid) == 34);
    assert!(offset_of!(ibv_port_attr, lmc) == 38);
    assert!(offset_of!(ibv_port_attr, link_layer) == 46);
    assert!(size_of::<ibv_device_attr>() == 232);
    assert!(offset_of!(ibv_device_attr, phys_port_cnt) == 227);
    assert!(offset_of!(ibv_qp, qp_num) == 52);
    assert!(offset_of!(ibv_mr, lkey) == 36);
    assert!(offset_of!(ibv_context, async_fd) == 268);
    assert!(size_of::<ibv_async_event>() == 16);
    assert!(size_of::<RawAsyncEvent>() == size_of::<ibv_async_event>());
    assert!(align_of::<RawAsyncEvent>() == align_of::<ibv_async_event>());
    assert!(offset_of!(RawAsyncEvent, event_type) == offset_of!(ibv_async_event, event_type));
    assert!(offset_of!(RawAsyncEvent, event_type) == 8);
};

/// How a Rust layout value must relate to the C one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(hidden)]
pub enum Relation {
    /// Equal.
    Eq,
    /// The Rust value is at least the C one (a newer, larger struct that the
    /// provider is told the size of).
    AtLeast,
}

/// A layout fact: a C expression (`sizeof(…)`, `offsetof(…)`,
/// `_Alignof(…)`), the value Rust has for it, and how they must relate.
#[derive(Debug, Clone, Copy)]
#[doc(hidden)]
pub struct LayoutFact {
    /// The C expression.
    pub c_expr: &'static str,
    /// The Rust value.
    pub rust: usize,
    /// How they must relate.
    pub relation: Relation,
}

macro_rules! facts {
    ($( $rel:ident $c:literal => $v:expr ),* $(,)?) => {
        &[ $( LayoutFact { c_expr: $c, rust: $v, relation: Relation::$rel } ),* ]
    };
}

/// Every layout this crate relies on, as C expressions with the Rust values,
/// for `tests/layout.rs` to compile against the installed `verbs.h`.
#[doc(hidden)]
pub fn layout_facts() -> &'static [LayoutFact] {
    facts![
        Eq "sizeof(union ibv_gid)" => size_of::<ibv_gid>(),
        Eq "_Alignof(union ibv_gid)" => align_of::<ibv_gid>(),
        Eq "sizeof(struct ibv_gid_entry)" => size_of::<ibv_gid_entry>(),
        Eq "offsetof(struct ibv_gid_entry, gid_index)" => offset_of!(ibv_gid_entry, gid_index),
        Eq "offsetof(struct ibv_gid_entry, port_num)" => offset_of!(ibv_gid_entry, port_num),
        Eq "offsetof(struct ibv_gid_entry, gid_type)" => offset_of!(ibv_gid_entry, gid_type),
        Eq "offsetof(struct ibv_gid_entry, ndev_ifindex)" => offset_of!(ibv_gid_entry, ndev_ifindex),
        Eq "sizeof(struct ibv_global_route)" => size_of::<ibv_global_route>(),
        Eq "offsetof(struct ibv_global_route, flow_label)" => offset_of!(ibv_global_route, flow_label),
        Eq "offsetof(struct ibv_global_route, sgid_index)" => offset_of!(ibv_global_route, sgid_index),
        Eq "offsetof(struct ibv_global_route, hop_limit)" => offset_of!(ibv_global_route, hop_limit),
        Eq "offsetof(struct ibv_global_route, traffic_class)" => offset_of!(ibv_global_route, traffic_class),
        Eq "sizeof(struct ibv_ah_attr)" => size_of::<ibv_ah_attr>(),
        Eq "_Alignof(struct ibv_ah_attr)" => align_of::<ibv_ah_attr>(),
        Eq "offsetof(struct ibv_ah_attr, dlid)" => offset_of!(ibv_ah_attr, dlid),
        Eq "offsetof(struct ibv_ah_attr, sl)" => offset_of!(ibv_ah_attr, sl),
        Eq "offsetof(struct ibv_ah_attr, src_path_bits)" => offset_of!(ibv_ah_attr, src_path_bits),
        Eq "offsetof(struct ibv_ah_attr, static_rate)" => offset_of!(ibv_ah_attr, static_rate),
        Eq "offsetof(struct ibv_ah_attr, is_global)" => offset_of!(ibv_ah_attr, is_global),
        Eq "offsetof(struct ibv_ah_attr, port_num)" => offset_of!(ibv_ah_attr, port_num),
        Eq "sizeof(struct ibv_wc)" => size_of::<ibv_wc>(),
        Eq "offsetof(struct ibv_wc, status)" => offset_of!(ibv_wc, status),
        Eq "offsetof(struct ibv_wc, opcode)" => offset_of!(ibv_wc, opcode),
        Eq "offsetof(struct ibv_wc, vendor_err)" => offset_of!(ibv_wc, vendor_err),
        Eq "offsetof(struct ibv_wc, byte_len)" => offset_of!(ibv_wc, byte_len),
        Eq "offsetof(struct ibv_wc, qp_num)" => offset_of!(ibv_wc, qp_num),
        Eq "offsetof(struct ibv_wc, src_qp)" => offset_of!(ibv_wc, src_qp),
        Eq "offsetof(struct ibv_wc, wc_flags)" => offset_of!(ibv_wc, wc_flags),
        Eq "offsetof(struct ibv_wc, pkey_index)" => offset_of!(ibv_wc, pkey_index),
        Eq "offsetof(struct ibv_wc, slid)" => offset_of!(ibv_wc, slid),
        Eq "offsetof(struct ibv_wc, sl)" => offset_of!(ibv_wc, sl),
        Eq "offsetof(struct ibv_wc, dlid_path_bits)" => offset_of!(ibv_wc, dlid_path_bits),
        Eq "sizeof(struct ibv_sge)" => size_of::<ibv_sge>(),
        Eq "offsetof(struct ibv_sge, length)" => offset_of!(ibv_sge, length),
        Eq "offsetof(struct ibv_sge, lkey)" => offset_of!(ibv_sge, lkey),
        Eq "sizeof(struct ibv_recv_wr)" => size_of::<ibv_recv_wr>(),
        Eq "offsetof(struct ibv_recv_wr, sg_list)" => offset_of!(ibv_recv_wr, sg_list),
        Eq "offsetof(struct ibv_recv_wr, num_sge)" => offset_of!(ibv_recv_wr, num_sge),
        Eq "sizeof(struct ibv_send_wr)" => size_of::<ibv_send_wr>(),
        Eq "offsetof(struct ibv_send_wr, sg_list)" => offset_of!(ibv_send_wr, sg_list),
        Eq "offsetof(struct ibv_send_wr, num_sge)" => offset_of!(ibv_send_wr, num_sge),
        Eq "offsetof(struct ibv_send_wr, opcode)" => offset_of!(ibv_send_wr, opcode),
        Eq "offsetof(struct ibv_send_wr, send_flags)" => offset_of!(ibv_send_wr, send_flags),
        Eq "offsetof(struct ibv_send_wr, wr.ud.ah)" => offset_of!(ibv_send_wr, wr) + offset_of!(rdma_mummy_sys::ud_t, ah),
        Eq "offsetof(struct ibv_send_wr, wr.ud.remote_qpn)" =>
            offset_of!(ibv_send_wr, wr) + offset_of!(rdma_mummy_sys::ud_t, remote_qpn),
        Eq "offsetof(struct ibv_send_wr, wr.ud.remote_qkey)" =>
            offset_of!(ibv_send_wr, wr) + offset_of!(rdma_mummy_sys::ud_t, remote_qkey),
        Eq "sizeof(struct ibv_qp_cap)" => size_of::<ibv_qp_cap>(),
        Eq "sizeof(struct ibv_qp_init_attr)" => size_of::<ibv_qp_init_attr>(),
        Eq "offsetof(struct ibv_qp_init_attr, send_cq)" => offset_of!(ibv_qp_init_attr, send_cq),
        Eq "offsetof(struct ibv_qp_init_attr, recv_cq)" => offset_of!(ibv_qp_init_attr, recv_cq),
        Eq "offsetof(struct ibv_qp_init_attr, cap)" => offset_of!(ibv_qp_init_attr, cap),
        Eq "offsetof(struct ibv_qp_init_attr, qp_type)" => offset_of!(ibv_qp_init_attr, qp_type),
        Eq "sizeof(struct ibv_qp_attr)" => size_of::<ibv_qp_attr>(),
        Eq "offsetof(struct ibv_qp_attr, qkey)" => offset_of!(ibv_qp_attr, qkey),
        Eq "offsetof(struct ibv_qp_attr, sq_psn)" => offset_of!(ibv_qp_attr, sq_psn),
        Eq "offsetof(struct ibv_qp_attr, ah_attr)" => offset_of!(ibv_qp_attr, ah_attr),
        Eq "offsetof(struct ibv_qp_attr, pkey_index)" => offset_of!(ibv_qp_attr, pkey_index),
        Eq "offsetof(struct ibv_qp_attr, port_num)" => offset_of!(ibv_qp_attr, port_num),
        AtLeast "sizeof(struct ibv_port_attr)" => size_of::<ibv_port_attr>(),
        Eq "offsetof(struct ibv_port_attr, state)" => offset_of!(ibv_port_attr, state),
        Eq "offsetof(struct ibv_port_attr, max_mtu)" => offset_of!(ibv_port_attr, max_mtu),
        Eq "offsetof(struct ibv_port_attr, active_mtu)" => offset_of!(ibv_port_attr, active_mtu),
        Eq "offsetof(struct ibv_port_attr, gid_tbl_len)" => offset_of!(ibv_port_attr, gid_tbl_len),
        Eq "offsetof(struct ibv_port_attr, lid)" => offset_of!(ibv_port_attr, lid),
        Eq "offsetof(struct ibv_port_attr, lmc)" => offset_of!(ibv_port_attr, lmc),
        Eq "offsetof(struct ibv_port_attr, phys_state)" => offset_of!(ibv_port_attr, phys_state),
        Eq "offsetof(struct ibv_port_attr, link_layer)" => offset_of!(ibv_port_attr, link_layer),
        Eq "sizeof(struct ibv_device_attr)" => size_of::<ibv_device_attr>(),
        Eq "offsetof(struct ibv_device_attr, max_ah)" => offset_of!(ibv_device_attr, max_ah),
        Eq "offsetof(struct ibv_device_attr, phys_port_cnt)" => offset_of!(ibv_device_attr, phys_port_cnt),
        Eq "offsetof(struct ibv_qp, qp_num)" => offset_of!(ibv_qp, qp_num),
        Eq "offsetof(struct ibv_mr, lkey)" => offset_of!(ibv_mr, lkey),
        Eq "offsetof(struct ibv_context, async_fd)" => offset_of!(ibv_context, async_fd),
        Eq "sizeof(struct ibv_async_event)" => size_of::<RawAsyncEvent>(),
        Eq "_Alignof(struct ibv_async_event)" => align_of::<RawAsyncEvent>(),
        Eq "offsetof(struct ibv_async_event, event_type)" => offset_of!(RawAsyncEvent, event_type),
        Eq "sizeof(((struct ibv_async_event *)0)->event_type)" => size_of::<u32>(),
        Eq "sizeof(struct ibv_grh)" => udah_core::wire::AREA_LEN,
    ]
}
