//! # udah-core
//!
//! Address handles (AHs) from RDMA unreliable-datagram (UD) receive
//! completions, without heap allocation and without locks on the hot path.
//!
//! A UD responder answers whoever wrote to it. The only return address is in
//! the work completion (source QP, SLID, SL, path bits, flags) and in the 40
//! bytes the NIC scatters in front of the payload: an InfiniBand GRH, a RoCE v1
//! GRH, the IPv6 header of a RoCE v2 packet, or 20 undefined bytes followed by
//! the IPv4 header of a RoCE v2 packet. This crate turns those into AH
//! attributes, bit-exactly as the C implementations do:
//!
//! * [`ah::libibverbs`] reproduces `ibv_init_ah_from_wc` of rdma-core 44
//!   (identical at rdma-core HEAD), quirks included;
//! * [`ah::kernel`] reproduces the Linux kernel's `ib_init_ah_attr_from_wc`
//!   (VLAN-aware GID match, exact GID types, RFC checksum, driver-reported
//!   network type);
//!
//! and it does so in nanoseconds: the header classification and field
//! extraction are straight-line code ([`wire::detect`]), and the GID-table
//! search is a hash probe into a snapshot ([`GidTable`]) instead of one system
//! call per table entry.
//!
//! ## The pipeline
//!
//! One completion goes through five stages, each in one module, in this
//! order; [`responder::Responder`] is all of them for one port:
//!
//! | stage | module | what |
//! |---|---|---|
//! | 1. area | [`wire`] | typed views over the 40-byte GRH area: IB/RoCE v1 GRH, RoCE v2 IPv6 and IPv4 headers, both IPv4 checksums, GIDs, header-type detection from [`wire::Evidence`] |
//! | 2. profile | [`ah`] | [`ah::Profile::words`]: the attribute libibverbs or the kernel builds, against a [`GidTable`] snapshot (O(1) look-ups that return exactly what each profile's linear scan would), in the word form of [`attr`] |
//! | 3. words | [`attr`] | [`attr::AttrWords`]: the attribute as the C `ibv_ah_attr`'s four words, the one place for that layout; [`attr::AhAttr`], the validated form a backend creates AHs from |
//! | 4. admission | [`responder`] | [`responder::Admission`]: allow-lists of source GID prefixes, VLANs and P_Key indices, refused completions counted by reason |
//! | 5. cache | [`table`] | [`table::AhCache`]: [`table::AhTable`] (a fixed-capacity, deduplicating AH cache whose hits are lock-free) with its backend, or a [`table::Session`] (hits without a locked instruction) |
//!
//! [`hal`] is the backend trait family (`udah-hal-ibverbs`, `udah-hal-mock`);
//! [`error`] has the small, `Copy` error types with errno mappings. Each
//! module's documentation has an example of its stage; the whole pipeline:
//!
//! ```
//! use udah_core::ah::{AhAttr, IbvWc, PortNum, IBV_WC_GRH};
//! use udah_core::hal::{ErrorKind, ErrorType, Hal, L2Info, PortInfo};
//! use udah_core::responder::{Config, Responder};
//! use udah_core::table::AhTable;
//! use udah_core::{GidEntry, GidTable, GidType, LinkLayer, wire::Gid};
//! # use core::sync::atomic::{AtomicU64, Ordering};
//! # #[derive(Default)] struct Null(AtomicU64);
//! # impl ErrorType for Null { type Error = ErrorKind; }
//! # impl Hal for Null {
//! #     type Ah = u64;
//! #     fn port_info(&self, p: PortNum) -> Result<PortInfo, ErrorKind> { Ok(PortInfo::new(p.get(), LinkLayer::Ethernet, 16)) }
//! #     fn snapshot_gids<const N: usize>(&self, _: PortNum, _: &mut GidTable<N>) -> Result<(), ErrorKind> { Ok(()) }
//! #     fn gid_generation(&self, _: PortNum) -> u64 { 0 }
//! #     fn resolve_l2(&self, _: &AhAttr) -> Result<Option<L2Info>, ErrorKind> { Ok(None) }
//! #     fn create_ah(&self, _: &AhAttr, _: Option<&L2Info>) -> Result<u64, ErrorKind> { Ok(self.0.fetch_add(1, Ordering::Relaxed)) }
//! #     fn destroy_ah(&self, _: u64) -> Result<(), ErrorKind> { Ok(()) }
//! # }
//! let mut gids: GidTable<16> = GidTable::new(1, LinkLayer::Ethernet, 16);
//! gids.set(3, GidEntry::new(Gid::from_ipv4([192, 168, 1, 10]), GidType::RoceV2)).unwrap();
//! let (hal, table) = (Null::default(), AhTable::<Null, 64>::new());
//! let mut port: Responder<_, 16> = Responder::from_snapshot(table.shared(&hal), gids, Config::default());
//!
//! let mut area = [0u8; 40]; // RoCE v2 / IPv4 from 192.168.1.20
//! area[20..].copy_from_slice(&[0x45, 0, 0, 0x3c, 0, 0, 0x40, 0, 0x40, 0x11, 0xb7, 0x42,
//!                              192, 168, 1, 20, 192, 168, 1, 10]);
//! let wc = IbvWc { wc_flags: IBV_WC_GRH, ..IbvWc::default() };
//! let a = port.resolve(&wc, &area).unwrap(); // miss: the backend creates the AH
//! let b = port.resolve(&wc, &area).unwrap(); // hit: the same AH, no lock, no system call
//! assert_eq!(a.ah(), b.ah());
//! port.release(a).unwrap();
//! port.release(b).unwrap();
//! ```
//!
//! ## Contract
//!
//! No function of this crate panics on any input, allocates, or blocks. Bad
//! input gives a typed error. (The one exception to "blocks" is the AH
//! table's slow path: a miss calls the backend's `create_ah`, and
//! [`table::AhTable::get_or_create`] waits for another thread's create of the
//! same AH; its hits never block.) The crate is `#![no_std]` and has no `alloc`
//! dependency and no `std` feature, so the compiler proves that it cannot
//! allocate. It has no `unsafe` code (`#![deny(unsafe_code)]`) but one
//! prefetch hint, in `table/prefetch.rs`: a batch on an AH table too large
//! for the caches starts loading its slots early
//! ([`responder::Responder::resolve_batch`]), which cuts its time per
//! completion to 0.32–0.70 at 10⁵–10⁶ peers (`benches/RESULTS.md`).
//!
//! ## The profile alone
//!
//! ```
//! use udah_core::ah::{libibverbs, IbvWc, IBV_WC_GRH};
//! use udah_core::{GidTable, GidEntry, GidType, LinkLayer, wire::Gid};
//!
//! // Our port: one RoCE v2 GID for 192.168.1.10 at index 3.
//! let mut table: GidTable<16> = GidTable::new(1, LinkLayer::Ethernet, 16);
//! table.set(3, GidEntry::new(Gid::from_ipv4([192, 168, 1, 10]), GidType::RoceV2)).unwrap();
//!
//! // A RoCE v2 / IPv4 request from 192.168.1.20: 20 undefined bytes, then the IPv4 header.
//! let mut area = [0u8; 40];
//! area[20..].copy_from_slice(&[0x45, 0, 0, 0x3c, 0, 0, 0x40, 0, 0x40, 0x11, 0xb7, 0x42,
//!                              192, 168, 1, 20, 192, 168, 1, 10]);
//! let wc = IbvWc { wc_flags: IBV_WC_GRH, ..IbvWc::default() };
//!
//! let attr = libibverbs::init_ah_from_wc(&table, 1, &wc, Some(&area)).unwrap();
//! assert_eq!(attr.grh.dgid, Gid::from_ipv4([192, 168, 1, 20]).0);
//! assert_eq!((attr.grh.sgid_index, attr.grh.hop_limit, attr.is_global), (3, 64, 1));
//! ```
#![no_std]
#![cfg_attr(doctest, doc = include_str!("../README.md"))]
#![deny(unsafe_code)]
#![deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]
#![cfg_attr(
    test,
    allow(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::arithmetic_side_effects
    )
)]

#[cfg(any(test, feature = "std"))]
extern crate std;

pub mod ah;
pub mod attr;
pub mod error;
/// Fuzzing entry points and the reference model: only with the private
/// `fuzzing` feature, which is not part of the public contract (fuzz/ and
/// the tests that replay its corpora enable it).
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod gid_table;
pub mod hal;
#[cfg(feature = "std")]
pub mod heap;
pub mod responder;
mod sync;
pub mod table;
pub mod wire;

pub use error::{GidTableError, IbvError, KernelError};
pub use gid_table::{GidEntry, GidTable, GidType, LinkLayer};
pub use wire::Gid;
