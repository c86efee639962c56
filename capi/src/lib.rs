//! # udah's C ABI
//!
//! `libudah.so` / `libudah.a` and `include/udah.h` (generated from this file
//! with cbindgen; `tests/header.rs` fails when the checked-in header is
//! stale). The API takes libibverbs' own structs (`struct ibv_wc`,
//! `struct ibv_grh`, `struct ibv_ah_attr`, `struct ibv_pd`, `struct ibv_ah`,
//! from `<infiniband/verbs.h>`) and follows libibverbs' conventions: `0` /
//! `-1` with `errno`, or a pointer / `NULL` with `errno`.
//!
//! ```c
//! struct udah_responder *r = udah_responder_open(ctx, port, pd);
//! struct ibv_ah *ah = udah_create_ah_from_wc(r, &wc, grh);   /* deduplicated */
//! ...
//! udah_destroy_ah(r, ah);                                     /* drops a reference */
//! udah_responder_destroy(r);
//! ```
//!
//! Every entry point is thread safe and catches any panic at the boundary
//! (reported as `ENOTRECOVERABLE`, its message in `udah_last_error()`); no
//! panic crosses into C.
//!
//! The crate's Rust items other than the `udah_*` functions are for
//! `libudah-preload.so` and the tests (`#[doc(hidden)]`).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]
#![allow(non_camel_case_types)]

use core::ffi::c_int;
use core::panic::AssertUnwindSafe;
use std::panic::catch_unwind;

use udah_core::ah::{IbvAhAttr, IbvWc, Profile};
use udah_core::wire::{Evidence, Gid, NetworkType};
use udah_core::{GidEntry, GidType, LinkLayer};

/// Binds each named function to its symbol version (`udah.map` defines the
/// node): `objdump -T libudah.so` lists it as `name@@UDAH_0.1`. Every
/// exported function must be named here or, for a function in a module, in
/// that module (the directive must be in the function's codegen unit;
/// `capi/check-abi.sh` checks).
macro_rules! symbol_versions {
    ($node:literal: $($f:ident),* $(,)?) => {
        // Not in the unit-test harness (not the shipped library): an
        // optimised test build may drop an unreferenced export before the
        // assembler sees its `.symver`, which is an error there.
        $(#[cfg(not(test))] core::arch::global_asm!(concat!(".symver ", stringify!($f), ", ", stringify!($f), "@@", $node, ", remove"));)*
    };
}

symbol_versions!("UDAH_0.1":
    udah_responder_open,
    udah_responder_from_gids,
    udah_responder_destroy,
    udah_init_ah_from_wc,
    udah_create_ah_from_wc,
    udah_create_ah,
    udah_destroy_ah,
    udah_create_ah_batch,
    udah_handle_async_event,
    udah_responder_refresh,
    udah_responder_stats,
    udah_version,
    udah_last_error,
    udah_responder_open_ex,
    udah_responder_stats_ex,
    udah_ah_is_current,
    udah_responder_from_gids_ex,
    udah_responder_event_fd,
    udah_responder_process_events,
);

#[doc(hidden)]
pub mod cq_ex;
pub use cq_ex::{udah_create_ah_from_cq_ex, udah_init_ah_from_cq_ex};
#[doc(hidden)]
pub mod engine;
#[doc(hidden)]
pub mod ffi;
mod fork;

use engine::{AhFailure, AhPtr, Responder, Verbs};
use ffi::{ibv_ah, ibv_ah_attr, ibv_async_event, ibv_context, ibv_gid_entry, ibv_grh, ibv_pd, ibv_wc};

/// The major version of this header (the `0` of soname `libudah.so.0`).
/// The unit tests check it, with the minor and patch, against the crate
/// version and `udah_version()`.
pub const UDAH_VERSION_MAJOR: u32 = 0;
/// The minor version of this header.
pub const UDAH_VERSION_MINOR: u32 = 1;
/// The patch version of this header.
pub const UDAH_VERSION_PATCH: u32 = 0;

/// Profile: libibverbs' `ibv_init_ah_from_wc` (rdma-core 44), bit-exact.
pub const UDAH_PROFILE_LIBIBVERBS: u32 = 0;
/// Profile: the Linux kernel's `ib_init_ah_attr_from_wc` (exact GID types;
/// the route hop limit is left to the kernel at create time and reads 255).
pub const UDAH_PROFILE_KERNEL: u32 = 1;

/// Evidence: none; the profile's own header heuristic (bit-exact).
pub const UDAH_EVIDENCE_NONE: u32 = 0;
/// Evidence: the packet is known to be an InfiniBand GRH.
pub const UDAH_EVIDENCE_IB: u32 = 1;
/// Evidence: the packet is known to be RoCE v1.
pub const UDAH_EVIDENCE_ROCE_V1: u32 = 2;
/// Evidence: the packet is known to be RoCE v2 over IPv4.
pub const UDAH_EVIDENCE_IPV4: u32 = 3;
/// Evidence: the packet is known to be RoCE v2 over IPv6.
pub const UDAH_EVIDENCE_IPV6: u32 = 4;

/// A responder: one port's GID-table snapshot, the AH profiles, and a
/// deduplicating cache of AHs on one protection domain. Opaque; thread safe.
#[derive(Debug)]
pub struct udah_responder(Responder);

/// Counters of a responder (`udah_responder_stats`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct udah_stats {
    /// `udah_init_ah_from_wc` calls.
    pub init_calls: u64,
    /// Of which returned -1.
    pub init_failures: u64,
    /// AH requests (`udah_create_ah_from_wc`, `udah_create_ah`, batch entries).
    pub create_calls: u64,
    /// Of which returned NULL.
    pub create_failures: u64,
    /// `udah_destroy_ah` calls.
    pub destroy_calls: u64,
    /// AH requests served by an AH that already existed (shared).
    pub ah_hits: u64,
    /// Kernel AHs created (`ibv_create_ah`).
    pub kernel_ahs_created: u64,
    /// Kernel AHs destroyed.
    pub kernel_ahs_destroyed: u64,
    /// Kernel AHs alive now (handed out, or cached for reuse).
    pub kernel_ahs_live: u64,
    /// AH references handed out and not yet given back.
    pub ahs_outstanding: u64,
    /// Asynchronous events passed to `udah_handle_async_event`.
    pub events: u64,
    /// GID-table snapshots re-read.
    pub refreshes: u64,
    /// Re-reads that failed (the previous snapshot stays in use).
    pub refresh_failures: u64,
    /// Generation of the snapshot in use (1 for the first).
    pub gid_generation: u64,
    /// The AH table's capacity (`udah_config.ah_slots`, rounded up).
    /// `udah_stats_ex` only (as every field below): `udah_responder_stats`
    /// writes the fields above.
    pub ah_slots: u64,
    /// Network events read by `udah_responder_process_events`.
    pub net_events: u64,
    /// Of which a neighbour now resolving to another MAC.
    pub mac_changes: u64,
    /// AHs retired because their destination's MAC changed (handles out
    /// stay valid until given back; `udah_ah_is_current` says 0).
    pub retired_by_events: u64,
    /// AH requests from completions refused by `udah_config.allow`.
    pub refused: u64,
}

