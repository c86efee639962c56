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

use core::sync::atomic::{AtomicBool, Ordering};
#[cfg(any(feature = "ibverbs", test))]
use core::time::Duration;
use std::process::ExitCode;
use std::time::Instant;

use udah_core::GidType;
use udah_core::ah::AhAttr;
#[cfg(feature = "ibverbs")]
use udah_core::ah::IbvAhAttr;
use udah_core::hal::Hal;
#[cfg(any(feature = "ibverbs", test))]
use udah_core::wire::AREA_LEN;
use udah_core::wire::Gid;
#[cfg(any(feature = "ibverbs", test))]
use udah_core::{
    GidTable, LinkLayer,
    ah::{IbvWc, PortNum, ProfileError, libibverbs},
    hal::AhToken,
    responder::{Config, EvidenceSource, ResolveError, Responder},
    table::{AhHandle, AhTable, Shared},
    wire::{Area, Stamp},
};
#[cfg(feature = "ibverbs")]
use udah_hal_ibverbs::{
    Context, GidKind, IbverbsHal, PortGids, QpCaps, Segment, UdDest, UdQp, VerbsAh, VerbsError, WcOpcode, WcStatus,
    WorkCompletion,
};
use udah_hal_mock::responder::{Mode, Responder as MockResponder};
use udah_hal_mock::{Fabric, MockAh, MockError, MockHal, PortConfig, PortId, Qpn};

use super::error::UsageError;
#[cfg(feature = "ibverbs")]
use super::error::VerbsCmdError;

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

/// The Q_Key both sides use by default (`ibv_ud_pingpong`'s), as `--help`
/// shows it (Q_Keys are read in hex).
pub(crate) const DEFAULT_QKEY_HEX: &str = "0x11111111";
/// [`DEFAULT_QKEY_HEX`] as a number.
#[cfg(test)]
pub(crate) const DEFAULT_QKEY: u32 = 0x1111_1111;
/// Exit code of a command-line mistake found before anything runs.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code of `serve --hal ibverbs` when the device went away under it
/// (`IBV_EVENT_DEVICE_FATAL`, or its uverbs node unregistered): it printed
/// `udah serve: device D removed (...)` and its final statistics, and
/// destroyed every AH before closing the device.
#[cfg(feature = "ibverbs")]
pub(crate) const EXIT_DEVICE_LOST: u8 = 3;
/// Exit code of `serve --hal ibverbs` when its QP or a CQ failed (a fatal
/// QP/CQ event, or flushed completions: the QP is in the error state); it
/// printed the reason and its final statistics, AHs destroyed as above.
#[cfg(feature = "ibverbs")]
pub(crate) const EXIT_QUEUE_FAULT: u8 = 4;

/// GID-table snapshot capacity.
#[cfg(any(feature = "ibverbs", test))]
pub(crate) const GIDS: usize = 1024;
/// AH-table capacity.
#[cfg(any(feature = "ibverbs", test))]
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
    /// Admit only requests whose source address is in this prefix
    /// (`198.18.0.0/24`, `fd00:da::/64`); repeat it for more. Others are
    /// refused before any AH is created for them, and counted (ibverbs).
    #[arg(long, value_name = "ADDR/LEN", value_parser = parse_prefix)]
    allow: Vec<(core::net::IpAddr, u8)>,
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
    if args.port == 0 {
        return Err(UsageError::PortZero);
    }
    if args.hal == HalKind::Mock {
        if args.peers == 0 {
            return Err(UsageError::NoPeers);
        }
        if args.port != 1 {
            return Err(UsageError::MockPort { port: args.port, side: "server" });
        }
        for (set, flag) in [
            (args.device.is_some(), "--device"),
            (args.gid_index.is_some(), "--gid-index"),
            (args.check_libibverbs, "--check-libibverbs"),
            (args.ud_pingpong, "--ud-pingpong"),
            (args.fault_qp_after.is_some(), "--fault-qp-after"),
            (args.log_ahs, "--log-ahs"),
            (!args.allow.is_empty(), "--allow"),
        ] {
            if set {
                return Err(UsageError::VerbsOnly { flag, mock: "the mock server has one fixed address" });
            }
        }
        if args.stamp && args.link == MockLink::Ib {
            return Err(UsageError::StampOnIb);
        }
    }
    Ok(())
}

/// Set by SIGINT and SIGTERM once [`stop_on_signals`] has run.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP.store(true, Ordering::Relaxed);
}

/// Makes SIGINT and SIGTERM set a flag instead of killing the process, so
/// that `serve` prints its final statistics and exits normally. `libc`'s
/// `sigaction` with an `AtomicBool` (no new dependency: libc is already in
/// the build through rdma-mummy-sys). No `SA_RESTART`: the loops poll.
pub(crate) fn stop_on_signals() -> &'static AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sigaction` is plain data; all-zero is an empty mask with
        // no flags (Linux).
        let mut sa: libc::sigaction = unsafe { core::mem::zeroed() };
        sa.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: `sa` is a valid action whose handler only does an atomic
        // store (async-signal-safe); the old action is not asked for (NULL).
        let r = unsafe { libc::sigaction(sig, &sa, core::ptr::null_mut()) };
        if r != 0 {
            eprintln!("udah: cannot install the handler for signal {sig}: {}", std::io::Error::last_os_error());
        }
    }
    &STOP
}

/// A number argument that is neither decimal nor `0x` hexadecimal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NumberError {
    text: String,
    source: core::num::ParseIntError,
}

impl core::fmt::Display for NumberError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}: {}", self.text, self.source)
    }
}

impl core::error::Error for NumberError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Parses decimal or `0x` hexadecimal.
pub(crate) fn parse_u32(s: &str) -> Result<u32, NumberError> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|source| NumberError { text: s.to_owned(), source })
}

