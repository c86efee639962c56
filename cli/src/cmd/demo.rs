//! `udah demo`: the main job. A mock fabric with peers of every family sends
//! UD requests to a responder that turns each completion into an AH through
//! udah (profile + GID snapshot + the lock-free AH table) and replies; then
//! the hot path alone is measured over the completions the simulated NICs
//! produced.

use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use clap::ValueEnum;
use serde::Serialize;
use udah_core::ah::{PortNum, Profile};
use udah_core::hal::Hal;
use udah_core::responder::{Config, EvidenceSource, ResolveError, Responder};
use udah_core::table::{AhCache, AhHandle, Session, TableError};
use udah_core::wire::{Area, Stamp};
use udah_core::{GidTable, LinkLayer};
use udah_hal_mock::scenario::{Family, Scenario};
use udah_hal_mock::{Faults, FrontFill, MockAh, MockError, MockHal, MockWc, Qpn, Quirks};

use udah_cli::alloc_count::thread_allocations;

use super::table_box::boxed_table;

/// The smallest AH-table capacity the demo takes ([`table_slots`]): 1 MiB
/// of slots, so that the peers of two workers seldom have slots side by
/// side (a core that reads a slot, or the line next to its own that the
/// hardware prefetches, takes it from the other core when that worker's
/// peer holds it). At 10³ peers, two threads gave 1.49–2.03× the
/// one-thread rate (median 1.64) with 2¹⁴ slots (6 % full), 1.16–1.46×
/// (median 1.40) with 2¹² (24 % full), five rounds each
/// (benches/RESULTS.md).
const MIN_TABLE_SLOTS: usize = 1 << 14;
/// The largest AH-table capacity (the largest of
/// [`AH_SLOTS`](udah_core::heap::AH_SLOTS)).
pub(crate) const MAX_TABLE_SLOTS: usize = udah_core::heap::AH_SLOTS[udah_core::heap::AH_SLOTS.len() - 1];
/// GID-snapshot capacity.
const GID_SLOTS: usize = 256;

/// Completions timed together (the timer costs more than one completion).
const BATCH: usize = 64;

/// The most completions the hot-path corpus keeps: the first ones in
/// arrival order (every peer's first round up to 10⁶ peers), 76 MiB (76 B each).
const CORPUS_MAX: usize = 1 << 20;

/// Peers that send a round of requests together in the end-to-end phase
/// (their requests and replies are in the fabric's queues at once).
const SEND_CHUNK: usize = 1 << 14;

/// Leases of each worker's session: 256 sets of two, so that a few hundred
/// hot peers rarely compete for a lease (more peers than that thrash them:
/// `--table-path shared` is the other way).
const SESSION_LEASES: usize = 512;

/// How hot-path workers reach the AH table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TablePathArg {
    /// One `Session` per worker: repeated hits served from leased references.
    Session,
    /// The shared table's calls: one compare-and-swap per hit and per release.
    Shared,
}

/// Profile of `udah demo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ProfileArg {
    /// libibverbs `ibv_init_ah_from_wc`.
    Libibverbs,
    /// Linux `ib_init_ah_attr_from_wc`.
    Kernel,
}

/// How the responder tells the header type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EvidenceArg {
    /// The profile's own heuristic.
    None,
    /// Receive areas pre-stamped before posting.
    Stamp,
    /// mlx5's packet-type bits in `wc.sl` (adds them to the chosen
    /// `--quirks`; not with `--quirks irdma`, whose NICs do not write them).
    Mlx5,
}

/// NIC behaviour on the simulated fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum QuirksArg {
    /// Reused buffers (undefined IPv4 bytes are the previous area's), the
    /// kernel reports the network type.
    Realistic,
    /// Fresh, zeroed buffers.
    Zero,
    /// Random undefined bytes.
    Random,
    /// irdma: zero IPv4 checksum, route hop limit 64, network type reported.
    Irdma,
    /// mlx5: packet type in `wc.sl`.
    Mlx5,
}

