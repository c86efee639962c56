//! Test vectors: reading, running and checking them.
//!
//! Two JSON Lines formats describe a call of an AH-from-WC function and what
//! the C code did:
//!
//! * the libibverbs profile (`shared/vectors/FORMAT.md`: `libibverbs-*.jsonl`,
//!   `oracle/handcheck.jsonl`, the capture cases), whose lines have no
//!   `profile` field;
//! * the kernel profile (`shared/vectors/FORMAT-kernel.md`:
//!   `kernel-*.jsonl`), whose lines say `"profile": "kernel"`.
//!
//! A third, pretty-printed JSON document (`shared/spec/ah_from_wc_edge_cases.json`,
//! an object with `description`, `cases` and `notes`) holds cases with the
//! results of both profiles side by side; [`load_str`] turns each of its
//! cases into one case per profile ([`edge`]).
//!
//! A [`Case`] is turned into the core's inputs (a GID-table snapshot, a work
//! completion, the 40-byte area), run through the profile
//! ([`Case::execute`]), and every field of its expectation is compared
//! exactly as the FORMAT documents say ([`Case::check`]), giving one
//! [`Mismatch`] per differing field.

use core::fmt;
use std::path::{Path, PathBuf};

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use udah_core::ah::kernel::{self, KernelResult};
use udah_core::ah::libibverbs::{self, IbvResult, Verdict};
use udah_core::ah::{AhType, Dmac, HopLimit, IBV_WC_GRH, IbvAhAttr, IbvWc, KernelWc, RdmaAhAttr};
use udah_core::error::errno;
use udah_core::{GidEntry, GidTable, GidType, IbvError, KernelError, LinkLayer, wire::Gid};

pub use udah_core::ah::Profile;

/// The largest GID-table index (plus one) a case may list: the runner's
/// biggest snapshot capacity. Tables may be longer (`gid_tbl_len` up to
/// 65536); their slots at or above the capacity are empty.
pub const MAX_CAPACITY: usize = 4096;

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
    fn of(t: AhType) -> Option<AhTypeJson> {
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

// ---------------------------------------------------------------------------
// Errors and mismatches
// ---------------------------------------------------------------------------

/// A case that is well-formed JSON but cannot be run as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseError {
    /// The `profile` field names no known profile.
    UnknownProfile(String),
    /// The case has no `expect` object.
    MissingExpect,
    /// `expect` does not have the shape of the profile's expectation.
    BadExpect {
        /// The profile the case runs under.
        profile: Profile,
        /// The decoder's complaint.
        message: String,
    },
    /// The case needs `ah_attr` but has none.
    MissingAhAttr,
    /// A value is outside what the profile's C type can hold.
    OutOfRange {
        /// The field.
        field: &'static str,
        /// The value.
        value: u64,
    },
    /// The link layer is not allowed in this profile.
    BadLinkLayer(LinkLayerJson),
    /// A GID index at or beyond [`MAX_CAPACITY`].
    OverCapacity {
        /// The index.
        index: u32,
    },
    /// The port's GID list breaks the format's rules (an index at or past
    /// `gid_tbl_len`, an index listed twice, a table longer than the
    /// profile allows).
    BadPort(String),
    /// `expect` has the other profile's shape: the case was written for
    /// `written_for`, and was asked to run under the other one.
    WrongFormat {
        /// The profile whose format `expect` has.
        written_for: Profile,
    },
    /// The GID table refused an entry.
    Table {
        /// The index.
        index: u32,
        /// Why.
        error: udah_core::GidTableError,
    },
}

impl fmt::Display for CaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaseError::UnknownProfile(p) => write!(f, "unknown profile {p:?} (want \"libibverbs\" or \"kernel\")"),
            CaseError::MissingExpect => f.write_str("the case has no \"expect\" object"),
            CaseError::BadExpect { profile, message } => {
                write!(f, "\"expect\" is not a {} expectation: {message}", profile_name(*profile))
            }
            CaseError::MissingAhAttr => f.write_str("\"expect\" has no \"ah_attr\" although the call did not crash"),
            CaseError::OutOfRange { field, value } => write!(f, "{field} = {value} is out of range for this profile"),
            CaseError::BadLinkLayer(l) => write!(f, "link layer {l:?} is not valid for the kernel profile"),
            CaseError::OverCapacity { index } => {
                write!(f, "GID index {index} is beyond the runner's table capacity {MAX_CAPACITY}")
            }
            CaseError::BadPort(m) => write!(f, "port: {m}"),
            CaseError::WrongFormat { written_for } => {
                let (this, doc, other) = match written_for {
                    Profile::Libibverbs => ("libibverbs", "FORMAT.md", "kernel"),
                    Profile::Kernel => ("kernel", "FORMAT-kernel.md", "libibverbs"),
                };
                write!(
                    f,
                    "\"expect\" is in the {this} format ({doc}), so the case cannot run under the {other} profile \
                     (--profile only overrides a case whose expect has that profile's format, or picks a side of \
                     the edge-case document)"
                )
            }
            // The table's error names the index itself.
            CaseError::Table { error, .. } => write!(f, "port.gids: {error}"),
        }
    }
}

