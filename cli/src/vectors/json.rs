//! The JSON shapes of a case: hex strings, ports and GIDs, the work completion, and each profile's expectation.

use super::*;

// ---------------------------------------------------------------------------
// Hex strings
// ---------------------------------------------------------------------------

/// `N` bytes written as `2 N` hex digits (lower case on output, either case
/// on input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hex<const N: usize>(pub [u8; N]);

impl<const N: usize> Hex<N> {
    /// Decodes exactly `2 N` hex digits.
    pub fn parse(s: &str) -> Result<Hex<N>, String> {
        let bytes = s.as_bytes();
        if bytes.len() != 2 * N {
            return Err(format!("expected {} hex digits, got {}", 2 * N, bytes.len()));
        }
        let mut out = [0u8; N];
        for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
            let [hi, lo] = [pair[0], pair[1]].map(|c| (c as char).to_digit(16));
            match (hi, lo) {
                (Some(h), Some(l)) => *o = (h * 16 + l) as u8,
                _ => return Err(format!("not a hex string: {s:?}")),
            }
        }
        Ok(Hex(out))
    }
}

impl<const N: usize> fmt::Display for Hex<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        // One `write_str` per 32 digits instead of a formatting call per byte.
        for chunk in self.0.chunks(16) {
            let mut buf = [0u8; 32];
            for (pair, b) in buf.chunks_exact_mut(2).zip(chunk) {
                pair[0] = DIGITS[usize::from(b >> 4)];
                pair[1] = DIGITS[usize::from(b & 15)];
            }
            let text = core::str::from_utf8(&buf[..2 * chunk.len()]).map_err(|_| fmt::Error)?;
            f.write_str(text)?;
        }
        Ok(())
    }
}

impl<const N: usize> Serialize for Hex<N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de, const N: usize> Deserialize<'de> for Hex<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Hex<N>, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Hex::parse(&s).map_err(D::Error::custom)
    }
}

// ---------------------------------------------------------------------------
// Case input (shared by both formats)
// ---------------------------------------------------------------------------

/// `port.link_layer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkLayerJson {
    /// `"infiniband"`.
    Infiniband,
    /// `"ethernet"`.
    Ethernet,
    /// `"opa"` (kernel profile).
    Opa,
    /// `"unspecified"` (libibverbs oracle only; no effect on the result).
    Unspecified,
}

/// `port.gids[].type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GidTypeJson {
    /// `"ib"`.
    Ib,
    /// `"roce_v1"`.
    RoceV1,
    /// `"roce_v2"`.
    RoceV2,
}

impl From<GidTypeJson> for GidType {
    fn from(t: GidTypeJson) -> GidType {
        match t {
            GidTypeJson::Ib => GidType::Ib,
            GidTypeJson::RoceV1 => GidType::RoceV1,
            GidTypeJson::RoceV2 => GidType::RoceV2,
        }
    }
}

/// One listed (non-empty) GID-table slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GidJson {
    /// Slot index.
    pub index: u32,
    /// The GID, wire order (an all-zero GID is an empty slot).
    pub gid: Hex<16>,
    /// The GID type.
    #[serde(rename = "type")]
    pub gid_type: GidTypeJson,
    /// Kernel profile: the VLAN id of the entry's netdev (`null` = untagged).
    /// The edge-case document calls it `netdev_vlan`.
    #[serde(default, alias = "netdev_vlan", skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// Kernel profile: `"upper"` for a netdev stacked on the VLAN device (same
    /// result; kept for completeness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ndev: Option<String>,
}

/// `port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortJson {
    /// Port number passed to the function.
    pub num: u32,
    /// Link layer / port kind.
    pub link_layer: LinkLayerJson,
    /// Number of table slots.
    pub gid_tbl_len: u32,
    /// The non-empty slots.
    #[serde(default)]
    pub gids: Vec<GidJson>,
}

/// `wc`: the union of both profiles' fields (missing ones are 0).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WcJson {
    /// Raw flag bits (userspace `IBV_WC_*` or kernel `IB_WC_*`, by profile).
    pub wc_flags: u32,
    /// Source LID (16 bits for libibverbs, 32 for the kernel).
    #[serde(default)]
    pub slid: u32,
    /// Service level.
    #[serde(default)]
    pub sl: u8,
    /// Destination LID path bits.
    #[serde(default)]
    pub dlid_path_bits: u8,
    /// Remote QP number (never read).
    #[serde(default)]
    pub src_qp: u32,
    /// P_Key index (never read).
    #[serde(default)]
    pub pkey_index: u16,
    /// Kernel: VLAN id (read with `IB_WC_WITH_VLAN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_id: Option<u16>,
    /// Kernel: driver-reported network type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_hdr_type: Option<u8>,
    /// Kernel: source MAC (never read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smac: Option<Hex<6>>,
}

/// The input part of a case: everything but `expect`, in the common format.
/// Serializes to a line the oracle accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseInput {
    /// Case name.
    pub name: String,
    /// `"kernel"`, `"libibverbs"`, or absent (libibverbs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The port and its GID table.
    pub port: PortJson,
    /// The work completion.
    pub wc: WcJson,
    /// The 40-byte area, or `null` for a NULL pointer.
    pub grh: Option<Hex<40>>,
}

// ---------------------------------------------------------------------------
// Expectations
// ---------------------------------------------------------------------------

/// `expect.ah_attr.grh` of the libibverbs format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IbvGrhJson {
    /// Destination GID.
    pub dgid: Hex<16>,
    /// Flow label.
    pub flow_label: u32,
    /// Local GID index (8 bits).
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
}