/// Arguments of `udah demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Number of peers (1 to 1,000,000; the AH table is sized for them to
    /// fill at most half of it: 2¹⁴ slots up to 8,192 peers, then 2¹⁶,
    /// 2¹⁸, 2²⁰ and 2²¹).
    #[arg(long, default_value_t = 64)]
    pub(crate) peers: usize,
    /// Completions to resolve on the measured hot path (1 to 1,000,000,000).
    #[arg(long, default_value_t = 4_000_000)]
    pub(crate) messages: u64,
    /// Fabric families, comma separated (ib, ib-grh, rocev1, rocev2-ipv4, rocev2-ipv6, rocev2-vlan).
    #[arg(long, value_delimiter = ',', default_value = "ib,ib-grh,rocev1,rocev2-ipv4,rocev2-ipv6,rocev2-vlan")]
    pub(crate) mix: Vec<Family>,
    /// Attribute profile.
    #[arg(long, value_enum, default_value_t = ProfileArg::Libibverbs)]
    pub(crate) profile: ProfileArg,
    /// Header-type evidence.
    #[arg(long, value_enum, default_value_t = EvidenceArg::None)]
    pub(crate) evidence: EvidenceArg,
    /// NIC quirks.
    #[arg(long, value_enum, default_value_t = QuirksArg::Realistic)]
    pub(crate) quirks: QuirksArg,
    /// Worker threads on the hot path (sharing one AH table; each polls the
    /// completions of its own peers, steered by sender, unless some worker
    /// would have none; 1 to 256).
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// How the workers use the AH table.
    #[arg(long, value_enum, default_value_t = TablePathArg::Session)]
    pub(crate) table_path: TablePathArg,
    /// Simulated AH create latency, microseconds (a RoCE create takes tens;
    /// at most 100,000). Unset: 20, or less for more than 100,000 peers, so
    /// that their creates take 2 s in all ([`default_create_latency_us`]).
    #[arg(long)]
    pub(crate) create_latency_us: Option<u64>,
    /// Requests each peer sends in the end-to-end phase; the hot path
    /// replays that many completions per peer too (1 to 1024).
    #[arg(long, default_value_t = 8)]
    pub(crate) rounds: usize,
    /// Seed of the fabric's random choices and,
    /// through [`table_seed`], of the AH table's keyed hash.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// No progress bar.
    #[arg(long)]
    pub(crate) no_progress: bool,
}

