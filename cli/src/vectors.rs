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

mod json;

pub use self::json::*;

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

pub mod edge;

#[cfg(test)]
mod test;
