//! `udah serve`'s completion-to-reply latency: for each answered request,
//! the time from its completion to its reply being posted, on up to three
//! clocks: the host's (from the poll that returned the completion; always),
//! the device's (`ibv_wc_read_completion_ts` against
//! `ibv_query_rt_values_ex`, converted with `hca_core_clock`) and the wall
//! clock (`ibv_wc_read_completion_wallclock_ns` against `CLOCK_REALTIME`),
//! the last two where the receive CQ carries them.

use std::time::Instant;

/// Samples kept per clock (the oldest are overwritten past this).
const KEEP: usize = 1 << 20;

/// Latency samples (ns) on one clock, bounded.
#[derive(Debug, Default)]
struct Samples {
    ns: Vec<u64>,
    next: usize,
    seen: u64,
}

impl Samples {
    fn push(&mut self, v: u64) {
        self.seen += 1;
        if self.ns.len() < KEEP {
            self.ns.push(v);
        } else if let Some(slot) = self.ns.get_mut(self.next) {
            *slot = v;
            self.next = (self.next + 1) % KEEP;
        }
    }

    /// `p50 X µs p99 Y µs (N)`, or `None` without samples.
    fn summary(&self) -> Option<String> {
        let (p50, p99) = percentiles(&self.ns)?;
        Some(format!("p50 {:.1} us p99 {:.1} us ({} replies)", p50 as f64 / 1e3, p99 as f64 / 1e3, self.seen))
    }
}

/// The 50th and 99th percentiles (nearest rank) of `v`.
fn percentiles(v: &[u64]) -> Option<(u64, u64)> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let rank = |p: usize| s.get((s.len() * p).div_ceil(100).saturating_sub(1)).copied().unwrap_or(0);
    Some((rank(50), rank(99)))
}

/// The wall clock now, ns since the epoch.
fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The per-clock samples of one serve run.
#[derive(Debug, Default)]
pub(crate) struct Latency {
    host: Samples,
    device: Samples,
    wall: Samples,
    /// Device clock ticks per ms (`hca_core_clock`, kHz); 0: unknown.
    core_khz: u64,
    /// Why device-clock samples are missing, once known.
    device_note: Option<String>,
}

impl Latency {
    /// For a device whose clock runs at `core_khz` kHz (0: unknown).
    pub(crate) fn new(core_khz: u64) -> Latency {
        Latency { core_khz, ..Latency::default() }
    }

    /// One reply posted now for a completion polled at `polled`, with the
    /// completion's device timestamp and wall-clock timestamp if any;
    /// `device_now` reads the device clock (called only with a device
    /// timestamp).
    pub(crate) fn record<E: core::fmt::Display>(
        &mut self,
        polled: Instant,
        device_ts: Option<u64>,
        wall_ns: Option<u64>,
        device_now: impl FnOnce() -> Result<u64, E>,
    ) {
        self.host.push(u64::try_from(polled.elapsed().as_nanos()).unwrap_or(u64::MAX));
        if let Some(ts) = device_ts {
            match (device_now(), self.core_khz) {
                (Ok(now), khz) if khz > 0 => {
                    let ticks = now.wrapping_sub(ts);
                    self.device.push(u64::try_from(u128::from(ticks) * 1_000_000 / u128::from(khz)).unwrap_or(0));
                }
                (Ok(_), _) => {
                    self.device_note.get_or_insert_with(|| "hca_core_clock unknown".to_owned());
                }
                (Err(e), _) => {
                    self.device_note.get_or_insert_with(|| format!("ibv_query_rt_values_ex: {e}"));
                }
            }
        }
        if let Some(w) = wall_ns {
            self.wall.push(realtime_ns().saturating_sub(w));
        }
    }

    /// The statistics line: `completion-to-reply latency: host clock (from
    /// the poll) …; device clock …; wall clock …`.
    pub(crate) fn line(&self) -> String {
        let none = "no replies".to_owned();
        let host = self.host.summary().unwrap_or(none);
        let device = match (self.device.summary(), &self.device_note) {
            (Some(s), _) => s,
            (None, Some(n)) => format!("not converted ({n})"),
            (None, None) => "not reported by the CQ".to_owned(),
        };
        let wall = self.wall.summary().unwrap_or_else(|| "not reported by the CQ".to_owned());
        format!(
            "completion-to-reply latency: host clock (from the poll) {host}; device clock {device}; wall clock {wall}"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentiles(&v), Some((50, 99)));
        assert_eq!(percentiles(&[7]), Some((7, 7)));
        assert_eq!(percentiles(&[]), None);
    }

    #[test]
    fn device_ticks_convert_with_the_core_clock() {
        let mut l = Latency::new(1_000_000); // 1 GHz: 1 tick = 1 ns
        l.record(Instant::now(), Some(1_000), None, || Ok::<u64, String>(3_500));
        l.record(Instant::now(), None, None, || Ok::<u64, String>(0));
        assert_eq!(l.device.ns, vec![2_500]);
        assert_eq!(l.host.seen, 2);
        let line = l.line();
        assert!(line.contains("device clock p50 2.5 us p99 2.5 us (1 replies)"), "{line}");
        assert!(line.contains("wall clock not reported by the CQ"), "{line}");
        let mut u = Latency::new(0);
        u.record(Instant::now(), Some(1), Some(realtime_ns()), || Ok::<u64, String>(2));
        assert!(u.line().contains("device clock not converted (hca_core_clock unknown)"), "{}", u.line());
        assert_eq!(u.wall.seen, 1);
    }
}