/// Runs `udah serve`.
pub(crate) fn run(args: &Args) -> ExitCode {
    if let Err(e) = validate(args) {
        return e.exit("serve");
    }
    match args.hal {
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

/// Why the mock fabric of `serve`/`ping` could not be built.
#[derive(Debug)]
pub(crate) enum MockSetupError {
    /// A client port has no RoCE v2 GID for its address.
    NoClientGid,
    /// A field of a client's AH attribute is out of range (`what`).
    Field(&'static str),
    /// The fabric refused a client's AH to the server.
    CreateAh(MockError),
    /// The fabric refused a client's QP.
    CreateQp,
}

impl core::fmt::Display for MockSetupError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MockSetupError::NoClientGid => f.write_str("client has no RoCE v2 GID"),
            MockSetupError::Field(what) => f.write_str(what),
            MockSetupError::CreateAh(e) => core::fmt::Display::fmt(e, f),
            MockSetupError::CreateQp => f.write_str("create_qp"),
        }
    }
}

impl core::error::Error for MockSetupError {}

/// Builds the mock fabric of `serve`/`ping`.
pub(crate) fn mock_setup(link: MockLink, peers: u8, qkey: u32) -> Result<MockSetup, MockSetupError> {
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
                let sgid = v2_index(&fabric, p, Gid::from_ipv4(ip)).ok_or(MockSetupError::NoClientGid)?;
                let g = GlobalRoute {
                    dgid: Gid::from_ipv4(server_ip),
                    flow_label: FlowLabel::new(u32::from(k)).ok_or(MockSetupError::Field("flow label"))?,
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
            port: PortNum::new(port.port).ok_or(MockSetupError::Field("port 0"))?,
            dlid: server_lid,
            sl: Sl::new(0).ok_or(MockSetupError::Field("sl"))?,
            src_path_bits: 0,
            static_rate: 0,
            grh,
        };
        let ah = MockHal::new(&fabric, port.device).create_ah(&attr, None).map_err(MockSetupError::CreateAh)?;
        let qpn = fabric.create_qp(port, qkey).ok_or(MockSetupError::CreateQp)?;
        clients.push((port, qpn, ah));
    }
    Ok(MockSetup { fabric, server, server_addr, clients })
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

// ---------------------------------------------------------------------------
// The responder: core's pipeline, generic over the backend

#[cfg(any(feature = "ibverbs", test))]
/// The pipeline of `serve --hal ibverbs`: core's [`Responder`] (GID
/// snapshot, libibverbs profile, AH table) on one port of a backend it
/// borrows, so that the backend (its PD and context) outlives every AH and
/// handle of the pipeline. Boxed by [`pipeline`]: it holds two snapshots of
/// [`GIDS`] entries.
pub(crate) type Pipeline<'h, H> = Responder<Shared<&'h H, Box<AhTable<H, AHS>>>, GIDS>;

#[cfg(any(feature = "ibverbs", test))]
/// serve's configuration: the libibverbs profile, its own header-type
/// heuristic, or the stamp the receive areas were pre-stamped with
/// (`--stamp`); every completion admitted.
pub(crate) fn config(stamp: Option<Stamp>) -> Config {
    Config { evidence: stamp.map_or(EvidenceSource::None, EvidenceSource::Stamp), ..Config::default() }
}

#[cfg(any(feature = "ibverbs", test))]
/// The pipeline on `port` of `hal`, with a first GID snapshot. Its AH table
/// is keyed with a random seed: serve answers whoever writes to it, and a
/// sender who knew the seed could craft source GIDs that all land in the
/// same windows and push the other peers out ([`AhTable::with_seed`]).
/// (`RandomState`'s keys come from the OS's random source.)
pub(crate) fn pipeline<H: Hal>(hal: &H, port: PortNum, stamp: Option<Stamp>) -> Result<Box<Pipeline<'_, H>>, H::Error>
where
    H::Ah: AhToken,
{
    use core::hash::BuildHasher;
    let seed = std::hash::RandomState::new().hash_one(0x7564_6168_u64);
    Responder::new(Shared::new(hal, Box::new(AhTable::with_seed(seed))), port, config(stamp)).map(Box::new)
}

#[cfg(any(feature = "ibverbs", test))]
/// Why a request got no reply AH.
#[derive(Debug)]
pub(crate) enum ReplyError<E> {
    /// The backend's GID generation moved and re-taking the snapshot failed
    /// (the previous snapshot stays; the next request tries again).
    Snapshot(E),
    /// The pipeline refused or failed: the libibverbs profile (header type,
    /// GID search), or the AH table or backend (an invalid attribute
    /// included).
    Resolve(ResolveError<E>),
}

#[cfg(any(feature = "ibverbs", test))]
impl<E: core::fmt::Debug + core::fmt::Display> core::fmt::Display for ReplyError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReplyError::Snapshot(e) => write!(f, "GID snapshot: {e}"),
            // As serve has always said it.
            ReplyError::Resolve(ResolveError::Profile(ProfileError::Libibverbs(e))) => write!(f, "AH attribute: {e}"),
            ReplyError::Resolve(e) => core::fmt::Display::fmt(e, f),
        }
    }
}

#[cfg(any(feature = "ibverbs", test))]
impl<E: core::fmt::Debug + core::fmt::Display> core::error::Error for ReplyError<E> {}

#[cfg(test)]
/// The AH to answer a completion with: the GID snapshot re-taken first if
/// the backend's GID generation moved (retiring the AHs built on changed
/// entries), then the pipeline. The handle holds a reference: give it back
/// with [`release`]. (The poll loop answers its completions in groups:
/// [`reply_ahs`].)
pub(crate) fn reply_ah<H: Hal>(
    p: &mut Pipeline<'_, H>,
    wc: &IbvWc,
    area: &Area,
) -> Result<AhHandle<H::Ah>, ReplyError<H::Error>>
where
    H::Ah: AhToken,
{
    p.refresh().map_err(ReplyError::Snapshot)?;
    p.resolve(wc, area).map_err(ReplyError::Resolve)
}

