//! `udah serve`: a UD responder. Every receive completion is turned into an
//! AH through the core (the libibverbs profile and the AH table) and the
//! payload is echoed back to the sender's QP.
//!
//! * `--hal ibverbs`: on a real (or Soft-RoCE) device: receives are posted
//!   with the 40-byte GRH area in front of the payload (optionally
//!   pre-stamped, `--stamp`), completions resolve through
//!   [`udah_core::table::AhTable`], GID-change events re-snapshot the GID
//!   table and retire stale AHs.
//! * `--hal mock` (default): the same on hal-mock's in-process fabric, with
//!   `--peers` simulated clients sending `--count` requests, through
//!   hal-mock's `Responder`.

use core::time::Duration;
use std::process::ExitCode;
use std::time::Instant;

use udah_core::ah::{AhAttr, libibverbs};
use udah_core::hal::{AhToken, Hal};
use udah_core::table::{AhHandle, AhTable};
use udah_core::wire::{AREA_LEN, Area, Evidence, Gid, Stamp};
use udah_core::{GidTable, GidType, LinkLayer};
use udah_hal_ibverbs::{
    GidKind, IbverbsHal, PortGids, QpCaps, Segment, UdDest, UdQp, VerbsAh, VerbsError, WcOpcode, WcStatus,
};
use udah_hal_mock::responder::{Mode, Responder};
use udah_hal_mock::{Fabric, MockAh, MockHal, PortConfig, PortId, Qpn};

use super::devices::fail;

/// Which backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum HalKind {
    /// hal-mock's in-process fabric (no hardware needed).
    Mock,
    /// libibverbs on a real or Soft-RoCE device.
    Ibverbs,
}

/// The link layer of the mock fabric's ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum MockLink {
    /// RoCE v2 over IPv4.
    Roce,
    /// InfiniBand, LID-routed.
    Ib,
}

/// The Q_Key both sides use by default (`ibv_ud_pingpong`'s).
pub(crate) const DEFAULT_QKEY: u32 = 0x1111_1111;

/// GID-table snapshot capacity.
pub(crate) const GIDS: usize = 1024;
/// AH-table capacity.
const AHS: usize = 1024;

/// Arguments of `udah serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Backend.
    #[arg(long, value_enum, default_value_t = HalKind::Mock)]
    hal: HalKind,
    /// RDMA device (ibverbs; default: the first).
    #[arg(long, short = 'd')]
    device: Option<String>,
    /// Port.
    #[arg(long, short = 'p', default_value_t = 1)]
    port: u8,
    /// GID index to advertise to clients (ibverbs; default: the first RoCE v2
    /// IPv4 entry, else the first RoCE v2 entry, else the first entry).
    /// Replies use the index the core finds for each request.
    #[arg(long, short = 'g')]
    gid_index: Option<u32>,
    /// Q_Key.
    #[arg(long, default_value_t = DEFAULT_QKEY, value_parser = parse_u32)]
    qkey: u32,
    /// Stop after answering this many requests (0: run until killed).
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
}

/// Parses decimal or `0x` hexadecimal.
pub(crate) fn parse_u32(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("{s:?}: {e}"))
}

/// Runs `udah serve`.
pub(crate) fn run(args: &Args) -> ExitCode {
    match args.hal {
        HalKind::Mock => serve_mock(args),
        HalKind::Ibverbs => match serve_ibverbs(args) {
            Ok(code) => code,
            Err(e) => fail(&e),
        },
    }
}

// ---------------------------------------------------------------------------
// Mock

/// A mock fabric with one server port and `peers` client ports, each client
/// with a QP and an AH to the server.
pub(crate) struct MockSetup {
    /// The fabric.
    pub(crate) fabric: Fabric,
    /// The server port.
    pub(crate) server: PortId,
    /// The server's address: its RoCE v2 GID, or its LID.
    pub(crate) server_addr: String,
    /// Clients: port, QP, AH to the server.
    pub(crate) clients: Vec<(PortId, Qpn, MockAh)>,
}

impl core::fmt::Debug for MockSetup {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MockSetup").field("server", &self.server).field("clients", &self.clients.len()).finish()
    }
}

