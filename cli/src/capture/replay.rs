//! The replay engine: reads a capture into UD packets, builds (or takes) the
//! receiver's GID table, runs each packet through a profile of the core and
//! groups the outcomes per peer.

use core::fmt::{self, Write as _};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;

use udah_core::ah::kernel::{self, KernelResult};
use udah_core::ah::libibverbs::{self, IbvResult, Verdict};
use udah_core::ah::{Dmac, HopLimit, IBV_WC_GRH, Profile};
use udah_core::error::errno;
use udah_core::wire::Gid;
use udah_core::{GidEntry, GidTable, GidTableError, GidType, LinkLayer};

use super::decode::{self, DecodeOptions, Decoded, Encap, FrameError, Peer, Skip, UdPacket};
use super::reader::{CaptureError, CaptureReader, Format};

/// Capacity of the GID-table snapshots the replay builds.
pub const TABLE_CAPACITY: usize = 4096;

/// A capture read into memory: its UD packets and what else it held.
#[derive(Debug, Default)]
pub struct Capture {
    /// The container format (`None` when the header could not be read).
    pub format: Option<Format>,
    /// Frames read (also those that were skipped or malformed).
    pub frames: u64,
    /// The UD packets with their frame numbers, in file order.
    pub packets: Vec<(u64, UdPacket)>,
    /// Frames that are not UD packets, counted by reason.
    pub skipped: BTreeMap<Skip, u64>,
    /// Frames that could not be decoded.
    pub malformed: Vec<(u64, FrameError)>,
    /// The error that stopped the reading, if any.
    pub fatal: Option<CaptureError>,
}

impl Capture {
    /// Reads and decodes a whole capture. A fatal error ends the reading
    /// and is kept in [`Capture::fatal`] with what was read before it.
    pub fn read<R: Read + 'static>(r: R, opts: &DecodeOptions) -> Capture {
        let mut cap = Capture::default();
        let mut reader = match CaptureReader::open(r) {
            Ok(r) => r,
            Err(e) => {
                cap.fatal = Some(e);
                return cap;
            }
        };
        cap.format = Some(reader.format());
        while let Some(frame) = reader.next_frame() {
            let frame = match frame {
                Ok(f) => f,
                Err(e) => {
                    cap.fatal = Some(e);
                    break;
                }
            };
            cap.frames = frame.number;
            match decode::decode(frame.link_type, frame.data, opts) {
                Ok(Decoded::Ud(p)) => cap.packets.push((frame.number, p)),
                Ok(Decoded::Skipped(s)) => *cap.skipped.entry(s).or_insert(0) += 1,
                Err(e) => cap.malformed.push((frame.number, e)),
            }
        }
        cap
    }
}

/// A receiver's GID table, as a list of entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    /// The port number.
    pub port_num: u8,
    /// The link layer.
    pub link_layer: LinkLayer,
    /// The number of slots (`gid_tbl_len`).
    pub len: u32,
    /// The valid entries, by index.
    pub entries: Vec<(u32, GidEntry)>,
}

/// The name of a GID type in the case format.
pub fn gid_type_name(t: GidType) -> &'static str {
    match t {
        GidType::Ib => "ib",
        GidType::RoceV1 => "roce_v1",
        GidType::RoceV2 => "roce_v2",
    }
}

impl TableSpec {
    /// The table a receiver needs for every packet of `packets` that came
    /// over `link_layer`: each unicast destination address, in order of first
    /// appearance, with the GID type its packet asks for (RoCE v2 for IPv4
    /// and IPv6, RoCE v1, or IB) and, on RoCE, the packet's VLAN. The table
    /// has at least 16 slots.
    pub fn synthesise(packets: &[(u64, UdPacket)], link_layer: LinkLayer, port_num: u8) -> TableSpec {
        let mut seen: Vec<GidEntry> = Vec::new();
        for (_, p) in packets {
            if (link_layer == LinkLayer::Ethernet) != p.encap.is_roce() {
                continue;
            }
            let Some(gid) = p.destination() else { continue };
            if gid.is_multicast_any() || gid == Gid::ZERO {
                continue;
            }
            let gid_type = match p.encap {
                Encap::Ib | Encap::IbGrh => GidType::Ib,
                Encap::RoceV1 => GidType::RoceV1,
                Encap::RoceV2Ipv4 | Encap::RoceV2Ipv6 => GidType::RoceV2,
            };
            let mut e = GidEntry::new(gid, gid_type);
            if let Some(v) = p.vlan.filter(|v| *v <= 4095) {
                e = e.with_vlan(v);
            }
            if !seen.contains(&e) && seen.len() < TABLE_CAPACITY {
                seen.push(e);
            }
        }
        let n = u32::try_from(seen.len()).unwrap_or(u32::MAX);
        TableSpec {
            port_num,
            link_layer,
            len: n.max(16),
            entries: seen.into_iter().enumerate().map(|(i, e)| (u32::try_from(i).unwrap_or(u32::MAX), e)).collect(),
        }
    }