/// The bytes of `struct udah_stats` as version 0.1 defined it, which
/// `udah_responder_stats` writes whatever the struct has grown to.
const STATS_V0_1: usize = 14 * 8;

fn set_errno(e: i32) {
    // SAFETY: `__errno_location` has no preconditions.
    let slot = unsafe { libc::__errno_location() };
    // SAFETY: it returns the calling thread's errno slot, valid for writes
    // for the thread's lifetime.
    unsafe { slot.write(e) };
}

std::thread_local! {
    /// The sentence of this thread's last failure (`udah_last_error`).
    static LAST_ERROR: core::cell::RefCell<std::ffi::CString> = core::cell::RefCell::new(std::ffi::CString::default());
}

/// Records `msg` as this thread's last failure (a NUL in it ends it).
fn set_last_error(msg: &str) {
    let text = msg.split('\0').next().unwrap_or_default();
    let c = std::ffi::CString::new(text).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|l| l.try_borrow_mut().map(|mut l| *l = c));
}

/// Runs `f`, turning a panic into `fail` with `errno = ENOTRECOVERABLE` and
/// the panic's message as the last error.
fn guard<R>(fail: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        set_last_error(&format!("internal error (a bug in libudah): {what}"));
        set_errno(libc::ENOTRECOVERABLE);
        fail
    })
}

/// The sentence for an errno without a more specific one.
fn describe(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

fn fail_int(e: i32) -> c_int {
    fail_int_msg(e, &describe(e))
}

fn fail_null<T>(e: i32) -> *mut T {
    fail_null_msg(e, &describe(e))
}

fn fail_int_msg(e: i32, msg: &str) -> c_int {
    set_last_error(msg);
    set_errno(e);
    -1
}

fn fail_null_msg<T>(e: i32, msg: &str) -> *mut T {
    set_last_error(msg);
    set_errno(e);
    core::ptr::null_mut()
}

/// The core's completion from `struct ibv_wc`.
#[doc(hidden)]
pub fn wc_from_c(wc: &ibv_wc) -> IbvWc {
    IbvWc {
        wc_flags: wc.wc_flags,
        slid: wc.slid,
        sl: wc.sl,
        dlid_path_bits: wc.dlid_path_bits,
        src_qp: wc.src_qp,
        pkey_index: wc.pkey_index,
    }
}

fn evidence_from(e: u32) -> Option<Evidence> {
    Some(match e {
        UDAH_EVIDENCE_NONE => Evidence::None,
        UDAH_EVIDENCE_IB => Evidence::NetworkType(NetworkType::Ib),
        UDAH_EVIDENCE_ROCE_V1 => Evidence::NetworkType(NetworkType::RoceV1),
        UDAH_EVIDENCE_IPV4 => Evidence::NetworkType(NetworkType::Ipv4),
        UDAH_EVIDENCE_IPV6 => Evidence::NetworkType(NetworkType::Ipv6),
        _ => return None,
    })
}

/// `p` as a reference, `None` when NULL.
///
/// # Safety
/// `p` must be NULL or valid for reads of a `T` for `'a`.
unsafe fn opt<'a, T>(p: *const T) -> Option<&'a T> {
    // SAFETY: forwarded contract.
    unsafe { p.as_ref() }
}

/// The responder behind `r`, `None` when NULL.
///
/// # Safety
/// `r` must be NULL or a live responder for `'a`.
unsafe fn resp<'a>(r: *const udah_responder) -> Option<&'a Responder> {
    // SAFETY: forwarded contract.
    unsafe { opt(r) }.map(|r| &r.0)
}

/// Boxes a responder for C.
fn into_c(r: Responder) -> *mut udah_responder {
    Box::into_raw(Box::new(udah_responder(r)))
}

/// Creates a responder for port `port_num` of the application's context
/// `context`, whose AHs are created on `pd` (the PD of the QP that sends
/// with them; may be NULL to only compute attributes). Both are borrowed:
/// udah never closes or frees them, and they must outlive the responder.
/// Reads the port's GID table once (`ibv_query_port`, then one
/// `ibv_query_gid_ex` per slot); pass every `ibv_async_event` to
/// `udah_handle_async_event` so that it is re-read on a change.
///
/// Returns NULL with errno: `EINVAL` (NULL context), `E2BIG` (more than 1024
/// GID slots), or the errno of the failed query.
///
/// # Safety
/// `context` must be a live `ibv_context` and `pd` NULL or a live PD of it,
/// both outliving the responder.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_responder_open(
    context: *mut ibv_context,
    port_num: u8,
    pd: *mut ibv_pd,
) -> *mut udah_responder {
    guard(core::ptr::null_mut(), || {
        // SAFETY: forwarded contract.
        match unsafe { Responder::open(context, port_num, pd, Verbs::libibverbs()) } {
            Ok(r) => into_c(r),
            Err(e) => fail_null(e.0),
        }
    })
}