/// The RoCE v2 index of `gid` on `port`.
fn v2_index(fabric: &Fabric, port: PortId, gid: Gid) -> Option<u8> {
    fabric
        .gids(port)
        .iter()
        .find(|(_, e)| e.gid == gid && e.gid_type == GidType::RoceV2)
        .and_then(|(i, _)| u8::try_from(*i).ok())
}

/// Builds the mock fabric of `serve`/`ping`.
pub(crate) fn mock_setup(link: MockLink, peers: u8, qkey: u32) -> Result<MockSetup, String> {
    use udah_core::ah::{FlowLabel, GlobalRoute, PortNum, Sl};
    let fabric = Fabric::new(0x0dab);
    let server_ip = [10, 0, 0, 1];
    let (server, server_addr, server_lid) = match link {
        MockLink::Roce => {
            let p = fabric.add_port(PortConfig::roce([0x02, 0, 0, 0, 0, 1]).with_ipv4(server_ip));
            (p, Gid::from_ipv4(server_ip).to_string(), 0)
        }
        MockLink::Ib => (fabric.add_port(PortConfig::ib(1, 0x0002_c903_0000_0001)), "LID 1".to_owned(), 1),
    };
    let mut clients = Vec::new();
    for k in 0..peers {
        let (port, grh) = match link {
            MockLink::Roce => {
                let ip = [10, 0, 0, k.saturating_add(2)];
                let mac = [0x02, 0, 0, 0, 1, k];
                let p = fabric.add_port(PortConfig::roce(mac).with_ipv4(ip));
                let sgid = v2_index(&fabric, p, Gid::from_ipv4(ip)).ok_or("client has no RoCE v2 GID")?;
                let g = GlobalRoute {
                    dgid: Gid::from_ipv4(server_ip),
                    flow_label: FlowLabel::new(u32::from(k)).ok_or("flow label")?,
                    sgid_index: sgid,
                    hop_limit: 64,
                    traffic_class: 0,
                };
                (p, Some(g))
            }
            MockLink::Ib => {
                let lid = 2u16.saturating_add(u16::from(k));
                (fabric.add_port(PortConfig::ib(lid, 0x0002_c903_0000_0100 + u64::from(k))), None)
            }
        };
        let attr = AhAttr {
            port: PortNum::new(port.port).ok_or("port 0")?,
            dlid: server_lid,
            sl: Sl::new(0).ok_or("sl")?,
            src_path_bits: 0,
            static_rate: 0,
            grh,
        };
        let ah = MockHal::new(&fabric, port.device).create_ah(&attr, None).map_err(|e| e.to_string())?;
        let qpn = fabric.create_qp(port, qkey).ok_or("create_qp")?;
        clients.push((port, qpn, ah));
    }
    Ok(MockSetup { fabric, server, server_addr, clients })
}

fn serve_mock(args: &Args) -> ExitCode {
    let setup = match mock_setup(args.link, args.peers.max(1), args.qkey) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("udah: mock fabric: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mode = if args.stamp { Mode::LibibverbsStamped } else { Mode::Libibverbs };
    let mut resp = match Responder::new(&setup.fabric, setup.server, args.qkey, mode) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("udah: responder: {e}");
            return ExitCode::FAILURE;
        }
    };
    let count = if args.count == 0 { 1000 } else { args.count };
    println!(
        "serving (mock fabric, {:?}) at {} QPN {:#x} Q_Key {:#x}; {} simulated client(s), {count} request(s)",
        args.link,
        setup.server_addr,
        resp.qpn().0,
        args.qkey,
        setup.clients.len()
    );
    let start = Instant::now();
    let (mut answered, mut failed, mut echoed, mut wrong) = (0u64, 0u64, 0u64, 0u64);
    let mut sent = 0u64;
    while sent < count {
        let batch: Vec<_> = setup.clients.iter().take(usize::try_from(count - sent).unwrap_or(usize::MAX)).collect();
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
                if r.payload == want && r.wc.src_qp == resp.qpn().0 {
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

// ---------------------------------------------------------------------------
// The responder core, generic over the backend

/// Why a completion was not answered.
#[derive(Debug)]
pub(crate) enum ServeError<E> {
    /// The libibverbs profile failed.
    Attr(udah_core::IbvError),
    /// The AH table or backend failed (an invalid attribute included).
    Table(udah_core::table::TableError<E>),
    /// Re-snapshotting the GID table failed.
    Snapshot(E),
}

impl<E: core::fmt::Display + core::fmt::Debug> core::fmt::Display for ServeError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ServeError::Attr(e) => write!(f, "AH attribute: {e}"),
            ServeError::Table(e) => write!(f, "AH table: {e}"),
            ServeError::Snapshot(e) => write!(f, "GID snapshot: {e}"),
        }
    }
}

