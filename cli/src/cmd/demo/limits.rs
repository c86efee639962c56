//! What the demo accepts: the bounds of its arguments, its defaults, their validation and its errors.

use super::*;

/// Why a bound of [`DemoError::OutOfRange`] is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// No reason given.
    Plain,
    /// The largest AH table the demo builds has this many slots.
    TableSlots(usize),
    /// The hot path keeps one timing per this many completions.
    Timings(usize),
}

/// Why the demo refused its arguments (before anything runs) or stopped;
/// exit status 2 either way.
#[derive(Debug)]
pub(crate) enum DemoError {
    /// `--<flag> <value>` outside `1..=max`.
    OutOfRange {
        /// The flag, without its dashes.
        flag: &'static str,
        /// The value given.
        value: u64,
        /// The largest allowed.
        max: u64,
        /// Why.
        bound: Bound,
    },
    /// `--create-latency-us` above [`MAX_CREATE_LATENCY_US`].
    CreateLatency(u64),
    /// `--peers` × `--create-latency-us` above [`MAX_CREATES_US`].
    CreatesTooLong {
        /// `--peers`.
        peers: usize,
        /// `--create-latency-us`.
        latency_us: u64,
    },
    /// More InfiniBand peers than one subnet has distinct addresses for.
    TooManyInfiniband {
        /// `--peers`.
        peers: usize,
        /// `--mix`, as given.
        mix: String,
        /// The InfiniBand peers among them.
        infiniband: usize,
    },
    /// `--mix` names no family.
    EmptyMix,
    /// `--evidence mlx5 --quirks irdma`.
    Mlx5OnIrdma,
    /// The AH table could not be built.
    Table(super::super::table_box::TableBoxError),
    /// The mock fabric, its GID tables or a release failed.
    Mock(MockError),
    /// The responder's `link` port is port 0 or has no QP.
    NoResponderQp(&'static str),
    /// Giving an AH handle back failed.
    Release(TableError<MockError>),
    /// The fabric delivered no completion to time.
    NoCompletions,
}

impl core::fmt::Display for DemoError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DemoError::OutOfRange { flag, value, max, bound } => {
                write!(f, "--{flag} {value} is outside 1..={max}")?;
                match bound {
                    Bound::Plain => Ok(()),
                    Bound::TableSlots(n) => write!(f, " (the largest AH table the demo builds has {n} slots)"),
                    Bound::Timings(n) => write!(f, " (the hot path keeps one timing per {n} completions)"),
                }
            }
            DemoError::CreateLatency(us) => write!(
                f,
                "--create-latency-us {us} is above {MAX_CREATE_LATENCY_US} (each peer's first request waits that long)"
            ),
            DemoError::CreatesTooLong { peers, latency_us } => {
                let creates_us = (*peers as u64).saturating_mul(*latency_us);
                write!(
                    f,
                    "--peers {peers} × --create-latency-us {latency_us} is {:.1} s of AH creates, above {} s: lower \
                     one of them (at most {} µs for {peers} peers)",
                    creates_us as f64 / 1e6,
                    MAX_CREATES_US / 1_000_000,
                    MAX_CREATES_US / (*peers as u64).max(1),
                )
            }
            DemoError::TooManyInfiniband { peers, mix, infiniband } => write!(
                f,
                "--peers {peers} with --mix {mix} has {infiniband} InfiniBand peers (ib, ib-grh), more than one \
                 subnet has distinct addresses for: add RoCE families to --mix"
            ),
            DemoError::EmptyMix => f.write_str("--mix names no family"),
            DemoError::Mlx5OnIrdma => f.write_str(
                "--evidence mlx5 reads mlx5's packet-type bits in wc.sl, which irdma NICs do not write: use \
                 --quirks mlx5 (or realistic, zero, random, to which the bits are added)",
            ),
            DemoError::Table(e) => core::fmt::Display::fmt(e, f),
            DemoError::Mock(e) => core::fmt::Display::fmt(e, f),
            DemoError::NoResponderQp(link) => write!(f, "no responder {link} port"),
            DemoError::Release(e) => write!(f, "release: {e:?}"),
            DemoError::NoCompletions => f.write_str("no completions were delivered"),
        }
    }
}

