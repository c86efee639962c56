//! [`VerbsError`]: what failed, with the verb, the errno and the context
//! (device, port, GID index), mapped onto the core's [`ErrorKind`].

use core::fmt;
use std::path::Path;

use udah_core::hal::{Error, ErrorKind};

use crate::enums::PortState;

/// Linux errno values this crate maps or reports.
pub mod errno {
    /// `EPERM`
    pub const EPERM: i32 = 1;
    /// `ENOENT`
    pub const ENOENT: i32 = 2;
    /// `EINTR`
    pub const EINTR: i32 = 4;
    /// `EIO`
    pub const EIO: i32 = 5;
    /// `EAGAIN`
    pub const EAGAIN: i32 = 11;
    /// `ENOMEM`
    pub const ENOMEM: i32 = 12;
    /// `EACCES`
    pub const EACCES: i32 = 13;
    /// `EBUSY`
    pub const EBUSY: i32 = 16;
    /// `ENODEV`
    pub const ENODEV: i32 = 19;
    /// `EINVAL`
    pub const EINVAL: i32 = 22;
    /// `ENOSYS`
    pub const ENOSYS: i32 = 38;
    /// `ENODATA`
    pub const ENODATA: i32 = 61;
    /// `EOVERFLOW`
    pub const EOVERFLOW: i32 = 75;
    /// `EOPNOTSUPP`
    pub const EOPNOTSUPP: i32 = 95;
    /// `ENETUNREACH`
    pub const ENETUNREACH: i32 = 101;
    /// `ETIMEDOUT`
    pub const ETIMEDOUT: i32 = 110;
    /// `EHOSTUNREACH`
    pub const EHOSTUNREACH: i32 = 113;

    /// The symbolic name of an errno value (`"E?"` when not listed here).
    pub const fn name(e: i32) -> &'static str {
        match e {
            EPERM => "EPERM",
            ENOENT => "ENOENT",
            EINTR => "EINTR",
            EIO => "EIO",
            EAGAIN => "EAGAIN",
            ENOMEM => "ENOMEM",
            EACCES => "EACCES",
            EBUSY => "EBUSY",
            ENODEV => "ENODEV",
            EINVAL => "EINVAL",
            ENOSYS => "ENOSYS",
            ENODATA => "ENODATA",
            EOVERFLOW => "EOVERFLOW",
            EOPNOTSUPP => "EOPNOTSUPP",
            ENETUNREACH => "ENETUNREACH",
            ETIMEDOUT => "ETIMEDOUT",
            EHOSTUNREACH => "EHOSTUNREACH",
            _ => "E?",
        }
    }

    /// The core's error kind for an errno.
    pub const fn kind(e: i32) -> udah_core::hal::ErrorKind {
        use udah_core::hal::ErrorKind;
        match e {
            ENOMEM | EOVERFLOW => ErrorKind::OutOfResources,
            EINVAL => ErrorKind::InvalidArgument,
            ETIMEDOUT => ErrorKind::Timeout,
            EAGAIN | EBUSY | EINTR => ErrorKind::WouldBlock,
            ENODEV | ENOENT | ENODATA => ErrorKind::NotFound,
            EOPNOTSUPP | ENOSYS => ErrorKind::Unsupported,
            EHOSTUNREACH | ENETUNREACH => ErrorKind::Unreachable,
            _ => ErrorKind::Other,
        }
    }
}

/// A verb, by its C name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// `ibv_get_device_list`
    GetDeviceList,
    /// `ibv_open_device`
    OpenDevice,
    /// `ibv_close_device`
    CloseDevice,
    /// `ibv_query_device`
    QueryDevice,
    /// `ibv_query_port`
    QueryPort,
    /// `ibv_query_gid_table`
    QueryGidTable,
    /// `ibv_query_gid_ex`
    QueryGidEx,
    /// `ibv_alloc_pd`
    AllocPd,
    /// `ibv_dealloc_pd`
    DeallocPd,
    /// `ibv_create_cq`
    CreateCq,
    /// `ibv_destroy_cq`
    DestroyCq,
    /// `ibv_poll_cq`
    PollCq,
    /// `ibv_create_qp`
    CreateQp,
    /// `ibv_modify_qp`
    ModifyQp,
    /// `ibv_destroy_qp`
    DestroyQp,
    /// `ibv_reg_mr`
    RegMr,
    /// `ibv_dereg_mr`
    DeregMr,
    /// `ibv_create_ah`
    CreateAh,
    /// `ibv_destroy_ah`
    DestroyAh,
    /// `ibv_post_send`
    PostSend,
    /// `ibv_init_ah_from_wc`
    InitAhFromWc,
    /// `ibv_post_recv`
    PostRecv,
    /// `ibv_get_async_event` (and the `poll(2)` on its file descriptor)
    GetAsyncEvent,
    /// `ibv_resolve_eth_l2_from_gid`
    ResolveL2,
    /// `ibv_create_cq_ex`
    CreateCqEx,
    /// `ibv_start_poll` / `ibv_next_poll` (an extended CQ)
    PollCqEx,
}