/// Creates a responder from an explicit GID table (for tests, or a caller
/// with its own GID source): port `port_num`, `link_layer` as
/// `enum ibv_port_link_layer` (`IBV_LINK_LAYER_ETHERNET` or InfiniBand),
/// `gid_tbl_len` slots of which the `n_gids` entries of `gids` are the valid
/// ones (`gid_index` and `gid_type` are read; every other slot is empty).
/// `pd` may be NULL (attributes only). `udah_handle_async_event` cannot
/// refresh such a responder (`EOPNOTSUPP`).
///
/// Returns NULL with errno (and a `udah_last_error` sentence), checked
/// before anything is allocated: `EINVAL` (port 0, a link layer other than
/// 0, 1 or 2, `n_gids` above `gid_tbl_len`, NULL `gids` with `n_gids` > 0,
/// an index at or above `gid_tbl_len`, an unknown type, a zero GID),
/// `EEXIST` (an index twice), `E2BIG` (`gid_tbl_len` above 1024).
///
/// # Safety
/// `gids` must point to `n_gids` entries (or be NULL when `n_gids` is 0);
/// `pd` must be NULL or a live PD that outlives the responder.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_responder_from_gids(
    port_num: u8,
    link_layer: u8,
    gid_tbl_len: u32,
    gids: *const ibv_gid_entry,
    n_gids: usize,
    pd: *mut ibv_pd,
) -> *mut udah_responder {
    // SAFETY: forwarded contract; a NULL configuration is the defaults.
    unsafe { udah_responder_from_gids_ex(port_num, link_layer, gid_tbl_len, gids, n_gids, pd, core::ptr::null()) }
}

/// `udah_responder_from_gids` with options (`cfg` may be NULL for the
/// defaults; `gid_slots` is not used: the table is `gid_tbl_len` long).
/// Returns NULL with errno as `udah_responder_from_gids`, and `EINVAL` or
/// `E2BIG` for a bad `cfg` as `udah_responder_open_ex`.
///
/// # Safety
/// As `udah_responder_from_gids`; `cfg` must be NULL or valid for reads of
/// `cfg->size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_responder_from_gids_ex(
    port_num: u8,
    link_layer: u8,
    gid_tbl_len: u32,
    gids: *const ibv_gid_entry,
    n_gids: usize,
    pd: *mut ibv_pd,
    cfg: *const udah_config,
) -> *mut udah_responder {
    guard(core::ptr::null_mut(), || {
        // SAFETY: forwarded contract.
        let config = match unsafe { read_config(cfg) } {
            Ok(c) => c,
            Err((e, msg)) => return fail_null_msg(e, &msg),
        };
        if port_num == 0 {
            return fail_null_msg(libc::EINVAL, "port 0 does not exist (ports are numbered from 1)");
        }
        let ll = match link_layer {
            0 | 1 => LinkLayer::Infiniband,
            2 => LinkLayer::Ethernet,
            other => {
                let msg =
                    format!("link layer {other} is not IBV_LINK_LAYER_UNSPECIFIED (0), INFINIBAND (1) or ETHERNET (2)");
                return fail_null_msg(libc::EINVAL, &msg);
            }
        };
        if gid_tbl_len as usize > engine::GID_CAP {
            let msg = format!("GID table has {gid_tbl_len} slots, above the responder's {}", engine::GID_CAP);
            return fail_null_msg(libc::E2BIG, &msg);
        }
        if n_gids > gid_tbl_len as usize {
            let msg = format!("{n_gids} GID entries for a table of {gid_tbl_len} slots");
            return fail_null_msg(libc::EINVAL, &msg);
        }
        let list: &[ibv_gid_entry] = if n_gids == 0 {
            &[]
        } else if gids.is_null() {
            return fail_null_msg(libc::EINVAL, "gids is NULL with n_gids above 0");
        } else {
            // SAFETY: `gids` points to `n_gids` entries (the contract).
            unsafe { core::slice::from_raw_parts(gids, n_gids) }
        };
        let mut entries = Vec::with_capacity(list.len());
        for g in list {
            let Some(ty) = GidType::from_raw(g.gid_type) else {
                let msg = format!("GID index {} has unknown type {}", g.gid_index, g.gid_type);
                return fail_null_msg(libc::EINVAL, &msg);
            };
            entries.push((g.gid_index, GidEntry::new(Gid(g.gid.raw), ty).with_ifindex(g.ndev_ifindex)));
        }
        let options = config;
        let made = engine::gids_from_list(port_num, ll, gid_tbl_len, entries).and_then(|t| {
            // SAFETY: forwarded contract on `pd`.
            unsafe { Responder::from_gids_with(t, pd, Verbs::libibverbs(), options) }
        });
        match made {
            Ok(r) => into_c(r),
            Err(e) => fail_null(e.0),
        }
    })
}

