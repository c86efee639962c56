//! `udah serve`: a UD responder. Every receive completion is turned into an
//! AH through the core (the libibverbs profile and the AH table) and the
//! payload is echoed back to the sender's QP.
//!
//! * `--hal ibverbs`: on a real (or Soft-RoCE) device: receives are posted
//!   with the 40-byte GRH area in front of the payload (optionally
//!   pre-stamped, `--stamp`), completions resolve through core's pipeline
//!   ([`udah_core::responder::Responder`]: the libibverbs profile and an
//!   [`udah_core::table::AhTable`]), GID-change events re-snapshot the GID
//!   table and retire stale AHs.
//! * `--hal mock` (default): the same on hal-mock's in-process fabric, with
//!   `--peers` simulated clients sending `--count` requests, through
//!   hal-mock's `Responder`.

use core::sync::atomic::Ordering;
#[cfg(feature = "ibverbs")]
use core::time::Duration;
use std::process::ExitCode;
use std::time::Instant;

#[cfg(feature = "ibverbs")]
use udah_core::{
    LinkLayer,
    ah::PortNum,
    responder::ResolveError,
    table::AhHandle,
    wire::{Area, Gid, Stamp},
};
#[cfg(feature = "ibverbs")]
use udah_hal_ibverbs::{IbverbsHal, UdDest, VerbsAh, VerbsError, WcOpcode, WcStatus, WorkCompletion};
use udah_hal_mock::responder::{Mode, Responder as MockResponder};

use super::common::{CqKind, DEFAULT_QKEY_HEX, HalKind, MockLink, PortArgs, parse_u32, stop_on_signals};
#[cfg(feature = "ibverbs")]
use super::common::{EXIT_DEVICE_LOST, EXIT_QUEUE_FAULT};
use super::error::UsageError;
#[cfg(feature = "ibverbs")]
use super::error::VerbsCmdError;
use super::mock_fabric::mock_setup;
#[cfg(feature = "ibverbs")]
use super::pingpong::{PingpongAddr, UD_PINGPONG_PORT, pingpong_psn, pingpong_serve_exchange};
#[cfg(feature = "ibverbs")]
use super::pipeline::{Pipeline, REPLY_BATCH, ReplyError, pipeline_in, release, reply_ahs, shutdown, table_seed};
#[cfg(feature = "ibverbs")]
use super::serve_check::LibCheck;
#[cfg(feature = "ibverbs")]
use super::serve_latency::Latency;
#[cfg(feature = "ibverbs")]
use super::table_box::boxed_table;
use super::table_box::{AH_SLOTS, AHS};
#[cfg(feature = "ibverbs")]
use super::verbs_port::{RecvCq, Stamped, VerbsPort, default_gid_index};