impl Op {
    /// The C function name.
    pub const fn name(self) -> &'static str {
        match self {
            Op::GetDeviceList => "ibv_get_device_list",
            Op::OpenDevice => "ibv_open_device",
            Op::CloseDevice => "ibv_close_device",
            Op::QueryDevice => "ibv_query_device",
            Op::QueryPort => "ibv_query_port",
            Op::QueryGidTable => "ibv_query_gid_table",
            Op::QueryGidEx => "ibv_query_gid_ex",
            Op::AllocPd => "ibv_alloc_pd",
            Op::DeallocPd => "ibv_dealloc_pd",
            Op::CreateCq => "ibv_create_cq",
            Op::DestroyCq => "ibv_destroy_cq",
            Op::PollCq => "ibv_poll_cq",
            Op::CreateQp => "ibv_create_qp",
            Op::ModifyQp => "ibv_modify_qp",
            Op::DestroyQp => "ibv_destroy_qp",
            Op::RegMr => "ibv_reg_mr",
            Op::DeregMr => "ibv_dereg_mr",
            Op::CreateAh => "ibv_create_ah",
            Op::DestroyAh => "ibv_destroy_ah",
            Op::PostSend => "ibv_post_send",
            Op::InitAhFromWc => "ibv_init_ah_from_wc",
            Op::PostRecv => "ibv_post_recv",
            Op::GetAsyncEvent => "ibv_get_async_event",
            Op::ResolveL2 => "ibv_resolve_eth_l2_from_gid",
            Op::CreateCqEx => "ibv_create_cq_ex",
            Op::PollCqEx => "ibv_start_poll",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed verb: which one, its errno, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbFailure {
    /// The verb.
    pub op: Op,
    /// The errno it left (positive).
    pub errno: i32,
    /// The device, when known.
    pub device: Option<String>,
    /// The port, when the verb was about one.
    pub port: Option<u8>,
    /// The GID index, when the verb was about one.
    pub gid_index: Option<u32>,
}

impl VerbFailure {
    /// A failure of `op` with `errno` and no context yet.
    pub const fn new(op: Op, errno: i32) -> VerbFailure {
        VerbFailure { op, errno, device: None, port: None, gid_index: None }
    }
}

impl fmt::Display for VerbFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed: {} (errno {}", self.op, errno::name(self.errno), self.errno)?;
        let msg = std::io::Error::from_raw_os_error(self.errno);
        write!(f, ", {msg})")?;
        if let Some(d) = &self.device {
            write!(f, " on device {d}")?;
        }
        if let Some(p) = self.port {
            write!(f, " port {p}")?;
        }
        if let Some(i) = self.gid_index {
            write!(f, " GID index {i}")?;
        }
        Ok(())
    }
}

/// Every failure of this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerbsError {
    /// `libibverbs.so.1` could not be loaded (not installed), or it lacks
    /// `ibv_get_device_list`.
    LibraryMissing,
    /// libibverbs found no RDMA device.
    NoDevices {
        /// Whether `/sys/class/infiniband` exists; when it does not, the
        /// kernel has no RDMA support loaded at all.
        kernel_support: bool,
        /// The errno `ibv_get_device_list` left when it failed outright
        /// (`None` when it returned an empty list).
        errno: Option<i32>,
    },
    /// No device of that name.
    DeviceNotFound {
        /// The name asked for.
        name: String,
        /// The devices there are.
        available: Vec<String>,
    },
    /// The device has no such port.
    PortNotFound {
        /// The device.
        device: String,
        /// The port asked for.
        port: u8,
        /// The device's port count.
        ports: u8,
    },
    /// The port is not active.
    PortDown {
        /// The device.
        device: String,
        /// The port.
        port: u8,
        /// Its state.
        state: PortState,
    },
    /// No GID entry at that index (or the index is past the table).
    GidNotFound {
        /// The device.
        device: String,
        /// The port.
        port: u8,
        /// The index.
        index: u32,
    },
    /// The port's GID table does not fit the snapshot's capacity.
    GidTableTooLarge {
        /// The port.
        port: u8,
        /// The index that did not fit.
        index: u32,
        /// The snapshot capacity.
        capacity: usize,
    },
    /// The port reports a link layer the core does not model.
    UnknownLinkLayer {
        /// The port.
        port: u8,
        /// The raw `link_layer` value.
        raw: u8,
    },
    /// An AH token that this backend did not create, or already destroyed.
    UnknownAh(u64),
    /// A borrowed protection domain belongs to another context than the one
    /// it was passed with.
    PdContextMismatch {
        /// The context's device.
        device: String,
    },
    /// A NULL pointer where a live verbs object was required.
    NullPointer(&'static str),
    /// Every preallocated AH slot of the backend holds a live AH.
    AhSlotsFull {
        /// The slot count.
        capacity: usize,
    },
    /// A buffer range outside a memory region.
    OutOfBounds {
        /// The offset asked for.
        offset: usize,
        /// The length asked for.
        len: usize,
        /// The region's size.
        size: usize,
    },
    /// A verb failed.
    Verb(VerbFailure),
}

impl VerbsError {
    /// A failed verb with its errno.
    pub const fn verb(op: Op, errno: i32) -> VerbsError {
        VerbsError::Verb(VerbFailure::new(op, errno))
    }

