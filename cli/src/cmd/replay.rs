//! `udah replay FILE...`: which AH would a UD responder build for the UD
//! packets of a capture, and why does it fail for some of them.
//!
//! For every capture it prints the receiver GID table used, one line per
//! (sender, source QP, outcome) with the AH attributes or the error and its
//! reason, the malformed frames and the totals. `--emit-cases` writes one
//! vector per UD packet in the shared case format (`udah conform` runs
//! them); `--check` compares every packet with a `.cases.jsonl` file.
//!
//! Exit status: 0 when every capture was read to its end (AH failures are
//! findings, not errors), 1 when a capture is malformed or truncated or a
//! `--check` case does not match, 2 for bad arguments or unreadable files.
//!
//! One rule for the files: every argument is checked before any capture is
//! read, so a missing file, a directory or an unreadable file stops the run
//! with status 2 and no report; a file that opens but is not a capture (or
//! is empty, or damaged) is reported in its turn, the other files are still
//! read, and the status is 1. A damaged container's reason is printed once,
//! on stderr. `-` reads a capture from standard input.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;
use udah_cli::capture::UdPacket;
use udah_cli::capture::decode::{DecodeOptions, V6PAD_FRONT};
use udah_cli::capture::replay::{self, Capture, Outcome, TableSource, TableSpec};
use udah_cli::vectors::{
    self, Case, CaseInput, GidJson, GidTypeJson, Hex, HopLimitJson, IbvAhAttrJson, IbvExpect, IbvGrhJson,
    KernelAhAttrJson, KernelExpect, KernelGrhJson, LinkLayerJson, PortJson, Profile, RoceJson, WcJson,
};
use udah_core::ah::{AhType, Dmac};
use udah_core::error::errno;
use udah_core::wire::Gid;
use udah_core::{GidEntry, GidType, LinkLayer};

/// The profile to run the packets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ProfileArg {
    /// libibverbs `ibv_init_ah_from_wc`.
    Libibverbs,
    /// Linux `ib_init_ah_attr_from_wc` (network type and VLAN from the packet).
    Kernel,
}

/// The link layer of a table given with `--gid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LinkLayerArg {
    /// An Ethernet (RoCE) port.
    Ethernet,
    /// An InfiniBand port.
    Infiniband,
}

/// Arguments of `udah replay`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Capture files: pcap or pcapng, optionally gzip-compressed; link types
    /// Ethernet (802.1Q/802.1ad tags), Linux cooked capture v1/v2,
    /// InfiniBand (247) and ERF (197) carrying InfiniBand or Ethernet.
    /// `-` is standard input (named `stdin` in the report and case names).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The profile to run every UD packet through.
    #[arg(long, value_enum, default_value_t = ProfileArg::Libibverbs)]
    profile: ProfileArg,
    /// The receiver's GID table: a JSON object shaped like the `port` of
    /// the case format (`{"num":1,"link_layer":"ethernet","gid_tbl_len":16,
    /// "gids":[{"index":0,"gid":"<32 hex>","type":"roce_v2"}]}`). Without it
    /// (and without --gid) the table is synthesised from the capture's
    /// unicast destination addresses.
    #[arg(long, value_name = "FILE", conflicts_with = "gid")]
    gid_table: Option<PathBuf>,
    /// A receiver GID, `GID[@TYPE][%VLAN]` (GID as an IPv6 or IPv4
    /// address, TYPE ib, roce_v1 or roce_v2 (the default), VLAN 0-4095);
    /// repeat it: the entries get the indices 0, 1, 2 …
    #[arg(long = "gid", value_name = "GID[@TYPE][%VLAN]")]
    gid: Vec<String>,
    /// The port number of the receiver (1-255: ports are numbered from 1).
    #[arg(long, default_value_t = 1)]
    port_num: u8,
    /// Link layer of the --gid table (default: ethernet unless every entry
    /// has type ib). `ethernet` takes RoCE GIDs only, `infiniband` ib GIDs only.
    #[arg(long, value_enum)]
    link_layer: Option<LinkLayerArg>,
    /// What the 20 bytes in front of a RoCE v2 IPv4 header hold (the NIC
    /// does not write them): `zero`, `v6pad` (a stale IPv6 header, `60 00 00
    /// 00 00 00 11 40` then zeros), or 40 hex digits.
    #[arg(long, default_value = "zero", value_name = "zero|v6pad|HEX")]
    ipv4_front: String,
    /// Write one case per UD packet, in the shared vector format with the
    /// core's result as `expect`, to this file (`udah conform` runs it).
    #[arg(long, value_name = "FILE")]
    emit_cases: Option<PathBuf>,
    /// Compare every UD packet with the case of the same name
    /// (`<file name>#<frame>`) in these files: area, completion, and the
    /// core's result on the case's own table against its `expect`.
    #[arg(long, value_name = "CASES")]
    check: Vec<PathBuf>,
    /// Print one line per UD packet as well.
    #[arg(short, long)]
    verbose: bool,
    /// Never show a progress bar.
    #[arg(long)]
    no_progress: bool,
}

