//! Address-handle attributes: the C mirrors each profile produces, and the
//! validated [`AhAttr`] that backends create AHs from.

use core::num::NonZeroU8;

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
    /// `w` (the C struct's memory image on x86-64). Written field by field
    /// from the words, which the optimiser turns back into four stores.
    #[inline(always)]
    pub(crate) const fn from_words(w: [u64; 4]) -> IbvAhAttr {
        let [w0, w1, w2, w3] = w;
        let d = (w0 as u128) | (w1 as u128) << 64;
        IbvAhAttr {
            grh: IbvGlobalRoute {
                dgid: d.to_le_bytes(),
                flow_label: w2 as u32,
                sgid_index: (w2 >> 32) as u8,
                hop_limit: (w2 >> 40) as u8,
                traffic_class: (w2 >> 48) as u8,
                reserved: (w2 >> 56) as u8,
            },
            dlid: w3 as u16,
            sl: (w3 >> 16) as u8,
            src_path_bits: (w3 >> 24) as u8,
            static_rate: (w3 >> 32) as u8,
            is_global: (w3 >> 40) as u8,
            port_num: (w3 >> 48) as u8,
            reserved: (w3 >> 56) as u8,
        }
    }

    /// The four little-endian words of the C struct's memory image (the
    /// inverse of [`from_words`](Self::from_words)).
    #[inline(always)]
    pub(crate) const fn to_words(self) -> [u64; 4] {
        let d = u128::from_le_bytes(self.grh.dgid);
        let g = &self.grh;
        [
            d as u64,
            (d >> 64) as u64,
            g.flow_label as u64
                | (g.sgid_index as u64) << 32
                | (g.hop_limit as u64) << 40
                | (g.traffic_class as u64) << 48
                | (g.reserved as u64) << 56,
            self.dlid as u64
                | (self.sl as u64) << 16
                | (self.src_path_bits as u64) << 24
                | (self.static_rate as u64) << 32
                | (self.is_global as u64) << 40
                | (self.port_num as u64) << 48
                | (self.reserved as u64) << 56,
        ]
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

/// A service level, 0..=15.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Sl(u8);

impl Sl {
    /// `Some` when `v <= 15`.
    pub const fn new(v: u8) -> Option<Sl> {
        if v <= 15 { Some(Sl(v)) } else { None }
    }
    /// The value.
    pub const fn get(self) -> u8 {
        self.0
    }
}

/// A flow label, 0..=0xFFFFF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct FlowLabel(u32);

impl FlowLabel {
    /// `Some` when `v <= 0xFFFFF`.
    pub const fn new(v: u32) -> Option<FlowLabel> {
        if v <= 0xf_ffff { Some(FlowLabel(v)) } else { None }
    }
    /// The value.
    pub const fn get(self) -> u32 {
        self.0
    }
    /// The RoCE v2 UDP source port derived from a non-zero flow label
    /// (`ibv_flow_label_to_udp_sport`); `None` for 0.
    pub const fn udp_sport(self) -> Option<u16> {
        let fl = self.0;
        if fl == 0 {
            return None;
        }
        Some((((fl & 0x3fff) ^ ((fl & 0xfc000) >> 14)) | 0xc000) as u16)
    }
}

/// A port number, 1..=255.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortNum(NonZeroU8);

impl PortNum {
    /// `Some` when `v >= 1`.
    pub const fn new(v: u8) -> Option<PortNum> {
        match NonZeroU8::new(v) {
            Some(n) => Some(PortNum(n)),
            None => None,
        }
    }
    /// The value.
    pub const fn get(self) -> u8 {
        self.0.get()
    }
}

/// The GRH part of a validated [`AhAttr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GlobalRoute {
    /// Remote GID.
    pub dgid: Gid,
    /// Flow label.
    pub flow_label: FlowLabel,
    /// Local GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
}

/// Validated AH attributes: what a backend creates an AH from, and what the
/// AH table deduplicates on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AhAttr {
    /// Port.
    pub port: PortNum,
    /// Destination LID (0 on RoCE).
    pub dlid: u16,
    /// Service level.
    pub sl: Sl,
    /// Source path bits.
    pub src_path_bits: u8,
    /// `enum ibv_rate` (0 = port current rate).
    pub static_rate: u8,
    /// Global route, if any.
    pub grh: Option<GlobalRoute>,
}

/// Why a C attribute is not a valid [`AhAttr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AttrError {
    /// SL above 15 (libibverbs copies `wc.sl` unmasked).
    InvalidSl(u8),
    /// Flow label above 0xFFFFF.
    InvalidFlowLabel(u32),
    /// Port 0.
    InvalidPort,
    /// The kernel attribute still needs route resolution (hop limit, MAC),
    /// which only a backend can do.
    Unresolved,
}