/// Options of `udah_responder_open_ex`. Set `size` to
/// `sizeof(struct udah_config)`: the library reads only the first `size`
/// bytes (a caller compiled against an older, shorter struct gets the
/// defaults for the fields it lacks), and fields are only ever appended.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct udah_config {
    /// `sizeof(struct udah_config)` as the caller compiled it; at least 8
    /// (this field and `ah_slots`).
    pub size: u32,
    /// AH-table slots: 0 for 1024, else a power of two up to 2²¹
    /// (2097152), rounded up to the next capacity the library is built for
    /// (1024, 4096, 16384, 65536, 262144, 1048576, 2097152); the slots are
    /// allocated at open (64 bytes each). `udah_stats.ah_slots` tells the
    /// capacity in use. A table stays below about 98 % full before it
    /// evicts an AH nobody holds.
    pub ah_slots: u32,
    /// GID-snapshot slots: 0 for the port's `gid_tbl_len`. This release
    /// validates it (at most 1024) and snapshots up to 1024 slots (a larger
    /// port table is `E2BIG`).
    pub gid_slots: u32,
    /// Reserved: validated (any value) but not yet used.
    pub max_pending_per_peer: u32,
    /// Reserved: validated (any value) but not yet used.
    pub max_pending_total: u32,
    /// How many entries `allow` has (at most 8); 0 admits every source.
    pub n_allow: u32,
    /// The admission allow-list: only completions whose source GID lies in
    /// one of these prefixes may create an AH (or take one from the cache)
    /// through `udah_create_ah_from_wc` and `udah_create_ah_batch`; the
    /// others fail with `EACCES` and create nothing, evict nothing.
    /// `udah_init_ah_from_wc` and `udah_create_ah` (the application's own
    /// attribute) are not filtered. Read at open only (may be freed after).
    pub allow: *const udah_gid_prefix,
}

/// A source-GID prefix of `udah_config.allow`: the GIDs whose first `len`
/// bits (0 to 128) are `raw`'s. An IPv4 subnet `a.b.c.d/n` is the
/// IPv4-mapped GID `::ffff:a.b.c.d` with `len` 96 + n.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct udah_gid_prefix {
    /// The GID, network byte order (as `union ibv_gid`'s `raw`).
    pub raw: [u8; 16],
    /// The prefix length in bits.
    pub len: u32,
}

impl Default for udah_config {
    fn default() -> udah_config {
        udah_config {
            size: core::mem::size_of::<udah_config>() as u32,
            ah_slots: 0,
            gid_slots: 0,
            max_pending_per_peer: 0,
            max_pending_total: 0,
            n_allow: 0,
            allow: core::ptr::null(),
        }
    }
}

/// A validated configuration, as the engine takes it.
type Config = engine::Options;

/// The configuration in `cfg` (NULL: the defaults), reading `cfg->size`
/// bytes at most, or the errno and sentence of its first bad field.
///
/// # Safety
/// `cfg` must be NULL or valid for reads of `cfg->size` bytes (at least the
/// `size` field).
unsafe fn read_config(cfg: *const udah_config) -> Result<Config, (i32, String)> {
    let mut c = udah_config::default();
    if cfg.is_null() {
        return Ok(Config::default());
    }
    // SAFETY: `cfg` is valid for reads of at least its `size` field.
    let size = unsafe { cfg.cast::<u32>().read_unaligned() } as usize;
    if size < 8 {
        return Err((libc::EINVAL, format!("udah_config.size is {size}, below the 8 bytes of size and ah_slots")));
    }
    let n = size.min(core::mem::size_of::<udah_config>());
    // SAFETY: `cfg` is valid for reads of `size` >= `n` bytes, `c` for
    // writes of `n` <= its size; they do not overlap.
    unsafe { core::ptr::copy_nonoverlapping(cfg.cast::<u8>(), (&raw mut c).cast::<u8>(), n) };
    let ah_slots = match c.ah_slots as usize {
        0 => engine::AH_CAP,
        n if n.is_power_of_two() && n <= engine::MAX_AH_SLOTS => {
            udah_core::heap::ah_slots_at_least(n).unwrap_or(engine::MAX_AH_SLOTS)
        }
        n => {
            let msg = format!("ah_slots {n} is not 0 or a power of two up to {}", engine::MAX_AH_SLOTS);
            return Err((libc::EINVAL, msg));
        }
    };
    if c.gid_slots as usize > engine::GID_CAP {
        return Err((libc::E2BIG, format!("gid_slots {} is above the responder's {}", c.gid_slots, engine::GID_CAP)));
    }
    // SAFETY: `allow` holds `n_allow` entries when not NULL (the contract).
    let admission = unsafe { read_allow(c.allow, c.n_allow) }?;
    Ok(Config { ah_slots, admission })
}

/// The admission policy of `udah_config.allow`: every source when `n` is 0.
///
/// # Safety
/// `allow` must be NULL or point to `n` entries.
unsafe fn read_allow(allow: *const udah_gid_prefix, n: u32) -> Result<udah_core::responder::Admission, (i32, String)> {
    use udah_core::responder::{Admission, MAX_RULES};
    if n == 0 {
        return Ok(Admission::allow_all());
    }
    if n as usize > MAX_RULES {
        return Err((libc::EINVAL, format!("n_allow {n} is above the {MAX_RULES} prefixes a responder checks")));
    }
    if allow.is_null() {
        return Err((libc::EINVAL, format!("allow is NULL with n_allow {n}")));
    }
    // SAFETY: `allow` points to `n` entries (the contract), checked non-NULL.
    let list = unsafe { core::slice::from_raw_parts(allow, n as usize) };
    let mut a = Admission::allow_all();
    for (i, p) in list.iter().enumerate() {
        let len = u8::try_from(p.len).ok().filter(|&l| l <= 128);
        let Some(len) = len else {
            return Err((libc::EINVAL, format!("allow[{i}].len is {}, above 128 bits", p.len)));
        };
        a = a.allow_gid_prefix(Gid(p.raw), len).map_err(|e| (libc::EINVAL, format!("allow[{i}]: {e}")))?;
    }
    Ok(a)
}