/// Files above this size get a progress bar (on a terminal).
const PROGRESS_MIN_BYTES: u64 = 1 << 20;

fn parse_front(s: &str) -> Result<[u8; 20], String> {
    match s {
        "zero" => Ok([0; 20]),
        "v6pad" => Ok(V6PAD_FRONT),
        hex => Hex::<20>::parse(hex).map(|h| h.0).map_err(|e| format!("--ipv4-front: {e}")),
    }
}

fn parse_gid_arg(s: &str) -> Result<GidEntry, String> {
    let (rest, vlan) = match s.split_once('%') {
        Some((r, v)) => (r, Some(v.parse::<u16>().map_err(|e| format!("--gid {s}: VLAN: {e}"))?)),
        None => (s, None),
    };
    let (addr, ty) = match rest.split_once('@') {
        Some((a, t)) => (a, t),
        None => (rest, "roce_v2"),
    };
    let gid_type = match ty {
        "ib" => GidType::Ib,
        "roce_v1" => GidType::RoceV1,
        "roce_v2" => GidType::RoceV2,
        other => return Err(format!("--gid {s}: unknown type {other:?} (ib, roce_v1, roce_v2)")),
    };
    let gid = if let Ok(a) = addr.parse::<core::net::Ipv6Addr>() {
        Gid::from(a)
    } else if let Ok(a) = addr.parse::<core::net::Ipv4Addr>() {
        Gid::from(a)
    } else {
        return Err(format!("--gid {s}: {addr:?} is not an IPv6 or IPv4 address"));
    };
    let mut e = GidEntry::new(gid, gid_type);
    if let Some(v) = vlan {
        if v > 4095 {
            return Err(format!("--gid {s}: VLAN {v} is above 4095"));
        }
        e = e.with_vlan(v);
    }
    Ok(e)
}

fn table_from_port(p: &PortJson) -> Result<TableSpec, String> {
    let port_num = u8::try_from(p.num).map_err(|_| format!("port number {} is above 255", p.num))?;
    if port_num == 0 {
        return Err("port number 0: ports are numbered from 1".into());
    }
    let link_layer = match p.link_layer {
        LinkLayerJson::Infiniband => LinkLayer::Infiniband,
        LinkLayerJson::Ethernet | LinkLayerJson::Unspecified => LinkLayer::Ethernet,
        LinkLayerJson::Opa => LinkLayer::Opa,
    };
    let entries = p
        .gids
        .iter()
        .filter(|g| g.gid.0 != [0; 16])
        .map(|g| {
            let mut e = GidEntry::new(Gid(g.gid.0), GidType::from(g.gid_type));
            if let Some(v) = g.vlan {
                e = e.with_vlan(v);
            }
            (g.index, e)
        })
        .collect();
    Ok(TableSpec { port_num, link_layer, len: p.gid_tbl_len, entries })
}