    /// The GID-table snapshot.
    pub fn build(&self) -> Result<Box<GidTable<TABLE_CAPACITY>>, GidTableError> {
        let mut t = Box::new(GidTable::new(self.port_num, self.link_layer, self.len));
        for (i, e) in &self.entries {
            t.set(*i, *e)?;
        }
        Ok(t)
    }
}

/// What a profile made of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// libibverbs profile, with the GID queries C would have made.
    Libibverbs {
        /// The result.
        result: IbvResult,
        /// `gid_queries` as the C library counts them.
        gid_queries: u64,
    },
    /// Kernel profile.
    Kernel(KernelResult),
}

impl Outcome {
    /// Whether an AH could be built.
    pub fn is_ok(&self) -> bool {
        match self {
            Outcome::Libibverbs { result, .. } => result.is_ok(),
            Outcome::Kernel(r) => r.is_ok(),
        }
    }
}

/// Runs one packet through `profile` against `table`.
pub fn evaluate<const N: usize>(table: &GidTable<N>, profile: Profile, p: &UdPacket) -> Outcome {
    match profile {
        Profile::Libibverbs => {
            let port = table.port_num();
            let result = libibverbs::init_ah_from_wc(table, port, &p.wc, Some(&p.area));
            let gid_queries = if p.wc.wc_flags & IBV_WC_GRH == 0 {
                0
            } else {
                let c = libibverbs::classify(&p.area);
                if c.verdict == Verdict::Search {
                    table.libibverbs_query_count(port, table.find_libibverbs(port, &c.local, c.want_v2))
                } else {
                    0
                }
            };
            Outcome::Libibverbs { result, gid_queries }
        }
        Profile::Kernel => Outcome::Kernel(kernel::init_ah_attr_from_wc(table, &p.kernel_wc(), Some(&p.area))),
    }
}

/// One line of the per-peer table: the packets of one sender and source QP
/// that gave the same outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerRow {
    /// The sender.
    pub peer: Peer,
    /// The source QP.
    pub src_qp: u32,
    /// The encapsulation.
    pub encap: Encap,
    /// The outcome.
    pub outcome: Outcome,
    /// An example packet (the first).
    pub example: UdPacket,
    /// Frame numbers of the packets.
    pub frames: Vec<u64>,
}

/// The outcome of a replay: per-packet results and the per-peer table.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Per packet: frame number, packet, outcome, and which table was used
    /// (index into [`Replay::tables`]).
    pub results: Vec<(u64, UdPacket, Outcome, usize)>,
    /// The per-peer rows, in order of first appearance.
    pub rows: Vec<PeerRow>,
    /// The tables used.
    pub tables: Vec<TableSpec>,
}

/// Where the receiver's GID table comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableSource {
    /// One table for every packet.
    Given(TableSpec),
    /// Synthesised from the capture's destinations: one per link layer.
    Synthesised {
        /// The port number of the synthesised tables.
        port_num: u8,
    },
}

/// Runs every packet of `cap` through `profile`.
pub fn replay(cap: &Capture, source: &TableSource, profile: Profile) -> Result<Replay, GidTableError> {
    let mut out = Replay::default();
    let (eth, ib) = match source {
        TableSource::Given(t) => {
            out.tables.push(t.clone());
            (0, 0)
        }
        TableSource::Synthesised { port_num } => {
            let has_roce = cap.packets.iter().any(|(_, p)| p.encap.is_roce());
            let has_ib = cap.packets.iter().any(|(_, p)| !p.encap.is_roce());
            let mut idx = (0, 0);
            if has_roce || !has_ib {
                out.tables.push(TableSpec::synthesise(&cap.packets, LinkLayer::Ethernet, *port_num));
                idx.0 = out.tables.len() - 1;
            }
            if has_ib {
                out.tables.push(TableSpec::synthesise(&cap.packets, LinkLayer::Infiniband, *port_num));
                idx.1 = out.tables.len() - 1;
            }
            idx
        }
    };
    let built = out.tables.iter().map(TableSpec::build).collect::<Result<Vec<_>, _>>()?;
    let mut index: HashMap<(Peer, u32, Encap, Outcome), usize> = HashMap::new();
    for (frame, p) in &cap.packets {
        let ti = if p.encap.is_roce() { eth } else { ib };
        let Some(table) = built.get(ti) else { continue };
        let outcome = evaluate(table, profile, p);
        out.results.push((*frame, *p, outcome, ti));
        let key = (p.source(), p.wc.src_qp, p.encap, outcome);
        match index.get(&key) {
            Some(&i) => {
                if let Some(r) = out.rows.get_mut(i) {
                    r.frames.push(*frame);
                }
            }
            None => {
                index.insert(key, out.rows.len());
                out.rows.push(PeerRow {
                    peer: p.source(),
                    src_qp: p.wc.src_qp,
                    encap: p.encap,
                    outcome,
                    example: *p,
                    frames: vec![*frame],
                });
            }
        }
    }
    Ok(out)
}

