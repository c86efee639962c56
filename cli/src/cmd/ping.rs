//! `udah ping`: the client side of `udah serve` (like `ibv_ud_pingpong`):
//! sends numbered UD requests to a QP and reports round-trip times.
//!
//! * `--hal ibverbs`: to `--dest GID|LID` and `--qpn` on a real device;
//! * `--hal mock` (default): against a `udah serve`-style responder on
//!   hal-mock's in-process fabric (`--dest`/`--qpn` are not needed).

use core::time::Duration;
use std::process::ExitCode;
use std::time::Instant;

#[cfg(feature = "ibverbs")]
use udah_core::LinkLayer;
#[cfg(feature = "ibverbs")]
use udah_core::ah::{AhAttr, FlowLabel, GlobalRoute, PortNum, Sl};
#[cfg(feature = "ibverbs")]
use udah_core::hal::Hal;
#[cfg(any(feature = "ibverbs", test))]
use udah_core::wire::Gid;
#[cfg(feature = "ibverbs")]
use udah_hal_ibverbs::{IbverbsHal, UdDest, VerbsError, WcOpcode, WcStatus};
use udah_hal_mock::responder::{Mode, Responder};

use super::common::{DEFAULT_QKEY_HEX, HalKind, MIN_SIZE, MOCK_MTU, MockLink, PortArgs, parse_u32};
use super::error::UsageError;
#[cfg(feature = "ibverbs")]
use super::error::VerbsCmdError;
use super::mock_fabric::mock_setup;
#[cfg(feature = "ibverbs")]
use super::pingpong::{PingpongAddr, pingpong_client_exchange, pingpong_psn};
#[cfg(feature = "ibverbs")]
use super::verbs_port::{VerbsPort, default_gid_index};

/// Arguments of `udah ping`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Backend, device and port.
    #[command(flatten)]
    at: PortArgs,
    /// Local GID index (ibverbs; default: the first RoCE v2 entry of the
    /// destination's address family, else 0).
    #[arg(long, short = 'g')]
    gid_index: Option<u32>,
    /// Destination: a GID (`fe80::…`, `::ffff:10.0.0.1`), an IPv4 address
    /// (RoCE v2), or a LID (decimal or 0x…) (ibverbs).
    #[arg(long)]
    dest: Option<String>,
    /// Destination LID when `--dest` is a GID on InfiniBand.
    #[arg(long, value_parser = parse_u32)]
    dlid: Option<u32>,
    /// Destination QP number (ibverbs).
    #[arg(long, value_parser = parse_u32)]
    qpn: Option<u32>,
    /// Q_Key (hex `0x…` or decimal).
    #[arg(long, default_value = DEFAULT_QKEY_HEX, value_parser = parse_u32)]
    qkey: u32,
    /// Requests to send.
    #[arg(long, short = 'n', default_value_t = 10)]
    count: u64,
    /// Payload bytes: at least 8 (the sequence number), at most the port's
    /// active MTU (a UD message is one packet; the mock fabric's MTU is
    /// 4096); anything else is refused up front.
    #[arg(long, short = 's', default_value_t = 64)]
    size: usize,
    /// Milliseconds to wait for each reply.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// Milliseconds between requests.
    #[arg(long, default_value_t = 0)]
    interval_ms: u64,
    /// Print every round trip.
    #[arg(long, short = 'v')]
    verbose: bool,
    /// Link layer of the simulated fabric (mock).
    #[arg(long, value_enum, default_value_t = MockLink::Roce)]
    link: MockLink,
    /// Drive an unmodified `ibv_ud_pingpong` server (or `udah serve
    /// --ud-pingpong`) at this host (`host` or `host:port`, TCP port 18515 by
    /// default): the destination GID/LID and QPN come from its address
    /// exchange instead of `--dest`/`--qpn`. Use the server's `-n` as
    /// `--count` and its `-s` as `--size` (ibverbs).
    #[arg(long, value_name = "SERVER")]
    ud_pingpong: Option<String>,
}

/// The command-line mistakes `ping` refuses before doing anything.
fn validate(args: &Args) -> Result<(), UsageError> {
    if args.size < MIN_SIZE {
        return Err(UsageError::SizeBelowMin(args.size));
    }
    args.at.validate("client")?;
    if args.at.hal == HalKind::Mock {
        if args.size > MOCK_MTU {
            return Err(UsageError::SizeAboveMockMtu(args.size));
        }
        for (set, flag) in [
            (args.dest.is_some(), "--dest"),
            (args.qpn.is_some(), "--qpn"),
            (args.dlid.is_some(), "--dlid"),
            (args.gid_index.is_some(), "--gid-index"),
            (args.at.device.is_some(), "--device"),
            (args.ud_pingpong.is_some(), "--ud-pingpong"),
        ] {
            if set {
                return Err(UsageError::VerbsOnly { flag, mock: "the mock fabric has its own server" });
            }
        }
    }
    Ok(())
}

