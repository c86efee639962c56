//! Inputs for the AH-table benchmarks at scale (`benches/benches/ah_scale.rs`)
//! and the table benchmarks' backend: [`BenchHal`], `P` distinct peers as
//! RoCE v2 completions ([`Peers`]), and peer streams in uniform and Zipf
//! order ([`stream`]).

use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;

use udah_core::GidTable;
use udah_core::ah::{AhAttr, IbvWc, PortNum, libibverbs};
use udah_core::hal::{ErrorKind, ErrorType, Hal, L2Info, PortInfo};
use udah_core::wire::Area;

use crate::{Family, Fixture, Rng, SEED};

/// A backend that hands out counter values as AHs, optionally after a sleep
/// (a RoCE `create_ah` resolving a neighbour); it never fails.
#[derive(Debug)]
pub struct BenchHal {
    next: AtomicU64,
    destroyed: AtomicU64,
    sleep: Option<Duration>,
}

impl BenchHal {
    /// A backend whose creates sleep for `sleep`, if any.
    pub const fn new(sleep: Option<Duration>) -> BenchHal {
        BenchHal { next: AtomicU64::new(1), destroyed: AtomicU64::new(0), sleep }
    }

    /// AHs destroyed so far.
    pub fn destroyed(&self) -> u64 {
        self.destroyed.load(Ordering::Relaxed)
    }
}

impl ErrorType for BenchHal {
    type Error = ErrorKind;
}

impl Hal for BenchHal {
    type Ah = u64;
    fn port_info(&self, port: PortNum) -> Result<PortInfo, ErrorKind> {
        Ok(PortInfo::new(port.get(), udah_core::LinkLayer::Ethernet, 256))
    }
    fn snapshot_gids<const N: usize>(&self, _: PortNum, _: &mut GidTable<N>) -> Result<(), ErrorKind> {
        Ok(())
    }
    fn gid_generation(&self, _: PortNum) -> u64 {
        0
    }
    fn resolve_l2(&self, _: &AhAttr) -> Result<Option<L2Info>, ErrorKind> {
        Ok(None)
    }
    fn create_ah(&self, _: &AhAttr, _: Option<&L2Info>) -> Result<u64, ErrorKind> {
        if let Some(d) = self.sleep {
            std::thread::sleep(d);
        }
        Ok(self.next.fetch_add(1, Ordering::Relaxed))
    }
    fn destroy_ah(&self, _: u64) -> Result<(), ErrorKind> {
        self.destroyed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// How the peers' source addresses are spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// Interface identifiers 1, 2, 3, ... (a block of hosts numbered in order).
    Consecutive,
    /// Interface identifiers scrambled by a bijection of the peer number.
    Scrambled,
}

/// `P` distinct peers: a RoCE v2 (IPv6 GRH) completion of the 256-entry
/// fixture whose source GID's interface identifier is the peer's, and the
/// attribute `init_ah_from_wc` gives for it.
#[derive(Debug)]
pub struct Peers {
    /// The port's GID table.
    pub gids: GidTable<256>,
    /// Completion and area of each peer.
    pub cases: Vec<(IbvWc, Area)>,
    /// The attribute of each peer.
    pub attrs: Vec<AhAttr>,
}

impl Peers {
    /// `n` peers spread as `spread`.
    pub fn new(n: usize, spread: Spread) -> Peers {
        let fx: Fixture<256> = Fixture::new(SEED);
        let base = fx
            .family(Family::RoceV2Ipv6)
            .iter()
            .find(|c| libibverbs::init_ah_from_wc(&fx.roce, 1, &c.wc, Some(&c.area)).is_ok())
            .expect("a RoCE v2 IPv6 case that resolves");
        let mut cases = Vec::with_capacity(n);
        let mut attrs = Vec::with_capacity(n);
        let mut i = 0u64;
        while cases.len() < n {
            let id = match spread {
                Spread::Consecutive => i + 1,
                // SplitMix64's first output is a bijection of its seed.
                Spread::Scrambled => Rng::new(i).next_u64(),
            };
            i += 1;
            let mut area = base.area;
            // The GRH's source GID is bytes 8..24 of the area: its interface
            // identifier, bytes 16..24.
            area[16..24].copy_from_slice(&id.to_be_bytes());
            // About one in 2¹⁶ areas also passes as an IPv4 header (its
            // checksum happens to match), which libibverbs then takes: skip
            // those identifiers.
            let Ok(c) = libibverbs::init_ah_from_wc(&fx.roce, 1, &base.wc, Some(&area)) else { continue };
            attrs.push(AhAttr::try_from(&c).expect("valid attribute"));
            cases.push((base.wc, area));
        }
        Peers { gids: fx.roce.clone(), cases, attrs }
    }

    /// How many peers.
    pub fn len(&self) -> usize {
        self.cases.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.cases.is_empty()
    }
}

/// The order in which completions arrive from the peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Popularity {
    /// Every peer equally likely.
    Uniform,
    /// Zipf with exponent 0.99 over the peers, ranked in a random order (a
    /// few peers send most of the traffic).
    Zipf,
}

/// A stream of `len` peer indices below `peers` (a power of two `len`, so
/// that a bench cycles through it with a mask), seeded.
pub fn stream(peers: usize, popularity: Popularity, len: usize, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    match popularity {
        Popularity::Uniform => (0..len).map(|_| rng.below(peers) as u32).collect(),
        Popularity::Zipf => {
            // Cumulative weights of ranks 1..=peers, then inverse sampling.
            let mut cdf = Vec::with_capacity(peers);
            let mut total = 0f64;
            for r in 1..=peers {
                total += 1.0 / (r as f64).powf(0.99);
                cdf.push(total);
            }
            let mut rank_to_peer: Vec<u32> = (0..peers as u32).collect();
            rng.shuffle(&mut rank_to_peer);
            (0..len)
                .map(|_| {
                    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
                    let r = cdf.partition_point(|&c| c < u).min(peers - 1);
                    rank_to_peer[r]
                })
                .collect()
        }
    }
}
