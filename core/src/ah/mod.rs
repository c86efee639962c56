//! Address-handle attributes from a work completion: the two profiles.
//!
//! * [`libibverbs`] — `ibv_init_ah_from_wc`, bit-exact (rdma-core 44 = HEAD);
//! * [`kernel`] — `ib_init_ah_attr_from_wc`, bit-exact with the kernel vectors.
//!
//! Both are pure functions of (GID-table snapshot, completion fields,
//! 40-byte area): no allocation, no lock, no system call. Their C-mirror
//! outputs ([`IbvAhAttr`], [`RdmaAhAttr`]) are what the C code writes,
//! including on failure; [`Profile::words`] is the pipeline's entry point,
//! which gives either profile's attribute, with any [`Evidence`], in the
//! [word form](AttrWords) the AH cache keys on.
//!
//! ```
//! use udah_core::ah::{IbvWc, Profile, IBV_WC_GRH};
//! use udah_core::wire::{Evidence, Gid, GrhRepr};
//! use udah_core::{GidEntry, GidTable, GidType, LinkLayer};
//!
//! let ours = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
//! let peer = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
//! let mut gids: GidTable<8> = GidTable::new(1, LinkLayer::Infiniband, 8);
//! gids.set(0, GidEntry::new(ours, GidType::Ib)).unwrap();
//! let mut area = [0u8; 40];
//! GrhRepr { sgid: peer, dgid: ours, hop_limit: 1, next_header: 0x1b, ..GrhRepr::default() }.emit(&mut area);
//! let wc = IbvWc { wc_flags: IBV_WC_GRH, slid: 4, ..IbvWc::default() };
//!
//! for profile in [Profile::Libibverbs, Profile::Kernel] {
//!     let w = profile.words(&gids, &wc, &area, Evidence::None, 64).unwrap();
//!     assert_eq!((w.dgid(), w.sgid_index(), w.port()), (Some(peer), Some(0), 1));
//! }
//! ```

pub mod attr;
pub mod kernel;
pub mod libibverbs;
pub mod wc;

pub use attr::{
    AhAttr, AhType, AttrError, AttrWords, Dmac, FlowLabel, GlobalRoute, HopLimit, IbvAhAttr, IbvGlobalRoute, PortNum,
    RdmaAhAttr, RdmaGlobalRoute, Sl,
};
pub use wc::*;

use crate::gid_table::GidTable;
use crate::wire::{Area, Evidence};

/// Which C implementation to reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Profile {
    /// libibverbs `ibv_init_ah_from_wc`.
    #[default]
    Libibverbs,
    /// Linux `ib_init_ah_attr_from_wc`.
    Kernel,
}

/// Why a profile gave no attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProfileError {
    /// The libibverbs profile refused the completion (the attribute as C
    /// leaves it included).
    Libibverbs(libibverbs::IbvFailure),
    /// The kernel profile refused the completion.
    Kernel(kernel::KernelFailure),
    /// The kernel profile's attribute is not a valid [`AhAttr`] (an SL
    /// above 15, a port above 255). (The libibverbs profile's words are
    /// validated by the cache, which converts them only on a miss.)
    Attr(AttrError),
}

impl core::fmt::Display for ProfileError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProfileError::Libibverbs(e) => write!(f, "libibverbs profile: {e}"),
            ProfileError::Kernel(e) => write!(f, "kernel profile: {e}"),
            ProfileError::Attr(e) => write!(f, "attribute: {e}"),
        }
    }
}

impl core::error::Error for ProfileError {}

impl Profile {
    /// The attribute for a reply to `wc` (40-byte area `area`) on the port
    /// whose GID snapshot is `gids` (its port number and link layer are
    /// used), in the [word form](AttrWords) the AH cache keys on; the header
    /// type from `evidence` ([`Evidence::None`]: the profile's own
    /// heuristic, bit-exact). `route_hop_limit` is the hop limit where the
    /// kernel profile leaves it to the route ([`HopLimit::Route`]); the
    /// libibverbs profile does not read it. Both profiles and every evidence
    /// take a word path: no C struct and no [`AhAttr`] is built on success.
    #[inline(always)]
    pub fn words<C: Completion + ?Sized, const N: usize>(
        self,
        gids: &GidTable<N>,
        wc: &C,
        area: &Area,
        evidence: Evidence,
        route_hop_limit: u8,
    ) -> Result<AttrWords, ProfileError> {
        match self {
            Profile::Libibverbs => libibverbs::words(gids, &wc.ibv(), area, evidence).map_err(ProfileError::Libibverbs),
            Profile::Kernel => kernel::words(gids, wc, area, evidence, route_hop_limit),
        }
    }
}