impl core::fmt::Display for AttrError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AttrError::InvalidSl(v) => write!(f, "service level {v} is above 15"),
            AttrError::InvalidFlowLabel(v) => write!(f, "flow label {v:#x} is above 0xfffff"),
            AttrError::InvalidPort => f.write_str("port number 0"),
            AttrError::Unresolved => f.write_str("attribute needs route resolution by the backend"),
        }
    }
}

impl core::error::Error for AttrError {}

impl TryFrom<&IbvAhAttr> for AhAttr {
    type Error = AttrError;
    fn try_from(a: &IbvAhAttr) -> Result<AhAttr, AttrError> {
        let grh = if a.is_global != 0 {
            Some(GlobalRoute {
                dgid: Gid(a.grh.dgid),
                flow_label: FlowLabel::new(a.grh.flow_label).ok_or(AttrError::InvalidFlowLabel(a.grh.flow_label))?,
                sgid_index: a.grh.sgid_index,
                hop_limit: a.grh.hop_limit,
                traffic_class: a.grh.traffic_class,
            })
        } else {
            None
        };
        Ok(AhAttr {
            port: PortNum::new(a.port_num).ok_or(AttrError::InvalidPort)?,
            dlid: a.dlid,
            sl: Sl::new(a.sl).ok_or(AttrError::InvalidSl(a.sl))?,
            src_path_bits: a.src_path_bits,
            static_rate: a.static_rate,
            grh,
        })
    }
}

impl From<&AhAttr> for IbvAhAttr {
    fn from(a: &AhAttr) -> IbvAhAttr {
        let g = a.grh.unwrap_or(GlobalRoute {
            dgid: Gid::ZERO,
            flow_label: FlowLabel(0),
            sgid_index: 0,
            hop_limit: 0,
            traffic_class: 0,
        });
        IbvAhAttr {
            grh: IbvGlobalRoute {
                dgid: g.dgid.0,
                flow_label: g.flow_label.get(),
                sgid_index: g.sgid_index,
                hop_limit: g.hop_limit,
                traffic_class: g.traffic_class,
                reserved: 0,
            },
            dlid: a.dlid,
            sl: a.sl.get(),
            src_path_bits: a.src_path_bits,
            static_rate: a.static_rate,
            is_global: u8::from(a.grh.is_some()),
            port_num: a.port.get(),
            reserved: 0,
        }
    }
}

impl RdmaAhAttr {
    /// The validated attribute, once the backend has resolved the route's hop
    /// limit (`route_hop_limit`, used where the kernel output says
    /// [`HopLimit::Route`]). SL is masked to 4 bits as RoCE/IB hardware does.
    pub fn to_ah_attr(&self, route_hop_limit: u8) -> Result<AhAttr, AttrError> {
        let grh = if self.ah_flags & 1 != 0 {
            Some(GlobalRoute {
                dgid: self.grh.dgid,
                flow_label: FlowLabel::new(self.grh.flow_label)
                    .ok_or(AttrError::InvalidFlowLabel(self.grh.flow_label))?,
                sgid_index: self.grh.sgid_index,
                hop_limit: match self.grh.hop_limit {
                    HopLimit::Value(v) => v,
                    HopLimit::Route => route_hop_limit,
                },
                traffic_class: self.grh.traffic_class,
            })
        } else {
            None
        };
        let port = u8::try_from(self.port_num).ok().and_then(PortNum::new).ok_or(AttrError::InvalidPort)?;
        Ok(AhAttr {
            port,
            dlid: self.dlid.map_or(0, |d| d as u16),
            sl: Sl::new(self.sl).ok_or(AttrError::InvalidSl(self.sl))?,
            src_path_bits: self.src_path_bits.unwrap_or(0),
            static_rate: self.static_rate,
            grh,
        })
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn newtypes() {
        assert!(Sl::new(15).is_some() && Sl::new(16).is_none());
        assert!(FlowLabel::new(0xfffff).is_some() && FlowLabel::new(0x100000).is_none());
        assert!(PortNum::new(0).is_none());
        assert_eq!(FlowLabel::new(0).unwrap().udp_sport(), None);
        assert_eq!(
            FlowLabel::new(0x12345).unwrap().udp_sport(),
            Some((((0x12345u32 & 0x3fff) ^ (0x12345u32 >> 14)) | 0xc000) as u16)
        );
    }

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