/// Arguments of `udah serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Backend, device and port.
    #[command(flatten)]
    at: PortArgs,
    /// GID index to advertise to clients (ibverbs; default: the first RoCE v2
    /// IPv4 entry, else the first RoCE v2 entry, else the first entry).
    /// Replies use the index the core finds for each request.
    #[arg(long, short = 'g')]
    gid_index: Option<u32>,
    /// Q_Key (hex `0x…` or decimal).
    #[arg(long, default_value = DEFAULT_QKEY_HEX, value_parser = parse_u32)]
    qkey: u32,
    /// Stop after answering this many requests (0: run until SIGINT or
    /// SIGTERM, which print the final statistics and exit as at the end of
    /// a count: 0 when every request was answered).
    #[arg(long, short = 'n', default_value_t = 1000)]
    count: u64,
    /// Pre-stamp every receive area so the header type is known from the
    /// bytes the NIC leaves alone (RoCE v2/IPv4).
    #[arg(long)]
    stamp: bool,
    /// Receive queue depth (ibverbs).
    #[arg(long, default_value_t = 64)]
    depth: u32,
    /// Simulated clients (mock).
    #[arg(long, default_value_t = 4)]
    peers: u8,
    /// Link layer of the simulated fabric (mock).
    #[arg(long, value_enum, default_value_t = MockLink::Roce)]
    link: MockLink,
    /// Seconds between progress lines (ibverbs; 0: none).
    #[arg(long, default_value_t = 1)]
    stats_interval: u64,
    /// Also compute every request's attribute with the real libibverbs
    /// `ibv_init_ah_from_wc` on the same context and port, compare it field
    /// by field with udah's, and time both; prints `check-libibverbs: N
    /// compared, M mismatches; udah X ns/WC, libibverbs Y ns/WC, ratio Y/X`
    /// at exit (exit code 1 on any mismatch) (ibverbs).
    #[arg(long)]
    check_libibverbs: bool,
    /// Before serving, answer one `ibv_ud_pingpong` client's address
    /// exchange on TCP port 18515 (run the client with the same `-n` as
    /// `--count`, `-s` at most the MTU, and `-g` of the same address
    /// family); replies still go where each completion says, not to the
    /// exchanged address (ibverbs).
    #[arg(long)]
    ud_pingpong: bool,
    /// Fault test: after answering this many requests, move the QP to the
    /// error state (`ibv_modify_qp` to `IBV_QPS_ERR`); serve then sees its
    /// work requests flushed, reports the QP error and exits 4 (ibverbs).
    #[arg(long, value_name = "N")]
    fault_qp_after: Option<u64>,
    /// Print each distinct (source QPN, attribute) serve answers with, once:
    /// `ah: QPN 0x… dgid … port …`, in `udah replay`'s notation, so that a
    /// capture of the same requests can be checked against it (ibverbs).
    #[arg(long)]
    log_ahs: bool,
    /// Requests held per destination while its address resolves (off the
    /// receive loop); more are refused and counted (ibverbs).
    #[arg(long, default_value_t = 4)]
    pending_per_peer: usize,
    /// Requests held in all while their destinations resolve (ibverbs).
    #[arg(long, default_value_t = 256)]
    pending_total: usize,
    /// AH-table slots: 1024, 4096, 16384, 65536, 262144, 1048576 or 2097152
    /// (ibverbs). The table holds about three quarters of its slots in
    /// peers before it evicts idle ones.
    #[arg(long, default_value_t = AHS, value_parser = parse_ah_slots)]
    ah_slots: usize,
    /// Admit only requests whose source address is in this prefix
    /// (`198.18.0.0/24`, `fd00:da::/64`); repeat it for more. Others are
    /// refused before any AH is created for them, and counted (ibverbs).
    #[arg(long, value_name = "ADDR/LEN", value_parser = parse_prefix)]
    allow: Vec<(core::net::IpAddr, u8)>,
    /// Receive CQ: `plain` (`ibv_poll_cq`) or `ex` (`ibv_create_cq_ex` and
    /// the poll cursor, with completion timestamps where the device gives
    /// them). Default: `ex` where the device supports it, else `plain`
    /// (with a line saying so) (ibverbs).
    #[arg(long, value_enum)]
    cq: Option<CqKind>,
}

/// `--ah-slots`: one of [`AH_SLOTS`].
fn parse_ah_slots(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|e| format!("'{s}': {e}"))?;
    if AH_SLOTS.contains(&n) {
        Ok(n)
    } else {
        let list: Vec<String> = AH_SLOTS.iter().map(usize::to_string).collect();
        Err(format!("{n} AH slots is not one of the table sizes udah serve is built for: {}", list.join(", ")))
    }
}