#[cfg(any(feature = "ibverbs", test))]
/// Completions of a poll answered together by [`reply_ahs`].
pub(crate) const REPLY_BATCH: usize = 64;

#[cfg(any(feature = "ibverbs", test))]
/// The answer to one completion of a [`reply_ahs`] group.
pub(crate) type Reply<H> = Result<AhHandle<<H as Hal>::Ah>, ResolveError<<H as udah_core::hal::ErrorType>::Error>>;

#[cfg(any(feature = "ibverbs", test))]
/// The AH for each of a group of polled completions: the GID snapshot
/// re-taken once if the backend's GID generation moved, then the group
/// through the pipeline's staged batch ([`Responder::resolve_batch`]: past
/// the cache, the group's table slots are prefetched side by side);
/// `out[i]` is the answer to the `i`-th completion. Returns how many were
/// answered (the group, up to `out.len()`); a failed snapshot answers none.
pub(crate) fn reply_ahs<'a, H: Hal>(
    p: &mut Pipeline<'_, H>,
    group: impl IntoIterator<Item = (&'a IbvWc, &'a Area)>,
    out: &mut [Option<Reply<H>>],
) -> Result<usize, H::Error>
where
    H::Ah: AhToken,
{
    p.refresh()?;
    Ok(p.resolve_batch(group, out))
}

#[cfg(any(feature = "ibverbs", test))]
/// Gives a handle back to the pipeline.
pub(crate) fn release<H: Hal>(p: &mut Pipeline<'_, H>, h: AhHandle<H::Ah>)
where
    H::Ah: AhToken,
{
    // A stale handle can only come from a bug here; nothing to do then.
    let _ = p.release(h);
}

#[cfg(any(feature = "ibverbs", test))]
/// The end of serving: gives back the handles still held (replies in
/// flight), then retires every AH in the table, so that none is left when
/// the device is closed. Returns how many entries were retired.
pub(crate) fn shutdown<H: Hal>(p: &mut Pipeline<'_, H>, held: impl IntoIterator<Item = AhHandle<H::Ah>>) -> usize
where
    H::Ah: AhToken,
{
    for h in held {
        release(p, h);
    }
    p.cache().table().retire_all(p.backend())
}

// ---------------------------------------------------------------------------
// ibv_ud_pingpong's address exchange

#[cfg(any(feature = "ibverbs", test))]
/// The TCP port `ibv_ud_pingpong` exchanges addresses on.
pub(crate) const UD_PINGPONG_PORT: u16 = 18515;

#[cfg(any(feature = "ibverbs", test))]
/// Length of one exchange message: `LLLL:QQQQQQ:PPPPPP:` then 32 hex digits
/// of GID and a NUL.
const UD_PINGPONG_MSG: usize = 52;

#[cfg(any(feature = "ibverbs", test))]
/// One side's address as `ibv_ud_pingpong` exchanges it over TCP: the text
/// `%04x:%06x:%06x:` + the GID's 16 bytes as 32 hex digits (in wire order),
/// NUL-padded to [`UD_PINGPONG_MSG`] bytes. The client writes its message
/// first, the server answers with its own, the client then writes `done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PingpongAddr {
    /// Port LID (0 on RoCE).
    pub(crate) lid: u16,
    /// UD QP number.
    pub(crate) qpn: u32,
    /// Packet sequence number (unused by UD, exchanged anyway).
    pub(crate) psn: u32,
    /// The GID the side sends from (all zero: no GRH, IB only).
    pub(crate) gid: Gid,
}

#[cfg(any(feature = "ibverbs", test))]
impl PingpongAddr {
    /// The message bytes.
    pub(crate) fn to_wire(self) -> [u8; UD_PINGPONG_MSG] {
        let mut text = format!("{:04x}:{:06x}:{:06x}:", self.lid, self.qpn & 0xff_ffff, self.psn & 0xff_ffff);
        for b in self.gid.0 {
            text.push_str(&format!("{b:02x}"));
        }
        let mut out = [0u8; UD_PINGPONG_MSG];
        let n = text.len().min(UD_PINGPONG_MSG - 1);
        out[..n].copy_from_slice(&text.as_bytes()[..n]);
        out
    }

    /// Parses a message (up to its first NUL).
    pub(crate) fn parse(msg: &[u8]) -> Result<PingpongAddr, AddrError> {
        let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        let text = core::str::from_utf8(&msg[..end]).map_err(|_| AddrError::NotText)?;
        let bad = || AddrError::Format(text.to_owned());
        let mut f = text.split(':');
        let (Some(lid), Some(qpn), Some(psn), Some(gid), None) = (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            return Err(bad());
        };
        let hex = |v: &str| u32::from_str_radix(v, 16).map_err(|_| bad());
        if gid.len() != 32 {
            return Err(bad());
        }
        let mut g = [0u8; 16];
        for (i, b) in g.iter_mut().enumerate() {
            *b = u8::from_str_radix(gid.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16).map_err(|_| bad())?;
        }
        Ok(PingpongAddr {
            lid: u16::try_from(hex(lid)?).map_err(|_| bad())?,
            qpn: hex(qpn)?,
            psn: hex(psn)?,
            gid: Gid(g),
        })
    }
}

#[cfg(any(feature = "ibverbs", test))]
/// Why an `ibv_ud_pingpong` address message did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AddrError {
    /// The bytes before the first NUL are not UTF-8.
    NotText,
    /// The text (here) is not `LID:QPN:PSN:GID`.
    Format(String),
}

#[cfg(any(feature = "ibverbs", test))]
impl core::fmt::Display for AddrError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AddrError::NotText => f.write_str("the address is not text"),
            AddrError::Format(text) => {
                write!(f, "{text:?} is not LID:QPN:PSN:GID (ibv_ud_pingpong's address format)")
            }
        }
    }
}

