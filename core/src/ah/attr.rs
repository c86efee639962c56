//! Address-handle attributes: the C mirrors each profile produces, and the
//! validated [`AhAttr`] that backends create AHs from.

pub use crate::attr::{AhAttr, AttrError, AttrWords, FlowLabel, GlobalRoute, PortNum, Sl};
use crate::attr::{w2, w3, word2, word3};
use crate::wire::Gid;

/// `struct ibv_global_route`, layout-compatible with rdma-core's `verbs.h`
/// (24 bytes; the C struct has alignment 8 only through `union ibv_gid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct IbvGlobalRoute {
    /// Destination GID (the remote side), wire order.
    pub dgid: [u8; 16],
    /// Flow label (low 20 bits meaningful).
    pub flow_label: u32,
    /// Local GID index, truncated to 8 bits.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Padding, always zero.
    pub reserved: u8,
}

/// `struct ibv_ah_attr`, layout-compatible with rdma-core's `verbs.h`
/// (32 bytes), holding exactly what `ibv_init_ah_from_wc` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct IbvAhAttr {
    /// Global route, meaningful when `is_global` is 1.
    pub grh: IbvGlobalRoute,
    /// Destination LID (libibverbs copies `wc.slid`, also on RoCE).
    pub dlid: u16,
    /// Service level (copied unmasked from `wc.sl`).
    pub sl: u8,
    /// Source path bits.
    pub src_path_bits: u8,
    /// `enum ibv_rate`; always 0 (port current rate) here.
    pub static_rate: u8,
    /// 1 when the GRH part is valid.
    pub is_global: u8,
    /// Port number.
    pub port_num: u8,
    /// Padding, always zero.
    pub reserved: u8,
}

impl IbvAhAttr {
    /// The attribute whose 32 bytes, read as four little-endian words, are
    /// `w` (the C struct's memory image on x86-64; layout in
    /// [`crate::attr`]). Written field by field from the words, which the
    /// optimiser turns back into four stores.
    #[inline(always)]
    pub(crate) const fn from_words(w: [u64; 4]) -> IbvAhAttr {
        let [w0, w1, w2, w3] = w;
        IbvAhAttr {
            grh: IbvGlobalRoute {
                dgid: Gid::from_words(w0, w1).0,
                flow_label: w2 as u32,
                sgid_index: (w2 >> w2::SGID_INDEX) as u8,
                hop_limit: (w2 >> w2::HOP_LIMIT) as u8,
                traffic_class: (w2 >> w2::TRAFFIC_CLASS) as u8,
                reserved: (w2 >> w2::RESERVED) as u8,
            },
            dlid: w3 as u16,
            sl: (w3 >> w3::SL) as u8,
            src_path_bits: (w3 >> w3::SRC_PATH_BITS) as u8,
            static_rate: (w3 >> w3::STATIC_RATE) as u8,
            is_global: (w3 >> w3::IS_GLOBAL) as u8,
            port_num: (w3 >> w3::PORT) as u8,
            reserved: (w3 >> w3::RESERVED) as u8,
        }
    }

    /// The four little-endian words of the C struct's memory image (the
    /// inverse of [`from_words`](Self::from_words)).
    #[inline(always)]
    pub(crate) const fn to_words(self) -> [u64; 4] {
        let g = &self.grh;
        let (d0, d1) = Gid(g.dgid).to_words();
        let global = self.is_global as u64;
        [
            d0,
            d1,
            word2(g.flow_label, g.sgid_index, g.hop_limit, g.traffic_class) | (g.reserved as u64) << w2::RESERVED,
            // `is_global` is a byte here, not a bool: or-ed in whole.
            word3(self.dlid, self.sl, self.src_path_bits, self.static_rate, false, self.port_num)
                | global << w3::IS_GLOBAL
                | (self.reserved as u64) << w3::RESERVED,
        ]
    }

    /// The attribute's [word form](AttrWords).
    #[inline(always)]
    pub const fn words(&self) -> AttrWords {
        AttrWords::from_raw(self.to_words())
    }
}

const _: () = {
    assert!(core::mem::size_of::<IbvGlobalRoute>() == 24);
    assert!(core::mem::size_of::<IbvAhAttr>() == 32);
    assert!(core::mem::offset_of!(IbvGlobalRoute, flow_label) == 16);
    assert!(core::mem::offset_of!(IbvGlobalRoute, sgid_index) == 20);
    assert!(core::mem::offset_of!(IbvAhAttr, dlid) == 24);
    assert!(core::mem::offset_of!(IbvAhAttr, sl) == 26);
    assert!(core::mem::offset_of!(IbvAhAttr, is_global) == 29);
    assert!(core::mem::offset_of!(IbvAhAttr, port_num) == 30);
};

/// `enum rdma_ah_attr_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum AhType {
    /// Not determined.
    #[default]
    Undefined = 0,
    /// InfiniBand.
    Ib = 1,
    /// RoCE.
    Roce = 2,
    /// Omni-Path.
    Opa = 3,
}