/// `ADDR/LEN` of `--allow`.
fn parse_prefix(s: &str) -> Result<(core::net::IpAddr, u8), String> {
    let (a, l) = s.split_once('/').ok_or_else(|| format!("'{s}' is not ADDR/LEN"))?;
    let addr: core::net::IpAddr = a.parse().map_err(|e| format!("'{a}': {e}"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len: u8 = l.parse().map_err(|e| format!("'{l}': {e}"))?;
    if len > max {
        return Err(format!("prefix length {len} is above {max}"));
    }
    Ok((addr, len))
}

/// The command-line mistakes `serve` refuses before doing anything.
fn validate(args: &Args) -> Result<(), UsageError> {
    args.at.validate("server")?;
    if args.at.hal == HalKind::Mock {
        if args.peers == 0 {
            return Err(UsageError::NoPeers);
        }
        for (set, flag) in [
            (args.at.device.is_some(), "--device"),
            (args.gid_index.is_some(), "--gid-index"),
            (args.check_libibverbs, "--check-libibverbs"),
            (args.ud_pingpong, "--ud-pingpong"),
            (args.fault_qp_after.is_some(), "--fault-qp-after"),
            (args.log_ahs, "--log-ahs"),
            (!args.allow.is_empty(), "--allow"),
            (args.ah_slots != AHS, "--ah-slots"),
        ] {
            if set {
                return Err(UsageError::VerbsOnly { flag, mock: "the mock server has one fixed address" });
            }
        }
        if args.cq.is_some() {
            return Err(UsageError::VerbsOnly {
                flag: "--cq",
                mock: "the mock fabric has no completion queue to choose",
            });
        }
        if args.stamp && args.link == MockLink::Ib {
            return Err(UsageError::StampOnIb);
        }
    }
    Ok(())
}

/// Runs `udah serve`.
pub(crate) fn run(args: &Args) -> ExitCode {
    if let Err(e) = validate(args) {
        return e.exit("serve");
    }
    match args.at.hal {
        HalKind::Mock => serve_mock(args),
        #[cfg(feature = "ibverbs")]
        HalKind::Ibverbs => match serve_ibverbs(args) {
            Ok(code) => code,
            Err(e) => e.exit("serve"),
        },
        #[cfg(not(feature = "ibverbs"))]
        HalKind::Ibverbs => super::no_verbs_backend("serve --hal ibverbs"),
    }
}

fn serve_mock(args: &Args) -> ExitCode {
    let setup = match mock_setup(args.link, args.peers, args.qkey) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("udah: mock fabric: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mode = if args.stamp { Mode::LibibverbsStamped } else { Mode::Libibverbs };
    let mut resp = match MockResponder::new(&setup.fabric, setup.server, args.qkey, mode) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("udah: responder: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stop = stop_on_signals();
    let count = args.count;
    println!(
        "serving (mock fabric, {:?}) at {} QPN {:#x} Q_Key {:#x}; {} simulated client(s), {}",
        args.link,
        setup.server_addr,
        resp.qpn().0,
        args.qkey,
        setup.clients.len(),
        if count == 0 { "until SIGINT/SIGTERM".to_owned() } else { format!("{count} request(s)") }
    );
    let start = Instant::now();
    let (mut answered, mut failed, mut echoed, mut wrong) = (0u64, 0u64, 0u64, 0u64);
    let mut sent = 0u64;
    while (count == 0 || sent < count) && !stop.load(Ordering::Relaxed) {
        let left = if count == 0 { usize::MAX } else { usize::try_from(count - sent).unwrap_or(usize::MAX) };
        let batch: Vec<_> = setup.clients.iter().take(left).collect();
        for (i, (_, qpn, ah)) in batch.iter().enumerate() {
            let payload = format!("request {} from client {i}", sent + i as u64).into_bytes();
            if let Err(e) = setup.fabric.post_send(*qpn, *ah, resp.qpn(), args.qkey, &payload) {
                eprintln!("udah: client send: {e}");
                return ExitCode::FAILURE;
            }
        }
        let (ok, errs) = resp.serve_pending();
        answered += ok as u64;
        failed += errs.len() as u64;
        for (_, e) in errs.iter().take(3) {
            eprintln!("udah: request not answered: {e}");
        }
        for (i, (_, qpn, _)) in batch.iter().enumerate() {
            let want = format!("request {} from client {i}", sent + i as u64).into_bytes();
            while let Some(r) = setup.fabric.poll(*qpn) {
                if r.payload == want && r.wc.ibv.src_qp == resp.qpn().0 {
                    echoed += 1;
                } else {
                    wrong += 1;
                }
            }
        }
        sent += batch.len() as u64;
    }
    let el = start.elapsed();
    let c = setup.fabric.counters();
    if stop.load(Ordering::Relaxed) {
        println!("stopped by a signal");
    }
    println!(
        "requests {sent}, answered {answered}, failed {failed}, echoes received {echoed}, wrong {wrong}, AHs {}, \
         fabric delivered {} dropped {}, {:.3} s, {:.0} req/s",
        resp.ahs_created(),
        c.delivered,
        c.sent.saturating_sub(c.delivered),
        el.as_secs_f64(),
        sent as f64 / el.as_secs_f64().max(1e-9)
    );
    if answered == sent && echoed == sent && wrong == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

#[cfg(feature = "ibverbs")]
#[derive(Debug, Default)]
struct Stats {
    received: u64,
    /// With `--ud-pingpong`: requests from another QP than the exchanged one.
    other_senders: u64,
    answered: u64,
    failed_wc: u64,
    failed_ah: u64,
    failed_send: u64,
    send_errors: u64,
    /// Requests to unresolved destinations refused (their bounds were full).
    refused: u64,
    /// Held requests dropped because their destination did not resolve.
    unresolved: u64,
    /// Requests to destinations without an AH refused while the port was
    /// down.
    refused_port_down: u64,
    /// Service time (completions polled to replies posted) of the polls
    /// that created no AH, and the requests they answered.
    hit_service: Service,
    /// The same for the polls that created one or more.
    create_service: Service,
}

/// Time spent serving, from the receive completions polled (and the
/// events turned) to the last reply posted, and the requests answered in it.
#[cfg(feature = "ibverbs")]
#[derive(Debug, Default, Clone, Copy)]
struct Service {
    nanos: u128,
    answered: u64,
}

#[cfg(feature = "ibverbs")]
impl core::fmt::Display for Service {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let per = if self.answered == 0 { 0.0 } else { self.nanos as f64 / self.answered as f64 };
        write!(f, "{} answered, {:.0} ns/request", self.answered, per)
    }
}

/// `serve --hal ibverbs` with an AH table of `--ah-slots` slots.
#[cfg(feature = "ibverbs")]
fn serve_ibverbs(args: &Args) -> Result<ExitCode, VerbsCmdError> {
    // `parse_ah_slots` admits only `AH_SLOTS`.
    udah_core::with_ah_slots!(args.ah_slots, N => serve_on::<N>(args)).unwrap_or_else(|| serve_on::<AHS>(args))
}

#[cfg(feature = "ibverbs")]
fn serve_on<const N: usize>(args: &Args) -> Result<ExitCode, VerbsCmdError> {
    let stop = stop_on_signals();
    let mut check = args.check_libibverbs.then(LibCheck::default);
    let depth = args.depth.max(2);
    // Dropped in the reverse order: the pipeline, the QP, then the backend
    // (the borrows make it so), after `shutdown` retired every AH.
    let hal = IbverbsHal::open_port(args.at.device.as_deref(), args.at.port)?;
    let mut vp = VerbsPort::open(&hal, args.at.port, args.qkey, depth, args.cq)?;
    let mut events = super::serve_events::NetEvents::open(&hal, args.at.port)?;
    let stamp = args.stamp.then_some(Stamp::DEFAULT);
    // `validate` refused port 0 already.
    let port = PortNum::new(args.at.port).ok_or(UsageError::PortZero)?;
    let table = boxed_table::<IbverbsHal, N>(table_seed()).map_err(VerbsCmdError::Table)?;
    let mut pipeline = pipeline_in(&hal, port, stamp, table)?;
    if !args.allow.is_empty() {
        pipeline.set_admission(admission(&args.allow)?);
    }
    let pa = hal.port_attr(args.at.port)?;
    let gids = hal.port_gids(args.at.port)?;
    let idx = match args.gid_index {
        Some(i) => {
            if !gids.entries.iter().any(|g| g.record.index == i) {
                let device = hal.device().to_owned();
                return Err(VerbsError::GidNotFound { device, port: args.at.port, index: i }.into());
            }
            Some(i)
        }
        None => default_gid_index(&gids, Some(true)),
    };
    let gid = idx.and_then(|i| gids.entries.iter().find(|g| g.record.index == i)).map(|g| g.record.gid);
    println!(
        "serving on {} port {} ({}, MTU {}): QPN {:#x} Q_Key {:#x} LID {:#x}{}",
        hal.device(),
        args.at.port,
        pa.link_layer,
        vp.mtu,
        vp.qp.qp_num(),
        args.qkey,
        pa.lid,
        match (idx, gid) {
            (Some(i), Some(g)) => format!(" GID[{i}] {g}"),
            _ => String::new(),
        }
    );
    let dest = match gid {
        Some(g) if pa.link_layer.to_core() == Some(LinkLayer::Ethernet) => g.to_string(),
        _ => format!("{}", pa.lid),
    };
    println!(
        "  client: udah ping --hal ibverbs --device <dev> --port <p> --dest {dest} --qpn {:#x} --qkey {:#x}",
        vp.qp.qp_num(),
        args.qkey
    );
    println!("  {}", vp.cq_line);
    let table_bytes = core::mem::size_of::<udah_core::table::AhTable<IbverbsHal, N>>();
    println!("  AH table: {N} slots, {} KiB", table_bytes / 1024);
    for i in 0..depth as usize {
        vp.post_recv(i, stamp)?;
    }
    let mut peer = None;
    if args.ud_pingpong {
        let listener = match std::net::TcpListener::bind(("::", UD_PINGPONG_PORT))
            .or_else(|_| std::net::TcpListener::bind(("0.0.0.0", UD_PINGPONG_PORT)))
        {
            Ok(l) => l,
            Err(e) => return Err(VerbsCmdError::Listen(e)),
        };
        println!("ud-pingpong: waiting for an ibv_ud_pingpong client on TCP port {UD_PINGPONG_PORT}");
        let ours =
            PingpongAddr { lid: pa.lid, qpn: vp.qp.qp_num(), psn: pingpong_psn(), gid: gid.unwrap_or(Gid([0; 16])) };
        match pingpong_serve_exchange(&listener, ours, stop) {
            Ok(Some(theirs)) => {
                println!("ud-pingpong: local address {ours}; remote address {theirs} (replies follow the completions)");
                peer = Some(theirs);
            }
            Ok(None) => println!("stopped by a signal"),
            Err(source) => return Err(VerbsCmdError::Exchange { server: None, source }),
        }
    }
    let mut free: Vec<usize> = (0..depth as usize).rev().collect();
    let mut in_flight: Vec<Option<AhHandle<VerbsAh>>> = (0..depth as usize).map(|_| None).collect();
    let mut st = Stats::default();
    let (start, mut last) = (Instant::now(), Instant::now());
    let mut wcs = Vec::new();
    let mut rx: Vec<Stamped> = Vec::new();
    let mut latency = match &vp.recv_cq {
        RecvCq::Ex(c) if c.has_completion_ts() => Latency::new(hal.context().core_clock_khz().unwrap_or(0)),
        _ => Latency::new(0),
    };
    let mut group = Vec::new();
    let mut out: Vec<Option<_>> = (0..REPLY_BATCH).map(|_| None).collect();
    let mut fault: Option<(String, u8)> = None;
    let mut injected = false;
    let mut logged = std::collections::HashSet::new();
    let mut misses = super::serve_misses::Misses::start(&hal, args.pending_per_peer, args.pending_total);
    let mut ready = Vec::new();
    while (args.count == 0 || st.answered < args.count) && !stop.load(Ordering::Relaxed) {
        if !injected && args.fault_qp_after.is_some_and(|n| st.answered >= n) {
            injected = true;
            vp.qp.to_error(args.at.port)?;
            println!("fault test: QP {:#x} moved to the error state after {} answer(s)", vp.qp.qp_num(), st.answered);
        }
        // The listener polls the async fd (100 ms timeout) and checks the
        // device is still registered, traffic or not; this is one atomic
        // load until it has seen something.
        if let Some(f) = hal.fault() {
            let code = if f.is_device_lost() { EXIT_DEVICE_LOST } else { EXIT_QUEUE_FAULT };
            fault = Some((format!("device {} {f}", hal.device()), code));
            break;
        }
        wcs.clear();
        vp.send_cq.poll(&mut wcs)?;
        for wc in &wcs {
            if wc.status == WcStatus::WrFlushErr && fault.is_none() {
                fault = Some((qp_error_line(&vp, "send", wc), EXIT_QUEUE_FAULT));
            }
            if wc.status != WcStatus::Success {
                st.send_errors += 1;
            }
            let i = wc.wr_id as usize;
            if let Some(h) = in_flight.get_mut(i).and_then(Option::take) {
                release(&mut pipeline, h);
            }
            free.push(i);
        }
        rx.clear();
        vp.recv_cq.poll_stamped(&mut rx)?;
        events.turn(rx.is_empty(), &hal, &mut pipeline, |gid| misses.forget(gid));
        if rx.is_empty() {
            std::thread::yield_now();
        }
        let (polled, answered_before) = (Instant::now(), st.answered);
        let creates_before = pipeline.cache().table().stats().creates;
        // First the group's receives read and reposted, then their AHs
        // through the staged batch (reply_ahs), then the replies.
        group.clear();
        for stamped in core::mem::take(&mut rx) {
            let wc = stamped.wc;
            let i = wc.wr_id as usize;
            if wc.status == WcStatus::WrFlushErr {
                // The QP is in the error state: every receive comes back
                // flushed, and reposting would spin.
                st.failed_wc += 1;
                if fault.is_none() {
                    fault = Some((qp_error_line(&vp, "receive", &wc), EXIT_QUEUE_FAULT));
                }
                continue;
            }
            if wc.status != WcStatus::Success || wc.opcode != WcOpcode::Recv {
                st.failed_wc += 1;
                eprintln!("udah: receive completion {}: {}", wc.wr_id, wc.status);
                vp.post_recv(i, stamp)?;
                continue;
            }
            st.received += 1;
            if peer.is_some_and(|p| p.qpn != wc.src_qp) {
                st.other_senders += 1;
            }
            let (area, payload) = vp.read_recv(i, wc.byte_len)?;
            vp.post_recv(i, stamp)?;
            let item = (stamped, area, payload);
            // While the port is down only requests to AHs in the table are
            // answered.
            if !events.creating() && !misses.is_hit(&mut pipeline, &item) {
                st.refused_port_down += 1;
                continue;
            }
            // A destination not yet resolved waits off this loop.
            match misses.admit(&mut pipeline, item) {
                udah_cli::miss_queue::Admit::Go((s, area, payload)) => group.push((s, s.wc.ibv(), area, payload)),
                udah_cli::miss_queue::Admit::Held => {}
                udah_cli::miss_queue::Admit::Refused(..) => st.refused += 1,
            }
        }
        misses.completed(&mut ready, &mut st.unresolved);
        group.extend(ready.drain(..).map(|(s, area, payload)| (s, s.wc.ibv(), area, payload)));
        for chunk in group.chunks(REPLY_BATCH) {
            let answered = match reply_ahs(&mut pipeline, chunk.iter().map(|(_, ibv, area, _)| (ibv, area)), &mut out) {
                Ok(n) => n,
                Err(e) => {
                    st.failed_ah += chunk.len() as u64;
                    let e = ReplyError::Snapshot(e);
                    eprintln!("udah: {} request(s) not answered: {e}", chunk.len());
                    continue;
                }
            };
            for ((stamped, _, area, payload), o) in chunk.iter().zip(out.iter_mut()).take(answered) {
                let wc = &stamped.wc;
                if let Some(c) = check.as_mut() {
                    c.check(hal.context(), pipeline.gids(), args.at.port, wc, area);
                }
                let h = match o.take() {
                    Some(Ok(h)) => h,
                    // Refused by `--allow`: counted by the pipeline, not a failure.
                    Some(Err(ResolveError::Refused(_))) => continue,
                    Some(Err(e)) => {
                        st.failed_ah += 1;
                        eprintln!("udah: request from QPN {:#x} not answered: {}", wc.src_qp, ReplyError::Resolve(e));
                        continue;
                    }
                    None => continue,
                };
                if args.log_ahs {
                    log_ah(&mut logged, &pipeline, wc, area);
                }
                let Some(s) = free.pop() else {
                    // Every send slot is busy: drop this reply (UD is unreliable).
                    st.failed_send += 1;
                    release(&mut pipeline, h);
                    continue;
                };
                match vp.send(s, h.ah(), UdDest { qpn: wc.src_qp, qkey: args.qkey }, payload) {
                    Ok(()) => {
                        st.answered += 1;
                        let ctx = hal.context();
                        latency.record(stamped.polled, stamped.device_ts, stamped.wall_ns, || ctx.device_clock());
                        if let Some(slot) = in_flight.get_mut(s) {
                            *slot = Some(h);
                        }
                    }
                    Err(e) => {
                        st.failed_send += 1;
                        eprintln!("udah: reply to QPN {:#x}: {e}", wc.src_qp);
                        release(&mut pipeline, h);
                        free.push(s);
                    }
                }
            }
        }
        if st.answered != answered_before {
            let took = Service { nanos: polled.elapsed().as_nanos(), answered: st.answered - answered_before };
            let acc = if pipeline.cache().table().stats().creates == creates_before {
                &mut st.hit_service
            } else {
                &mut st.create_service
            };
            acc.nanos += took.nanos;
            acc.answered += took.answered;
        }
        if fault.is_some() {
            break;
        }
        if args.stats_interval > 0 && last.elapsed() >= Duration::from_secs(args.stats_interval) {
            last = Instant::now();
            print_stats(&st, &pipeline, start.elapsed());
        }
    }
    if let Some((line, _)) = &fault {
        eprintln!("udah serve: {line}; stopping");
    } else if stop.load(Ordering::Relaxed) {
        println!("stopped by a signal");
    }
    print_stats(&st, &pipeline, start.elapsed());
    println!("{}", latency.line());
    let ec = events.counts();
    println!(
        "network events: {} neighbour MAC change(s), {} AH(s) retired for them, {} link change(s); port: {} error(s), \
         {} active, {} request(s) refused while down; {} GID event(s), {} local change(s)",
        ec.mac_changes,
        ec.retired,
        ec.links,
        ec.port_errors,
        ec.port_actives,
        st.refused_port_down,
        ec.gid_changes,
        ec.local_changes
    );
    println!("{}", misses.line(st.refused, st.unresolved));
    println!(
        "service (completions polled to replies posted): polls without an AH create: {}; with creates: {}",
        st.hit_service, st.create_service
    );
    if !args.allow.is_empty() {
        let r = pipeline.refused();
        println!(
            "admission (--allow): {} request(s) refused ({} outside the prefixes, {} without a GRH)",
            r.total(),
            r.gid_prefix,
            r.no_grh
        );
    }
    let retired = shutdown(&mut pipeline, in_flight.into_iter().flatten());
    let live = hal.stats().live_ahs;
    if fault.is_some() || live != 0 {
        println!("shutdown: {retired} AH(s) retired, {live} left alive before closing {}", hal.device());
    }
    if let Some((_, code)) = fault {
        // The pipeline, then `vp` (QP, CQs, MRs), then the backend (its PD
        // and context) drop on return, after every AH is gone.
        return Ok(ExitCode::from(code));
    }
    if let Some(p) = peer {
        println!("ud-pingpong: {} request(s) from QPs other than the exchanged QPN {:#x}", st.other_senders, p.qpn);
    }
    // Refused and unresolved requests are counted, not failures: UD drops
    // what cannot be answered, and the bounds are what keeps the loop live.
    let mut failed = st.failed_wc + st.failed_ah + st.failed_send + st.send_errors;
    if let Some(c) = &check {
        println!("{}", c.line());
        failed += c.mismatches;
    }
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The admission of `--allow`: source GIDs in any of the prefixes (IPv4 as
/// IPv4-mapped GIDs), any VLAN and P_Key index.
#[cfg(feature = "ibverbs")]
fn admission(allow: &[(core::net::IpAddr, u8)]) -> Result<udah_core::responder::Admission, UsageError> {
    use udah_core::responder::Admission;
    let mut a = Admission::allow_all();
    for &(addr, len) in allow {
        a = match addr {
            core::net::IpAddr::V4(v4) => a.allow_ipv4_subnet(v4.octets(), len),
            core::net::IpAddr::V6(v6) => a.allow_gid_prefix(Gid(v6.octets()), len),
        }
        .map_err(|e| UsageError::Admission(e.to_string()))?;
    }
    Ok(a)
}

/// `--log-ahs`: prints the attribute the pipeline answers `wc` with, once
/// per (source QPN, attribute).
#[cfg(feature = "ibverbs")]
fn log_ah<const N: usize>(
    logged: &mut std::collections::HashSet<(u32, String)>,
    pipeline: &Pipeline<'_, IbverbsHal, N>,
    wc: &WorkCompletion,
    area: &Area,
) {
    let Ok(attr) = pipeline.words(&wc.ibv(), area).map(udah_core::attr::AttrWords::to_attr) else { return };
    let Ok(attr) = attr else { return };
    let line = udah_cli::capture::replay::describe_ibv(&udah_core::ah::IbvAhAttr::from(&attr));
    if logged.insert((wc.src_qp, line.clone())) {
        println!("ah: QPN {:#x} {line}", wc.src_qp);
    }
}

/// `udah serve: ...` text for a flushed completion: the QP is in the error
/// state.
#[cfg(feature = "ibverbs")]
fn qp_error_line(vp: &VerbsPort, queue: &str, wc: &WorkCompletion) -> String {
    format!(
        "QP {:#x} on device {} is in the error state ({queue} completion {}: {}, vendor error {:#x})",
        vp.qp.qp_num(),
        vp.hal.device(),
        wc.wr_id,
        wc.status,
        wc.vendor_err
    )
}

#[cfg(feature = "ibverbs")]
fn print_stats<const N: usize>(st: &Stats, pipeline: &Pipeline<'_, IbverbsHal, N>, el: Duration) {
    let t = pipeline.cache().table().stats_exact();
    let p = pipeline.stats();
    let h = pipeline.backend().stats();
    println!(
        "received {}, answered {}, failed: completion {} AH {} send {} send-error {}; AH table: {} hits {} misses \
         {} creates {} live, {} retired by GID changes ({} re-snapshots, GID generation {}); events {}; {:.1} s, \
         {:.0} req/s",
        st.received,
        st.answered,
        st.failed_wc,
        st.failed_ah,
        st.failed_send,
        st.send_errors,
        t.hits,
        t.misses,
        t.creates,
        t.live,
        p.retired,
        p.resnapshots,
        pipeline.gids().generation(),
        h.events,
        el.as_secs_f64(),
        st.answered as f64 / el.as_secs_f64().max(1e-9)
    );
}
