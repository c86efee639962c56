//! The udah command.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

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
    /// Run test vectors through the core and compare every field.
    Conform(cmd::conform::Args),
    /// Replay a capture: the AH a UD responder would build for each UD packet.
    Replay(cmd::replay::Args),
    /// List RDMA devices, ports and GID tables (ibv_devinfo -v + show_gids).
    Devices(cmd::devices::Args),
    /// A UD responder: every request's AH from its completion, payload echoed.
    Serve(cmd::serve::Args),
    /// The client of `udah serve`: UD requests and round-trip times.
    Ping(cmd::ping::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Conform(args) => cmd::conform::run(&args),
        Command::Replay(args) => cmd::replay::run(&args),
        Command::Devices(args) => cmd::devices::run(&args),
        Command::Serve(args) => cmd::serve::run(&args),
        Command::Ping(args) => cmd::ping::run(&args),
    }
}