/// `udah_responder_open` with options (`cfg` may be NULL for the defaults).
/// Returns NULL with errno: `EINVAL` (`cfg->size` below 8, a bad
/// `ah_slots`, NULL context), `E2BIG` (`gid_slots` or the port's table above
/// 1024), or the errno of the failed query; `udah_last_error` says which.
///
/// # Safety
/// As `udah_responder_open`; `cfg` must be NULL or valid for reads of
/// `cfg->size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_responder_open_ex(
    context: *mut ibv_context,
    port_num: u8,
    pd: *mut ibv_pd,
    cfg: *const udah_config,
) -> *mut udah_responder {
    guard(core::ptr::null_mut(), || {
        // SAFETY: forwarded contract.
        let config = match unsafe { read_config(cfg) } {
            Ok(c) => c,
            Err((e, msg)) => return fail_null_msg(e, &msg),
        };
        if context.is_null() {
            return fail_null_msg(libc::EINVAL, "context is NULL");
        }
        if port_num == 0 {
            return fail_null_msg(libc::EINVAL, "port 0 does not exist (ports are numbered from 1)");
        }
        let options = config;
        // SAFETY: forwarded contract.
        match unsafe { Responder::open_with(context, port_num, pd, Verbs::libibverbs(), options) } {
            Ok(r) => into_c(r),
            Err(e) => fail_null(e.0),
        }
    })
}

/// Destroys a responder and every AH it still caches. Returns -1 with
/// `EBUSY` (and destroys nothing) while AHs it handed out have not been
/// given back with `udah_destroy_ah`, `EINVAL` for NULL.
///
/// # Safety
/// `r` must be NULL or a responder not yet destroyed, used by no other thread
/// during the call nor afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_responder_destroy(r: *mut udah_responder) -> c_int {
    guard(-1, || {
        // SAFETY: `r` is NULL or live (the contract).
        let Some(resp) = (unsafe { resp(r) }) else { return fail_int(libc::EINVAL) };
        if let Err(e) = resp.close() {
            return fail_int(e);
        }
        // SAFETY: `r` came from `Box::into_raw` and is not used again.
        drop(unsafe { Box::from_raw(r) });
        0
    })
}

/// `ibv_init_ah_from_wc` for the responder's port: fills `ah_attr` from the
/// completion `wc` and the 40 bytes `grh` in front of its payload. With
/// `UDAH_PROFILE_LIBIBVERBS` and `UDAH_EVIDENCE_NONE` the result is
/// bit-exact with libibverbs 44, including what it leaves in `ah_attr` on
/// failure, in a few nanoseconds instead of two system calls per GID slot.
/// `UDAH_PROFILE_KERNEL` reproduces the kernel's rules instead; an
/// `UDAH_EVIDENCE_*` other than NONE gives the header type and replaces the
/// heuristic.
///
/// Returns 0, or -1 with errno: `EINVAL` (multicast destination, local GID
/// not found, bad argument), `EPROTONOSUPPORT` (no IPv4/IPv6/GRH header,
/// unknown next header), `EPROTO` (evidence contradicts the header),
/// `ENOENT`, `EPROTOTYPE` or `ENODATA` (kernel profile), `EFAULT` (NULL
/// `grh`: libibverbs would crash; `ah_attr` is zeroed).
///
/// # Safety
/// `r` must be a live responder; `wc`, `grh` (or NULL) and `ah_attr` must be
/// valid for reads / writes of their structs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_init_ah_from_wc(
    r: *mut udah_responder,
    wc: *const ibv_wc,
    grh: *const ibv_grh,
    profile: u32,
    evidence: u32,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    guard(-1, || {
        // SAFETY: `wc` is NULL or valid (the contract).
        let Some(wc) = (unsafe { opt(wc) }) else { return fail_int(libc::EINVAL) };
        // SAFETY: forwarded contract.
        unsafe { init_ah(r, &wc_from_c(wc), grh, profile, evidence, ah_attr) }
    })
}

/// The body of `udah_init_ah_from_wc` (and of `udah_init_ah_from_cq_ex`)
/// on the core's completion.
///
/// # Safety
/// As `udah_init_ah_from_wc`.
unsafe fn init_ah(
    r: *mut udah_responder,
    wc: &IbvWc,
    grh: *const ibv_grh,
    profile: u32,
    evidence: u32,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    {
        // SAFETY: `r` is NULL or live (the contract).
        let Some(resp) = (unsafe { resp(r) }) else { return fail_int(libc::EINVAL) };
        if ah_attr.is_null() {
            return fail_int(libc::EINVAL);
        }
        let profile = match profile {
            UDAH_PROFILE_LIBIBVERBS => Profile::Libibverbs,
            UDAH_PROFILE_KERNEL => Profile::Kernel,
            _ => return fail_int(libc::EINVAL),
        };
        let Some(evidence) = evidence_from(evidence) else { return fail_int(libc::EINVAL) };
        // SAFETY: `grh` is NULL or valid for reads (the contract).
        let area = unsafe { opt(grh) }.map(|g| &g.bytes);
        let (attr, err) = resp.init_ah_from_wc(wc, area, profile, evidence);
        // SAFETY: `ah_attr` is valid for writes of the 32-byte struct.
        unsafe { ah_attr.write(ibv_ah_attr { attr }) };
        if err == 0 { 0 } else { fail_int(err) }
    }
}

fn ah_result(r: Result<AhPtr, AhFailure>) -> *mut ibv_ah {
    match r {
        Ok(ah) => ah.ptr(),
        Err(e) => fail_null(e.errno()),
    }
}