/// The summary `udah demo` prints.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
    /// Profile used.
    pub(crate) profile: ProfileArg,
    /// Evidence used.
    pub(crate) evidence: EvidenceArg,
    /// Quirks simulated.
    pub(crate) quirks: QuirksArg,
    /// Peers.
    pub(crate) peers: usize,
    /// Families.
    pub(crate) families: Vec<String>,
    /// Hot-path threads.
    pub(crate) threads: usize,
    /// How the workers used the AH table.
    pub(crate) table_path: TablePathArg,
    /// Whether each worker polled the completions of its own peers
    /// (steered by sender); otherwise all of them, from its own offset.
    pub(crate) steered: bool,
    /// The AH table's hash seed ([`table_seed`] of `--seed`).
    pub(crate) table_seed: u64,
    /// The AH table's capacity, slots.
    pub(crate) table_capacity: usize,
    /// Slots holding an entry at the end.
    pub(crate) table_entries: u64,
    /// `table_entries / table_capacity`.
    pub(crate) load_factor: f64,
    /// Bytes of the AH table (its slots, 64 B each, and its counters).
    pub(crate) table_bytes: usize,
    /// End-to-end: requests sent.
    pub e2e_requests: usize,
    /// End-to-end: requests answered (an AH was built and a reply posted).
    pub e2e_answered: usize,
    /// End-to-end: replies that reached the requesting QP.
    pub e2e_replies: usize,
    /// End-to-end: replies that reached another QP (must be 0).
    pub e2e_misdelivered: usize,
    /// End-to-end: requests the profile refused, by reason.
    pub e2e_refused: Vec<(String, usize)>,
    /// End-to-end: replies the fabric dropped (VLAN mismatch, stale MAC).
    pub e2e_dropped: u64,
    /// Distinct completions in the hot-path corpus.
    pub(crate) corpus: usize,
    /// Completions resolved on the measured hot path.
    pub(crate) messages: u64,
    /// Of which refused by the profile.
    pub(crate) refused: u64,
    /// Wall time of the measured hot path, seconds.
    pub(crate) seconds: f64,
    /// Completions per second, all threads.
    pub(crate) completions_per_sec: f64,
    /// Median ns per completion (over batches of 64).
    pub ns_p50: f64,
    /// 99th percentile ns per completion (over batches of 64).
    pub ns_p99: f64,
    /// AH-table look-ups answered without a lock.
    pub(crate) hits: u64,
    /// AH-table misses.
    pub(crate) misses: u64,
    /// Backend AHs created.
    pub(crate) creates: u64,
    /// Entries evicted.
    pub(crate) evictions: u64,
    /// Backend AHs alive at the end.
    pub(crate) live_ahs: u64,
    /// Simulated latency of one AH create, µs.
    pub(crate) create_latency_us: u64,
    /// Whether `create_latency_us` was chosen for the peer count (no
    /// `--create-latency-us`).
    pub(crate) create_latency_default: bool,
    /// Time the backend spent creating AHs, milliseconds.
    pub(crate) backend_create_ms: f64,
    /// The process's maximum resident set at the end, bytes (`VmHWM`;
    /// `None` where `/proc/self/status` does not tell).
    pub(crate) max_rss_bytes: Option<u64>,
    /// Heap allocations on the measured hot path (must be 0).
    pub(crate) hot_path_allocations: u64,
}

/// A completion as the responder got it.
#[derive(Debug, Clone, Copy)]
struct Completion {
    wc: MockWc,
    area: Area,
}

/// The hot-path corpus: the completions of each port in arrival order, as
/// its CQ gave them (at most [`CORPUS_MAX`] in all).
#[derive(Debug, Default)]
struct Corpus {
    /// The InfiniBand port's.
    ib: Vec<Completion>,
    /// The RoCE port's.
    roce: Vec<Completion>,
}

impl Corpus {
    fn len(&self) -> usize {
        self.ib.len() + self.roce.len()
    }

    /// The completions of the RoCE port (`true`) or of the IB port.
    fn stream(&self, roce: bool) -> &[Completion] {
        if roce { &self.roce } else { &self.ib }
    }
}

/// The core pipeline of one port, over a worker's cache.
type PortPipeline<C> = Box<Responder<C, GID_SLOTS>>;

/// A worker's responder: the core pipeline of each of the two ports, over
/// the worker's way to the AH table (its own sessions, or the shared calls).
struct Ports<C: AhCache<Backend = MockHal>> {
    ib: PortPipeline<C>,
    roce: PortPipeline<C>,
}

/// Why a completion got no AH (typed: nothing is formatted on the hot path).
type Refusal = ResolveError<MockError>;

/// The summary's name of a refusal.
fn reason(r: &Refusal) -> String {
    match r {
        ResolveError::Table(e) => format!("AH table: {e:?}"),
        e => e.to_string(),
    }
}

/// The pipeline configuration of `udah demo`'s arguments.
fn config(args: &Args) -> Config {
    let profile = match args.profile {
        ProfileArg::Libibverbs => Profile::Libibverbs,
        ProfileArg::Kernel => Profile::Kernel,
    };
    let evidence = match args.evidence {
        EvidenceArg::None => EvidenceSource::None,
        EvidenceArg::Stamp => EvidenceSource::Stamp(Stamp::DEFAULT),
        EvidenceArg::Mlx5 => EvidenceSource::Mlx5Sl,
    };
    // The kernel profile leaves the route hop limit to the backend; the mock's is 64.
    Config { profile, evidence, route_hop_limit: 64, ..Config::default() }
}

