//! `udah devices`: every RDMA device, its ports (state, link layer, LID,
//! MTU) and GID tables (index, GID, type, netdev, VLAN) in one listing —
//! what `ibv_devinfo -v` and `show_gids` give together.

use std::process::ExitCode;

#[cfg(feature = "ibverbs")]
use udah_hal_ibverbs::gid::{kind_label, read_port_gids};
#[cfg(feature = "ibverbs")]
use udah_hal_ibverbs::{DeviceList, VerbsError};

/// Exit code when libibverbs finds no RDMA device (or the kernel has no RDMA
/// support).
#[cfg(feature = "ibverbs")]
pub(crate) const EXIT_NO_DEVICES: u8 = 3;
/// Exit code when libibverbs is not installed.
pub(crate) const EXIT_NO_LIBRARY: u8 = 4;

/// Arguments of `udah devices`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Only this device.
    #[arg(long, short = 'd')]
    device: Option<String>,
    /// Leave out the GID tables.
    #[arg(long)]
    no_gids: bool,
}

/// A verbs command in a `udah` built without the `ibverbs` feature: says how
/// to get it, exit code 4 (as for a missing libibverbs).
#[cfg(not(feature = "ibverbs"))]
pub(crate) fn without_ibverbs() -> ExitCode {
    eprintln!(
        "udah: this udah was built without the verbs backend: rebuild with \
         `cargo build --release -p udah-cli --features ibverbs` (needs cmake and libclang-dev)"
    );
    ExitCode::from(EXIT_NO_LIBRARY)
}

/// Prints `e` and returns the exit code for it: 3 for no devices, 4 for no
/// libibverbs, 1 otherwise.
#[cfg(feature = "ibverbs")]
pub(crate) fn fail(e: &VerbsError) -> ExitCode {
    eprintln!("udah: {e}");
    match e {
        VerbsError::NoDevices { .. } => ExitCode::from(EXIT_NO_DEVICES),
        VerbsError::LibraryMissing => ExitCode::from(EXIT_NO_LIBRARY),
        _ => ExitCode::FAILURE,
    }
}

/// Runs `udah devices`.
#[cfg(feature = "ibverbs")]
pub(crate) fn run(args: &Args) -> ExitCode {
    match list(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Runs `udah devices` (built without the verbs backend).
#[cfg(not(feature = "ibverbs"))]
pub(crate) fn run(args: &Args) -> ExitCode {
    let _ = (&args.device, args.no_gids);
    without_ibverbs()
}

#[cfg(feature = "ibverbs")]
fn list(args: &Args) -> Result<(), VerbsError> {
    let devices = DeviceList::new()?;
    if let Some(name) = args.device.as_ref().filter(|n| !devices.names().contains(n)) {
        return Err(VerbsError::DeviceNotFound { name: name.clone(), available: devices.names() });
    }
    for dev in devices.iter() {
        let name = dev.name();
        if args.device.as_ref().is_some_and(|d| *d != name) {
            continue;
        }
        let ctx = dev.open()?;
        let attr = ctx.query_device()?;
        println!("{name}: node GUID {:016x}, {} port(s), max AHs {}", attr.node_guid, attr.phys_port_cnt, attr.max_ah);
        let mut ports = Vec::new();
        let mut total = 0usize;
        for p in 1..=attr.phys_port_cnt {
            let pa = ctx.query_port(p)?;
            total = total.saturating_add(pa.gid_tbl_len as usize);
            ports.push((p, pa));
        }
        for (p, pa) in &ports {
            let mtu = pa.active_mtu.bytes().map_or_else(|| pa.active_mtu.to_string(), |b| b.to_string());
            println!(
                "  port {p}: state {}, link layer {}, LID {:#06x}, LMC {}, SM LID {:#06x}, active MTU {mtu}, GID table length {}",
                pa.state, pa.link_layer, pa.lid, pa.lmc, pa.sm_lid, pa.gid_tbl_len
            );
            if args.no_gids {
                continue;
            }
            match read_port_gids(&ctx, *p, pa, total) {
                Ok(gids) => {
                    let how = match gids.source {
                        udah_hal_ibverbs::GidSource::Table => "ibv_query_gid_table".to_owned(),
                        udah_hal_ibverbs::GidSource::PerIndex { table_errno } => format!(
                            "ibv_query_gid_ex per index; ibv_query_gid_table: {}",
                            table_errno.map_or("failed", udah_hal_ibverbs::error::errno::name)
                        ),
                    };
                    println!("    {} valid GID(s) (read with {how})", gids.entries.len());
                    println!("    {:>5}  {:<40} {:<8} {:<12} {:>4}", "INDEX", "GID", "TYPE", "NETDEV", "VLAN");
                    for g in &gids.entries {
                        println!(
                            "    {:>5}  {:<40} {:<8} {:<12} {:>4}",
                            g.record.index,
                            g.record.gid.to_string(),
                            kind_label(g.record.kind),
                            g.netdev.as_deref().unwrap_or("-"),
                            g.vlan.map_or_else(|| "-".to_owned(), |v| v.to_string())
                        );
                    }
                }
                Err(e) => println!("    GID table unreadable: {e}"),
            }
        }
    }
    Ok(())
}