impl core::error::Error for CaseError {}

/// One field whose value differs from the expectation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The case name.
    pub case: String,
    /// The field, as a path into `expect` (`ret`, `ah_attr.grh.dgid` …).
    pub field: String,
    /// The expected value, JSON-like.
    pub expected: String,
    /// What the core gave, in the same notation.
    pub got: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MISMATCH {}: {}: expected {}, got {}", self.case, self.field, self.expected, self.got)
    }
}

/// The lower-case name of a profile, as in the `profile` field.
pub fn profile_name(p: Profile) -> &'static str {
    match p {
        Profile::Libibverbs => "libibverbs",
        Profile::Kernel => "kernel",
    }
}

/// Parses a profile name (`libibverbs` or `kernel`).
pub fn parse_profile(s: &str) -> Option<Profile> {
    match s {
        "libibverbs" => Some(Profile::Libibverbs),
        "kernel" => Some(Profile::Kernel),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------

/// A runnable case: input plus the expectation of its profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// The input.
    pub input: CaseInput,
    /// The expectation (its variant is the profile the case runs under).
    pub expect: Expect,
}

/// What the core returned for a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// libibverbs profile: the result and the GID queries C would have made.
    Libibverbs {
        /// The result.
        result: IbvResult,
        /// `gid_queries` as the C library would count them.
        gid_queries: u64,
    },
    /// Kernel profile.
    Kernel(KernelResult),
}

/// A JSON line (or object) of either format, with its `expect` still raw.
#[derive(Debug, Clone, Deserialize)]
struct RawCase {
    #[serde(flatten)]
    input: CaseInput,
    #[serde(default)]
    expect: Option<Value>,
}

impl Case {
    /// Builds a case from an input and an expectation object, under
    /// `profile` (or the input's own `profile` field when `None`).
    pub fn from_parts(input: CaseInput, expect: Option<Value>, profile: Option<Profile>) -> Result<Case, CaseError> {
        let profile = match (profile, input.profile.as_deref()) {
            (Some(p), _) => p,
            (None, None) => Profile::Libibverbs,
            (None, Some(s)) => parse_profile(s).ok_or_else(|| CaseError::UnknownProfile(s.to_owned()))?,
        };
        check_port(&input.port, profile)?;
        let expect = expect.ok_or(CaseError::MissingExpect)?;
        let other = match profile {
            Profile::Libibverbs => Profile::Kernel,
            Profile::Kernel => Profile::Libibverbs,
        };
        // An `expect` that fails as this profile's but fits the other's.
        let fits_other = |v: &Value| match other {
            Profile::Libibverbs => serde_json::from_value::<IbvExpect>(v.clone()).is_ok(),
            Profile::Kernel => serde_json::from_value::<KernelExpect>(v.clone()).is_ok(),
        };
        let bad = |e: serde_json::Error, v: &Value| {
            if fits_other(v) {
                CaseError::WrongFormat { written_for: other }
            } else {
                CaseError::BadExpect { profile, message: e.to_string() }
            }
        };
        let expect = match profile {
            Profile::Libibverbs => {
                let e: IbvExpect = serde_json::from_value(expect.clone()).map_err(|e| bad(e, &expect))?;
                if e.signal.is_none() && e.ah_attr.is_none() {
                    return Err(CaseError::MissingAhAttr);
                }
                Expect::Libibverbs(e)
            }
            Profile::Kernel => {
                let e: KernelExpect = serde_json::from_value(expect.clone()).map_err(|e| bad(e, &expect))?;
                if e.signal.is_none() && e.ah_attr.is_none() {
                    return Err(CaseError::MissingAhAttr);
                }
                Expect::Kernel(e)
            }
        };
        Ok(Case { input, expect })
    }

    /// The case name.
    pub fn name(&self) -> &str {
        &self.input.name
    }

    /// The profile the case runs under.
    pub fn profile(&self) -> Profile {
        self.expect.profile()
    }

