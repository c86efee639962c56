//! # udah-hal-ibverbs
//!
//! The udah backend over real libibverbs: devices, ports, GID tables,
//! protection domains, address handles, completion queues (plain, and
//! extended: [`CqEx`] and its poll cursor [`ExPoll`]), UD QPs and memory
//! regions, and the core's [`Hal`](udah_core::hal::Hal) over them
//! ([`IbverbsHal`]).
//!
//! ## Library dependency
//!
//! The FFI goes through [`rdma_mummy_sys`], which loads `libibverbs.so.1` at
//! run time. The crate therefore builds on any Linux machine (the build needs
//! `cmake` and `libclang-dev`, not libibverbs), and a program using it starts
//! without libibverbs; the first verb then fails with
//! [`VerbsError::LibraryMissing`]. A machine with libibverbs but no RDMA
//! device gives [`VerbsError::NoDevices`], which says whether the kernel has
//! RDMA support at all (`/sys/class/infiniband`).
//!
//! ## Thread safety
//!
//! Every handle is `Send + Sync`: libibverbs verbs are thread safe.
//! [`IbverbsHal`] keeps its AHs in a preallocated lock-free slot array, so
//! [`IbverbsHal::post_send`] takes no lock; GID snapshots sit behind
//! mutexes (control path only).
//!
//! ## Resource cleanup
//!
//! Objects hold reference-counted handles to their parents, so C objects are
//! always destroyed children first. `Drop` never panics; a failed destroy is
//! counted ([`teardown_failures`]). [`AddressHandle::destroy`] reports the
//! error instead.
//!
//! ## An application's own context and PD
//!
//! An AH must live on the PD of the QP that sends with it. A program that
//! already has its `ibv_context` and `ibv_pd` (a C runtime, the C API)
//! hands them to [`IbverbsHal::from_raw_borrowed`]: udah creates its AHs on
//! that PD and never closes the context nor deallocates the PD
//! ([`Context::from_raw_borrowed`] and [`Pd::from_raw_borrowed`] are the
//! pieces). The application keeps reading its asynchronous events and
//! passes each to [`IbverbsHal::handle_async_event`].
//!
//! ## `unsafe`
//!
//! Only `ffi.rs` (layouts, pinned at compile time and checked against the
//! installed headers by `tests/layout.rs`), `verbs/` (the calls, a file per
//! object), `epoll.rs` (the epoll(2) calls), `slots.rs` (a slot's boxed
//! handle) and the two AH-slot calls in `hal.rs` (post and destroy through a
//! pinned slot) contain `unsafe`; every block carries a `// SAFETY:` proof. C enums become Rust
//! enums with an `Unknown(raw)` variant ([`enums`]).
//!
//! ## Hardware tests
//!
//! `tests/hardware.rs` is `#[ignore]`d; run it on a real or Soft-RoCE device:
//!
//! ```text
//! UDAH_TEST_DEVICE=rxe0 cargo test -p udah-hal-ibverbs --test hardware -- --ignored --test-threads=1
//! ```
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod enums;
mod epoll;
pub mod error;
pub mod events;
#[doc(hidden)]
pub mod ffi;
pub mod gid;
mod hal;
/// The rtnetlink watcher (neighbour, link and address events), shared with
/// libudah.
pub use udah_netevents as netevents;
mod slots;
pub mod verbs;

pub use enums::{EventType, GidKind, Mtu, PortLinkLayer, PortState, WcOpcode, WcStatus};
pub use error::{Op, VerbFailure, VerbsError, kernel_has_rdma};
pub use gid::{GidInfo, GidSource, PortGids};
pub use hal::{DeviceFault, HalStats, IbverbsHal, MAX_AH_SLOTS, VerbsAh};
pub use verbs::{
    AddressHandle, AsyncEvent, Context, Cq, CqEx, CqExCreated, Device, DeviceAttr, DeviceList, ExCompletion, ExPoll,
    GidRecord, Mr, Pd, PortAttr, QpCaps, Segment, UdDest, UdQp, WorkCompletion, library_available, teardown_failures,
};