    /// Adds the device name to a verb failure.
    #[must_use]
    pub fn on_device(mut self, device: &str) -> VerbsError {
        if let VerbsError::Verb(v) = &mut self {
            v.device = Some(device.to_owned());
        }
        self
    }

    /// Adds the port to a verb failure.
    #[must_use]
    pub fn on_port(mut self, port: u8) -> VerbsError {
        if let VerbsError::Verb(v) = &mut self {
            v.port = Some(port);
        }
        self
    }

    /// Adds the GID index to a verb failure.
    #[must_use]
    pub fn at_gid_index(mut self, index: u32) -> VerbsError {
        if let VerbsError::Verb(v) = &mut self {
            v.gid_index = Some(index);
        }
        self
    }

    /// The errno, for a verb failure.
    pub fn errno(&self) -> Option<i32> {
        match self {
            VerbsError::Verb(v) => Some(v.errno),
            VerbsError::NoDevices { errno, .. } => *errno,
            _ => None,
        }
    }

    /// Whether this is an environment problem (no library, no device) rather
    /// than a failure of a device that exists.
    pub fn is_environment(&self) -> bool {
        matches!(self, VerbsError::LibraryMissing | VerbsError::NoDevices { .. })
    }
}

/// Whether the kernel exposes RDMA devices at all (`/sys/class/infiniband`).
pub fn kernel_has_rdma() -> bool {
    Path::new("/sys/class/infiniband").is_dir()
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerbsError::LibraryMissing => f.write_str(
                "libibverbs is not installed: libibverbs.so.1 could not be loaded \
                 (Debian/Ubuntu: apt-get install libibverbs1 ibverbs-providers; \
                 RHEL/Fedora: dnf install libibverbs)",
            ),
            VerbsError::NoDevices { kernel_support, errno } => {
                f.write_str("no RDMA devices found")?;
                if let Some(e) = errno {
                    write!(f, " (ibv_get_device_list failed: {})", errno::name(*e))?;
                }
                if *kernel_support {
                    f.write_str(
                        "; /sys/class/infiniband exists but libibverbs lists no device \
                         (is the provider package, e.g. ibverbs-providers, installed?)",
                    )
                } else {
                    f.write_str(
                        "; /sys/class/infiniband is missing: this kernel has no RDMA support loaded \
                         (load the NIC's RDMA driver, or add Soft-RoCE: \
                         modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0)",
                    )
                }
            }
            VerbsError::DeviceNotFound { name, available } => {
                write!(f, "RDMA device {name:?} not found; devices: {}", available.join(", "))
            }
            VerbsError::PortNotFound { device, port, ports } => {
                write!(f, "device {device} has no port {port} (ports 1..={ports})")
            }
            VerbsError::PortDown { device, port, state } => {
                write!(f, "device {device} port {port} is not active (state {state})")
            }
            VerbsError::GidNotFound { device, port, index } => {
                write!(f, "device {device} port {port} has no GID at index {index}")
            }
            VerbsError::GidTableTooLarge { port, index, capacity } => {
                write!(f, "port {port}: GID index {index} exceeds the snapshot capacity {capacity}")
            }
            VerbsError::UnknownLinkLayer { port, raw } => write!(f, "port {port}: unknown link layer {raw}"),
            VerbsError::UnknownAh(t) => write!(f, "AH token {t:#x} is not a live AH of this backend"),
            VerbsError::PdContextMismatch { device } => {
                write!(f, "the protection domain was not allocated on this context (device {device})")
            }
            VerbsError::NullPointer(what) => write!(f, "{what} is NULL"),
            VerbsError::AhSlotsFull { capacity } => {
                write!(f, "all {capacity} AH slots of the backend hold live AHs (destroy some first)")
            }
            VerbsError::OutOfBounds { offset, len, size } => {
                write!(f, "range {offset}..{offset}+{len} is outside the {size}-byte memory region")
            }
            VerbsError::Verb(v) => fmt::Display::fmt(v, f),
        }
    }
}