/// A hop limit in the kernel profile's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HopLimit {
    /// A known value (0 when not filled, 255 for IB and link-local RoCE v1).
    Value(u8),
    /// The route's hop limit, to be resolved by the backend at create time
    /// (the kernel resolves the route and neighbour here; udah leaves it to
    /// the backend, like the vectors' `"route"`).
    Route,
}

impl Default for HopLimit {
    fn default() -> HopLimit {
        HopLimit::Value(0)
    }
}

/// A destination MAC in the kernel profile's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dmac {
    /// A known MAC (zero when not computed).
    Mac([u8; 6]),
    /// The neighbour MAC of `grh.dgid`, to be resolved by the backend at
    /// create time (the vectors' `"resolve"`).
    Resolve,
}

/// The GRH part of [`RdmaAhAttr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RdmaGlobalRoute {
    /// Destination GID (the remote side).
    pub dgid: Gid,
    /// Flow label.
    pub flow_label: u32,
    /// Local GID index, truncated to 8 bits.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: HopLimit,
    /// Traffic class.
    pub traffic_class: u8,
    /// The GID entry whose reference the kernel attribute holds
    /// (`grh.sgid_attr->index`, untruncated), or `None`.
    pub sgid_attr_index: Option<u32>,
}

/// What the kernel's `ib_init_ah_attr_from_wc` leaves in `struct
/// rdma_ah_attr`, with route-dependent values symbolic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RdmaAhAttr {
    /// The attribute type, from the port.
    pub ah_type: AhType,
    /// Service level (unmasked).
    pub sl: u8,
    /// Port number.
    pub port_num: u32,
    /// Static rate; always 0.
    pub static_rate: u8,
    /// `IB_AH_GRH` (1) when the GRH part is filled.
    pub ah_flags: u8,
    /// The GRH part.
    pub grh: RdmaGlobalRoute,
    /// IB: `slid & 0xffff`; OPA: `slid`; `None` on RoCE (the kernel drops it).
    pub dlid: Option<u32>,
    /// IB/OPA source path bits; `None` on RoCE.
    pub src_path_bits: Option<u8>,
    /// RoCE destination MAC; `None` on IB/OPA.
    pub roce: Option<Dmac>,
}

impl TryFrom<&IbvAhAttr> for AhAttr {
    type Error = AttrError;
    #[inline]
    fn try_from(a: &IbvAhAttr) -> Result<AhAttr, AttrError> {
        AttrWords::from_raw(a.to_words()).to_attr()
    }
}

impl From<&AhAttr> for IbvAhAttr {
    #[inline]
    fn from(a: &AhAttr) -> IbvAhAttr {
        IbvAhAttr::from_words(AttrWords::from_attr(a).raw())
    }
}

impl RdmaAhAttr {
    /// The validated attribute, once the backend has resolved the route's hop
    /// limit (`route_hop_limit`, used where the kernel output says
    /// [`HopLimit::Route`]): an SL above 15, a flow label above 20 bits or a
    /// port outside 1..=255 is an error.
    pub fn to_ah_attr(&self, route_hop_limit: u8) -> Result<AhAttr, AttrError> {
        self.to_words(route_hop_limit).and_then(AttrWords::to_attr)
    }

    /// [`to_ah_attr`](Self::to_ah_attr) in its canonical [word form](AttrWords),
    /// without building the [`AhAttr`] (the kernel profile's way into the AH
    /// cache).
    #[inline]
    pub fn to_words(&self, route_hop_limit: u8) -> Result<AttrWords, AttrError> {
        let global = self.ah_flags & 1 != 0;
        let g = &self.grh;
        let w2 = if global {
            if g.flow_label > 0xf_ffff {
                return Err(AttrError::InvalidFlowLabel(g.flow_label));
            }
            let hop = match g.hop_limit {
                HopLimit::Value(v) => v,
                HopLimit::Route => route_hop_limit,
            };
            word2(g.flow_label, g.sgid_index, hop, g.traffic_class)
        } else {
            0
        };
        let port = u8::try_from(self.port_num).ok().filter(|&p| p != 0).ok_or(AttrError::InvalidPort)?;
        if self.sl > 15 {
            return Err(AttrError::InvalidSl(self.sl));
        }
        let (d0, d1) = if global { g.dgid.to_words() } else { (0, 0) };
        let dlid = self.dlid.map_or(0, |d| d as u16);
        let w3 = word3(dlid, self.sl, self.src_path_bits.unwrap_or(0), self.static_rate, global, port);
        Ok(AttrWords::from_raw([d0, d1, w2, w3]))
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn round_trip_c_attr() {
        let c = IbvAhAttr {
            grh: IbvGlobalRoute {
                dgid: [1; 16],
                flow_label: 5,
                sgid_index: 3,
                hop_limit: 64,
                traffic_class: 7,
                reserved: 0,
            },
            dlid: 0,
            sl: 3,
            src_path_bits: 0,
            static_rate: 0,
            is_global: 1,
            port_num: 1,
            reserved: 0,
        };
        let a = AhAttr::try_from(&c).unwrap();
        assert_eq!(IbvAhAttr::from(&a), c);
        let bad = IbvAhAttr { sl: 31, ..c };
        assert_eq!(AhAttr::try_from(&bad), Err(AttrError::InvalidSl(31)));
    }
}