/// `ibv_create_ah_from_wc` on the responder's PD, deduplicated: the
/// attribute is computed as `udah_init_ah_from_wc` does (libibverbs profile),
/// and completions that give the same attribute share one kernel AH
/// (`ibv_create_ah` once; later calls take a reference, without a system
/// call). Every AH returned must be given back with `udah_destroy_ah` (not
/// `ibv_destroy_ah`), once per return.
///
/// Returns NULL with errno: as `udah_init_ah_from_wc`, `EINVAL` also for a
/// responder without PD or an SL above 15, `ENOMEM` (cache full of AHs in
/// use), or `ibv_create_ah`'s errno.
///
/// # Safety
/// `r` must be a live responder; `wc` and `grh` must be valid for reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_create_ah_from_wc(
    r: *mut udah_responder,
    wc: *const ibv_wc,
    grh: *const ibv_grh,
) -> *mut ibv_ah {
    guard(core::ptr::null_mut(), || {
        // SAFETY: `r` and `wc` are NULL or valid (the contract).
        let (Some(resp), Some(wc)) = (unsafe { resp(r) }, unsafe { opt(wc) }) else { return fail_null(libc::EINVAL) };
        // SAFETY: `grh` is NULL or valid for reads (the contract).
        let Some(grh) = (unsafe { opt(grh) }) else { return fail_null(libc::EFAULT) };
        ah_result(resp.create_ah_from_wc(&wc_from_c(wc), &grh.bytes))
    })
}

/// `ibv_create_ah` on the responder's PD, deduplicated like
/// `udah_create_ah_from_wc` (for attributes from the kernel profile or the
/// application). Give it back with `udah_destroy_ah`.
///
/// # Safety
/// `r` must be a live responder; `ah_attr` must be valid for reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_create_ah(r: *mut udah_responder, ah_attr: *const ibv_ah_attr) -> *mut ibv_ah {
    guard(core::ptr::null_mut(), || {
        // SAFETY: `r` and `ah_attr` are NULL or valid (the contract).
        let (Some(resp), Some(attr)) = (unsafe { resp(r) }, unsafe { opt(ah_attr) }) else {
            return fail_null(libc::EINVAL);
        };
        let attr: IbvAhAttr = attr.attr;
        ah_result(resp.create_ah(&attr))
    })
}

/// Gives back one reference to an AH from `udah_create_ah_from_wc`,
/// `udah_create_ah` or `udah_create_ah_batch`. The kernel AH stays cached for
/// reuse while the responder lives (destroyed with it, or when its GID
/// changes), so destroy the responder before deallocating its PD.
///
/// Returns 0, or -1 with `EINVAL` for an AH this responder did not hand out
/// (or has already been given back as many times as it was handed out).
///
/// # Safety
/// `r` must be a live responder. `ah` is only compared, never dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_destroy_ah(r: *mut udah_responder, ah: *mut ibv_ah) -> c_int {
    guard(-1, || {
        // SAFETY: `r` is NULL or live (the contract).
        let Some(resp) = (unsafe { resp(r) }) else { return fail_int(libc::EINVAL) };
        if ah.is_null() {
            return fail_int(libc::EINVAL);
        }
        match resp.destroy_ah(AhPtr(ah.expose_provenance() as u64)) {
            Ok(()) => 0,
            Err(e) => fail_int(e),
        }
    })
}

/// Whether an AH this responder handed out (and that has not been given
/// back) is still the current AH of its peer. A retired AH (its GID changed
/// or its entry was replaced) stays valid until given back with
/// `udah_destroy_ah`; a holder that sees 0 can ask for a new one.
///
/// Returns 1 (current), 0 (retired), or -1 with `EINVAL` for a NULL
/// responder or an AH this responder has not out.
///
/// # Safety
/// `r` must be NULL or a live responder. `ah` is only compared, never
/// dereferenced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_ah_is_current(r: *mut udah_responder, ah: *mut ibv_ah) -> c_int {
    guard(-1, || {
        // SAFETY: `r` is NULL or live (the contract).
        let Some(resp) = (unsafe { resp(r) }) else { return fail_int(libc::EINVAL) };
        if ah.is_null() {
            return fail_int(libc::EINVAL);
        }
        match resp.is_current(AhPtr(ah.expose_provenance() as u64)) {
            Ok(c) => c_int::from(c),
            Err(e) => fail_int(e),
        }
    })
}