/// GID snapshot + AH table of one port: completion → AH handle, with the
/// snapshot re-taken (and stale AHs retired) whenever the backend's GID
/// generation moves.
pub(crate) struct Engine<H: Hal>
where
    H::Ah: AhToken,
{
    port: u8,
    gids: Box<GidTable<GIDS>>,
    table: Box<AhTable<H, AHS>>,
    stamp: Option<Stamp>,
    /// Snapshots re-taken after a generation change.
    pub(crate) resnapshots: u64,
    /// AH-table entries retired by GID changes.
    pub(crate) retired: u64,
}

impl<H: Hal> Engine<H>
where
    H::Ah: AhToken,
    H::Error: core::fmt::Debug,
{
    /// An engine for `port`, with a first snapshot.
    pub(crate) fn new(hal: &H, port: u8, stamp: Option<Stamp>) -> Result<Engine<H>, H::Error> {
        let mut gids = Box::new(GidTable::new(port, LinkLayer::Infiniband, 0));
        hal.snapshot_gids(port, &mut gids)?;
        Ok(Engine { port, gids, table: Box::new(AhTable::new()), stamp, resnapshots: 0, retired: 0 })
    }

    /// The GID snapshot.
    pub(crate) fn gids(&self) -> &GidTable<GIDS> {
        &self.gids
    }

    /// The AH table.
    pub(crate) fn table(&self) -> &AhTable<H, AHS> {
        &self.table
    }

    /// Re-snapshots and retires stale AHs if the GID generation moved.
    pub(crate) fn refresh(&mut self, hal: &H) -> Result<(), ServeError<H::Error>> {
        if self.gids.generation() == hal.gid_generation(self.port) {
            return Ok(());
        }
        let mut fresh = Box::new(GidTable::new(self.port, LinkLayer::Infiniband, 0));
        hal.snapshot_gids(self.port, &mut fresh).map_err(ServeError::Snapshot)?;
        self.retired += self.table.retire_gid_change(hal, &self.gids, &fresh) as u64;
        self.gids = fresh;
        self.resnapshots += 1;
        Ok(())
    }

    /// The AH to answer a completion with (a reference: give it back with
    /// [`release`](Self::release)).
    pub(crate) fn reply_ah(
        &mut self,
        hal: &H,
        wc: &udah_core::ah::IbvWc,
        area: &Area,
    ) -> Result<AhHandle<H::Ah>, ServeError<H::Error>> {
        self.refresh(hal)?;
        let evidence = self.stamp.map_or(Evidence::None, Evidence::Stamped);
        let words = libibverbs::words(&self.gids, wc, area, evidence).map_err(|f| ServeError::Attr(f.error))?;
        self.table.get_or_create(hal, &words).map_err(ServeError::Table)
    }

    /// Gives a handle back.
    pub(crate) fn release(&self, hal: &H, h: AhHandle<H::Ah>) {
        // A stale handle can only come from a bug here; nothing to do then.
        let _ = self.table.release(hal, h);
    }
}

impl<H: Hal> core::fmt::Debug for Engine<H>
where
    H::Ah: AhToken,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Engine").field("port", &self.port).field("generation", &self.gids.generation()).finish()
    }
}

// ---------------------------------------------------------------------------
// ibverbs

/// The GID index to use by default: the first RoCE v2 entry (IPv4-mapped
/// first when `ipv4` says so), else the first entry.
pub(crate) fn default_gid_index(gids: &PortGids, ipv4: Option<bool>) -> Option<u32> {
    let v2 = |g: &&udah_hal_ibverbs::GidInfo| g.record.kind == GidKind::RoceV2;
    let fam = |g: &&udah_hal_ibverbs::GidInfo| ipv4.is_none_or(|v4| g.record.gid.is_ipv4_mapped() == v4);
    gids.entries
        .iter()
        .find(|g| v2(g) && fam(g))
        .or_else(|| gids.entries.iter().find(v2))
        .or_else(|| gids.entries.first())
        .map(|g| g.record.index)
}