impl core::error::Error for VerbsError {}

impl Error for VerbsError {
    fn kind(&self) -> ErrorKind {
        match self {
            VerbsError::LibraryMissing => ErrorKind::Unsupported,
            VerbsError::NoDevices { .. }
            | VerbsError::DeviceNotFound { .. }
            | VerbsError::PortNotFound { .. }
            | VerbsError::GidNotFound { .. } => ErrorKind::NotFound,
            VerbsError::PortDown { .. } => ErrorKind::Unreachable,
            VerbsError::GidTableTooLarge { .. } | VerbsError::AhSlotsFull { .. } => ErrorKind::OutOfResources,
            VerbsError::UnknownLinkLayer { .. } => ErrorKind::Unsupported,
            VerbsError::UnknownAh(_)
            | VerbsError::OutOfBounds { .. }
            | VerbsError::PdContextMismatch { .. }
            | VerbsError::NullPointer(_) => ErrorKind::InvalidArgument,
            VerbsError::Verb(v) => errno::kind(v.errno),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_kinds() {
        assert_eq!(errno::kind(errno::ENOMEM), ErrorKind::OutOfResources);
        assert_eq!(errno::kind(errno::EINVAL), ErrorKind::InvalidArgument);
        assert_eq!(errno::kind(errno::ETIMEDOUT), ErrorKind::Timeout);
        assert_eq!(errno::kind(errno::EAGAIN), ErrorKind::WouldBlock);
        assert_eq!(errno::kind(errno::ENODEV), ErrorKind::NotFound);
        assert_eq!(errno::kind(errno::EOPNOTSUPP), ErrorKind::Unsupported);
        assert_eq!(errno::kind(errno::EHOSTUNREACH), ErrorKind::Unreachable);
        assert_eq!(errno::kind(12345), ErrorKind::Other);
        assert_eq!(errno::name(12345), "E?");
    }

    #[test]
    fn context_in_messages() {
        let e = VerbsError::verb(Op::QueryGidEx, errno::EINVAL).on_device("rxe0").on_port(1).at_gid_index(7);
        let s = e.to_string();
        assert!(s.contains("ibv_query_gid_ex") && s.contains("EINVAL") && s.contains("rxe0"), "{s}");
        assert!(s.contains("port 1") && s.contains("GID index 7"), "{s}");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(e.errno(), Some(errno::EINVAL));
        let n = VerbsError::NoDevices { kernel_support: false, errno: Some(errno::ENOSYS) };
        assert!(n.to_string().contains("no RDMA devices") && n.to_string().contains("no RDMA support"));
        assert!(n.is_environment());
        assert!(VerbsError::LibraryMissing.to_string().contains("libibverbs is not installed"));
        let d = VerbsError::PortDown { device: "mlx5_0".into(), port: 1, state: PortState::Down };
        assert_eq!(d.to_string(), "device mlx5_0 port 1 is not active (state DOWN)");
    }
}