impl core::error::Error for DemoError {}

/// The most completions `--messages` takes: the hot path keeps one timing
/// per [`BATCH`] completions (125 MB of them at this bound, about a minute).
pub(crate) const MAX_MESSAGES: u64 = 1_000_000_000;
/// The most hot-path threads (each has its own session and timings).
pub(crate) const MAX_THREADS: usize = 256;
/// The longest simulated create, µs: every miss waits this long, and each
/// peer misses at least once per phase.
pub(crate) const MAX_CREATE_LATENCY_US: u64 = 100_000;
/// The most time the creates of all peers may take together, µs.
pub(crate) const MAX_CREATES_US: u64 = 10_000_000;
/// The simulated create latency without `--create-latency-us`, µs.
pub(crate) const DEFAULT_CREATE_LATENCY_US: u64 = 20;
/// The most time the creates of all peers take together without
/// `--create-latency-us`, µs.
pub(crate) const DEFAULT_CREATES_US: u64 = 2_000_000;

/// The create latency without `--create-latency-us` for `peers` peers:
/// [`DEFAULT_CREATE_LATENCY_US`], or less when their creates would take
/// more than [`DEFAULT_CREATES_US`] together (2 µs at 10⁶ peers), at
/// least 1 µs.
pub(crate) fn default_create_latency_us(peers: usize) -> u64 {
    (DEFAULT_CREATES_US / (peers as u64).max(1)).clamp(1, DEFAULT_CREATE_LATENCY_US)
}

/// The create latency of a run: `--create-latency-us`, or
/// [`default_create_latency_us`].
pub(super) fn create_latency_us(args: &Args) -> u64 {
    args.create_latency_us.unwrap_or_else(|| default_create_latency_us(args.peers))
}
/// The most `--rounds` (requests per peer in the end-to-end phase).
pub(crate) const MAX_ROUNDS: usize = 1024;

/// Checks the arguments up front: every bound the run relies on, and the
/// combinations that contradict each other.
pub(crate) fn validate(args: &Args) -> Result<(), DemoError> {
    let range = |flag: &'static str, value: u64, max: u64, bound: Bound| {
        if value == 0 || value > max { Err(DemoError::OutOfRange { flag, value, max, bound }) } else { Ok(()) }
    };
    range("peers", args.peers as u64, MAX_PEERS as u64, Bound::TableSlots(MAX_TABLE_SLOTS))?;
    range("messages", args.messages, MAX_MESSAGES, Bound::Timings(BATCH))?;
    range("threads", args.threads as u64, MAX_THREADS as u64, Bound::Plain)?;
    range("rounds", args.rounds as u64, MAX_ROUNDS as u64, Bound::Plain)?;
    if let Some(latency_us) = args.create_latency_us {
        if latency_us > MAX_CREATE_LATENCY_US {
            return Err(DemoError::CreateLatency(latency_us));
        }
        // Each peer's first request misses: the creates alone take peers × latency.
        let creates_us = (args.peers as u64).saturating_mul(latency_us);
        if creates_us > MAX_CREATES_US {
            return Err(DemoError::CreatesTooLong { peers: args.peers, latency_us });
        }
    }
    if !udah_hal_mock::scenario::infiniband_fits(&args.mix, args.peers) {
        return Err(DemoError::TooManyInfiniband {
            peers: args.peers,
            mix: args.mix.iter().map(|f| f.name()).collect::<Vec<_>>().join(","),
            infiniband: udah_hal_mock::scenario::infiniband_peers(&args.mix, args.peers),
        });
    }
    if args.mix.is_empty() {
        return Err(DemoError::EmptyMix);
    }
    if args.evidence == EvidenceArg::Mlx5 && args.quirks == QuirksArg::Irdma {
        return Err(DemoError::Mlx5OnIrdma);
    }
    Ok(())
}
