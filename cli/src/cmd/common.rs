//! What `serve` and `ping` share: the backend, device and port flags, the
//! link choice, the Q_Key default, the exit status of a usage error,
//! payload bounds, number parsing and the stop-on-signal flag.

use super::error::UsageError;
use core::sync::atomic::{AtomicBool, Ordering};

/// Which backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum HalKind {
    /// hal-mock's in-process fabric (no hardware needed).
    Mock,
    /// libibverbs on a real or Soft-RoCE device.
    Ibverbs,
}

/// The backend, device and port flags of the commands that open one port
/// (`ping`, `serve`).
#[derive(Debug, clap::Args)]
pub(crate) struct PortArgs {
    /// Backend.
    #[arg(long, value_enum, default_value_t = HalKind::Mock)]
    pub(crate) hal: HalKind,
    /// RDMA device (ibverbs; default: the first).
    #[arg(long, short = 'd')]
    pub(crate) device: Option<String>,
    /// Port.
    #[arg(long, short = 'p', default_value_t = 1)]
    pub(crate) port: u8,
}

impl PortArgs {
    /// The port's mistakes: port 0, and on the mock fabric any port but 1
    /// (`side`: which end of the mock fabric the command is).
    pub(crate) fn validate(&self, side: &'static str) -> Result<(), UsageError> {
        if self.port == 0 {
            return Err(UsageError::PortZero);
        }
        if self.hal == HalKind::Mock && self.port != 1 {
            return Err(UsageError::MockPort { port: self.port, side });
        }
        Ok(())
    }
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

/// The MTU `ping --hal mock` enforces (the mock fabric has none; 4096 is
/// RoCE's largest).
pub(crate) const MOCK_MTU: usize = 4096;

/// The smallest payload: the sequence number.
pub(crate) const MIN_SIZE: usize = 8;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_u32(DEFAULT_QKEY_HEX), Ok(DEFAULT_QKEY));
        assert_eq!(parse_u32("0x11111111"), Ok(0x1111_1111));
        assert_eq!(parse_u32("17"), Ok(17));
        assert!(parse_u32("x").is_err());
    }
}

/// Which receive CQ to poll (`serve --cq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CqKind {
    /// `ibv_create_cq` and `ibv_poll_cq` into `struct ibv_wc`.
    Plain,
    /// `ibv_create_cq_ex` and `ibv_start_poll`/`ibv_next_poll`/`ibv_end_poll`
    /// with the `ibv_wc_read_*` functions (and completion timestamps where
    /// the device gives them).
    Ex,
}