/// An open port with a UD QP at RTS, its CQs and buffers.
pub(crate) struct VerbsPort {
    pub(crate) hal: IbverbsHal,
    pub(crate) qp: UdQp,
    pub(crate) send_cq: udah_hal_ibverbs::Cq,
    pub(crate) recv_cq: udah_hal_ibverbs::Cq,
    pub(crate) recv_mr: udah_hal_ibverbs::Mr,
    pub(crate) send_mr: udah_hal_ibverbs::Mr,
    pub(crate) slot: usize,
    pub(crate) mtu: usize,
}

impl core::fmt::Debug for VerbsPort {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("VerbsPort").field("device", &self.hal.device()).field("qpn", &self.qp.qp_num()).finish()
    }
}

impl VerbsPort {
    /// Opens `device`/`port` (must be active) and brings a UD QP to RTS.
    pub(crate) fn open(device: Option<&str>, port: u8, qkey: u32, depth: u32) -> Result<VerbsPort, VerbsError> {
        let hal = IbverbsHal::open_port(device, port)?;
        let pa = hal.port_attr(port)?;
        let mtu = pa.active_mtu.bytes().unwrap_or(1024) as usize;
        let slot = AREA_LEN + mtu;
        let ctx = hal.context().clone();
        let depth = depth.max(1);
        let send_cq = ctx.create_cq(depth)?;
        let recv_cq = ctx.create_cq(depth)?;
        let qp = UdQp::create(hal.pd(), &send_cq, &recv_cq, QpCaps { max_send_wr: depth, max_recv_wr: depth })?;
        qp.to_rts(port, 0, qkey)?;
        let recv_mr = hal.pd().reg_mr(slot * depth as usize)?;
        let send_mr = hal.pd().reg_mr(mtu * depth as usize)?;
        Ok(VerbsPort { hal, qp, send_cq, recv_cq, recv_mr, send_mr, slot, mtu })
    }

    /// Posts receive slot `i` (stamping its area first when asked).
    pub(crate) fn post_recv(&mut self, i: usize, stamp: Option<Stamp>) -> Result<(), VerbsError> {
        let off = i * self.slot;
        if let Some(s) = stamp {
            self.recv_mr.write(off, s.bytes())?;
        }
        let seg = Segment { mr: &self.recv_mr, offset: off, len: self.slot as u32 };
        self.qp.post_recv(seg, i as u64)
    }

    /// Reads receive slot `i`: the area and `byte_len - 40` payload bytes.
    pub(crate) fn read_recv(&self, i: usize, byte_len: u32) -> Result<(Area, Vec<u8>), VerbsError> {
        let off = i * self.slot;
        let mut area = [0u8; AREA_LEN];
        self.recv_mr.read(off, &mut area)?;
        let n = (byte_len as usize).saturating_sub(AREA_LEN).min(self.mtu);
        let mut payload = vec![0u8; n];
        self.recv_mr.read(off + AREA_LEN, &mut payload)?;
        Ok((area, payload))
    }

    /// Sends `payload` from send slot `i` through `ah`.
    pub(crate) fn send(&mut self, i: usize, ah: VerbsAh, dest: UdDest, payload: &[u8]) -> Result<(), VerbsError> {
        let off = i * self.mtu;
        let n = payload.len().min(self.mtu);
        self.send_mr.write(off, payload.get(..n).unwrap_or_default())?;
        let seg = Segment { mr: &self.send_mr, offset: off, len: n as u32 };
        self.hal.post_send(&self.qp, ah, dest, seg, i as u64)
    }
}

#[derive(Debug, Default)]
struct Stats {
    received: u64,
    answered: u64,
    failed_wc: u64,
    failed_ah: u64,
    failed_send: u64,
    send_errors: u64,
}