/// `udah_create_ah_from_wc` for a polled CQ array: `wcs[i]` with the 40
/// bytes at `grhs[i]`, for i < `n`. `ahs[i]` receives the AH or NULL; when
/// `errnos` is not NULL, `errnos[i]` receives 0 or the errno of entry i.
/// Completions whose status is not `IBV_WC_SUCCESS` get NULL and `EINVAL`.
///
/// Returns the number of AHs created (give each back with
/// `udah_destroy_ah`), or -1 with `EINVAL` for a NULL array or a negative
/// `n`, or a NULL responder (also when `n` is 0).
///
/// # Safety
/// `r` must be a live responder; `wcs`, `grhs` and `ahs` (and `errnos` when
/// not NULL) must hold `n` elements; each `grhs[i]` must be valid for reads
/// (or NULL, which gives `EFAULT` for that entry).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_create_ah_batch(
    r: *mut udah_responder,
    wcs: *const ibv_wc,
    grhs: *const *const ibv_grh,
    n: c_int,
    ahs: *mut *mut ibv_ah,
    errnos: *mut c_int,
) -> c_int {
    guard(-1, || {
        let Ok(n) = usize::try_from(n) else { return fail_int_msg(libc::EINVAL, "batch size is negative") };
        // SAFETY: `r` is NULL or live (the contract).
        let Some(resp) = (unsafe { resp(r) }) else { return fail_int_msg(libc::EINVAL, "responder is NULL") };
        if n == 0 {
            return 0;
        }
        if wcs.is_null() || grhs.is_null() || ahs.is_null() {
            return fail_int(libc::EINVAL);
        }
        // SAFETY: non-null, and the array holds `n` elements (the contract).
        let wcs = unsafe { core::slice::from_raw_parts(wcs, n) };
        // SAFETY: as for `wcs`.
        let grhs = unsafe { core::slice::from_raw_parts(grhs, n) };
        // SAFETY: as for `wcs`, valid for writes, and aliasing neither.
        let out = unsafe { core::slice::from_raw_parts_mut(ahs, n) };
        let mut made = 0;
        // On the stack, a chunk at a time: the engine stages its look-ups
        // when the table is past the caches.
        const CHUNK: usize = 64;
        let mut reqs = [(IbvWc::default(), None::<&udah_core::wire::Area>); CHUNK];
        let mut res = [Err(AhFailure::Table(0)); CHUNK];
        for start in (0..n).step_by(CHUNK) {
            let m = CHUNK.min(n - start);
            let (Some(w), Some(g)) = (wcs.get(start..start + m), grhs.get(start..start + m)) else { break };
            for (req, (wc, g)) in reqs.iter_mut().zip(w.iter().zip(g)) {
                // SAFETY: each `grhs[i]` is NULL or valid for reads.
                let area = unsafe { opt(*g) }.map(|g| &g.bytes);
                // A completion in error is refused before its words: EINVAL.
                *req = (wc_from_c(wc), if wc.status != 0 { None } else { area });
            }
            let (Some(reqs), Some(res)) = (reqs.get(..m), res.get_mut(..m)) else { break };
            resp.create_ah_batch(reqs, res);
            for (k, (r, (wc, g))) in res.iter().zip(w.iter().zip(g)).enumerate() {
                let i = start + k;
                let r = match r {
                    // The engine's `EFAULT` for a missing area; a failed
                    // completion is `EINVAL` whatever its area.
                    Err(_) if wc.status != 0 => Err(AhFailure::Attr(libc::EINVAL)),
                    Err(_) if g.is_null() => Err(AhFailure::Attr(libc::EFAULT)),
                    r => *r,
                };
                let (ah, e) = match r {
                    Ok(ah) => {
                        made += 1;
                        (ah.ptr(), 0)
                    }
                    Err(e) => (core::ptr::null_mut(), e.errno()),
                };
                if let Some(slot) = out.get_mut(i) {
                    *slot = ah;
                }
                if !errnos.is_null() {
                    // SAFETY: `errnos` holds `n` elements and `i < n`.
                    let p = unsafe { errnos.add(i) };
                    // SAFETY: in bounds of the caller's array, valid for writes.
                    unsafe { p.write(e) };
                }
            }
        }
        made
    })
}

/// Tells the responder about an asynchronous event the application read
/// with `ibv_get_async_event` (call it before `ibv_ack_async_event`). On
/// `IBV_EVENT_GID_CHANGE`, a port, LID, P_Key or SM event, or a client
/// re-register, of the responder's port, the GID table is re-read and AHs
/// built on a changed entry are retired (new requests get fresh AHs; AHs
/// already handed out stay valid until given back).
///
/// Returns 1 when the snapshot was re-read, 0 when the event does not
/// concern it, or -1 with errno (`EOPNOTSUPP` for a responder made with
/// `udah_responder_from_gids`, or the failed query's errno; the previous
/// snapshot then stays in use).
///
/// # Safety
/// `r` must be a live responder and `event` valid for reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_handle_async_event(r: *mut udah_responder, event: *const ibv_async_event) -> c_int {
    guard(-1, || {
        // SAFETY: `r` and `event` are NULL or valid (the contract).
        let (Some(resp), Some(&ev)) = (unsafe { resp(r) }, unsafe { opt(event) }) else {
            return fail_int(libc::EINVAL);
        };
        let is_port_event = matches!(
            ev.event_type,
            ffi::IBV_EVENT_PORT_ACTIVE
                | ffi::IBV_EVENT_PORT_ERR
                | ffi::IBV_EVENT_LID_CHANGE
                | ffi::IBV_EVENT_PKEY_CHANGE
                | ffi::IBV_EVENT_SM_CHANGE
                | ffi::IBV_EVENT_CLIENT_REREGISTER
                | ffi::IBV_EVENT_GID_CHANGE
        );
        // SAFETY: for port events libibverbs fills `element.port_num`; the
        // union's every bit pattern is a valid `i32`.
        let raw_port = unsafe { ev.element.port_num };
        let port = is_port_event.then_some(raw_port);
        match resp.handle_event(ev.event_type, port) {
            Ok(refreshed) => c_int::from(refreshed),
            Err(e) => fail_int(e),
        }
    })
}

/// A file descriptor that becomes readable when network events that can
/// make the responder's AHs stale wait (a neighbour's MAC, a local MAC or
/// address changed): add it to `poll`/`epoll`, and call
/// `udah_responder_process_events` when it is readable. For programs
/// without an event loop of their own; the context's asynchronous events
/// stay the application's (pass them to `udah_handle_async_event`).
///
/// The first call opens it (an rtnetlink socket, which then asks the kernel
/// for its neighbour table, so that a peer resolved before it opened is
/// known); later calls return the same descriptor, which the responder owns
/// and closes when destroyed (do not close it). Returns the descriptor, or
/// -1 with errno (`EINVAL` for a NULL responder, or the socket's errno).
///
/// # Safety
/// `r` must be NULL or a live responder.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_responder_event_fd(r: *mut udah_responder) -> c_int {
    guard(-1, || {
        // SAFETY: `r` is NULL or live (the contract).
        let Some(resp) = (unsafe { resp(r) }) else { return fail_int_msg(libc::EINVAL, "responder is NULL") };
        match resp.event_fd() {
            Ok(fd) => fd,
            Err(e) => fail_int_msg(e, &format!("cannot open the rtnetlink socket: {}", describe(e))),
        }
    })
}