    /// Runs the case through the core.
    pub fn execute(&self) -> Result<Output, CaseError> {
        let needed = self
            .input
            .port
            .gids
            .iter()
            .filter(|g| g.gid.0 != [0; 16])
            .map(|g| g.index)
            .max()
            .map_or(0, |i| i as usize + 1);
        match needed {
            0..=16 => self.execute_n::<16>(),
            17..=256 => self.execute_n::<256>(),
            257..=1024 => self.execute_n::<1024>(),
            1025..=MAX_CAPACITY => self.execute_n::<MAX_CAPACITY>(),
            _ => Err(CaseError::OverCapacity { index: (needed - 1) as u32 }),
        }
    }

    fn execute_n<const N: usize>(&self) -> Result<Output, CaseError> {
        let port = &self.input.port;
        let profile = self.profile();
        let port_num = u8::try_from(port.num)
            .map_err(|_| CaseError::OutOfRange { field: "port.num", value: u64::from(port.num) })?;
        let link_layer = match (port.link_layer, profile) {
            (LinkLayerJson::Infiniband, _) => LinkLayer::Infiniband,
            (LinkLayerJson::Ethernet, _) => LinkLayer::Ethernet,
            (LinkLayerJson::Opa, _) => LinkLayer::Opa,
            // The libibverbs function never looks at the link layer.
            (LinkLayerJson::Unspecified, Profile::Libibverbs) => LinkLayer::Ethernet,
            (l @ LinkLayerJson::Unspecified, Profile::Kernel) => return Err(CaseError::BadLinkLayer(l)),
        };
        if profile == Profile::Kernel && port_num == 0 {
            return Err(CaseError::OutOfRange { field: "port.num", value: 0 });
        }
        let mut table: Box<GidTable<N>> = Box::new(GidTable::new(port_num, link_layer, port.gid_tbl_len));
        for g in &port.gids {
            if g.gid.0 == [0; 16] {
                continue; // an empty slot, as in the kernel
            }
            let mut entry = GidEntry::new(Gid(g.gid.0), g.gid_type.into());
            if let Some(v) = g.vlan {
                entry = entry.with_vlan(v);
            }
            table.set(g.index, entry).map_err(|error| CaseError::Table { index: g.index, error })?;
        }
        let wc = &self.input.wc;
        let area = self.input.grh.as_ref().map(|h| &h.0);
        match profile {
            Profile::Libibverbs => {
                let ibv_wc = IbvWc {
                    wc_flags: wc.wc_flags,
                    slid: u16::try_from(wc.slid)
                        .map_err(|_| CaseError::OutOfRange { field: "wc.slid", value: u64::from(wc.slid) })?,
                    sl: wc.sl,
                    dlid_path_bits: wc.dlid_path_bits,
                    src_qp: wc.src_qp,
                    pkey_index: wc.pkey_index,
                };
                let result = libibverbs::init_ah_from_wc(&table, port_num, &ibv_wc, area);
                Ok(Output::Libibverbs { result, gid_queries: libibverbs_gid_queries(&table, port_num, &ibv_wc, area) })
            }
            Profile::Kernel => {
                let kwc = KernelWc {
                    wc_flags: wc.wc_flags,
                    slid: wc.slid,
                    sl: wc.sl,
                    dlid_path_bits: wc.dlid_path_bits,
                    vlan_id: wc.vlan_id.unwrap_or(0),
                    network_hdr_type: wc.network_hdr_type.unwrap_or(0),
                    smac: wc.smac.map_or([0; 6], |h| h.0),
                    src_qp: wc.src_qp,
                    pkey_index: wc.pkey_index,
                };
                Ok(Output::Kernel(kernel::init_ah_attr_from_wc(&table, &kwc, area)))
            }
        }
    }

    /// Runs the case and compares every field of the expectation.
    pub fn check(&self) -> Result<Vec<Mismatch>, CaseError> {
        let out = self.execute()?;
        let mut c = Cmp { case: self.name(), out: Vec::new() };
        match (&self.expect, out) {
            (Expect::Libibverbs(e), Output::Libibverbs { result, gid_queries }) => {
                check_libibverbs(&mut c, e, result, gid_queries)?
            }
            (Expect::Kernel(e), Output::Kernel(result)) => check_kernel(&mut c, e, result)?,
            // `execute` runs the profile of the expectation.
            (e, _) => return Err(CaseError::BadExpect { profile: e.profile(), message: "profile mix-up".into() }),
        }
        Ok(c.out)
    }
}

/// `gid_queries` as libibverbs would count them: 0 without a search, else
/// what [`GidTable::libibverbs_query_count`] says for the search's result.
fn libibverbs_gid_queries<const N: usize>(table: &GidTable<N>, port: u8, wc: &IbvWc, area: Option<&[u8; 40]>) -> u64 {
    let Some(area) = area else { return 0 };
    if wc.wc_flags & IBV_WC_GRH == 0 {
        return 0;
    }
    let c = libibverbs::classify(area);
    if c.verdict != Verdict::Search {
        return 0;
    }
    table.libibverbs_query_count(port, table.find_libibverbs(port, &c.local, c.want_v2))
}