#[cfg(any(feature = "ibverbs", test))]
impl core::error::Error for AddrError {}

#[cfg(any(feature = "ibverbs", test))]
impl core::fmt::Display for PingpongAddr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "LID {:#06x}, QPN {:#08x}, PSN {:#08x}, GID {}", self.lid, self.qpn, self.psn, self.gid)
    }
}

#[cfg(any(feature = "ibverbs", test))]
/// Reads until `buf` is full or the peer closes; returns the bytes read.
fn read_msg(s: &mut std::net::TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut n = 0;
    while n < buf.len() {
        match s.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(any(feature = "ibverbs", test))]
/// The server side of the exchange on `listener`: waits for one client
/// (giving up, `Ok(None)`, once `stop` is set), reads its address, answers
/// with `ours`, reads its `done`.
pub(crate) fn pingpong_serve_exchange(
    listener: &std::net::TcpListener,
    ours: PingpongAddr,
    stop: &AtomicBool,
) -> std::io::Result<Option<PingpongAddr>> {
    use std::io::Write;
    listener.set_nonblocking(true)?;
    let mut s = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted => {
                if stop.load(Ordering::Relaxed) {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    };
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut msg = [0u8; UD_PINGPONG_MSG];
    let n = read_msg(&mut s, &mut msg)?;
    if n != UD_PINGPONG_MSG {
        return Err(std::io::Error::other(format!("the client sent {n} of the {UD_PINGPONG_MSG} address bytes")));
    }
    let theirs = PingpongAddr::parse(&msg).map_err(std::io::Error::other)?;
    s.write_all(&ours.to_wire())?;
    // `done` (5 bytes from ibv_ud_pingpong; whatever comes, until EOF).
    let _ = read_msg(&mut s, &mut msg);
    Ok(Some(theirs))
}

#[cfg(any(feature = "ibverbs", test))]
/// The client side: connects to `server` (`host` or `host:port`; port
/// [`UD_PINGPONG_PORT`] by default), sends `ours`, reads the server's
/// address, says `done` (5 bytes with the NUL).
pub(crate) fn pingpong_client_exchange(server: &str, ours: PingpongAddr) -> std::io::Result<PingpongAddr> {
    use std::io::Write;
    use std::net::ToSocketAddrs;
    let addrs: Vec<_> = match server.to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(_) => (server, UD_PINGPONG_PORT).to_socket_addrs()?.collect(),
    };
    let mut last = std::io::Error::other(format!("{server}: no address"));
    for a in addrs {
        match std::net::TcpStream::connect_timeout(&a, Duration::from_secs(10)) {
            Ok(mut s) => {
                s.set_read_timeout(Some(Duration::from_secs(30)))?;
                s.write_all(&ours.to_wire())?;
                let mut msg = [0u8; UD_PINGPONG_MSG];
                let n = read_msg(&mut s, &mut msg)?;
                if n != UD_PINGPONG_MSG {
                    return Err(std::io::Error::other(format!(
                        "the server sent {n} of the {UD_PINGPONG_MSG} address bytes"
                    )));
                }
                let theirs = PingpongAddr::parse(&msg).map_err(std::io::Error::other)?;
                // `done` and its NUL, exactly as ibv_ud_pingpong's client
                // writes it: its server checks that it read 5 bytes (seen on
                // rdma-core 44: a padded 52-byte `done` makes it give up).
                s.write_all(b"done\0")?;
                return Ok(theirs);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(feature = "ibverbs")]
/// A PSN for the exchange (UD does not use it; ibv_ud_pingpong draws one).
pub(crate) fn pingpong_psn() -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    (t ^ std::process::id().rotate_left(12)) & 0xff_ffff
}

// ---------------------------------------------------------------------------
// ibverbs

#[cfg(feature = "ibverbs")]
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

#[cfg(feature = "ibverbs")]
/// A UD QP at RTS on a port of a backend, its CQs and buffers. The backend
/// is borrowed, not owned, so that the QP's sends and receives (which write
/// the buffers: `&mut self`) and a [`Pipeline`] (whose AHs they send
/// through) share it, and so that it outlives both: the QP and every AH
/// are gone before the backend closes its PD and context.
pub(crate) struct VerbsPort<'h> {
    pub(crate) hal: &'h IbverbsHal,
    pub(crate) qp: UdQp,
    pub(crate) send_cq: udah_hal_ibverbs::Cq,
    pub(crate) recv_cq: udah_hal_ibverbs::Cq,
    pub(crate) recv_mr: udah_hal_ibverbs::Mr,
    pub(crate) send_mr: udah_hal_ibverbs::Mr,
    pub(crate) slot: usize,
    pub(crate) mtu: usize,
}

#[cfg(feature = "ibverbs")]
impl core::fmt::Debug for VerbsPort<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("VerbsPort").field("device", &self.hal.device()).field("qpn", &self.qp.qp_num()).finish()
    }
}

