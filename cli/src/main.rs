//! The udah command.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

/// Counts heap allocations per thread, so that `udah demo` can show its hot path makes none.
#[global_allocator]
static ALLOCATOR: udah_cli::alloc_count::Counting = udah_cli::alloc_count::Counting;

/// udah: address handles from RDMA UD work completions.
#[derive(Debug, Parser)]
#[command(name = "udah", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands, one module of `cmd` each.
#[derive(Debug, Subcommand)]
enum Command {
    /// The main job: peers on a mock fabric, a responder building every AH through udah, and the hot path measured.
    Demo(cmd::demo::Args),
    /// Run test vectors through the core and compare every field.
    Conform(cmd::conform::Args),
    /// Replay a capture: the AH a UD responder would build for each UD packet.
    Replay(cmd::replay::Args),
    /// List RDMA devices, ports and GID tables (ibv_devinfo -v + show_gids).
    #[cfg(feature = "ibverbs")]
    Devices(cmd::devices::Args),
    /// List RDMA devices (needs a udah built with `--features ibverbs`).
    #[cfg(not(feature = "ibverbs"))]
    Devices(cmd::Unavailable),
    /// A UD responder: every request's AH from its completion, payload echoed.
    Serve(cmd::serve::Args),
    /// The client of `udah serve`: UD requests and round-trip times.
    Ping(cmd::ping::Args),
    /// RoCE v2 UD requests from many source addresses, as raw Ethernet frames (for `serve` at scale).
    #[cfg(target_os = "linux")]
    RawSend(cmd::raw_send::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo(args) => cmd::demo::run(&args),
        Command::Conform(args) => cmd::conform::run(&args),
        Command::Replay(args) => cmd::replay::run(&args),
        #[cfg(feature = "ibverbs")]
        Command::Devices(args) => cmd::devices::run(&args),
        #[cfg(not(feature = "ibverbs"))]
        Command::Devices(_) => cmd::no_verbs_backend("devices"),
        Command::Serve(args) => cmd::serve::run(&args),
        Command::Ping(args) => cmd::ping::run(&args),
        #[cfg(target_os = "linux")]
        Command::RawSend(args) => cmd::raw_send::run(&args),
    }
}