struct Cmp<'a> {
    case: &'a str,
    out: Vec<Mismatch>,
}

impl Cmp<'_> {
    fn field<T: PartialEq + fmt::Display>(&mut self, field: &str, expected: T, got: T) {
        if expected != got {
            self.out.push(Mismatch {
                case: self.case.to_owned(),
                field: field.to_owned(),
                expected: expected.to_string(),
                got: got.to_string(),
            });
        }
    }
}

/// `Option<T>` printed as JSON (`null` or the value).
#[derive(PartialEq)]
struct Nullable<T>(Option<T>);

impl<T: fmt::Display> fmt::Display for Nullable<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(v) => v.fmt(f),
            None => f.write_str("null"),
        }
    }
}

/// A string printed with quotes, as in JSON.
#[derive(PartialEq)]
struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

fn quoted(s: Option<&str>) -> Nullable<Quoted<'_>> {
    Nullable(s.map(Quoted))
}

fn check_libibverbs(c: &mut Cmp<'_>, e: &IbvExpect, result: IbvResult, gid_queries: u64) -> Result<(), CaseError> {
    let crashed = matches!(result, Err(f) if f.error == IbvError::MissingGrh);
    if e.signal.is_some() || crashed {
        let got = if crashed { Some("SIGSEGV") } else { None };
        c.field("signal", quoted(e.signal.as_deref()), quoted(got));
        return Ok(());
    }
    let ret = if result.is_ok() { 0 } else { -1 };
    c.field("ret", Nullable(e.ret), Nullable(Some(ret)));
    if e.ret != Some(0) {
        let got = result.err().map(|f| errno::name(f.error.errno()));
        c.field("errno", quoted(e.errno.as_deref()), quoted(got));
    }
    let x = e.ah_attr.as_ref().ok_or(CaseError::MissingAhAttr)?;
    let a: IbvAhAttr = match result {
        Ok(a) => a,
        Err(f) => f.attr,
    };
    c.field("ah_attr.dlid", x.dlid, a.dlid);
    c.field("ah_attr.sl", x.sl, a.sl);
    c.field("ah_attr.src_path_bits", x.src_path_bits, a.src_path_bits);
    c.field("ah_attr.static_rate", x.static_rate, a.static_rate);
    c.field("ah_attr.is_global", x.is_global, a.is_global);
    c.field("ah_attr.port_num", x.port_num, a.port_num);
    c.field("ah_attr.grh.dgid", x.grh.dgid, Hex(a.grh.dgid));
    c.field("ah_attr.grh.flow_label", x.grh.flow_label, a.grh.flow_label);
    c.field("ah_attr.grh.sgid_index", x.grh.sgid_index, a.grh.sgid_index);
    c.field("ah_attr.grh.hop_limit", x.grh.hop_limit, a.grh.hop_limit);
    c.field("ah_attr.grh.traffic_class", x.grh.traffic_class, a.grh.traffic_class);
    if let Some(q) = e.gid_queries {
        c.field("gid_queries", q, gid_queries);
    }
    Ok(())
}

impl fmt::Display for HopLimitJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            HopLimit::Value(v) => v.fmt(f),
            HopLimit::Route => f.write_str("\"route\""),
        }
    }
}

impl fmt::Display for DmacJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Dmac::Mac(m) => Hex(m).fmt(f),
            Dmac::Resolve => f.write_str("\"resolve\""),
        }
    }
}

impl fmt::Display for AhTypeJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AhTypeJson::Ib => "\"IB\"",
            AhTypeJson::Roce => "\"ROCE\"",
            AhTypeJson::Opa => "\"OPA\"",
        })
    }
}