impl<C: AhCache<Backend = MockHal>> Ports<C> {
    /// The two ports' pipelines over `ib` and `roce` (the same table), from
    /// the snapshots taken at start.
    fn new(ib: C, roce: C, gids: (&GidTable<GID_SLOTS>, &GidTable<GID_SLOTS>), config: Config) -> Ports<C> {
        Ports {
            ib: Box::new(Responder::from_snapshot(ib, gids.0.clone(), config)),
            roce: Box::new(Responder::from_snapshot(roce, gids.1.clone(), config)),
        }
    }

    /// The pipeline of the RoCE port (`true`) or of the IB port.
    fn port(&mut self, roce: bool) -> &mut PortPipeline<C> {
        if roce { &mut self.roce } else { &mut self.ib }
    }

    /// The hot path: completion → AH handle (evidence, profile, GID look-up,
    /// AH-table probe), through the core pipeline of the completion's port.
    #[inline]
    fn resolve(&mut self, roce: bool, c: &Completion) -> Result<AhHandle<MockAh>, Refusal> {
        self.port(roce).resolve(&c.wc, &c.area)
    }

    /// A polled batch: `batch` (completions of one port, in arrival order)
    /// through that port's [`Responder::resolve_batch`] (staged, with the
    /// slots prefetched, once the table is past the cache), each handle
    /// released; returns how many were refused.
    #[inline]
    fn resolve_batch(&mut self, roce: bool, batch: &[Completion], out: &mut [Option<Outcome>; BATCH]) -> u64 {
        let port = self.port(roce);
        let n = port.resolve_batch(batch.iter().map(|c| (&c.wc, &c.area)), &mut out[..]);
        let mut refused = 0u64;
        for o in out.iter_mut().take(n) {
            match o.take() {
                Some(Ok(h)) => {
                    core::hint::black_box(h.ah());
                    let _ = port.release(h);
                }
                _ => refused += 1,
            }
        }
        refused
    }
}

/// What the hot path makes of one completion.
type Outcome = Result<AhHandle<MockAh>, Refusal>;

/// How the workers share the corpus ([`steer`]).
enum Steered {
    /// Each worker its own part: the completions of its peers.
    PerWorker(Vec<Corpus>),
    /// All of it for every worker (each starting at its own offset).
    Shared(Corpus),
}

/// The part of the worker of `threads` that polls the completions of the
/// sender of `wc` (a hash of its QP number), as a NIC's receive-side
/// scaling steers each flow to one queue.
fn worker_of(wc: &MockWc, threads: usize) -> usize {
    ((u64::from(wc.ibv.src_qp).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) % threads.max(1) as u64) as usize
}

/// Splits the corpus between `threads` workers by sender ([`worker_of`]),
/// each part in arrival order, so that a peer's completions and its AH's
/// slot are one worker's; the whole corpus for each when one worker would
/// have nothing (fewer peers than workers).
fn steer(corpus: Corpus, threads: usize) -> Steered {
    if threads <= 1 {
        return Steered::Shared(corpus);
    }
    let mut parts: Vec<Corpus> = (0..threads).map(|_| Corpus::default()).collect();
    for (roce, stream) in [(false, &corpus.ib), (true, &corpus.roce)] {
        for c in stream {
            let part = &mut parts[worker_of(&c.wc, threads)];
            if roce { part.roce.push(*c) } else { part.ib.push(*c) }
        }
    }
    if parts.iter().any(|p| p.len() == 0) { Steered::Shared(corpus) } else { Steered::PerWorker(parts) }
}

/// The most batches [`work`] times for `per_thread` completions of
/// `corpus`: full ones, and a short one where a port's stream wraps and at
/// the end.
fn max_batches(corpus: &Corpus, per_thread: u64) -> usize {
    let wraps = |len: usize| if len == 0 { 0 } else { per_thread / len as u64 + 1 };
    (per_thread.div_ceil(BATCH as u64) + wraps(corpus.ib.len()) + wraps(corpus.roce.len()) + 1) as usize
}

