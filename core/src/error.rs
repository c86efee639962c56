//! Error types: small, `Copy`, one variant per failure path, each with the
//! errno the C implementation reports for it.

use core::fmt;

/// Linux errno values used by the two profiles.
pub mod errno {
    /// `ENOENT`
    pub const ENOENT: i32 = 2;
    /// `EFAULT`
    pub const EFAULT: i32 = 14;
    /// `EINVAL`
    pub const EINVAL: i32 = 22;
    /// `ENODATA`
    pub const ENODATA: i32 = 61;
    /// `EPROTO`
    pub const EPROTO: i32 = 71;
    /// `EPROTOTYPE`
    pub const EPROTOTYPE: i32 = 91;
    /// `EPROTONOSUPPORT`
    pub const EPROTONOSUPPORT: i32 = 93;

    /// The symbolic name of an errno value this crate produces.
    pub const fn name(e: i32) -> &'static str {
        match e {
            ENOENT => "ENOENT",
            EFAULT => "EFAULT",
            EINVAL => "EINVAL",
            ENODATA => "ENODATA",
            EPROTO => "EPROTO",
            EPROTOTYPE => "EPROTOTYPE",
            EPROTONOSUPPORT => "EPROTONOSUPPORT",
            _ => "E?",
        }
    }
}

/// Why the libibverbs profile ([`crate::ah::libibverbs`]) failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IbvError {
    /// No receive area was given. libibverbs dereferences `grh` even without
    /// `IBV_WC_GRH` and crashes (SIGSEGV); udah returns this instead.
    MissingGrh,
    /// The first nibble is not 6 and `area[20] >> 4` is not 4
    /// (`EPROTONOSUPPORT`).
    UnknownHeaderVersion,
    /// The IPv4 destination is in 224.0.0.0/4 or the GRH destination GID is in
    /// `ff00::/8` (`EINVAL`).
    MulticastDestination,
    /// The GRH next header is neither `0x1B` nor 17 (`EPROTONOSUPPORT`).
    UnknownNextHeader(u8),
    /// No GID-table entry has the local address with the wanted type class.
    /// libibverbs' scan ends with a failing query: `EINVAL` through the
    /// kernel's GID ioctl (Linux ≥ 5.10), `ENOENT` through the sysfs fallback.
    GidNotFound,
    /// The caller's evidence contradicts the bytes, or the bytes fit two
    /// headers (only with [`crate::wire::Evidence`] other than `None`).
    AmbiguousHeader,
}

impl IbvError {
    /// The errno libibverbs leaves (ioctl GID path, Linux ≥ 5.10). For
    /// `MissingGrh`, where C crashes, `EFAULT`; for `AmbiguousHeader`, which C
    /// cannot report, `EPROTO`.
    pub const fn errno(self) -> i32 {
        match self {
            IbvError::MissingGrh => errno::EFAULT,
            IbvError::UnknownHeaderVersion | IbvError::UnknownNextHeader(_) => errno::EPROTONOSUPPORT,
            IbvError::MulticastDestination | IbvError::GidNotFound => errno::EINVAL,
            IbvError::AmbiguousHeader => errno::EPROTO,
        }
    }
}

impl fmt::Display for IbvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IbvError::MissingGrh => f.write_str("no receive area (libibverbs would crash)"),
            IbvError::UnknownHeaderVersion => f.write_str("receive area holds neither a GRH/IPv6 nor an IPv4 header"),
            IbvError::MulticastDestination => f.write_str("packet was sent to a multicast address"),
            IbvError::UnknownNextHeader(nh) => write!(f, "GRH next header {nh:#04x} is neither 0x1b nor 0x11"),
            IbvError::GidNotFound => f.write_str("local GID not found in the GID table"),
            IbvError::AmbiguousHeader => f.write_str("header type is ambiguous or contradicts the evidence"),
        }
    }
}

impl core::error::Error for IbvError {}

/// Why the kernel profile ([`crate::ah::kernel`]) failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KernelError {
    /// No receive area was given where the kernel reads it (an oops).
    MissingGrh,
    /// The completion reported a network type above 3 (`-EINVAL`).
    InvalidNetworkType(u8),
    /// A RoCE completion without `IB_WC_GRH` (`-EPROTOTYPE`).
    NoGrhOnRoce,
    /// No valid entry with the local GID, exact type (and, on RoCE, VLAN)
    /// (`-ENOENT`).
    GidNotFound,
    /// The local GID has the SA well-known interface id and slot 0 is empty
    /// (`-ENODATA`).
    WellKnownSlotEmpty,
    /// The local GID has the SA well-known interface id and the port has no
    /// GID slots (`-EINVAL`).
    NoGidSlots,
    /// Exactly one of the local entry's GID and the remote GID is IPv4-mapped;
    /// `rdma_resolve_ip` refuses before routing (`-EINVAL`).
    AddressFamilyMismatch,
    /// The caller's evidence contradicts the bytes (only with
    /// [`crate::wire::Evidence`] other than `None`).
    AmbiguousHeader,
}

impl KernelError {
    /// The positive errno; the kernel returns its negation.
    pub const fn errno(self) -> i32 {
        match self {
            KernelError::MissingGrh => errno::EFAULT,
            KernelError::InvalidNetworkType(_) | KernelError::NoGidSlots | KernelError::AddressFamilyMismatch => {
                errno::EINVAL
            }
            KernelError::NoGrhOnRoce => errno::EPROTOTYPE,
            KernelError::GidNotFound => errno::ENOENT,
            KernelError::WellKnownSlotEmpty => errno::ENODATA,
            KernelError::AmbiguousHeader => errno::EPROTO,
        }
    }
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelError::MissingGrh => f.write_str("no receive area (the kernel would oops)"),
            KernelError::InvalidNetworkType(t) => write!(f, "completion reports network type {t}, above 3"),
            KernelError::NoGrhOnRoce => f.write_str("RoCE completion without IB_WC_GRH"),
            KernelError::GidNotFound => f.write_str("local GID not found with this type and VLAN"),
            KernelError::WellKnownSlotEmpty => f.write_str("well-known GUID: GID slot 0 is empty"),
            KernelError::NoGidSlots => f.write_str("well-known GUID: the port has no GID slots"),
            KernelError::AddressFamilyMismatch => {
                f.write_str("local and remote GIDs are of different address families")
            }
            KernelError::AmbiguousHeader => f.write_str("header type is ambiguous or contradicts the evidence"),
        }
    }
}

impl core::error::Error for KernelError {}

/// Why a GID-table update was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GidTableError {
    /// The index is not below the table length (`gid_tbl_len`).
    IndexOutOfRange {
        /// The index given.
        index: u32,
        /// The table length.
        len: u32,
    },
    /// The index is below the table length but above this snapshot's capacity.
    OverCapacity {
        /// The index given.
        index: u32,
        /// The capacity `N`.
        capacity: usize,
    },
    /// The all-zero GID: the kernel never stores it (the slot is empty).
    ZeroGid,
    /// A VLAN id above 4095.
    InvalidVlan(u16),
}

impl fmt::Display for GidTableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GidTableError::IndexOutOfRange { index, len } => {
                write!(f, "GID index {index} is outside the table (length {len})")
            }
            GidTableError::OverCapacity { index, capacity } => {
                write!(f, "GID index {index} exceeds the snapshot capacity {capacity}")
            }
            GidTableError::ZeroGid => f.write_str("the zero GID marks an empty slot and cannot be stored"),
            GidTableError::InvalidVlan(v) => write!(f, "VLAN id {v} is above 4095"),
        }
    }
}

impl core::error::Error for GidTableError {}