fn check_kernel(c: &mut Cmp<'_>, e: &KernelExpect, result: KernelResult) -> Result<(), CaseError> {
    let crashed = matches!(result, Err(f) if f.error == KernelError::MissingGrh);
    if e.signal.is_some() || crashed {
        let got = if crashed { Some("SIGSEGV") } else { None };
        c.field("signal", quoted(e.signal.as_deref()), quoted(got));
        return Ok(());
    }
    let ret = match result {
        Ok(_) => 0,
        Err(f) => f.error.errno().wrapping_neg(),
    };
    c.field("ret", Nullable(e.ret), Nullable(Some(ret)));
    if e.ret != Some(0) {
        let got = result.err().map(|f| errno::name(f.error.errno()));
        c.field("errno", quoted(e.errno.as_deref()), quoted(got));
    }
    let x = e.ah_attr.as_ref().ok_or(CaseError::MissingAhAttr)?;
    let a: RdmaAhAttr = match result {
        Ok(a) => a,
        Err(f) => f.attr,
    };
    c.field("ah_attr.type", Nullable(Some(x.ah_type)), Nullable(AhTypeJson::of(a.ah_type)));
    c.field("ah_attr.sl", x.sl, a.sl);
    c.field("ah_attr.port_num", x.port_num, a.port_num);
    c.field("ah_attr.static_rate", x.static_rate, a.static_rate);
    c.field("ah_attr.ah_flags", x.ah_flags, a.ah_flags);
    c.field("ah_attr.dlid", Nullable(x.dlid), Nullable(a.dlid));
    c.field("ah_attr.src_path_bits", Nullable(x.src_path_bits), Nullable(a.src_path_bits));
    c.field("ah_attr.grh.dgid", x.grh.dgid, Hex(a.grh.dgid.0));
    c.field("ah_attr.grh.flow_label", x.grh.flow_label, a.grh.flow_label);
    c.field("ah_attr.grh.sgid_index", x.grh.sgid_index, a.grh.sgid_index);
    c.field("ah_attr.grh.hop_limit", x.grh.hop_limit, HopLimitJson(a.grh.hop_limit));
    c.field("ah_attr.grh.traffic_class", x.grh.traffic_class, a.grh.traffic_class);
    c.field("ah_attr.grh.sgid_attr_index", Nullable(x.grh.sgid_attr_index), Nullable(a.grh.sgid_attr_index));
    c.field("ah_attr.roce.dmac", Nullable(x.roce.map(|r| r.dmac)), Nullable(a.roce.map(DmacJson)));
    Ok(())
}

// ---------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------

/// A case and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedCase {
    /// 1-based line of the case in its file (for the edge-case document, the
    /// line where its `cases` array starts).
    pub line: usize,
    /// The case.
    pub case: Case,
}

/// Why a file's text could not be read as cases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl core::error::Error for LoadError {}

/// Why a file could not be read as cases.
#[derive(Debug)]
pub struct FileError {
    /// The file.
    pub path: PathBuf,
    /// The line, when the text was read.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.path.display(), l, self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl core::error::Error for FileError {}

/// Reads a vector file: JSON Lines of either format, or the edge-case
/// document. `profile` overrides each case's profile (and, for the edge-case
/// document, picks which side to take).
pub fn load_file(path: &Path, profile: Option<Profile>) -> Result<Vec<LoadedCase>, FileError> {
    let bytes =
        std::fs::read(path).map_err(|e| FileError { path: path.to_owned(), line: None, message: e.to_string() })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        let col = at - bytes[..at].iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
        FileError {
            path: path.to_owned(),
            line: Some(line),
            message: format!("byte {col} of the line is not UTF-8: not a vector file (JSON text)"),
        }
    })?;
    load_str(&text, profile).map_err(|e| FileError { path: path.to_owned(), line: Some(e.line), message: e.message })
}

/// Reads cases from text: JSON Lines (blank lines are skipped) or the
/// edge-case document (one JSON object with a `cases` array).
pub fn load_str(text: &str, profile: Option<Profile>) -> Result<Vec<LoadedCase>, LoadError> {
    let first = text.lines().enumerate().find(|(_, l)| !l.trim().is_empty());
    let Some((first_idx, first_line)) = first else { return Ok(Vec::new()) };
    let more_lines = text.lines().skip(first_idx + 1).any(|l| !l.trim().is_empty());
    let is_document = match serde_json::from_str::<Value>(first_line) {
        Ok(v) => v.get("cases").is_some() && v.get("port").is_none(),
        // An object that does not end on its first line: a pretty-printed
        // document, unless the file has no other line (a cut-off case,
        // reported below at its own line).
        Err(e) => e.is_eof() && more_lines,
    };
    if is_document {
        let doc: Value = serde_json::from_str(text)
            .map_err(|e| LoadError { line: e.line(), message: format!("invalid JSON: {e}") })?;
        return edge::convert(&doc, profile)
            .map_err(|e| LoadError { line: first_idx + 1, message: format!("edge-case document: {e}") });
    }
    let mut out = Vec::new();
    let mut names: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |message: String| LoadError { line: i + 1, message };
        let raw: RawCase = serde_json::from_str(line).map_err(|e| {
            if e.is_eof() {
                err(format!("invalid case: the line ends inside the JSON object (cut off?): {e}"))
            } else {
                err(format!("invalid case: {e}"))
            }
        })?;
        if let Some(first) = names.insert(raw.input.name.clone(), i + 1) {
            return Err(err(format!("case name {:?} already used at line {first}", raw.input.name)));
        }
        let case = Case::from_parts(raw.input, raw.expect, profile)
            .map_err(|e| err(format!("case {:?}: {e}", raw_name(line))))?;
        out.push(LoadedCase { line: i + 1, case });
    }
    Ok(out)
}