/// The error when the local GID `local` (index `idx`) and the destination
/// are of different address families: RoCE v2 cannot send from an IPv6 GID
/// to an IPv4 address or back (the kernel answers EINVAL).
#[cfg(any(feature = "ibverbs", test))]
fn family_mismatch(dest: Gid, idx: u32, local: Gid) -> Option<UsageError> {
    (dest.is_ipv4_mapped() != local.is_ipv4_mapped()).then_some(UsageError::FamilyMismatch { dest, index: idx, local })
}

/// Runs `udah ping`.
pub(crate) fn run(args: &Args) -> ExitCode {
    if let Err(e) = validate(args) {
        return e.exit("ping");
    }
    match args.at.hal {
        HalKind::Mock => ping_mock(args),
        #[cfg(not(feature = "ibverbs"))]
        HalKind::Ibverbs => super::no_verbs_backend("ping --hal ibverbs"),
        #[cfg(feature = "ibverbs")]
        HalKind::Ibverbs => match ping_ibverbs(args) {
            Ok(code) => code,
            Err(e) => e.exit("ping"),
        },
    }
}

fn payload(seq: u64, size: usize) -> Vec<u8> {
    let mut p = vec![0u8; size.max(MIN_SIZE)];
    p[..8].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in p.iter_mut().enumerate().skip(8) {
        *b = i as u8;
    }
    p
}

/// Round-trip times and the summary line.
#[derive(Debug, Default)]
struct Rtts {
    ns: Vec<u64>,
    lost: u64,
    wrong: u64,
}

impl Rtts {
    fn report(&mut self, sent: u64, el: Duration) -> ExitCode {
        self.ns.sort_unstable();
        let pct = |p: usize| self.ns.get((self.ns.len().saturating_sub(1)) * p / 100).copied().unwrap_or(0);
        let us = |ns: u64| ns as f64 / 1000.0;
        let avg = if self.ns.is_empty() { 0 } else { self.ns.iter().sum::<u64>() / self.ns.len() as u64 };
        println!(
            "{sent} sent, {} received, {} lost, {} wrong; rtt min/avg/p50/p99/max = {:.2}/{:.2}/{:.2}/{:.2}/{:.2} us; {:.3} s",
            self.ns.len(),
            self.lost,
            self.wrong,
            us(self.ns.first().copied().unwrap_or(0)),
            us(avg),
            us(pct(50)),
            us(pct(99)),
            us(self.ns.last().copied().unwrap_or(0)),
            el.as_secs_f64()
        );
        if self.ns.len() as u64 == sent && self.wrong == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
    }
}

fn ping_mock(args: &Args) -> ExitCode {
    let setup = match mock_setup(args.link, 1, args.qkey) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("udah: mock fabric: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut resp = match Responder::new(&setup.fabric, setup.server, args.qkey, Mode::Libibverbs) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("udah: responder: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(&(_, qpn, ah)) = setup.clients.first() else {
        eprintln!("udah: mock fabric has no client");
        return ExitCode::FAILURE;
    };
    println!(
        "pinging (mock fabric, {:?}) {} QPN {:#x} Q_Key {:#x}: {} request(s) of {} bytes",
        args.link,
        setup.server_addr,
        resp.qpn().0,
        args.qkey,
        args.count,
        args.size
    );
    let mut rtts = Rtts::default();
    let start = Instant::now();
    for seq in 0..args.count {
        let p = payload(seq, args.size);
        let t0 = Instant::now();
        if let Err(e) = setup.fabric.post_send(qpn, ah, resp.qpn(), args.qkey, &p) {
            eprintln!("udah: send: {e}");
            return ExitCode::FAILURE;
        }
        let (_, failed) = resp.serve_pending();
        for (_, e) in &failed {
            eprintln!("udah: responder: {e}");
        }
        match setup.fabric.poll(qpn) {
            Some(r) if r.payload == p => {
                let ns = t0.elapsed().as_nanos() as u64;
                if args.verbose {
                    println!("seq={seq} rtt={:.2} us", ns as f64 / 1000.0);
                }
                rtts.ns.push(ns);
            }
            Some(_) => rtts.wrong += 1,
            None => rtts.lost += 1,
        }
        if args.interval_ms > 0 {
            std::thread::sleep(Duration::from_millis(args.interval_ms));
        }
    }
    rtts.report(args.count, start.elapsed())
}

/// A `--dest` value.
#[cfg(any(feature = "ibverbs", test))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dest {
    Gid(Gid),
    Lid(u16),
}

