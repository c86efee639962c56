//! The backend (HAL) trait family: what udah needs from a verbs provider.
//!
//! The hot path (`wire`, `ah`, `gid_table`) never calls a backend. Backends
//! are used on the control path only: to snapshot a port's GID table, and to
//! create and destroy the hardware AHs behind AH-table slots.
//!
//! # For backend authors
//!
//! Implement [`ErrorType`] with an error whose [`Error::kind`] maps onto
//! [`ErrorKind`] (the AH table decides on eviction and retry from the kind
//! alone), then [`Hal`]. Methods take `&self`: the AH table calls
//! `create_ah` from whichever thread missed, outside any lock, so a backend
//! shared between threads must be `Sync` and do its own synchronisation.
//! `create_ah` may block (a RoCE create can take milliseconds);
//! `destroy_ah` should not.
//!
//! # For users
//!
//! Use `udah-hal-ibverbs` on real hardware and `udah-hal-mock` in tests and
//! benchmarks; code generic over `H: Hal` runs on both.

use core::fmt::Debug;

use crate::attr::{AhAttr, PortNum};
use crate::gid_table::{GidTable, LinkLayer};

/// What kind of failure a backend reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Out of AH resources or memory (`ENOMEM`, `EOVERFLOW`): evicting
    /// unreferenced AHs and retrying may help.
    OutOfResources,
    /// The attributes were refused (`EINVAL`).
    InvalidArgument,
    /// The operation timed out (`ETIMEDOUT`).
    Timeout,
    /// Try again later (`EAGAIN`).
    WouldBlock,
    /// Device, port or GID not found (`ENODEV`, `ENOENT`).
    NotFound,
    /// Not supported by the provider (`EOPNOTSUPP`).
    Unsupported,
    /// Route or neighbour resolution failed (`EHOSTUNREACH`, `ENETUNREACH`).
    Unreachable,
    /// Anything else.
    Other,
}

/// A backend error.
pub trait Error: Debug {
    /// The kind of this error.
    fn kind(&self) -> ErrorKind;
}

impl Error for core::convert::Infallible {
    fn kind(&self) -> ErrorKind {
        match *self {}
    }
}

impl Error for ErrorKind {
    fn kind(&self) -> ErrorKind {
        *self
    }
}

/// The error type of a backend.
pub trait ErrorType {
    /// The error.
    type Error: Error;
}

impl<T: ErrorType + ?Sized> ErrorType for &T {
    type Error = T::Error;
}

/// Static facts about a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct PortInfo {
    /// Port number.
    pub port_num: u8,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// GID table length (`gid_tbl_len`).
    pub gid_tbl_len: u32,
    /// Base LID (IB).
    pub lid: u16,
    /// LID mask count (IB).
    pub lmc: u8,
    /// Whether the port is active.
    pub active: bool,
}

impl PortInfo {
    /// A port description.
    pub const fn new(port_num: u8, link_layer: LinkLayer, gid_tbl_len: u32) -> PortInfo {
        PortInfo { port_num, link_layer, gid_tbl_len, lid: 0, lmc: 0, active: true }
    }

    /// With base LID and LMC.
    pub const fn with_lid(self, lid: u16, lmc: u8) -> PortInfo {
        PortInfo { lid, lmc, ..self }
    }

    /// With the port state.
    pub const fn with_active(self, active: bool) -> PortInfo {
        PortInfo { active, ..self }
    }
}

/// Layer-2 facts a backend resolved for a RoCE AH (part of the AH's identity:
/// two AHs with the same attributes but different resolved MACs are not the
/// same AH, exactly as irdma's dedup compares its ARP index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct L2Info {
    /// Destination MAC.
    pub dmac: [u8; 6],
    /// VLAN tag (VID | PCP << 13) or `None` when untagged.
    pub vlan_tag: Option<u16>,
    /// The route's hop limit, where the backend rewrites the attribute's.
    pub hop_limit: Option<u8>,
}

/// A backend AH that the AH table ([`crate::table::AhTable`]) can keep in one
/// atomic word.
///
/// The table has no `unsafe` but one prefetch hint (`table/prefetch.rs`): it stores each AH as a `u64`
/// token in an `AtomicU64`, so its hit path is plain atomic loads plus one
/// compare-and-swap, and it needs no `UnsafeCell`.
///
/// # For backend authors
///
/// `into_token` must be injective over the AHs alive at one time, and
/// `from_token(into_token(ah))` must give `ah` back. The table calls
/// `from_token` only on a token that `into_token` produced for an AH it has
/// not yet passed to [`Hal::destroy_ah`]. A backend whose AH is a pointer can
/// use the pointer's exposed address (`expose_provenance` /
/// `with_exposed_provenance_mut`), or keep its AHs in a slab of its own and
/// hand out indices.
pub trait AhToken: Copy + Debug + Send + Sync {
    /// The AH as a token.
    fn into_token(self) -> u64;
    /// The AH back from a token `into_token` returned.
    fn from_token(token: u64) -> Self;
}

impl AhToken for u64 {
    fn into_token(self) -> u64 {
        self
    }
    fn from_token(token: u64) -> u64 {
        token
    }
}

impl AhToken for u32 {
    fn into_token(self) -> u64 {
        u64::from(self)
    }
    fn from_token(token: u64) -> u32 {
        // Only tokens from `into_token` come back: they fit.
        token as u32
    }
}

/// A verbs provider: GID tables and address handles.
pub trait Hal: ErrorType {
    /// The backend's AH object (a verbs `ibv_ah` wrapper, a mock id, …). The
    /// AH table additionally needs `Ah:` [`AhToken`].
    type Ah: Debug;

    /// Facts about `port`.
    fn port_info(&self, port: PortNum) -> Result<PortInfo, Self::Error>;

    /// Fills `table` with a snapshot of `port`'s GID table and stamps it with
    /// the backend's current GID generation.
    fn snapshot_gids<const N: usize>(&self, port: PortNum, table: &mut GidTable<N>) -> Result<(), Self::Error>;

    /// The current GID-table generation of `port` (bumped on every change).
    fn gid_generation(&self, port: PortNum) -> u64;

    /// Resolves the layer-2 facts of a RoCE destination (`Ok(None)` on IB).
    fn resolve_l2(&self, attr: &AhAttr) -> Result<Option<L2Info>, Self::Error>;

    /// Creates an AH. May block.
    fn create_ah(&self, attr: &AhAttr, l2: Option<&L2Info>) -> Result<Self::Ah, Self::Error>;

    /// Destroys an AH. The AH is gone even when an error is returned.
    fn destroy_ah(&self, ah: Self::Ah) -> Result<(), Self::Error>;
}

impl<T: Hal + ?Sized> Hal for &T {
    type Ah = T::Ah;
    fn port_info(&self, port: PortNum) -> Result<PortInfo, Self::Error> {
        T::port_info(self, port)
    }
    fn snapshot_gids<const N: usize>(&self, port: PortNum, table: &mut GidTable<N>) -> Result<(), Self::Error> {
        T::snapshot_gids(self, port, table)
    }
    fn gid_generation(&self, port: PortNum) -> u64 {
        T::gid_generation(self, port)
    }
    fn resolve_l2(&self, attr: &AhAttr) -> Result<Option<L2Info>, Self::Error> {
        T::resolve_l2(self, attr)
    }
    fn create_ah(&self, attr: &AhAttr, l2: Option<&L2Info>) -> Result<Self::Ah, Self::Error> {
        T::create_ah(self, attr, l2)
    }
    fn destroy_ah(&self, ah: Self::Ah) -> Result<(), Self::Error> {
        T::destroy_ah(self, ah)
    }
}
