//! Typed views over the 40-byte receive area in front of every UD payload.
//!
//! A UD receive always reserves 40 bytes in front of the payload. On
//! InfiniBand and RoCE v1 they hold the GRH ([`grh`]); on RoCE v2 over IPv6 the
//! IPv6 header (the same layout, next header 17); on RoCE v2 over IPv4 the NIC
//! writes the 20-byte IPv4 header into bytes 20..40 ([`ipv4`]) and leaves bytes
//! 0..20 **undefined** (whatever was in the buffer). [`detect`] tells them
//! apart.
//!
//! ## The contract
//!
//! Every function takes the area as `&[u8; 40]` ([`Area`]): the length is
//! checked once, by the type, where the caller turns a receive buffer into an
//! area ([`area`]). After that no accessor indexes out of bounds, panics or
//! branches on the contents: fields are read with constant offsets from a
//! fixed-size array. Parsing never casts a pointer to a C struct (the receive
//! buffer is often not 8-aligned, and the C `struct ibv_grh` has alignment 8).
//!
//! `emit` functions make no assumption about the buffer's previous contents:
//! [`grh::GrhRepr::emit`] writes every byte; [`ipv4::Ipv4Repr::emit`] writes
//! every byte of the IPv4 header and leaves the undefined front alone.
//!
//! ## The pipeline's first stage
//!
//! A profile reads the area once, into a [`View`]: every field at a constant
//! offset, and the header type its heuristic (or the evidence) decides.
//!
//! ```
//! use udah_core::wire::{self, Classifier, Evidence, Gid, Heuristic, Ipv4Repr, View};
//!
//! // A receive buffer: 40 bytes of area (RoCE v2 / IPv4 from 10.0.0.2 to
//! // 10.0.0.1: 20 undefined bytes, then the IPv4 header), then the payload.
//! let mut buf = [0xa5u8; 64];
//! let area: &mut wire::Area = (&mut buf[..40]).try_into().unwrap();
//! Ipv4Repr { ttl: 64, protocol: 17, src: [10, 0, 0, 2], dst: [10, 0, 0, 1], ..Default::default() }.emit(area);
//!
//! let area = wire::area(&buf).unwrap(); // the length, checked once
//! let v = View::read(area, Some(Classifier { heuristic: Heuristic::Libibverbs, evidence: Evidence::None }));
//! assert!(v.is4 && !v.is6);
//! assert_eq!(v.src4, Gid::from_ipv4([10, 0, 0, 2]).to_words());
//! assert_eq!(v.ttl, 64);
//! assert_eq!(wire::area(&buf[..39]).unwrap_err().len, 39); // too short: a typed error
//! ```

pub mod bth;
pub mod detect;
pub mod gid;
pub mod grh;
pub mod ipv4;
pub mod lrh;
pub mod source;
pub mod view;

pub use detect::{Classifier, Detection, Evidence, HeaderVersion, Heuristic, NetworkType, Stamp};
pub use gid::Gid;
pub use grh::GrhRepr;
pub use ipv4::Ipv4Repr;
pub use source::SourceAddress;
pub use view::View;

/// The 40-byte receive area ("GRH area") in front of a UD payload.
pub type Area = [u8; 40];

/// Length of the receive area.
pub const AREA_LEN: usize = 40;

/// The error of [`area`]: the buffer is shorter than 40 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncated {
    /// The length that was given.
    pub len: usize,
}

impl core::fmt::Display for Truncated {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "receive area truncated: {} bytes, need {AREA_LEN}", self.len)
    }
}

impl core::error::Error for Truncated {}

/// The receive area at the start of a receive buffer (the first 40 bytes).
#[inline]
pub fn area(buf: &[u8]) -> Result<&Area, Truncated> {
    buf.first_chunk::<AREA_LEN>().ok_or(Truncated { len: buf.len() })
}

/// The 8 bytes of `area` at `at` as a little-endian integer (so that the
/// integer's bytes in memory order are the area's). `at` is a constant at
/// every call: the bounds check folds away.
#[inline(always)]
fn le64(area: &Area, at: usize) -> u64 {
    area.get(at..).and_then(|s| s.first_chunk::<8>()).map_or(0, |b| u64::from_le_bytes(*b))
}

/// The byte of `area` at `at`, a constant at every call.
#[inline(always)]
fn octet(area: &Area, at: usize) -> u8 {
    area.get(at).copied().unwrap_or(0)
}
