//! Address-handle attributes from a work completion.
//!
//! * [`libibverbs`] — `ibv_init_ah_from_wc`, bit-exact (rdma-core 44 = HEAD);
//! * [`kernel`] — `ib_init_ah_attr_from_wc`, bit-exact with the kernel vectors.
//!
//! Both are pure functions of (GID-table snapshot, completion fields,
//! 40-byte area): no allocation, no lock, no system call. Their outputs are
//! C mirrors ([`IbvAhAttr`], [`RdmaAhAttr`]) because the profiles are defined
//! by what the C code writes, including on failure; [`AhAttr`] is the
//! validated form a backend creates AHs from.

pub mod attr;
pub mod kernel;
pub mod libibverbs;
pub mod wc;

pub use attr::{
    AhAttr, AhType, AttrError, Dmac, FlowLabel, GlobalRoute, HopLimit, IbvAhAttr, IbvGlobalRoute, PortNum, RdmaAhAttr,
    RdmaGlobalRoute, Sl,
};
pub use wc::*;

/// Which C implementation to reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Profile {
    /// libibverbs `ibv_init_ah_from_wc`.
    #[default]
    Libibverbs,
    /// Linux `ib_init_ah_attr_from_wc`.
    Kernel,
}