/// `expect.ah_attr` of the libibverbs format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IbvAhAttrJson {
    /// Destination LID.
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub src_path_bits: u8,
    /// Static rate.
    pub static_rate: u8,
    /// `is_global`.
    pub is_global: u8,
    /// Port number.
    pub port_num: u8,
    /// Global route.
    pub grh: IbvGrhJson,
}

/// `expect` of the libibverbs format (also the `ibv-oracle` output line,
/// whose extra keys are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IbvExpect {
    /// 0, -1, or `null` after a crash.
    pub ret: Option<i32>,
    /// errno name; compared only when `ret != 0`.
    #[serde(default)]
    pub errno: Option<String>,
    /// The attribute as left by the call (absent is allowed after a crash).
    #[serde(default)]
    pub ah_attr: Option<IbvAhAttrJson>,
    /// GID queries made (optional).
    #[serde(default)]
    pub gid_queries: Option<u64>,
    /// `"SIGSEGV"` or `null`.
    #[serde(default)]
    pub signal: Option<String>,
}

/// `expect.ah_attr.type` of the kernel format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AhTypeJson {
    /// `"IB"`.
    #[serde(rename = "IB")]
    Ib,
    /// `"ROCE"`.
    #[serde(rename = "ROCE")]
    Roce,
    /// `"OPA"`.
    #[serde(rename = "OPA")]
    Opa,
}

impl AhTypeJson {
    pub(super) fn of(t: AhType) -> Option<AhTypeJson> {
        match t {
            AhType::Ib => Some(AhTypeJson::Ib),
            AhType::Roce => Some(AhTypeJson::Roce),
            AhType::Opa => Some(AhTypeJson::Opa),
            AhType::Undefined => None,
        }
    }
}

/// A kernel hop limit: a number or `"route"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HopLimitJson(pub HopLimit);

impl Serialize for HopLimitJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            HopLimit::Value(v) => s.serialize_u8(v),
            HopLimit::Route => s.serialize_str("route"),
        }
    }
}

impl<'de> Deserialize<'de> for HopLimitJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HopLimitJson, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) if s == "route" => Ok(HopLimitJson(HopLimit::Route)),
            Value::Number(n) => n
                .as_u64()
                .and_then(|v| u8::try_from(v).ok())
                .map(|v| HopLimitJson(HopLimit::Value(v)))
                .ok_or_else(|| D::Error::custom(format!("hop_limit {n} is not a u8"))),
            v => Err(D::Error::custom(format!("hop_limit must be a u8 or \"route\", got {v}"))),
        }
    }
}

/// A kernel destination MAC: 12 hex digits or `"resolve"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DmacJson(pub Dmac);

impl Serialize for DmacJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Dmac::Mac(m) => s.collect_str(&Hex(m)),
            Dmac::Resolve => s.serialize_str("resolve"),
        }
    }
}

impl<'de> Deserialize<'de> for DmacJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<DmacJson, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        if s == "resolve" {
            return Ok(DmacJson(Dmac::Resolve));
        }
        Hex::<6>::parse(&s).map(|h| DmacJson(Dmac::Mac(h.0))).map_err(D::Error::custom)
    }
}

/// `expect.ah_attr.roce` of the kernel format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoceJson {
    /// Destination MAC.
    pub dmac: DmacJson,
}

/// `expect.ah_attr.grh` of the kernel format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelGrhJson {
    /// Remote GID.
    pub dgid: Hex<16>,
    /// Flow label.
    pub flow_label: u32,
    /// Local GID index (8 bits).
    pub sgid_index: u8,
    /// Hop limit or `"route"`.
    pub hop_limit: HopLimitJson,
    /// Traffic class.
    pub traffic_class: u8,
    /// Index of the referenced GID entry, or `null`.
    pub sgid_attr_index: Option<u32>,
}

/// `expect.ah_attr` of the kernel format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelAhAttrJson {
    /// Attribute type.
    #[serde(rename = "type")]
    pub ah_type: AhTypeJson,
    /// Service level.
    pub sl: u8,
    /// Port number.
    pub port_num: u32,
    /// Static rate (always 0; absent in the edge-case document).
    #[serde(default)]
    pub static_rate: u8,
    /// `IB_AH_GRH`.
    pub ah_flags: u8,
    /// DLID (`null` on RoCE).
    pub dlid: Option<u32>,
    /// Source path bits (`null` on RoCE).
    pub src_path_bits: Option<u8>,
    /// Global route.
    pub grh: KernelGrhJson,
    /// RoCE part (`null` on IB/OPA).
    pub roce: Option<RoceJson>,
}

/// `expect` of the kernel format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelExpect {
    /// 0, a negative errno, or `null` after a fault.
    pub ret: Option<i32>,
    /// errno name; compared only when `ret != 0`.
    #[serde(default)]
    pub errno: Option<String>,
    /// The attribute as left by the call (not compared after a fault).
    #[serde(default)]
    pub ah_attr: Option<KernelAhAttrJson>,
    /// `"SIGSEGV"` or `null`.
    #[serde(default)]
    pub signal: Option<String>,
}

/// A case's expectation, by profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// libibverbs profile.
    Libibverbs(IbvExpect),
    /// Kernel profile.
    Kernel(KernelExpect),
}

impl Expect {
    /// The profile the expectation belongs to.
    pub fn profile(&self) -> Profile {
        match self {
            Expect::Libibverbs(_) => Profile::Libibverbs,
            Expect::Kernel(_) => Profile::Kernel,
        }
    }
}
