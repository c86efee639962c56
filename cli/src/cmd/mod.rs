//! One module per subcommand.

use std::process::ExitCode;

pub(crate) mod common;
pub(crate) mod conform;
pub(crate) mod demo;
#[cfg(feature = "ibverbs")]
pub(crate) mod devices;
pub(crate) mod error;
pub(crate) mod mock_fabric;
pub(crate) mod ping;
#[cfg(any(feature = "ibverbs", test))]
pub(crate) mod pingpong;
#[cfg(any(feature = "ibverbs", test))]
pub(crate) mod pipeline;
#[cfg(target_os = "linux")]
pub(crate) mod raw_send;
pub(crate) mod replay;
pub(crate) mod serve;
#[cfg(feature = "ibverbs")]
pub(crate) mod serve_check;
#[cfg(feature = "ibverbs")]
pub(crate) mod serve_events;
#[cfg(any(feature = "ibverbs", test))]
pub(crate) mod serve_latency;
#[cfg(any(feature = "ibverbs", test))]
pub(crate) mod serve_misses;
pub(crate) mod table_box;
#[cfg(feature = "ibverbs")]
pub(crate) mod verbs_port;

/// Exit code of a verbs command (`devices`, `serve/ping --hal ibverbs`) in a
/// `udah` built without the `ibverbs` feature.
pub(crate) const EXIT_NO_VERBS_BACKEND: u8 = 5;

/// What a verbs command says in a `udah` built without the `ibverbs` feature:
/// how to get it.
pub(crate) const NO_VERBS_BACKEND: &str = "this udah was built without the verbs backend (real RDMA devices). \
Rebuild it with `cargo build --release -p udah-cli --features ibverbs` \
(or `cargo install --path cli --features ibverbs`); that build needs cmake and libclang: \
`apt-get install cmake libclang-dev`. `--hal mock` (the default) runs on the in-process fabric without it.";

/// Prints [`NO_VERBS_BACKEND`] for `what` and returns
/// [`EXIT_NO_VERBS_BACKEND`].
#[cfg_attr(feature = "ibverbs", allow(dead_code))]
pub(crate) fn no_verbs_backend(what: &str) -> ExitCode {
    eprintln!("udah {what}: {NO_VERBS_BACKEND}");
    ExitCode::from(EXIT_NO_VERBS_BACKEND)
}

/// Arguments of a verbs command in a `udah` built without the `ibverbs`
/// feature: anything, so that the message says how to get the backend
/// instead of clap rejecting the flags.
#[cfg(not(feature = "ibverbs"))]
#[derive(Debug, clap::Args)]
pub(crate) struct Unavailable {
    /// Ignored: the command is not built in.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _rest: Vec<String>,
}