/// The errno name of an outcome's failure (`None` on success).
pub fn errno_name(o: &Outcome) -> Option<&'static str> {
    match o {
        Outcome::Libibverbs { result: Err(f), .. } => Some(errno::name(f.error.errno())),
        Outcome::Kernel(Err(f)) => Some(errno::name(f.error.errno())),
        _ => None,
    }
}

/// A libibverbs attribute in one line, as `replay` prints it and `serve
/// --log-ahs` logs it (`dgid … sgid_index … hop_limit … tclass …
/// flow_label … dlid … sl … port …`).
pub fn describe_ibv(a: &udah_core::ah::IbvAhAttr) -> String {
    let mut s = String::new();
    if a.is_global != 0 {
        let _ = write!(
            s,
            "dgid {} sgid_index {} hop_limit {} tclass {} flow_label {:#x} ",
            Gid(a.grh.dgid),
            a.grh.sgid_index,
            a.grh.hop_limit,
            a.grh.traffic_class,
            a.grh.flow_label
        );
    } else {
        s.push_str("no GRH, ");
    }
    let _ = write!(s, "dlid {} sl {} port {}", a.dlid, a.sl, a.port_num);
    s
}

/// Describes an outcome in one line: the AH attributes, or the error and
/// why it happened for this packet.
pub fn describe(o: &Outcome, p: &UdPacket) -> String {
    let mut s = String::new();
    match o {
        Outcome::Libibverbs { result: Ok(a), .. } => s = describe_ibv(a),
        Outcome::Libibverbs { result: Err(f), .. } => {
            let _ = write!(s, "{}: {}", errno::name(f.error.errno()), f.error);
            if matches!(f.error, udah_core::IbvError::GidNotFound) {
                let c = libibverbs::classify(&p.area);
                let class = if c.want_v2 { "roce_v2" } else { "ib/roce_v1" };
                let _ = write!(s, " (looked for {} as {class})", c.local);
            }
            if let (udah_core::IbvError::MulticastDestination, Some(d)) = (f.error, p.destination()) {
                let _ = write!(s, " ({d})");
            }
        }
        Outcome::Kernel(Ok(a)) => {
            if a.ah_flags & 1 != 0 {
                let hop = match a.grh.hop_limit {
                    HopLimit::Value(v) => v.to_string(),
                    HopLimit::Route => "route".into(),
                };
                let _ = write!(
                    s,
                    "dgid {} sgid_index {} hop_limit {hop} tclass {} flow_label {:#x} ",
                    a.grh.dgid, a.grh.sgid_index, a.grh.traffic_class, a.grh.flow_label
                );
            } else {
                s.push_str("no GRH, ");
            }
            match (a.dlid, a.roce) {
                (Some(d), _) => {
                    let _ = write!(s, "dlid {d} ");
                }
                (None, Some(Dmac::Resolve)) => s.push_str("dmac resolve "),
                (None, Some(Dmac::Mac(m))) => {
                    let _ = write!(s, "dmac {} ", Mac(m));
                }
                (None, None) => {}
            }
            let _ = write!(s, "sl {} port {}", a.sl, a.port_num);
        }
        Outcome::Kernel(Err(f)) => {
            let _ = write!(s, "{}: {}", errno::name(f.error.errno()), f.error);
            if let (udah_core::KernelError::GidNotFound, Some(d)) = (f.error, p.destination()) {
                let vlan = p.vlan.map(|v| format!(" on VLAN {v}")).unwrap_or_default();
                let _ = write!(s, " (looked for {d}{vlan})");
            }
        }
    }
    s
}