/// From this size on, the corpus is past a core's caches and [`work`]
/// prefetches each stream's next batch while it resolves one.
const PREFETCH_CORPUS_BYTES: usize = 4 << 20;

/// Hints the cache lines of `batch` in (a hint: it changes nothing that any
/// thread reads).
#[inline(always)]
fn prefetch_completions(batch: &[Completion]) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse"))]
    {
        let start = batch.as_ptr().cast::<u8>();
        for off in (0..core::mem::size_of_val(batch)).step_by(64) {
            let line = start.wrapping_add(off).cast::<i8>();
            // SAFETY: `_mm_prefetch` is `unsafe` for its raw pointer and for
            // SSE: PREFETCHT0 reads nothing the program observes and never
            // faults, whatever the address (here inside `batch`: `off` is
            // below its size); SSE is enabled where this is compiled.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(line);
            }
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse")))]
    let _ = batch;
}

/// Whether [`work`] polls the RoCE stream next, having taken `taken`
/// completions of the streams of lengths `lens` (IB, RoCE): the IB stream
/// when it is behind its share (taken / length) or the RoCE one is empty.
fn roce_next(taken: [u64; 2], lens: [u128; 2]) -> bool {
    lens[0] == 0 || (lens[1] != 0 && u128::from(taken[0]) * lens[1] > u128::from(taken[1]) * lens[0])
}

/// Resolves `per_thread` completions of `corpus`, polling the two ports'
/// streams in turn (each from its index in `start` on, wrapping, the one
/// behind in its share next, so that each port gets its part of the
/// completions) in batches of up to [`BATCH`], each timed, pushing the ns
/// per completion of each batch to `ns` (allocated for [`max_batches`] by
/// the caller: nothing here allocates); returns how many were refused.
fn work<C: AhCache<Backend = MockHal>>(
    ports: &mut Ports<C>,
    corpus: &Corpus,
    mut at: [usize; 2],
    per_thread: u64,
    progress: &AtomicU64,
    ns: &mut Vec<f64>,
) -> u64 {
    let mut refused = 0u64;
    let mut done = 0u64;
    let mut taken = [0u64; 2];
    let lens = [corpus.ib.len() as u128, corpus.roce.len() as u128];
    let prefetch_ahead = corpus.len().saturating_mul(core::mem::size_of::<Completion>()) > PREFETCH_CORPUS_BYTES;
    let mut out: [Option<Outcome>; BATCH] = core::array::from_fn(|_| None);
    while done < per_thread {
        let roce = roce_next(taken, lens);
        let s = usize::from(roce);
        let stream = corpus.stream(roce);
        if stream.is_empty() {
            break;
        }
        if at[s] >= stream.len() {
            at[s] = 0;
        }
        let want = (per_thread - done).min(BATCH as u64) as usize;
        let n = want.min(stream.len() - at[s]);
        let t0 = Instant::now();
        if prefetch_ahead {
            // The stream's next batch, as a poll loop reads its CQ ahead.
            let next = at[s] + n;
            prefetch_completions(stream.get(next..stream.len().min(next + BATCH)).unwrap_or_default());
        }
        refused += ports.resolve_batch(roce, &stream[at[s]..at[s] + n], &mut out);
        ns.push(t0.elapsed().as_nanos() as f64 / n as f64);
        at[s] += n;
        taken[s] += n as u64;
        done += n as u64;
        progress.fetch_add(n as u64, Ordering::Relaxed);
    }
    refused
}