/// Reads every network event waiting on `udah_responder_event_fd` (never
/// blocks) and applies it: a neighbour whose MAC changed has its AHs
/// retired (only those; the same MAC, or a first sighting, retires
/// nothing; handles out stay valid until given back, and
/// `udah_ah_is_current` says 0 for them); a local MAC or address change
/// re-reads the GID table. Returns the number of events read (0 when none,
/// or before the first `udah_responder_event_fd`), or -1 with errno:
/// `EINVAL` for a NULL responder, `ENOBUFS` when the kernel dropped events
/// (the ones read were applied; a MAC change may have been lost, so an
/// application that cannot miss one re-creates the AHs it holds).
///
/// # Safety
/// `r` must be NULL or a live responder.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_responder_process_events(r: *mut udah_responder) -> c_int {
    guard(-1, || {
        // SAFETY: `r` is NULL or live (the contract).
        let Some(resp) = (unsafe { resp(r) }) else { return fail_int_msg(libc::EINVAL, "responder is NULL") };
        match resp.process_events() {
            Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
            Err(e) => fail_int_msg(e, &format!("reading network events: {}", describe(e))),
        }
    })
}

/// Re-reads the GID table now (what `udah_handle_async_event` does on a GID
/// change). Returns 0, or -1 with errno as `udah_handle_async_event`.
///
/// # Safety
/// `r` must be a live responder.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_responder_refresh(r: *mut udah_responder) -> c_int {
    guard(-1, || {
        // SAFETY: `r` is NULL or live (the contract).
        let Some(resp) = (unsafe { resp(r) }) else { return fail_int(libc::EINVAL) };
        match resp.refresh() {
            Ok(()) => 0,
            Err(e) => fail_int(e),
        }
    })
}

/// Copies the responder's first 14 counters (the struct as version 0.1
/// defined it, up to `gid_generation`) into `stats`; later counters need
/// `udah_responder_stats_ex`. Returns 0, or -1 with `EINVAL` for a NULL
/// argument.
///
/// # Safety
/// `r` must be a live responder and `stats` valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_responder_stats(r: *const udah_responder, stats: *mut udah_stats) -> c_int {
    guard(-1, || {
        // SAFETY: `r` is NULL or live (the contract).
        let Some(resp) = (unsafe { resp(r) }) else { return fail_int(libc::EINVAL) };
        if stats.is_null() {
            return fail_int(libc::EINVAL);
        }
        let c = resp.stats();
        // SAFETY: `stats` is valid for writes of the version-0.1 struct (the
        // contract: a caller compiled against any header has at least its
        // 14 counters), `c` for reads of more; they do not overlap.
        unsafe { core::ptr::copy_nonoverlapping((&raw const c).cast::<u8>(), stats.cast::<u8>(), STATS_V0_1) };
        0
    })
}

/// `udah_responder_stats` for a caller that passes the size of its
/// `struct udah_stats` (`sizeof(struct udah_stats)` as it was compiled):
/// the first `size` bytes of the counters are written (an older, shorter
/// struct gets the counters it has; counters are only ever appended), at
/// most `sizeof(struct udah_stats)`. Returns 0, or -1 with `EINVAL` for a
/// NULL argument or a `size` that is not a multiple of 8.
///
/// # Safety
/// `r` must be a live responder and `stats` valid for writes of `size`
/// bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn udah_responder_stats_ex(
    r: *const udah_responder,
    stats: *mut udah_stats,
    size: usize,
) -> c_int {
    guard(-1, || {
        // SAFETY: `r` is NULL or live (the contract).
        let Some(resp) = (unsafe { resp(r) }) else { return fail_int_msg(libc::EINVAL, "responder is NULL") };
        if stats.is_null() || !size.is_multiple_of(8) {
            return fail_int_msg(libc::EINVAL, &format!("stats is NULL or size {size} is not a multiple of 8"));
        }
        let c = resp.stats();
        let n = size.min(core::mem::size_of::<udah_stats>());
        // SAFETY: `stats` is valid for writes of `size` >= `n` bytes, `c`
        // for reads of `n`; they do not overlap.
        unsafe { core::ptr::copy_nonoverlapping((&raw const c).cast::<u8>(), stats.cast::<u8>(), n) };
        0
    })
}

/// A sentence describing the last failure of a udah call in the calling
/// thread (for a person, not to be parsed), e.g. "GID table has 2048 slots,
/// above the responder's 1024"; an empty string before any failure. The
/// pointer stays valid until this thread's next failing udah call. A caught
/// internal panic is reported as `ENOTRECOVERABLE` with its message here.
#[unsafe(no_mangle)]
pub extern "C" fn udah_last_error() -> *const core::ffi::c_char {
    LAST_ERROR.try_with(|l| l.try_borrow().map(|l| l.as_ptr()).unwrap_or(c"".as_ptr())).unwrap_or(c"".as_ptr())
}

/// The library version, `"MAJOR.MINOR.PATCH"` (static storage).
#[unsafe(no_mangle)]
pub extern "C" fn udah_version() -> *const core::ffi::c_char {
    c"0.1.0".as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_matches_the_crate() {
        // SAFETY: a static NUL-terminated string.
        let v = unsafe { core::ffi::CStr::from_ptr(udah_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
        let macros = format!("{UDAH_VERSION_MAJOR}.{UDAH_VERSION_MINOR}.{UDAH_VERSION_PATCH}");
        assert_eq!(macros, env!("CARGO_PKG_VERSION"), "UDAH_VERSION_* and Cargo.toml disagree");
    }
}