/// A MAC address printed as `aa:bb:cc:dd:ee:ff`.
#[derive(Debug, Clone, Copy)]
pub struct Mac(pub [u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

/// Frame numbers as a short list: `1,3,8` or `1,3,8,… (12)`.
pub fn frame_list(frames: &[u64]) -> String {
    const SHOWN: usize = 8;
    let mut s = frames.iter().take(SHOWN).map(u64::to_string).collect::<Vec<_>>().join(",");
    if frames.len() > SHOWN {
        let _ = write!(s, ",… ({})", frames.len());
    }
    s
}

/// The report of one capture: the tables, the per-peer table, the
/// malformed frames and the totals.
pub fn render(name: &str, cap: &Capture, r: &Replay, table_origin: &str) -> String {
    let mut s = String::new();
    let fmt_name = cap.format.map_or_else(|| "?".to_owned(), |f| f.to_string());
    let _ = writeln!(s, "== {name} ({fmt_name}, {} frames)", cap.frames);
    for t in &r.tables {
        let ll = match t.link_layer {
            LinkLayer::Ethernet => "ethernet",
            LinkLayer::Infiniband => "infiniband",
            LinkLayer::Opa => "opa",
        };
        let _ = writeln!(
            s,
            "receiver GID table ({table_origin}; port {}, {ll}, {} slots, {} {}):",
            t.port_num,
            t.len,
            t.entries.len(),
            if t.entries.len() == 1 { "entry" } else { "entries" }
        );
        for (i, e) in &t.entries {
            let vlan = e.vlan.map(|v| format!(" vlan {v}")).unwrap_or_default();
            let _ = writeln!(s, "  [{i}] {} {}{vlan}", e.gid, gid_type_name(e.gid_type));
        }
    }
    let _ = writeln!(s);
    if r.rows.is_empty() {
        let _ = writeln!(s, "no UD packets");
    } else {
        let w = r.rows.iter().map(|row| row.peer.to_string().len()).max().unwrap_or(0).max(6);
        let _ =
            writeln!(s, "{:<w$}  {:>8}  {:<11}  {:>7}  {:<14}  result", "source", "src QP", "via", "packets", "frames");
        for row in &r.rows {
            let status = if row.outcome.is_ok() { "ok" } else { "FAIL" };
            let _ = writeln!(
                s,
                "{:<w$}  {:>8}  {:<11}  {:>7}  {:<14}  {status} {}",
                row.peer.to_string(),
                format!("{:#x}", row.src_qp),
                row.encap.to_string(),
                row.frames.len(),
                frame_list(&row.frames),
                describe(&row.outcome, &row.example)
            );
        }
    }
    for (frame, e) in &cap.malformed {
        let _ = writeln!(s, "frame {frame}: malformed: {e}");
    }
    // Totals.
    let mut by_encap: BTreeMap<Encap, u64> = BTreeMap::new();
    for (_, p, _, _) in &r.results {
        *by_encap.entry(p.encap).or_insert(0) += 1;
    }
    let ok = r.results.iter().filter(|(_, _, o, _)| o.is_ok()).count();
    let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
    for (_, _, o, _) in &r.results {
        if let Some(e) = errno_name(o) {
            let why = match o {
                Outcome::Libibverbs { result: Err(f), .. } => f.error.to_string(),
                Outcome::Kernel(Err(f)) => f.error.to_string(),
                _ => String::new(),
            };
            *reasons.entry(format!("{e} {why}")).or_insert(0) += 1;
        }
    }
    let _ = writeln!(s);
    let encaps = by_encap.iter().map(|(e, n)| format!("{e} {n}")).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        s,
        "totals: {} frames, {} UD packets{}, {} AH ok, {} AH failed",
        cap.frames,
        r.results.len(),
        if encaps.is_empty() { String::new() } else { format!(" ({encaps})") },
        ok,
        r.results.len() - ok
    );
    for (why, n) in &reasons {
        let _ = writeln!(s, "  failed: {n} × {why}");
    }
    let skipped: u64 = cap.skipped.values().sum();
    if skipped > 0 {
        let list = cap.skipped.iter().map(|(k, n)| format!("{k}: {n}")).collect::<Vec<_>>().join(", ");
        let _ = writeln!(s, "  skipped {skipped} frames ({list})");
    }
    if !cap.malformed.is_empty() {
        let _ = writeln!(s, "  malformed: {} frames", cap.malformed.len());
    }
    if let Some(e) = &cap.fatal {
        // The reason goes to stderr once (`udah replay`); the report says
        // where the reading stopped.
        let _ = writeln!(
            s,
            "  reading stopped at {}",
            if e.frame == 0 { "the file header".to_owned() } else { format!("frame {}", e.frame) }
        );
    }
    s
}