fn quirks_of(q: QuirksArg, evidence: EvidenceArg) -> Quirks {
    let mut quirks = match q {
        QuirksArg::Realistic => Quirks { front_fill: FrontFill::Stale, report_network_type: true, ..Quirks::default() },
        QuirksArg::Zero => Quirks::default(),
        QuirksArg::Random => Quirks { front_fill: FrontFill::Random, ..Quirks::default() },
        QuirksArg::Irdma => Quirks {
            front_fill: FrontFill::Stale,
            irdma_zero_ipv4_checksum: true,
            report_network_type: true,
            route_hop_limit: Some(64),
            ..Quirks::default()
        },
        QuirksArg::Mlx5 => Quirks { front_fill: FrontFill::Stale, mlx5_sl_packet_type: true, ..Quirks::default() },
    };
    if evidence == EvidenceArg::Mlx5 {
        quirks.mlx5_sl_packet_type = true;
    }
    quirks
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs the demo.
pub(crate) fn run(args: &Args) -> ExitCode {
    let summary = validate(args).and_then(|()| {
        // `table_slots` gives one of `AH_SLOTS`.
        let n = table_slots(args.peers);
        udah_core::with_ah_slots!(n, N => demo::<N>(args)).unwrap_or_else(|| demo::<0x20_0000>(args))
    });
    match summary {
        Ok(s) => {
            if args.json {
                match serde_json::to_string_pretty(&s) {
                    Ok(j) => println!("{j}"),
                    Err(e) => {
                        eprintln!("udah demo: {e}");
                        return ExitCode::from(2);
                    }
                }
            } else {
                print_summary(&s);
            }
            if s.e2e_misdelivered > 0 || s.hot_path_allocations > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS }
        }
        Err(e) => {
            eprintln!("udah demo: {e}");
            ExitCode::from(2)
        }
    }
}

/// The most `--peers`.
pub(crate) const MAX_PEERS: usize = 1_000_000;

/// The AH-table capacity for `peers` peers: the smallest of
/// [`AH_SLOTS`](udah_core::heap::AH_SLOTS), from [`MIN_TABLE_SLOTS`] up,
/// that they fill to at most half.
///
/// The table stays ≥ 90 % full before its first eviction, so any of these
/// never evicts; half full is for speed. Below half, three look-ups in
/// four find their key in its first slot and a look-up reads 1.45 slots
/// (2.04 at 71 % full: `position_histogram` in udah-core's table tests).
/// At 10⁴ peers, 2¹⁶ slots instead of 2¹⁴ (15 % full instead of 61 %,
/// 3 MiB more) gave 26.4–31.5 against 22.8–27.5 M completions/s on one
/// thread and 33.1–48.4 against 27.9–37.5 on two, where the other
/// worker's peers' slots, read on the way to one's own, bounce between
/// the cores (three interleaved pairs, benches/RESULTS.md).
pub(crate) fn table_slots(peers: usize) -> usize {
    udah_core::heap::ah_slots_at_least(peers.saturating_mul(2).max(MIN_TABLE_SLOTS)).unwrap_or(MAX_TABLE_SLOTS)
}