/// The largest `gid_tbl_len` of the libibverbs format (FORMAT.md: the
/// kernel's `u32` table length is queried into an `int`, and the vectors keep
/// to 0..=65536).
pub const MAX_IBV_GID_TBL_LEN: u32 = 65_536;

/// The format rules on `port` that hold for every case: each index below
/// `gid_tbl_len` and listed once; in the libibverbs format, `gid_tbl_len`
/// at most [`MAX_IBV_GID_TBL_LEN`].
fn check_port(port: &PortJson, profile: Profile) -> Result<(), CaseError> {
    if profile == Profile::Libibverbs && port.gid_tbl_len > MAX_IBV_GID_TBL_LEN {
        return Err(CaseError::BadPort(format!(
            "gid_tbl_len {} is above {MAX_IBV_GID_TBL_LEN} (FORMAT.md: 0..65536)",
            port.gid_tbl_len
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for g in &port.gids {
        if g.index >= port.gid_tbl_len {
            return Err(CaseError::BadPort(format!(
                "GID index {} is not below gid_tbl_len {}",
                g.index, port.gid_tbl_len
            )));
        }
        if !seen.insert(g.index) {
            return Err(CaseError::BadPort(format!("GID index {} is listed twice", g.index)));
        }
    }
    Ok(())
}

fn raw_name(line: &str) -> String {
    serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default()
}

/// The edge-case document (`shared/spec/ah_from_wc_edge_cases.json`):
/// each case has one input and a `libibverbs` and a `kernel` result, some of
/// whose values are prose where the outcome depends on routing. This module
/// rewrites them into the JSON Lines formats.
pub mod edge {
    use serde_json::{Map, Value, json};

    use super::{Case, CaseInput, LoadedCase, Profile};

    /// Converts the document's cases, both profiles, or only `profile`.
    /// Every case gets the line number 1 (the document is one JSON value).
    pub fn convert(doc: &Value, profile: Option<Profile>) -> Result<Vec<LoadedCase>, String> {
        let cases = doc.get("cases").and_then(Value::as_array).ok_or("no \"cases\" array")?;
        let mut out = Vec::new();
        for (k, c) in cases.iter().enumerate() {
            let id = c.get("id").and_then(Value::as_u64).unwrap_or(k as u64 + 1);
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            let ctx = |e: String| format!("case id {id} ({name}): {e}");
            for p in [Profile::Libibverbs, Profile::Kernel] {
                if profile.is_some_and(|want| want != p) {
                    continue;
                }
                let side = match p {
                    Profile::Libibverbs => c.get("libibverbs"),
                    Profile::Kernel => c.get("kernel"),
                };
                let Some(side) = side.filter(|s| !s.is_null()) else { continue };
                let expect = match p {
                    Profile::Libibverbs => libibverbs_expect(side),
                    Profile::Kernel => kernel_expect(side),
                }
                .map_err(ctx)?;
                let input = input(c, id, name, p).map_err(ctx)?;
                let case = Case::from_parts(input, Some(expect), Some(p)).map_err(|e| ctx(e.to_string()))?;
                out.push(LoadedCase { line: 1, case });
            }
        }
        Ok(out)
    }

    fn input(c: &Value, id: u64, name: &str, p: Profile) -> Result<CaseInput, String> {
        let mut v = Map::new();
        v.insert("name".into(), json!(format!("edge-{id:02}-{name}@{}", super::profile_name(p))));
        v.insert("profile".into(), json!(super::profile_name(p)));
        for k in ["port", "wc", "grh"] {
            v.insert(k.into(), c.get(k).cloned().ok_or(format!("no \"{k}\""))?);
        }
        serde_json::from_value(Value::Object(v)).map_err(|e| format!("bad input: {e}"))
    }

    fn is_crash(side: &Value) -> bool {
        side.get("outcome").and_then(Value::as_str).is_some_and(|o| o.contains("SIGSEGV") || o.contains("NULL"))
    }

    fn libibverbs_expect(side: &Value) -> Result<Value, String> {
        if is_crash(side) {
            return Ok(json!({"ret": null, "errno": null, "signal": "SIGSEGV"}));
        }
        let mut e = Map::new();
        for k in ["ret", "errno", "ah_attr", "gid_queries"] {
            e.insert(k.into(), side.get(k).cloned().ok_or(format!("libibverbs: no \"{k}\""))?);
        }
        e.insert("signal".into(), Value::Null);
        Ok(Value::Object(e))
    }

    /// Prose meaning "resolution was required here" (`"route"` / `"resolve"`).
    fn prose(v: &Value, starts: &str) -> bool {
        v.as_str().is_some_and(|s| s.starts_with(starts))
    }

    fn kernel_expect(side: &Value) -> Result<Value, String> {
        if is_crash(side) {
            return Ok(json!({"ret": null, "errno": null, "signal": "SIGSEGV"}));
        }
        let ret = side.get("ret").ok_or("kernel: no \"ret\"")?;
        let ret = match ret {
            Value::Number(_) => ret.clone(),
            // "0 if neighbour resolution succeeds, else its negative errno"
            v if prose(v, "0 if") => json!(0),
            v => return Err(format!("kernel: unexpected ret {v}")),
        };
        let a = side.get("rdma_ah_attr").and_then(Value::as_object).ok_or("kernel: no \"rdma_ah_attr\"")?;
        let mut attr = Map::new();
        for (k, v) in a {
            match k.as_str() {
                "roce_dmac" => {
                    let roce = match v {
                        Value::Null => Value::Null,
                        v if v.as_str().is_some_and(|s| s.contains("neighbour") || s == "resolve") => {
                            json!({"dmac": "resolve"})
                        }
                        v => json!({"dmac": v}),
                    };
                    attr.insert("roce".into(), roce);
                }
                "grh" => {
                    let mut g = v.as_object().cloned().ok_or("kernel: grh is not an object")?;
                    if let Some(h) = g.get_mut("hop_limit").filter(|h| prose(h, "route")) {
                        *h = json!("route");
                    }
                    attr.insert(k.clone(), Value::Object(g));
                }
                _ => {
                    attr.insert(k.clone(), v.clone());
                }
            }
        }
        Ok(json!({
            "ret": ret,
            "errno": side.get("errno").cloned().unwrap_or(Value::Null),
            "ah_attr": attr,
            "signal": null,
        }))
    }
}

#[cfg(test)]
mod test {
    use super::*;

    const IB_NO_GRH: &str = r#"{"name":"01-ib-no-grh-flag","port":{"num":1,"link_layer":"infiniband","gid_tbl_len":4,"gids":[{"index":0,"gid":"fe800000000000000002c90300012345","type":"ib"},{"index":2,"gid":"fe800000000000000002c90300099999","type":"ib"}]},"wc":{"wc_flags":0,"slid":7,"sl":3,"dlid_path_bits":2,"src_qp":5,"pkey_index":0},"grh":"6001234500001b40fe800000000000000002c90300011111fe800000000000000002c90300099999","expect":{"ret":0,"errno":null,"ah_attr":{"dlid":7,"sl":3,"src_path_bits":2,"static_rate":0,"is_global":0,"port_num":1,"grh":{"dgid":"00000000000000000000000000000000","flow_label":74565,"sgid_index":0,"hop_limit":0,"traffic_class":0}},"gid_queries":0,"signal":null}}"#;

    #[test]
    fn hex_round_trip_and_errors() {
        let h = Hex::<2>::parse("aB0f").unwrap();
        assert_eq!(h.0, [0xab, 0x0f]);
        assert_eq!(h.to_string(), "ab0f");
        assert!(Hex::<2>::parse("ab0").is_err());
        assert!(Hex::<2>::parse("zz00").is_err());
        assert!(Hex::<2>::parse("éa").is_err());
    }

    #[test]
    fn passes_and_reports_mismatches() {
        let cases = load_str(IB_NO_GRH, None).unwrap();
        assert_eq!(cases.len(), 1);
        assert_eq!(cases[0].case.check().unwrap(), vec![]);

        let bad = IB_NO_GRH.replace("\"flow_label\":74565", "\"flow_label\":1");
        let cases = load_str(&bad, None).unwrap();
        let m = cases[0].case.check().unwrap();
        assert_eq!(
            m,
            vec![Mismatch {
                case: "01-ib-no-grh-flag".into(),
                field: "ah_attr.grh.flow_label".into(),
                expected: "1".into(),
                got: "74565".into(),
            }]
        );
    }

    #[test]
    fn bad_input_is_an_error_with_a_line() {
        let text = format!("\n{IB_NO_GRH}\n{{\"name\": 3}}\n");
        let e = load_str(&text, None).unwrap_err();
        assert_eq!(e.line, 3);
        let e = load_str(&IB_NO_GRH.replace("\"ib\"}]", "\"ib\"}],\"x\":1").replace("infiniband", "token-ring"), None)
            .unwrap_err();
        assert_eq!(e.line, 1);
        // A libibverbs expectation read as kernel.
        let e = load_str(IB_NO_GRH, Some(Profile::Kernel)).unwrap_err();
        assert!(e.message.contains("kernel"), "{e}");
    }

    #[test]
    fn never_panics_on_damaged_lines() {
        // Every prefix, and every single-byte change to a few bytes, of a valid
        // line: an error or a result, never a panic.
        for cut in 0..IB_NO_GRH.len() {
            if let Ok(cases) = load_str(&IB_NO_GRH[..cut], None) {
                for c in cases {
                    let _ = c.case.check();
                }
            }
        }
        let bytes = IB_NO_GRH.as_bytes();
        for pos in (0..bytes.len()).step_by(3) {
            for b in [b'0', b'9', b'f', b'-', b'"', b'{', b'}', b'x', b' '] {
                let mut m = bytes.to_vec();
                m[pos] = b;
                let Ok(text) = core::str::from_utf8(&m) else { continue };
                if let Ok(cases) = load_str(text, None) {
                    for c in cases {
                        let _ = c.case.check();
                    }
                }
            }
        }
    }

    #[test]
    fn edge_case_document_both_profiles() {
        let port = r#"{"num":1,"link_layer":"ethernet","gid_tbl_len":16,"gids":[
            {"index":3,"gid":"00000000000000000000ffffc0a8010a","type":"roce_v2","netdev_vlan":null}]}"#;
        let grh = "00000000000000000000000000000000000000004500003c000040004011b742c0a80114c0a8010a";
        let doc = format!(
            r#"{{
  "description": "test",
  "cases": [
    {{"id": 1, "name": "v2-ipv4-basic", "port": {port}, "wc": {{"wc_flags": 1, "slid": 0, "sl": 0, "dlid_path_bits": 0}},
      "grh": "{grh}",
      "libibverbs": {{"ret": 0, "errno": null, "errno_left_on_success": null, "gid_queries": 8,
        "ah_attr": {{"is_global": 1, "dlid": 0, "sl": 0, "src_path_bits": 0, "static_rate": 0, "port_num": 1,
          "grh": {{"dgid": "00000000000000000000ffffc0a80114", "flow_label": 0, "sgid_index": 3, "hop_limit": 64, "traffic_class": 0}}}}}},
      "kernel": {{"ret": "0 if neighbour resolution succeeds, else its negative errno", "errno": null,
        "rdma_ah_attr": {{"type": "ROCE", "ah_flags": 1, "sl": 0, "port_num": 1, "dlid": null, "src_path_bits": null,
          "grh": {{"dgid": "00000000000000000000ffffc0a80114", "flow_label": 0, "sgid_index": 3,
            "hop_limit": "route hop limit (64 with default sysctls); 255 if resolution fails", "traffic_class": 0, "sgid_attr_index": 3}},
          "roce_dmac": "neighbour MAC of grh.dgid (resolved via IP stack)"}}}}}},
    {{"id": 2, "name": "null", "port": {port}, "wc": {{"wc_flags": 0}}, "grh": null,
      "libibverbs": {{"outcome": "SIGSEGV (NULL grh dereferenced)"}},
      "kernel": {{"outcome": "NULL pointer dereference"}}}}
  ],
  "notes": []
}}"#
        );
        let all = load_str(&doc, None).unwrap();
        assert_eq!(all.len(), 4);
        for lc in &all {
            assert_eq!(lc.case.check().unwrap(), vec![], "{}", lc.case.name());
        }
        assert_eq!(all[1].case.profile(), Profile::Kernel);
        let Expect::Kernel(k) = &all[1].case.expect else { panic!("kernel expected") };
        let a = k.ah_attr.unwrap();
        assert_eq!((a.grh.hop_limit.0, a.roce.unwrap().dmac.0), (HopLimit::Route, Dmac::Resolve));
        assert_eq!(load_str(&doc, Some(Profile::Kernel)).unwrap().len(), 2);
        // Unknown prose is an error with a line, not a guess.
        let e = load_str(&doc.replace("\"0 if neighbour", "\"maybe"), None).unwrap_err();
        assert!(e.message.contains("case id 1"), "{e}");
    }

    #[test]
    fn over_capacity_is_a_case_error() {
        let big =
            IB_NO_GRH.replace("\"gid_tbl_len\":4", "\"gid_tbl_len\":65536").replace("\"index\":2", "\"index\":5000");
        let cases = load_str(&big, None).unwrap();
        assert_eq!(cases[0].case.check(), Err(CaseError::OverCapacity { index: 5000 }));
        let slid = IB_NO_GRH.replace("\"slid\":7", "\"slid\":70000");
        let cases = load_str(&slid, None).unwrap();
        assert_eq!(cases[0].case.check(), Err(CaseError::OutOfRange { field: "wc.slid", value: 70000 }));
    }
}