fn port_json(t: &TableSpec) -> PortJson {
    PortJson {
        num: u32::from(t.port_num),
        link_layer: match t.link_layer {
            LinkLayer::Infiniband => LinkLayerJson::Infiniband,
            LinkLayer::Ethernet => LinkLayerJson::Ethernet,
            LinkLayer::Opa => LinkLayerJson::Opa,
        },
        gid_tbl_len: t.len,
        gids: t
            .entries
            .iter()
            .map(|(i, e)| GidJson {
                index: *i,
                gid: Hex(e.gid.0),
                gid_type: match e.gid_type {
                    GidType::Ib => GidTypeJson::Ib,
                    GidType::RoceV1 => GidTypeJson::RoceV1,
                    GidType::RoceV2 => GidTypeJson::RoceV2,
                },
                vlan: e.vlan,
                ndev: None,
            })
            .collect(),
    }
}

fn wc_json(p: &UdPacket, profile: Profile) -> WcJson {
    match profile {
        Profile::Libibverbs => WcJson {
            wc_flags: p.wc.wc_flags,
            slid: u32::from(p.wc.slid),
            sl: p.wc.sl,
            dlid_path_bits: p.wc.dlid_path_bits,
            src_qp: p.wc.src_qp,
            pkey_index: p.wc.pkey_index,
            ..WcJson::default()
        },
        Profile::Kernel => {
            let k = p.kernel_wc();
            WcJson {
                wc_flags: k.wc_flags,
                slid: k.slid,
                sl: k.sl,
                dlid_path_bits: k.dlid_path_bits,
                src_qp: k.src_qp,
                pkey_index: k.pkey_index,
                vlan_id: p.vlan,
                network_hdr_type: p.encap.is_roce().then_some(k.network_hdr_type),
                smac: p.smac.map(Hex),
            }
        }
    }
}

fn expect_json(o: &Outcome) -> Result<Value, serde_json::Error> {
    match o {
        Outcome::Libibverbs { result, gid_queries } => {
            let (ret, errno_name, a) = match result {
                Ok(a) => (0, None, a),
                Err(f) => (-1, Some(errno::name(f.error.errno()).to_owned()), &f.attr),
            };
            serde_json::to_value(IbvExpect {
                ret: Some(ret),
                errno: errno_name,
                ah_attr: Some(IbvAhAttrJson {
                    dlid: a.dlid,
                    sl: a.sl,
                    src_path_bits: a.src_path_bits,
                    static_rate: a.static_rate,
                    is_global: a.is_global,
                    port_num: a.port_num,
                    grh: IbvGrhJson {
                        dgid: Hex(a.grh.dgid),
                        flow_label: a.grh.flow_label,
                        sgid_index: a.grh.sgid_index,
                        hop_limit: a.grh.hop_limit,
                        traffic_class: a.grh.traffic_class,
                    },
                }),
                gid_queries: Some(*gid_queries),
                signal: None,
            })
        }
        Outcome::Kernel(result) => {
            let (ret, errno_name, a) = match result {
                Ok(a) => (0, None, a),
                Err(f) => (-f.error.errno(), Some(errno::name(f.error.errno()).to_owned()), &f.attr),
            };
            let ah_type = match a.ah_type {
                AhType::Ib => vectors::AhTypeJson::Ib,
                AhType::Roce => vectors::AhTypeJson::Roce,
                AhType::Opa | AhType::Undefined => vectors::AhTypeJson::Opa,
            };
            serde_json::to_value(KernelExpect {
                ret: Some(ret),
                errno: errno_name,
                ah_attr: Some(KernelAhAttrJson {
                    ah_type,
                    sl: a.sl,
                    port_num: a.port_num,
                    static_rate: a.static_rate,
                    ah_flags: a.ah_flags,
                    dlid: a.dlid,
                    src_path_bits: a.src_path_bits,
                    grh: KernelGrhJson {
                        dgid: Hex(a.grh.dgid.0),
                        flow_label: a.grh.flow_label,
                        sgid_index: a.grh.sgid_index,
                        hop_limit: HopLimitJson(a.grh.hop_limit),
                        traffic_class: a.grh.traffic_class,
                        sgid_attr_index: a.grh.sgid_attr_index,
                    },
                    roce: a.roce.map(|d: Dmac| RoceJson { dmac: vectors::DmacJson(d) }),
                }),
                signal: None,
            })
        }
    }
}