#[cfg(any(feature = "ibverbs", test))]
fn parse_dest(s: &str) -> Result<Dest, UsageError> {
    if let Ok(a) = s.parse::<core::net::Ipv6Addr>() {
        return Ok(Dest::Gid(a.into()));
    }
    if let Ok(a) = s.parse::<core::net::Ipv4Addr>() {
        return Ok(Dest::Gid(a.into()));
    }
    let lid = parse_u32(s).map_err(|_| UsageError::BadDest(s.to_owned()))?;
    u16::try_from(lid).map(Dest::Lid).map_err(|_| UsageError::LidTooLarge { lid, dlid: false })
}

#[cfg(feature = "ibverbs")]
fn ping_ibverbs(args: &Args) -> Result<ExitCode, VerbsCmdError> {
    let given = match &args.ud_pingpong {
        None => {
            let d = args.dest.as_deref().ok_or(UsageError::Missing("--dest"))?;
            let dest = parse_dest(d)?;
            Some((dest, args.qpn.ok_or(UsageError::Missing("--qpn"))?))
        }
        Some(_) if args.dest.is_some() || args.qpn.is_some() => {
            return Err(UsageError::DestWithExchange.into());
        }
        Some(_) => None,
    };
    let hal = IbverbsHal::open_port(args.at.device.as_deref(), args.at.port)?;
    let mut vp = VerbsPort::open(&hal, args.at.port, args.qkey, 16, Some(super::verbs_port::CqKind::Plain))?;
    // `validate` refused port 0 already.
    let port = PortNum::new(args.at.port).ok_or(UsageError::PortZero)?;
    let info = hal.port_info(port)?;
    let roce = info.link_layer == LinkLayer::Ethernet;
    let mut exchanged_lid = None;
    let (dest, qpn) = match (given, &args.ud_pingpong) {
        (Some(g), _) => g,
        (None, server) => {
            let server = server.as_deref().unwrap_or_default();
            let gids = hal.port_gids(args.at.port)?;
            // Ours goes first, before we know the server's family: -g, else
            // the first RoCE v2 IPv4 GID (ibv_ud_pingpong sends a zero GID
            // without -g, which only works on InfiniBand).
            let gid = match args.gid_index.or_else(|| default_gid_index(&gids, Some(true)).filter(|_| roce)) {
                Some(i) => {
                    gids.entries.iter().find(|e| e.record.index == i).map(|e| e.record.gid).ok_or_else(|| {
                        VerbsError::GidNotFound { device: hal.device().to_owned(), port: args.at.port, index: i }
                    })?
                }
                None => Gid([0; 16]),
            };
            let ours = PingpongAddr { lid: info.lid, qpn: vp.qp.qp_num(), psn: pingpong_psn(), gid };
            let theirs = pingpong_client_exchange(server, ours)
                .map_err(|source| VerbsCmdError::Exchange { server: Some(server.to_owned()), source })?;
            println!("ud-pingpong: local address {ours}; remote address {theirs}");
            exchanged_lid = Some(theirs.lid);
            // ibv_ud_pingpong uses a GRH when the GID's interface id is set.
            let dest =
                if theirs.gid.0[8..].iter().any(|&b| b != 0) { Dest::Gid(theirs.gid) } else { Dest::Lid(theirs.lid) };
            (dest, theirs.qpn)
        }
    };
    let attr = match dest {
        Dest::Lid(_) if roce => return Err(UsageError::LidOnRoce.into()),
        Dest::Lid(lid) => AhAttr { port, dlid: lid, sl: Sl::default(), src_path_bits: 0, static_rate: 0, grh: None },
        Dest::Gid(g) => {
            let gids = hal.port_gids(args.at.port)?;
            let idx = match args.gid_index {
                Some(i) => i,
                None => default_gid_index(&gids, Some(g.is_ipv4_mapped())).ok_or(UsageError::NoGid)?,
            };
            let Some(local) = gids.entries.iter().find(|e| e.record.index == idx) else {
                return Err(VerbsError::GidNotFound {
                    device: hal.device().to_owned(),
                    port: args.at.port,
                    index: idx,
                }
                .into());
            };
            if roce && let Some(e) = family_mismatch(g, idx, local.record.gid) {
                return Err(e.into());
            }
            let dlid = match args.dlid {
                Some(lid) => u16::try_from(lid).map_err(|_| UsageError::LidTooLarge { lid, dlid: true })?,
                None if roce => 0,
                None if exchanged_lid.is_some() => exchanged_lid.unwrap_or_default(),
                None => return Err(UsageError::NeedsDlid.into()),
            };
            AhAttr {
                port,
                dlid,
                sl: Sl::default(),
                src_path_bits: 0,
                static_rate: 0,
                grh: Some(GlobalRoute {
                    dgid: g,
                    flow_label: FlowLabel::default(),
                    sgid_index: u8::try_from(idx).map_err(|_| UsageError::GidIndexTooLarge(idx))?,
                    hop_limit: 64,
                    traffic_class: 0,
                }),
            }
        }
    };
    if args.size > vp.mtu {
        return Err(UsageError::SizeAboveMtu { size: args.size, mtu: vp.mtu }.into());
    }
    let size = args.size;
    let ah = hal.create_ah(&attr, None)?;
    println!(
        "pinging {} QPN {qpn:#x} Q_Key {:#x} from {} port {} QPN {:#x}: {} request(s) of {size} bytes",
        args.dest.as_deref().unwrap_or_default(),
        args.qkey,
        hal.device(),
        args.at.port,
        vp.qp.qp_num(),
        args.count
    );
    let to = UdDest { qpn, qkey: args.qkey };
    let mut rtts = Rtts::default();
    let start = Instant::now();
    let mut wcs = Vec::new();
    let mut posted = false;
    for seq in 0..args.count {
        if !posted {
            vp.post_recv(0, None)?;
            posted = true;
        }
        let p = payload(seq, size);
        let t0 = Instant::now();
        vp.send(0, ah, to, &p)?;
        let deadline = t0 + Duration::from_millis(args.timeout_ms);
        let (mut sent_done, mut got) = (false, None);
        while (!sent_done || got.is_none()) && Instant::now() < deadline {
            wcs.clear();
            vp.send_cq.poll(&mut wcs)?;
            for wc in &wcs {
                if wc.status != WcStatus::Success {
                    eprintln!("udah: send completion: {}", wc.status);
                }
                sent_done = true;
            }
            if got.is_none() {
                wcs.clear();
                vp.recv_cq.poll(&mut wcs)?;
                if let Some(wc) = wcs.iter().find(|w| w.opcode == WcOpcode::Recv) {
                    got = Some((*wc, t0.elapsed()));
                }
            }
        }
        if got.is_some() {
            posted = false;
        }
        match got {
            Some((wc, rtt)) if wc.status == WcStatus::Success => {
                let (_, reply) = vp.read_recv(0, wc.byte_len)?;
                if reply == p {
                    if args.verbose {
                        println!("seq={seq} rtt={:.2} us from QPN {:#x}", rtt.as_secs_f64() * 1e6, wc.src_qp);
                    }
                    rtts.ns.push(rtt.as_nanos() as u64);
                } else {
                    rtts.wrong += 1;
                }
            }
            Some((wc, _)) => {
                eprintln!("udah: receive completion: {}", wc.status);
                rtts.lost += 1;
            }
            None => {
                rtts.lost += 1;
                if args.verbose {
                    println!("seq={seq} timed out");
                }
                // The receive stays posted; the next request reuses it.
                continue;
            }
        }
        if args.interval_ms > 0 {
            std::thread::sleep(Duration::from_millis(args.interval_ms));
        }
    }
    let code = rtts.report(args.count, start.elapsed());
    hal.destroy_ah(ah)?;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations() {
        assert_eq!(parse_dest("fe80::1"), Ok(Dest::Gid("fe80::1".parse::<core::net::Ipv6Addr>().unwrap().into())));
        assert_eq!(parse_dest("10.0.0.1"), Ok(Dest::Gid(Gid::from_ipv4([10, 0, 0, 1]))));
        assert_eq!(parse_dest("0x12"), Ok(Dest::Lid(0x12)));
        assert_eq!(parse_dest("7"), Ok(Dest::Lid(7)));
        assert!(parse_dest("70000").is_err() && parse_dest("nope").is_err());
    }

    #[test]
    fn address_families_must_match() {
        let v4 = Gid::from_ipv4([10, 0, 0, 1]);
        let v6: Gid = "fd00::1".parse::<core::net::Ipv6Addr>().unwrap().into();
        let ll: Gid = "fe80::1".parse::<core::net::Ipv6Addr>().unwrap().into();
        assert_eq!(family_mismatch(v4, 1, Gid::from_ipv4([10, 0, 0, 2])), None);
        assert_eq!(family_mismatch(v6, 2, ll), None);
        let m = family_mismatch(v4, 2, v6).unwrap().to_string();
        assert!(m.contains("GID index 2") && m.contains("(IPv6)") && m.contains("is IPv4"), "{m}");
        let m = family_mismatch(ll, 1, v4).unwrap().to_string();
        assert!(m.contains("(IPv4)") && m.contains("is IPv6"), "{m}");
    }

    #[test]
    fn payload_carries_the_sequence() {
        let p = payload(0x0102, 3);
        assert_eq!(p.len(), 8);
        assert_eq!(p, 0x0102u64.to_be_bytes());
        assert_eq!(payload(1, 16).len(), 16);
    }
}