#[cfg(feature = "ibverbs")]
impl<'h> VerbsPort<'h> {
    /// Brings a UD QP on `port` of `hal` to RTS (open the backend with
    /// [`IbverbsHal::open_port`], which checks that the port is active).
    pub(crate) fn open(hal: &'h IbverbsHal, port: u8, qkey: u32, depth: u32) -> Result<VerbsPort<'h>, VerbsError> {
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

#[cfg(feature = "ibverbs")]
/// `--check-libibverbs`: udah's attribute against the real
/// `ibv_init_ah_from_wc`, per completion.
#[derive(Debug, Default)]
pub(crate) struct LibCheck {
    compared: u64,
    mismatches: u64,
    udah_ns: u128,
    lib_ns: u128,
}

#[cfg(feature = "ibverbs")]
impl LibCheck {
    /// udah's profile is timed over this many runs per completion (its one
    /// run is close to the clock's resolution); libibverbs' once.
    const REPS: u32 = 8;
    /// Mismatches printed in full (the rest are counted).
    const SHOWN: u64 = 5;

    /// Compares (and times) both for one completion.
    fn check(&mut self, ctx: &Context, gids: &GidTable<GIDS>, port: u8, wc: &WorkCompletion, area: &Area) {
        use core::hint::black_box;
        let ibv = wc.ibv();
        let t = Instant::now();
        let mut ours = libibverbs::init_ah_from_wc(gids, port, &ibv, Some(area));
        for _ in 1..Self::REPS {
            ours = black_box(libibverbs::init_ah_from_wc(black_box(gids), port, black_box(&ibv), Some(area)));
        }
        self.udah_ns += t.elapsed().as_nanos() / u128::from(Self::REPS);
        let t = Instant::now();
        let theirs = ctx.init_ah_from_wc(port, wc, area);
        self.lib_ns += t.elapsed().as_nanos();
        let theirs = theirs.map_err(|e| e.errno().unwrap_or(0));
        self.record(wc.src_qp, &ours, &theirs);
    }

    /// Counts one comparison; prints the first few mismatches.
    fn record(&mut self, src_qp: u32, ours: &libibverbs::IbvResult, theirs: &Result<IbvAhAttr, i32>) {
        self.compared += 1;
        let diff = result_diff(ours, theirs);
        if !diff.is_empty() {
            self.mismatches += 1;
            if self.mismatches <= Self::SHOWN {
                eprintln!("check-libibverbs: request from QPN {src_qp:#x}: {}", diff.join(", "));
            }
        }
    }

    /// The summary line (COORD.md's format; the ratio is libibverbs' time
    /// over udah's).
    pub(crate) fn line(&self) -> String {
        let n = self.compared.max(1) as f64;
        let (x, y) = (self.udah_ns as f64 / n, self.lib_ns as f64 / n);
        format!(
            "check-libibverbs: {} compared, {} mismatches; udah {x:.0} ns/WC, libibverbs {y:.0} ns/WC, ratio {:.1}",
            self.compared,
            self.mismatches,
            y / x.max(1.0)
        )
    }
}

#[cfg(feature = "ibverbs")]
/// The fields in which two `ibv_ah_attr`s differ, as `name udah=… libibverbs=…`.
fn attr_diff(a: &IbvAhAttr, b: &IbvAhAttr) -> Vec<String> {
    let mut d = Vec::new();
    let mut f = |name: &str, x: String, y: String| {
        if x != y {
            d.push(format!("{name} udah={x} libibverbs={y}"));
        }
    };
    f("dgid", Gid(a.grh.dgid).to_string(), Gid(b.grh.dgid).to_string());
    f("flow_label", format!("{:#x}", a.grh.flow_label), format!("{:#x}", b.grh.flow_label));
    f("sgid_index", a.grh.sgid_index.to_string(), b.grh.sgid_index.to_string());
    f("hop_limit", a.grh.hop_limit.to_string(), b.grh.hop_limit.to_string());
    f("traffic_class", a.grh.traffic_class.to_string(), b.grh.traffic_class.to_string());
    f("dlid", format!("{:#x}", a.dlid), format!("{:#x}", b.dlid));
    f("sl", a.sl.to_string(), b.sl.to_string());
    f("src_path_bits", a.src_path_bits.to_string(), b.src_path_bits.to_string());
    f("static_rate", a.static_rate.to_string(), b.static_rate.to_string());
    f("is_global", a.is_global.to_string(), b.is_global.to_string());
    f("port_num", a.port_num.to_string(), b.port_num.to_string());
    d
}

#[cfg(feature = "ibverbs")]
/// How udah's result differs from libibverbs' (attribute fields on success,
/// the errno on failure); empty when they agree.
fn result_diff(ours: &libibverbs::IbvResult, theirs: &Result<IbvAhAttr, i32>) -> Vec<String> {
    match (ours, theirs) {
        (Ok(a), Ok(b)) => attr_diff(a, b),
        (Err(f), Err(e)) if f.error.errno() == *e => Vec::new(),
        (Err(f), Err(e)) => vec![format!("errno udah={} libibverbs={e}", f.error.errno())],
        (Ok(_), Err(e)) => vec![format!("udah succeeded, libibverbs failed with errno {e}")],
        (Err(f), Ok(_)) => vec![format!("udah failed ({}), libibverbs succeeded", f.error)],
    }
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
}

#[cfg(feature = "ibverbs")]
fn serve_ibverbs(args: &Args) -> Result<ExitCode, VerbsCmdError> {
    let stop = stop_on_signals();
    let mut check = args.check_libibverbs.then(LibCheck::default);
    let depth = args.depth.max(2);
    // Dropped in the reverse order: the pipeline, the QP, then the backend
    // (the borrows make it so), after `shutdown` retired every AH.
    let hal = IbverbsHal::open_port(args.device.as_deref(), args.port)?;
    let mut vp = VerbsPort::open(&hal, args.port, args.qkey, depth)?;
    hal.start_event_listener()?;
    let stamp = args.stamp.then_some(Stamp::DEFAULT);
    // `validate` refused port 0 already.
    let port = PortNum::new(args.port).ok_or(UsageError::PortZero)?;
    let mut pipeline = pipeline(&hal, port, stamp)?;
    if !args.allow.is_empty() {
        pipeline.set_admission(admission(&args.allow)?);
    }
    let pa = hal.port_attr(args.port)?;
    let gids = hal.port_gids(args.port)?;
    let idx = match args.gid_index {
        Some(i) => {
            if !gids.entries.iter().any(|g| g.record.index == i) {
                let device = hal.device().to_owned();
                return Err(VerbsError::GidNotFound { device, port: args.port, index: i }.into());
            }
            Some(i)
        }
        None => default_gid_index(&gids, Some(true)),
    };
    let gid = idx.and_then(|i| gids.entries.iter().find(|g| g.record.index == i)).map(|g| g.record.gid);
    println!(
        "serving on {} port {} ({}, MTU {}): QPN {:#x} Q_Key {:#x} LID {:#x}{}",
        hal.device(),
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
    let mut group = Vec::new();
    let mut out: Vec<Option<_>> = (0..REPLY_BATCH).map(|_| None).collect();
    let mut fault: Option<(String, u8)> = None;
    let mut injected = false;
    let mut events = super::serve_events::NetEvents::open();
    let mut logged = std::collections::HashSet::new();
    let mut misses = super::serve_misses::Misses::start(&hal, args.pending_per_peer, args.pending_total);
    let mut ready = Vec::new();
    while (args.count == 0 || st.answered < args.count) && !stop.load(Ordering::Relaxed) {
        if !injected && args.fault_qp_after.is_some_and(|n| st.answered >= n) {
            injected = true;
            vp.qp.to_error(args.port)?;
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
        wcs.clear();
        vp.recv_cq.poll(&mut wcs)?;
        events.turn(wcs.is_empty(), &mut pipeline, &mut |gid| misses.forget(gid));
        if wcs.is_empty() {
            std::thread::yield_now();
        }
        // First the group's receives read and reposted, then their AHs
        // through the staged batch (reply_ahs), then the replies.
        group.clear();
        for wc in core::mem::take(&mut wcs) {
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
            // A destination not yet resolved waits off this loop.
            match misses.admit(&mut pipeline, (wc, area, payload)) {
                udah_cli::miss_queue::Admit::Go((wc, area, payload)) => group.push((wc, wc.ibv(), area, payload)),
                udah_cli::miss_queue::Admit::Held => {}
                udah_cli::miss_queue::Admit::Refused(..) => st.refused += 1,
            }
        }
        misses.completed(&mut ready, &mut st.unresolved);
        group.extend(ready.drain(..).map(|(wc, area, payload)| (wc, wc.ibv(), area, payload)));
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
            for ((wc, _, area, payload), o) in chunk.iter().zip(out.iter_mut()).take(answered) {
                if let Some(c) = check.as_mut() {
                    c.check(hal.context(), pipeline.gids(), args.port, wc, area);
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
    println!(
        "network events: {} neighbour MAC change(s), {} AH(s) retired for them, {} link change(s)",
        events.mac_changes, events.retired, events.links
    );
    println!("{}", misses.line(st.refused, st.unresolved));
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
fn log_ah(
    logged: &mut std::collections::HashSet<(u32, String)>,
    pipeline: &Pipeline<'_, IbverbsHal>,
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
fn print_stats(st: &Stats, pipeline: &Pipeline<'_, IbverbsHal>, el: Duration) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::Cell;
    use udah_core::GidEntry;
    use udah_core::ah::PortNum;
    use udah_core::hal::{ErrorKind, ErrorType, L2Info, PortInfo};

    /// A backend with one RoCE v2 GID whose value can change.
    #[derive(Debug, Default)]
    struct OneGid {
        generation: Cell<u64>,
        ip: Cell<[u8; 4]>,
        creates: Cell<u64>,
        destroys: Cell<u64>,
        /// Makes `snapshot_gids` fail.
        fail_snapshot: Cell<bool>,
    }

    impl ErrorType for OneGid {
        type Error = ErrorKind;
    }

    impl Hal for OneGid {
        type Ah = u64;
        fn port_info(&self, port: PortNum) -> Result<PortInfo, ErrorKind> {
            Ok(PortInfo::new(port.get(), LinkLayer::Ethernet, 4))
        }
        fn snapshot_gids<const N: usize>(&self, port: PortNum, t: &mut GidTable<N>) -> Result<(), ErrorKind> {
            if self.fail_snapshot.get() {
                return Err(ErrorKind::Other);
            }
            *t = GidTable::new(port.get(), LinkLayer::Ethernet, 4);
            t.set(1, GidEntry::new(Gid::from_ipv4(self.ip.get()), GidType::RoceV2)).map_err(|_| ErrorKind::Other)?;
            t.set_generation(self.generation.get());
            Ok(())
        }
        fn gid_generation(&self, _: PortNum) -> u64 {
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

    fn p1() -> PortNum {
        PortNum::new(1).unwrap()
    }

    #[test]
    fn pipeline_resolves_caches_and_retires_on_gid_change() {
        let hal = OneGid { generation: Cell::new(1), ip: Cell::new([10, 0, 0, 1]), ..OneGid::default() };
        for stamp in [None, Some(Stamp::DEFAULT)] {
            let mut p = pipeline(&hal, p1(), stamp).unwrap();
            let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, src_qp: 7, ..IbvWc::default() };
            let mut area = v4_area([10, 0, 0, 9], [10, 0, 0, 1]);
            if let Some(s) = stamp {
                area[..20].copy_from_slice(s.bytes());
            }
            let creates = hal.creates.get();
            let h1 = reply_ah(&mut p, &wc, &area).unwrap();
            release(&mut p, h1);
            let h2 = reply_ah(&mut p, &wc, &area).unwrap();
            release(&mut p, h2);
            assert_eq!(hal.creates.get(), creates + 1, "second request hits the table");
            assert!(p.cache().table().stats_exact().hits >= 1);
            // The local address moves: new generation, the old AH is retired.
            hal.ip.set([10, 0, 0, 2]);
            hal.generation.set(hal.generation.get() + 1);
            let err = reply_ah(&mut p, &wc, &area).unwrap_err();
            assert!(
                matches!(
                    err,
                    ReplyError::Resolve(ResolveError::Profile(ProfileError::Libibverbs(libibverbs::IbvFailure {
                        error: udah_core::IbvError::GidNotFound,
                        ..
                    })))
                ),
                "{err:?}"
            );
            assert_eq!((p.stats().resnapshots, p.stats().retired), (1, 1));
            let area2 = {
                let mut a = v4_area([10, 0, 0, 9], [10, 0, 0, 2]);
                if let Some(s) = stamp {
                    a[..20].copy_from_slice(s.bytes());
                }
                a
            };
            let h3 = reply_ah(&mut p, &wc, &area2).unwrap();
            release(&mut p, h3);
            assert_eq!(hal.creates.get(), creates + 2);
            assert_eq!(p.gids().generation(), hal.generation.get());
            hal.ip.set([10, 0, 0, 1]);
            hal.generation.set(hal.generation.get() + 1);
        }
    }

    /// A group goes through the staged batch with the answers that one
    /// completion at a time gets; a failed re-snapshot answers none of it.
    #[test]
    fn a_group_is_answered_like_its_completions_one_by_one() {
        let hal = OneGid { generation: Cell::new(1), ip: Cell::new([10, 0, 0, 1]), ..OneGid::default() };
        let mut p = pipeline(&hal, p1(), None).unwrap();
        let wc = |qp| IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, src_qp: qp, ..IbvWc::default() };
        let (a, b) = (v4_area([10, 0, 0, 9], [10, 0, 0, 1]), v4_area([10, 0, 0, 8], [10, 0, 0, 1]));
        // The third is for an address the port does not have.
        let bad = v4_area([10, 0, 0, 8], [10, 0, 0, 7]);
        let group = [(wc(7), a), (wc(8), b), (wc(7), a), (wc(9), bad)];
        let mut out: Vec<Option<Reply<OneGid>>> = (0..REPLY_BATCH).map(|_| None).collect();
        let n = reply_ahs(&mut p, group.iter().map(|(w, a)| (w, a)), &mut out).unwrap();
        assert_eq!(n, group.len());
        let mut ahs = Vec::new();
        for ((w, area), o) in group.iter().zip(out.iter_mut()) {
            let one = reply_ah(&mut p, w, area).map(|h| {
                let ah = h.ah();
                release(&mut p, h);
                ah
            });
            match (o.take(), one) {
                (Some(Ok(h)), Ok(ah)) => {
                    assert_eq!(h.ah(), ah);
                    ahs.push(ah);
                    release(&mut p, h);
                }
                (Some(Err(e)), Err(ReplyError::Resolve(f))) => assert_eq!(format!("{e:?}"), format!("{f:?}")),
                (got, want) => panic!("{got:?} against {want:?}"),
            }
        }
        assert_eq!(ahs.len(), 3);
        assert_eq!(ahs[0], ahs[2], "one AH per sender");
        assert_eq!(hal.creates.get(), 2);
        hal.fail_snapshot.set(true);
        hal.generation.set(2);
        assert_eq!(reply_ahs(&mut p, group.iter().map(|(w, a)| (w, a)), &mut out).map_err(|_| ()), Err(()));
        assert!(out.iter().all(Option::is_none));
    }

    /// A failed re-snapshot answers nothing (the request is counted as not
    /// answered, with the backend's error) and keeps the previous snapshot;
    /// the next request tries again.
    #[test]
    fn a_failed_snapshot_refuses_the_request_and_retries() {
        let hal = OneGid { generation: Cell::new(1), ip: Cell::new([10, 0, 0, 1]), ..OneGid::default() };
        let mut p = pipeline(&hal, p1(), None).unwrap();
        let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, src_qp: 7, ..IbvWc::default() };
        let area = v4_area([10, 0, 0, 9], [10, 0, 0, 1]);
        hal.fail_snapshot.set(true);
        hal.generation.set(2);
        let err = reply_ah(&mut p, &wc, &area).unwrap_err();
        assert!(matches!(err, ReplyError::Snapshot(ErrorKind::Other)), "{err:?}");
        assert_eq!((p.gids().generation(), p.stats().resnapshots, hal.creates.get()), (1, 0, 0));
        hal.fail_snapshot.set(false);
        let h = reply_ah(&mut p, &wc, &area).unwrap();
        release(&mut p, h);
        assert_eq!((p.gids().generation(), p.stats().resnapshots, hal.creates.get()), (2, 1, 1));
    }

    /// The fault/exit path: handles still in flight are given back and
    /// every AH in the table is destroyed, so none is left when the device
    /// is closed.
    #[test]
    fn pipeline_shutdown_destroys_every_ah() {
        let hal = OneGid { generation: Cell::new(1), ip: Cell::new([10, 0, 0, 1]), ..OneGid::default() };
        let mut p = pipeline(&hal, p1(), None).unwrap();
        let wc = IbvWc { wc_flags: udah_core::ah::IBV_WC_GRH, src_qp: 7, ..IbvWc::default() };
        let idle = reply_ah(&mut p, &wc, &v4_area([10, 0, 0, 9], [10, 0, 0, 1])).unwrap();
        release(&mut p, idle);
        let held: Vec<_> = [[10, 0, 0, 10], [10, 0, 0, 11]]
            .map(|src| reply_ah(&mut p, &wc, &v4_area(src, [10, 0, 0, 1])).unwrap())
            .into();
        assert_eq!((hal.creates.get(), hal.destroys.get()), (3, 0));
        assert_eq!(shutdown(&mut p, held), 3);
        assert_eq!(hal.destroys.get(), 3, "every AH destroyed");
        assert_eq!(p.cache().table().stats().live, 0);
        // Nothing left to retire a second time.
        assert_eq!(shutdown(&mut p, Vec::new()), 0);
        assert_eq!(hal.destroys.get(), 3);
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u32(DEFAULT_QKEY_HEX), Ok(DEFAULT_QKEY));
        assert_eq!(parse_u32("0x11111111"), Ok(0x1111_1111));
        assert_eq!(parse_u32("17"), Ok(17));
        assert!(parse_u32("x").is_err());
    }

    #[test]
    #[cfg(feature = "ibverbs")]
    fn libibverbs_comparison_names_every_differing_field() {
        let a = IbvAhAttr { dlid: 3, sl: 1, is_global: 1, port_num: 1, ..IbvAhAttr::default() };
        let mut b = a;
        assert!(result_diff(&Ok(a), &Ok(b)).is_empty());
        b.grh.sgid_index = 2;
        b.grh.hop_limit = 64;
        let d = result_diff(&Ok(a), &Ok(b));
        assert_eq!(d, ["sgid_index udah=0 libibverbs=2", "hop_limit udah=0 libibverbs=64"]);
        let fail = libibverbs::IbvFailure { error: udah_core::IbvError::GidNotFound, attr: a };
        assert!(result_diff(&Err(fail), &Err(22)).is_empty(), "same errno (EINVAL)");
        assert_eq!(result_diff(&Err(fail), &Err(95)), ["errno udah=22 libibverbs=95"]);
        assert_eq!(result_diff(&Ok(a), &Err(22)).len(), 1);
        assert_eq!(result_diff(&Err(fail), &Ok(a)).len(), 1);
        let mut c = LibCheck { udah_ns: 2_000, lib_ns: 50_000, ..LibCheck::default() };
        c.record(7, &Ok(a), &Ok(a));
        c.record(7, &Ok(a), &Ok(b));
        assert_eq!(
            c.line(),
            "check-libibverbs: 2 compared, 1 mismatches; udah 1000 ns/WC, libibverbs 25000 ns/WC, ratio 25.0"
        );
    }

    /// The reasons serve prints for an unanswered request.
    #[test]
    #[cfg(feature = "ibverbs")]
    fn reply_errors_read_as_before() {
        let fail = libibverbs::IbvFailure { error: udah_core::IbvError::GidNotFound, attr: IbvAhAttr::default() };
        let profile = ReplyError::<VerbsError>::Resolve(ResolveError::Profile(ProfileError::Libibverbs(fail)));
        assert_eq!(profile.to_string(), format!("AH attribute: {}", udah_core::IbvError::GidNotFound));
        let table = ReplyError::<VerbsError>::Resolve(ResolveError::Table(udah_core::table::TableError::Full));
        assert_eq!(table.to_string(), "AH table: AH table window full of referenced entries");
        let snapshot = ReplyError::Snapshot(VerbsError::UnknownAh(7));
        assert_eq!(snapshot.to_string(), format!("GID snapshot: {}", VerbsError::UnknownAh(7)));
    }

    #[test]
    fn ud_pingpong_address_text() {
        let a = PingpongAddr { lid: 0x12, qpn: 0x11, psn: 0xabcdef, gid: Gid::from_ipv4([198, 18, 0, 1]) };
        let w = a.to_wire();
        assert_eq!(w.len(), 52);
        assert_eq!(&w[..51], b"0012:000011:abcdef:00000000000000000000ffffc6120001".as_slice());
        assert_eq!(w[51], 0);
        assert_eq!(PingpongAddr::parse(&w), Ok(a));
        let v6: Gid = "fe80::1:2".parse::<core::net::Ipv6Addr>().unwrap().into();
        let b = PingpongAddr { lid: 0, qpn: 0xff_ffff, psn: 0, gid: v6 };
        assert_eq!(PingpongAddr::parse(&b.to_wire()), Ok(b));
        for bad in [&b"0012:000011:abcdef"[..], b"0012:11:0:00ff", b"zz:1:2:00000000000000000000ffffc6120001", b""] {
            assert!(PingpongAddr::parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// Both sides of the TCP exchange against each other over loopback.
    #[test]
    fn ud_pingpong_exchange_over_loopback() {
        let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let srv = PingpongAddr { lid: 1, qpn: 0x42, psn: 7, gid: Gid::from_ipv4([10, 0, 0, 1]) };
        let cli = PingpongAddr { lid: 2, qpn: 0x43, psn: 8, gid: Gid::from_ipv4([10, 0, 0, 2]) };
        let stop = AtomicBool::new(false);
        let t = std::thread::spawn(move || pingpong_client_exchange(&format!("127.0.0.1:{port}"), cli).unwrap());
        let got = pingpong_serve_exchange(&l, srv, &stop).unwrap();
        assert_eq!(got, Some(cli));
        assert_eq!(t.join().unwrap(), srv);
        // A set stop flag ends the wait for a client.
        stop.store(true, Ordering::Relaxed);
        assert_eq!(pingpong_serve_exchange(&l, srv, &stop).unwrap(), None);
    }

    /// The client's last word is exactly `done\0` (5 bytes), as rdma-core's
    /// client writes it: ibv_ud_pingpong's server (rdma-core 44) refuses a
    /// `done` of any other length ("Couldn't send/recv local address").
    #[test]
    fn ud_pingpong_client_says_done_like_ibv_ud_pingpong() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let cli = PingpongAddr { lid: 0, qpn: 0x43, psn: 8, gid: Gid::from_ipv4([10, 0, 0, 2]) };
        let t = std::thread::spawn(move || pingpong_client_exchange(&format!("127.0.0.1:{port}"), cli));
        let (mut c, _) = l.accept().unwrap();
        let mut msg = [0u8; UD_PINGPONG_MSG];
        c.read_exact(&mut msg).unwrap();
        assert_eq!(PingpongAddr::parse(&msg), Ok(cli));
        let srv = PingpongAddr { lid: 0, qpn: 0x42, psn: 7, gid: Gid::from_ipv4([10, 0, 0, 1]) };
        c.write_all(&srv.to_wire()).unwrap();
        assert_eq!(t.join().unwrap().unwrap(), srv);
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"done\0");
    }

    #[test]
    fn mock_setup_builds() {
        for link in [MockLink::Roce, MockLink::Ib] {
            let s = mock_setup(link, 3, DEFAULT_QKEY).unwrap();
            assert_eq!(s.clients.len(), 3);
        }
    }
}