fn serve_ibverbs(args: &Args) -> Result<ExitCode, VerbsError> {
    let depth = args.depth.max(2);
    let mut vp = VerbsPort::open(args.device.as_deref(), args.port, args.qkey, depth)?;
    vp.hal.start_event_listener()?;
    let stamp = args.stamp.then_some(Stamp::DEFAULT);
    let mut engine = Engine::new(&vp.hal, args.port, stamp)?;
    let pa = vp.hal.port_attr(args.port)?;
    let gids = vp.hal.port_gids(args.port)?;
    let idx = match args.gid_index {
        Some(i) => {
            if !gids.entries.iter().any(|g| g.record.index == i) {
                return Err(VerbsError::GidNotFound { device: vp.hal.device().to_owned(), port: args.port, index: i });
            }
            Some(i)
        }
        None => default_gid_index(&gids, Some(true)),
    };
    let gid = idx.and_then(|i| gids.entries.iter().find(|g| g.record.index == i)).map(|g| g.record.gid);
    println!(
        "serving on {} port {} ({}, MTU {}): QPN {:#x} Q_Key {:#x} LID {:#x}{}",
        vp.hal.device(),
        args.port,
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
    for i in 0..depth as usize {
        vp.post_recv(i, stamp)?;
    }
    let mut free: Vec<usize> = (0..depth as usize).rev().collect();
    let mut in_flight: Vec<Option<AhHandle<VerbsAh>>> = (0..depth as usize).map(|_| None).collect();
    let mut st = Stats::default();
    let (start, mut last) = (Instant::now(), Instant::now());
    let mut wcs = Vec::new();
    while args.count == 0 || st.answered < args.count {
        wcs.clear();
        vp.send_cq.poll(&mut wcs)?;
        for wc in &wcs {
            if wc.status != WcStatus::Success {
                st.send_errors += 1;
            }
            let i = wc.wr_id as usize;
            if let Some(h) = in_flight.get_mut(i).and_then(Option::take) {
                engine.release(&vp.hal, h);
            }
            free.push(i);
        }
        wcs.clear();
        vp.recv_cq.poll(&mut wcs)?;
        if wcs.is_empty() {
            std::thread::yield_now();
        }
        for wc in core::mem::take(&mut wcs) {
            let i = wc.wr_id as usize;
            if wc.status != WcStatus::Success || wc.opcode != WcOpcode::Recv {
                st.failed_wc += 1;
                eprintln!("udah: receive completion {}: {}", wc.wr_id, wc.status);
                vp.post_recv(i, stamp)?;
                continue;
            }
            st.received += 1;
            let (area, payload) = vp.read_recv(i, wc.byte_len)?;
            vp.post_recv(i, stamp)?;
            let h = match engine.reply_ah(&vp.hal, &wc.ibv(), &area) {
                Ok(h) => h,
                Err(e) => {
                    st.failed_ah += 1;
                    eprintln!("udah: request from QPN {:#x} not answered: {e}", wc.src_qp);
                    continue;
                }
            };
            let Some(s) = free.pop() else {
                // Every send slot is busy: drop this reply (UD is unreliable).
                st.failed_send += 1;
                engine.release(&vp.hal, h);
                continue;
            };
            match vp.send(s, h.ah(), UdDest { qpn: wc.src_qp, qkey: args.qkey }, &payload) {
                Ok(()) => {
                    st.answered += 1;
                    if let Some(slot) = in_flight.get_mut(s) {
                        *slot = Some(h);
                    }
                }
                Err(e) => {
                    st.failed_send += 1;
                    eprintln!("udah: reply to QPN {:#x}: {e}", wc.src_qp);
                    engine.release(&vp.hal, h);
                    free.push(s);
                }
            }
        }
        if args.stats_interval > 0 && last.elapsed() >= Duration::from_secs(args.stats_interval) {
            last = Instant::now();
            print_stats(&st, &engine, &vp.hal, start.elapsed());
        }
    }
    print_stats(&st, &engine, &vp.hal, start.elapsed());
    for h in in_flight.into_iter().flatten() {
        engine.release(&vp.hal, h);
    }
    let failed = st.failed_wc + st.failed_ah + st.failed_send + st.send_errors;
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn print_stats(st: &Stats, engine: &Engine<IbverbsHal>, hal: &IbverbsHal, el: Duration) {
    let t = engine.table().stats();
    let h = hal.stats();
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
        engine.retired,
        engine.resnapshots,
        engine.gids().generation(),
        h.events,
        el.as_secs_f64(),
        st.answered as f64 / el.as_secs_f64().max(1e-9)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::Cell;
    use udah_core::GidEntry;
    use udah_core::ah::IbvWc;
    use udah_core::hal::{ErrorKind, ErrorType, L2Info, PortInfo};

    /// A backend with one RoCE v2 GID whose value can change.
    #[derive(Debug, Default)]
    struct OneGid {
        generation: Cell<u64>,
        ip: Cell<[u8; 4]>,
        creates: Cell<u64>,
        destroys: Cell<u64>,
    }

    impl ErrorType for OneGid {
        type Error = ErrorKind;
    }

    impl Hal for OneGid {
        type Ah = u64;
        fn port_info(&self, port: u8) -> Result<PortInfo, ErrorKind> {
            Ok(PortInfo::new(port, LinkLayer::Ethernet, 4))
        }
        fn snapshot_gids<const N: usize>(&self, port: u8, t: &mut GidTable<N>) -> Result<(), ErrorKind> {
            *t = GidTable::new(port, LinkLayer::Ethernet, 4);
            t.set(1, GidEntry::new(Gid::from_ipv4(self.ip.get()), GidType::RoceV2)).map_err(|_| ErrorKind::Other)?;
            t.set_generation(self.generation.get());
            Ok(())
        }
        fn gid_generation(&self, _: u8) -> u64 {
            self.generation.get()
        }
        fn resolve_l2(&self, _: &AhAttr) -> Result<Option<L2Info>, ErrorKind> {
            Ok(None)
        }
        fn create_ah(&self, _: &AhAttr, _: Option<&L2Info>) -> Result<u64, ErrorKind> {
            self.creates.set(self.creates.get() + 1);
            Ok(self.creates.get())
        }
        fn destroy_ah(&self, _: u64) -> Result<(), ErrorKind> {
            self.destroys.set(self.destroys.get() + 1);
            Ok(())
        }
    }

    fn v4_area(src: [u8; 4], dst: [u8; 4]) -> Area {
        let mut h = [0x45, 0, 0, 0x3c, 0, 0, 0x40, 0, 0x40, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        h[12..16].copy_from_slice(&src);
        h[16..20].copy_from_slice(&dst);
        let mut sum = 0u32;
        for c in h.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        let mut area = [0u8; AREA_LEN];
        area[20..].copy_from_slice(&h);
        area
    }

    #[test]
    fn engine_resolves_caches_and_retires_on_gid_change() {
        let hal = OneGid { generation: Cell::new(1), ip: Cell::new([10, 0, 0, 1]), ..OneGid::default() };
        for stamp in [None, Some(Stamp::DEFAULT)] {
            let mut e = Engine::new(&hal, 1, stamp).unwrap();
            let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, src_qp: 7, ..IbvWc::default() };
            let mut area = v4_area([10, 0, 0, 9], [10, 0, 0, 1]);
            if let Some(s) = stamp {
                area[..20].copy_from_slice(s.bytes());
            }
            let creates = hal.creates.get();
            let h1 = e.reply_ah(&hal, &wc, &area).unwrap();
            e.release(&hal, h1);
            let h2 = e.reply_ah(&hal, &wc, &area).unwrap();
            e.release(&hal, h2);
            assert_eq!(hal.creates.get(), creates + 1, "second request hits the table");
            // The local address moves: new generation, the old AH is retired.
            hal.ip.set([10, 0, 0, 2]);
            hal.generation.set(hal.generation.get() + 1);
            let err = e.reply_ah(&hal, &wc, &area).unwrap_err();
            assert!(matches!(err, ServeError::Attr(_)), "{err:?}");
            assert_eq!((e.resnapshots, e.retired), (1, 1));
            let area2 = {
                let mut a = v4_area([10, 0, 0, 9], [10, 0, 0, 2]);
                if let Some(s) = stamp {
                    a[..20].copy_from_slice(s.bytes());
                }
                a
            };
            let h3 = e.reply_ah(&hal, &wc, &area2).unwrap();
            e.release(&hal, h3);
            assert_eq!(hal.creates.get(), creates + 2);
            assert_eq!(e.gids().generation(), hal.generation.get());
            hal.ip.set([10, 0, 0, 1]);
            hal.generation.set(hal.generation.get() + 1);
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u32("0x11111111"), Ok(0x1111_1111));
        assert_eq!(parse_u32("17"), Ok(17));
        assert!(parse_u32("x").is_err());
    }

    #[test]
    fn mock_setup_builds() {
        for link in [MockLink::Roce, MockLink::Ib] {
            let s = mock_setup(link, 3, DEFAULT_QKEY).unwrap();
            assert_eq!(s.clients.len(), 3);
        }
    }
}