/// The AH table's hash seed for `--seed`: SplitMix64 of it, so that a run
/// replays with its seed and the table's key is not the fabric's seed itself.
pub(crate) fn table_seed(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

mod limits;
mod report;

pub(crate) use self::limits::*;
use self::report::{max_rss_bytes, print_summary};

/// The demo over an AH table of `N` slots (the arguments are validated).
fn demo<const N: usize>(args: &Args) -> Result<Summary, DemoError> {
    let table_seed = table_seed(args.seed);
    let table = boxed_table::<MockHal, N>(table_seed).map_err(DemoError::Table)?;
    let table = &*table;
    let quirks = quirks_of(args.quirks, args.evidence);
    let latency_us = create_latency_us(args);
    let faults = Faults { create_latency: Duration::from_micros(latency_us), ..Faults::default() };
    let sc = Scenario::build_with(args.seed, &args.mix, args.peers, quirks, faults).map_err(DemoError::Mock)?;
    let hal = MockHal::new(&sc.fabric, sc.ib_port.device);
    let mut ib: Box<GidTable<GID_SLOTS>> = Box::new(GidTable::new(1, LinkLayer::Infiniband, 0));
    let mut roce: Box<GidTable<GID_SLOTS>> = Box::new(GidTable::new(2, LinkLayer::Ethernet, 0));
    let ib_port = PortNum::new(sc.ib_port.port).ok_or(DemoError::NoResponderQp("IB"))?;
    let roce_port = PortNum::new(sc.roce_port.port).ok_or(DemoError::NoResponderQp("RoCE"))?;
    hal.snapshot_gids(ib_port, &mut ib).map_err(DemoError::Mock)?;
    hal.snapshot_gids(roce_port, &mut roce).map_err(DemoError::Mock)?;
    let ib_qp = sc.fabric.create_qp(sc.ib_port, sc.qkey).ok_or(DemoError::NoResponderQp("IB"))?;
    let roce_qp = sc.fabric.create_qp(sc.roce_port, sc.qkey).ok_or(DemoError::NoResponderQp("RoCE"))?;
    if args.evidence == EvidenceArg::Stamp {
        sc.fabric.set_receive_stamp(ib_qp, Some(Stamp::DEFAULT));
        sc.fabric.set_receive_stamp(roce_qp, Some(Stamp::DEFAULT));
    }
    let gids = (&*ib, &*roce);
    let mut shared = Ports::new(table.shared(&hal), table.shared(&hal), gids, config(args));

    // Phase 1: end to end through the fabric, round after round, a slice
    // of the peers at a time.
    let (mut sent, mut answered, mut replies, mut misdelivered) = (0usize, 0usize, 0usize, 0usize);
    let ib_peers = udah_hal_mock::scenario::infiniband_peers(&args.mix, args.peers);
    let mut corpus = Corpus {
        ib: Vec::with_capacity(ib_peers.saturating_mul(args.rounds).min(CORPUS_MAX)),
        roce: Vec::with_capacity((args.peers - ib_peers).saturating_mul(args.rounds).min(CORPUS_MAX)),
    };
    let mut refused: std::collections::BTreeMap<String, usize> = Default::default();
    for round in 0..args.rounds {
        for first in (0..args.peers).step_by(SEND_CHUNK) {
            let peers = first..first.saturating_add(SEND_CHUNK);
            sent += sc.send_round(ib_qp, roce_qp, round, peers.clone());
            for (qp, roce) in [(ib_qp, false), (roce_qp, true)] {
                while let Some(m) = sc.fabric.poll(qp) {
                    let c = Completion { wc: m.wc, area: m.area };
                    if corpus.len() < CORPUS_MAX {
                        if roce { corpus.roce.push(c) } else { corpus.ib.push(c) }
                    }
                    match shared.resolve(roce, &c) {
                        Ok(h) => {
                            if sc.fabric.post_send(qp, h.ah(), Qpn(m.wc.ibv.src_qp), sc.qkey, &m.payload).is_ok() {
                                answered += 1;
                            }
                            shared.port(roce).release(h).map_err(DemoError::Release)?;
                        }
                        Err(r) => *refused.entry(reason(&r)).or_default() += 1,
                    }
                }
            }
            let (got, wrong) = sc.collect_replies_of(peers);
            replies += got;
            misdelivered += wrong;
        }
    }
    let fc = sc.fabric.counters();
    let e2e_dropped =
        fc.dropped_vlan + fc.dropped_mac + fc.dropped_no_route + fc.dropped_qkey + fc.dropped_sgid + fc.dropped_pkey;

    // Phase 2: the hot path alone, over the completions the NICs produced,
    // with a warm table, in arrival order (each port's completions one
    // after the other in memory, as a responder reads its CQ: only the
    // table is read at random).
    if corpus.len() == 0 {
        return Err(DemoError::NoCompletions);
    }
    for roce in [false, true] {
        for c in corpus.stream(roce) {
            if let Ok(h) = shared.resolve(roce, c) {
                let _ = shared.port(roce).release(h);
            }
        }
    }
    let corpus_len = corpus.len();
    let parts = steer(corpus, args.threads);
    let progress = AtomicU64::new(0);
    let per_thread = args.messages.div_ceil(args.threads as u64);
    let show = !args.no_progress && !args.json;
    let started = Instant::now();
    let results: Vec<(Vec<f64>, u64, u64)> = std::thread::scope(|s| {
        let monitor = show.then(|| {
            let progress = &progress;
            s.spawn(move || {
                let total = per_thread * args.threads as u64;
                // Only runs that last longer than a second get a bar.
                let shown = Instant::now() + Duration::from_secs(1);
                while Instant::now() < shown {
                    if progress.load(Ordering::Relaxed) >= total {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let pb = indicatif::ProgressBar::new(total);
                pb.set_style(
                    indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} completions ({per_sec})")
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                loop {
                    let p = progress.load(Ordering::Relaxed);
                    pb.set_position(p);
                    if p >= total {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                pb.finish_and_clear();
            })
        });
        let workers: Vec<_> = (0..args.threads)
            .map(|t| {
                let (progress, hal) = (&progress, &hal);
                let (corpus, at) = match &parts {
                    Steered::PerWorker(parts) => (&parts[t], [0, 0]),
                    Steered::Shared(c) => (c, [c.ib.len(), c.roce.len()].map(|len| t * len / args.threads)),
                };
                s.spawn(move || {
                    let mut ns = Vec::with_capacity(max_batches(corpus, per_thread));
                    // The pipelines (and sessions) are made before the
                    // allocation count starts (they are boxed: the GID
                    // snapshots, 10 KiB of leases each), and dropped after it.
                    let (refused, allocs) = match args.table_path {
                        TablePathArg::Session => {
                            let session = || Session::<_, N, SESSION_LEASES>::new(table, hal);
                            let mut ports = Ports::new(session(), session(), gids, config(args));
                            let before = thread_allocations();
                            let refused = work(&mut ports, corpus, at, per_thread, progress, &mut ns);
                            (refused, thread_allocations() - before)
                        }
                        TablePathArg::Shared => {
                            let mut ports = Ports::new(table.shared(hal), table.shared(hal), gids, config(args));
                            let before = thread_allocations();
                            let refused = work(&mut ports, corpus, at, per_thread, progress, &mut ns);
                            (refused, thread_allocations() - before)
                        }
                    };
                    (ns, refused, allocs)
                })
            })
            .collect();
        let r = workers.into_iter().map(|w| w.join().unwrap_or_default()).collect();
        if let Some(m) = monitor {
            let _ = m.join();
        }
        r
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut ns: Vec<f64> = results.iter().flat_map(|r| r.0.iter().copied()).collect();
    ns.sort_by(f64::total_cmp);
    let messages = per_thread * args.threads as u64;
    let st = table.stats_exact();
    let mut e2e_refused: Vec<(String, usize)> = refused.into_iter().collect();
    e2e_refused.sort_by_key(|r| core::cmp::Reverse(r.1));
    Ok(Summary {
        profile: args.profile,
        evidence: args.evidence,
        quirks: args.quirks,
        peers: args.peers,
        families: args.mix.iter().map(|f| f.name().to_string()).collect(),
        threads: args.threads,
        table_path: args.table_path,
        steered: matches!(parts, Steered::PerWorker(_)),
        table_seed,
        table_capacity: table.capacity(),
        table_entries: st.entries,
        load_factor: st.entries as f64 / table.capacity() as f64,
        table_bytes: core::mem::size_of_val(table),
        e2e_requests: sent,
        e2e_answered: answered,
        e2e_replies: replies,
        e2e_misdelivered: misdelivered,
        e2e_refused,
        e2e_dropped,
        corpus: corpus_len,
        messages,
        refused: results.iter().map(|r| r.1).sum(),
        seconds,
        completions_per_sec: messages as f64 / seconds,
        ns_p50: percentile(&ns, 0.50),
        ns_p99: percentile(&ns, 0.99),
        hits: st.hits,
        misses: st.misses,
        creates: st.creates,
        evictions: st.evictions,
        live_ahs: st.live,
        create_latency_us: latency_us,
        create_latency_default: args.create_latency_us.is_none(),
        backend_create_ms: sc.fabric.counters().ah_create_ns as f64 / 1e6,
        max_rss_bytes: max_rss_bytes(),
        hot_path_allocations: results.iter().map(|r| r.2).sum(),
    })
}

#[cfg(test)]
mod tests;
