//! # udah-hal-mock
//!
//! A deterministic, in-process RDMA fabric and a [`udah_core::hal::Hal`]
//! backend over it, so that the whole UD pipeline — a peer posts a send, the
//! "NIC" delivers a completion and the 40-byte GRH area exactly as hardware
//! writes them, the responder turns them into an AH and replies — can be
//! tested and benchmarked without RDMA hardware.
//!
//! What it simulates:
//!
//! * devices with ports of link layer InfiniBand (LID, LMC) or Ethernet
//!   (MAC, GID tables with IB / RoCE v1 / RoCE v2 entries, VLANs, holes),
//!   P_Keys (a QP uses one; delivery needs the same base and one full
//!   member, as IBA 10.9.3 says), and asynchronous events (GID added/removed, port up/down)
//!   queued the way `ibv_get_async_event` delivers them;
//! * UD QPs with Q_Keys; `post_send` goes through a switch to the
//!   destination port (by LID on InfiniBand, by GID/IP, MAC and VLAN on
//!   RoCE), and the receiver gets a completion with the fields a NIC reports
//!   and the GRH area as the NIC writes it: an IB GRH, a RoCE v1 GRH, a RoCE v2
//!   IPv6 header, or 20 undefined bytes ([`FrontFill`]) and the IPv4 header;
//! * vendor quirks ([`Quirks`]): irdma's zeroed IPv4 checksum, mlx5's
//!   packet-type bits in `wc.sl`, a driver-reported network type, the route
//!   hop limit a kernel-built AH gets;
//! * AH creation like the real thing: RoCE destination-MAC resolution from a
//!   neighbour table that can change (and a packet sent with a stale MAC is
//!   dropped), the multicast and link-local MAC rules, VLAN tags with
//!   priority; a cost model (a create latency) and fault injection
//!   ([`Faults`]: out of AH resources at a limit, and `ETIMEDOUT`, `EINVAL`,
//!   `EAGAIN` on chosen creates); counters of creates, destroys and live AHs.
//!
//! ## A fabric in five lines
//!
//! ```
//! use udah_hal_mock::{Fabric, PortConfig};
//! use udah_core::wire::Gid;
//!
//! let fabric = Fabric::new(7);
//! let a = fabric.add_port(PortConfig::roce([0x02, 0, 0, 0, 0, 0xa]).with_ipv4([10, 0, 0, 10]));
//! let b = fabric.add_port(PortConfig::roce([0x02, 0, 0, 0, 0, 0xb]).with_ipv4([10, 0, 0, 11]));
//! let (qa, qb) = (fabric.create_qp(a, 0x1111).unwrap(), fabric.create_qp(b, 0x1111).unwrap());
//! # let _ = (qa, qb, Gid::ZERO);
//! ```
//!
//! `with_ipv4` adds the RoCE v1 and v2 entries of the address and a
//! neighbour-table entry; see the end-to-end tests for sending and replying.
//!
//! Everything is deterministic for a given seed: the random front bytes and
//! the fault schedule come from a seeded generator, and nothing depends on
//! wall time except the optional create latency.

mod fabric;
#[doc(hidden)]
pub mod fuzzing;
mod hal;
pub mod responder;
pub mod scenario;

pub use fabric::{
    AsyncEvent, Counters, Fabric, Faults, FrontFill, GID_IN_COMPLETION_FILL, MockAh, MockWc, PortConfig, PortId, Qpn,
    Quirks, Received, SLEEP_QUANTUM, SendError,
};
pub use hal::{MockError, MockHal};