/// The case line of one packet: input plus `expect`.
fn case_line(name: String, p: &UdPacket, o: &Outcome, t: &TableSpec, profile: Profile) -> Result<String, String> {
    let input = CaseInput {
        name,
        profile: (profile == Profile::Kernel).then(|| "kernel".to_owned()),
        port: port_json(t),
        wc: wc_json(p, profile),
        grh: Some(Hex(p.area)),
    };
    // Keep the input's field order (name first) and put `expect` last.
    let line = serde_json::to_string(&input).map_err(|e| e.to_string())?;
    let expect = serde_json::to_string(&expect_json(o).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let body = line.strip_suffix('}').ok_or("case input is not a JSON object")?;
    Ok(format!("{body},\"expect\":{expect}}}"))
}

/// Compares one packet with its case; returns the differences.
fn check_packet(case: &Case, p: &UdPacket) -> Vec<String> {
    let mut out = Vec::new();
    if case.input.grh != Some(Hex(p.area)) {
        let got = Hex(p.area);
        let want = case.input.grh.map_or_else(|| "null".to_owned(), |h| h.to_string());
        out.push(format!("grh: case has {want}, capture gives {got}"));
    }
    let w = &case.input.wc;
    let pairs = [
        ("wc.wc_flags", u64::from(w.wc_flags), u64::from(p.wc.wc_flags)),
        ("wc.slid", u64::from(w.slid), u64::from(p.wc.slid)),
        ("wc.sl", u64::from(w.sl), u64::from(p.wc.sl)),
        ("wc.dlid_path_bits", u64::from(w.dlid_path_bits), u64::from(p.wc.dlid_path_bits)),
        ("wc.src_qp", u64::from(w.src_qp), u64::from(p.wc.src_qp)),
        ("wc.pkey_index", u64::from(w.pkey_index), u64::from(p.wc.pkey_index)),
    ];
    for (field, want, got) in pairs {
        if want != got {
            out.push(format!("{field}: case has {want}, capture gives {got}"));
        }
    }
    match case.check() {
        Ok(m) => out.extend(m.iter().map(ToString::to_string)),
        Err(e) => out.push(format!("case cannot run: {e}")),
    }
    out
}

/// `-`: standard input.
fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Checks that every capture argument can be read, before any is: a
/// missing file, a directory, an unreadable file, `-` given twice.
fn check_files(files: &[PathBuf]) -> Result<(), String> {
    if files.iter().filter(|p| is_stdin(p)).count() > 1 {
        return Err("`-` (standard input) is given more than once".into());
    }
    for path in files.iter().filter(|p| !is_stdin(p)) {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.is_dir() {
            return Err(format!("{}: is a directory, not a capture file", path.display()));
        }
        File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Entries of a `--gid` table that its link layer cannot hold.
fn check_link_layer(entries: &[GidEntry], link_layer: LinkLayer) -> Result<(), String> {
    let misfit = entries.iter().enumerate().find(|(_, e)| match link_layer {
        LinkLayer::Ethernet => e.gid_type == GidType::Ib,
        _ => e.gid_type != GidType::Ib,
    });
    match misfit {
        Some((i, e)) => Err(format!(
            "--gid #{} has type {} but --link-layer is {}: an {} port holds {} GIDs only",
            i + 1,
            match e.gid_type {
                GidType::Ib => "ib",
                GidType::RoceV1 => "roce_v1",
                GidType::RoceV2 => "roce_v2",
            },
            if link_layer == LinkLayer::Ethernet { "ethernet" } else { "infiniband" },
            if link_layer == LinkLayer::Ethernet { "Ethernet" } else { "InfiniBand" },
            if link_layer == LinkLayer::Ethernet { "RoCE (roce_v1, roce_v2)" } else { "ib" },
        )),
        None => Ok(()),
    }
}

fn file_name(path: &Path) -> String {
    if is_stdin(path) {
        return "stdin".to_owned();
    }
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

fn open_capture(path: &Path, progress: bool) -> std::io::Result<(Box<dyn std::io::Read>, Option<ProgressBar>)> {
    if is_stdin(path) {
        return Ok((Box::new(std::io::stdin()), None));
    }
    let f = File::open(path)?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if progress && len >= PROGRESS_MIN_BYTES {
        let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})") {
            pb.set_style(style.progress_chars("=> "));
        }
        pb.set_message(file_name(path));
        Ok((Box::new(pb.wrap_read(f)), Some(pb)))
    } else {
        Ok((Box::new(f), None))
    }
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let usage = |msg: String| {
        eprintln!("udah replay: error: {msg}");
        ExitCode::from(2)
    };
    let profile = match args.profile {
        ProfileArg::Libibverbs => Profile::Libibverbs,
        ProfileArg::Kernel => Profile::Kernel,
    };
    let opts = match parse_front(&args.ipv4_front) {
        Ok(f) => DecodeOptions { ipv4_front: f },
        Err(e) => return usage(e),
    };
    if args.port_num == 0 {
        return usage("--port-num 0: ports are numbered from 1".into());
    }
    if let Err(e) = check_files(&args.files) {
        return usage(e);
    }
    let source = if let Some(path) = &args.gid_table {
        let port = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: {e}", path.display()))
            .and_then(|t| serde_json::from_str::<PortJson>(&t).map_err(|e| format!("{}: {e}", path.display())))
            .and_then(|p| table_from_port(&p));
        match port {
            Ok(t) => TableSource::Given(t),
            Err(e) => return usage(e),
        }
    } else if !args.gid.is_empty() {
        let entries = match args.gid.iter().map(|g| parse_gid_arg(g)).collect::<Result<Vec<_>, _>>() {
            Ok(e) => e,
            Err(e) => return usage(e),
        };
        let link_layer = match args.link_layer {
            Some(LinkLayerArg::Ethernet) => LinkLayer::Ethernet,
            Some(LinkLayerArg::Infiniband) => LinkLayer::Infiniband,
            None if entries.iter().all(|e| e.gid_type == GidType::Ib) => LinkLayer::Infiniband,
            None => LinkLayer::Ethernet,
        };
        if let Err(e) = check_link_layer(&entries, link_layer) {
            return usage(e);
        }
        let n = u32::try_from(entries.len()).unwrap_or(u32::MAX);
        TableSource::Given(TableSpec {
            port_num: args.port_num,
            link_layer,
            len: n.max(16),
            entries: (0..).zip(entries).collect(),
        })
    } else {
        TableSource::Synthesised { port_num: args.port_num }
    };
    let origin = match &source {
        TableSource::Given(_) => "given",
        TableSource::Synthesised { .. } => "synthesised from the destinations",
    };

    let mut cases: HashMap<String, Case> = HashMap::new();
    for path in &args.check {
        match vectors::load_file(path, None) {
            Ok(loaded) => cases.extend(loaded.into_iter().map(|lc| (lc.case.name().to_owned(), lc.case))),
            Err(e) => return usage(e.to_string()),
        }
    }
    let mut emit = match &args.emit_cases {
        Some(path) => match File::create(path) {
            Ok(f) => Some(BufWriter::new(f)),
            Err(e) => return usage(format!("{}: {e}", path.display())),
        },
        None => None,
    };

    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut failed = false;
    let mut checked = 0u64;
    let mut mismatched = 0u64;
    let mut seen_cases = std::collections::HashSet::new();
    for path in &args.files {
        let name = file_name(path);
        let (reader, pb) = match open_capture(path, !args.no_progress) {
            Ok(r) => r,
            Err(e) => return usage(format!("{}: {e}", path.display())),
        };
        let cap = Capture::read(reader, &opts);
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        let r = match replay::replay(&cap, &source, profile) {
            Ok(r) => r,
            Err(e) => return usage(format!("the receiver GID table is invalid: {e}")),
        };
        let _ = write!(out, "{}", replay::render(&name, &cap, &r, origin));
        if cap.fatal.is_some() {
            failed = true;
        }
        for (frame, p, o, ti) in &r.results {
            let case_name = format!("{name}#{frame}");
            if args.verbose {
                let status = if o.is_ok() { "ok" } else { "FAIL" };
                let lid = p.dlid.map(|d| format!(" slid {} dlid {d} sl {}", p.wc.slid, p.wc.sl)).unwrap_or_default();
                let vlan = p.vlan.map(|v| format!(" vlan {v} pcp {}", p.wc.sl)).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "  frame {frame}: {} {} qp {:#x} -> qp {:#x} pkey {:#06x} qkey {:#x}{lid}{vlan}: {status} {}",
                    p.encap,
                    p.source(),
                    p.wc.src_qp,
                    p.dest_qp,
                    p.pkey,
                    p.qkey,
                    replay::describe(o, p)
                );
            }
            if let (Some(w), Some(t)) = (emit.as_mut(), r.tables.get(*ti)) {
                match case_line(case_name.clone(), p, o, t, profile) {
                    Ok(line) => {
                        if let Err(e) = writeln!(w, "{line}") {
                            return usage(format!("--emit-cases: {e}"));
                        }
                    }
                    Err(e) => return usage(format!("--emit-cases: {e}")),
                }
            }
            if !args.check.is_empty() {
                checked += 1;
                match cases.get(&case_name) {
                    Some(case) => {
                        seen_cases.insert(case_name.clone());
                        let diffs = check_packet(case, p);
                        if !diffs.is_empty() {
                            mismatched += 1;
                            for d in diffs {
                                let _ = writeln!(out, "MISMATCH {case_name}: {d}");
                            }
                        }
                    }
                    None => {
                        mismatched += 1;
                        let _ = writeln!(out, "MISMATCH {case_name}: no case of this name in the --check files");
                    }
                }
            }
        }
        let _ = writeln!(out);
        if let Some(e) = &cap.fatal {
            eprintln!("udah replay: error: {}: {e}", path.display());
        }
    }
    if !args.check.is_empty() {
        let mut missing: Vec<&String> = cases.keys().filter(|k| !seen_cases.contains(*k)).collect();
        missing.sort();
        for m in &missing {
            let _ = writeln!(out, "MISMATCH {m}: the capture has no UD packet for this case");
        }
        let bad = mismatched + missing.len() as u64;
        let _ = writeln!(out, "check: {} passed, {} failed", checked - mismatched, bad);
        if bad > 0 {
            failed = true;
        }
    }
    if let Some(Err(e)) = emit.as_mut().map(Write::flush) {
        return usage(format!("--emit-cases: {e}"));
    }
    let _ = out.flush();
    if failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

#[cfg(test)]
mod tests {
    use super::*;
    use udah_cli::capture::Encap;

    #[test]
    fn gid_args() {
        let e = parse_gid_arg("::ffff:172.17.242.56").unwrap();
        assert_eq!((e.gid, e.gid_type, e.vlan), (Gid::from_ipv4([172, 17, 242, 56]), GidType::RoceV2, None));
        let e = parse_gid_arg("10.0.0.1@roce_v1%7").unwrap();
        assert_eq!((e.gid, e.gid_type, e.vlan), (Gid::from_ipv4([10, 0, 0, 1]), GidType::RoceV1, Some(7)));
        assert!(parse_gid_arg("fe80::1@ib").is_ok());
        assert!(parse_gid_arg("fe80::1@foo").is_err());
        assert!(parse_gid_arg("nonsense").is_err());
        assert!(parse_gid_arg("::1%5000").is_err());
    }

    #[test]
    fn fronts() {
        assert_eq!(parse_front("zero").unwrap(), [0; 20]);
        assert_eq!(parse_front("v6pad").unwrap(), V6PAD_FRONT);
        assert!(parse_front("00").is_err());
        assert_eq!(parse_front(&"ab".repeat(20)).unwrap(), [0xab; 20]);
    }

    #[test]
    fn encap_names_are_stable() {
        assert_eq!(Encap::RoceV2Ipv4.to_string(), "RoCEv2/IPv4");
    }
}
