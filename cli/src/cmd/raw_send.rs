//! `udah raw-send`: RoCE v2 UD SEND Only frames from many IPv4 source
//! addresses, written to an Ethernet netdev through an `AF_PACKET` socket
//! (frames built by [`udah_cli::raw_roce`], ICRC included), so that a `udah
//! serve` on the other end of the wire sees more distinct senders than any
//! one host's GID table could hold (rxe keeps about 1024 per port).
//!
//! Round after round, each of `--sources` addresses (counting up from
//! `--src-base`) sends one request, in the same order every round. The
//! receiver has to reach those addresses for its replies: a route and
//! neighbour entries towards this host's MAC (`ip -batch`), which is what
//! the fabric check `95-scale.sh` sets up.

use core::time::Duration;
use std::process::ExitCode;
use std::time::Instant;

use udah_cli::raw_roce::{UdSendV4, nth_source};

use super::common::{DEFAULT_QKEY_HEX, parse_u32};

/// Arguments of `udah raw-send`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Ethernet netdev to write the frames to.
    #[arg(long)]
    netdev: String,
    /// Destination MAC (`aa:bb:cc:dd:ee:ff`).
    #[arg(long, value_parser = parse_mac)]
    dst_mac: [u8; 6],
    /// Source MAC (default: the netdev's).
    #[arg(long, value_parser = parse_mac)]
    src_mac: Option<[u8; 6]>,
    /// Destination IPv4 address (the receiver's RoCE v2 GID).
    #[arg(long)]
    dst_ip: core::net::Ipv4Addr,
    /// First source IPv4 address; the others count up from it.
    #[arg(long, default_value = "10.77.0.0")]
    src_base: core::net::Ipv4Addr,
    /// Distinct source addresses (1 to 1,048,576).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    sources: u32,
    /// Rounds: each source sends one request per round.
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// Destination QP number (hex `0x…` or decimal).
    #[arg(long, value_parser = parse_u32)]
    qpn: u32,
    /// Q_Key (hex `0x…` or decimal).
    #[arg(long, default_value = DEFAULT_QKEY_HEX, value_parser = parse_u32)]
    qkey: u32,
    /// Source QP number of every request.
    #[arg(long, default_value = "0x100", value_parser = parse_u32)]
    src_qpn: u32,
    /// Frames per second at most (0: as fast as the socket takes them).
    #[arg(long, default_value_t = 0)]
    pps: u64,
    /// Payload bytes of each request (at least 8, at most 4096).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(8..=4096))]
    size: u16,
}

/// `aa:bb:cc:dd:ee:ff`.
fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        let p = parts.next().ok_or_else(|| format!("'{s}' is not a MAC address"))?;
        if p.len() != 2 {
            return Err(format!("'{s}' is not a MAC address"));
        }
        *b = u8::from_str_radix(p, 16).map_err(|_| format!("'{s}' is not a MAC address"))?;
    }
    if parts.next().is_some() {
        return Err(format!("'{s}' is not a MAC address"));
    }
    Ok(mac)
}

/// The MAC address of `netdev` (sysfs).
fn netdev_mac(netdev: &str) -> Result<[u8; 6], String> {
    if netdev.contains('/') || netdev.is_empty() {
        return Err(format!("'{netdev}' is not a netdev name"));
    }
    let p = format!("/sys/class/net/{netdev}/address");
    let s = std::fs::read_to_string(&p).map_err(|e| format!("{p}: {e}"))?;
    parse_mac(s.trim())
}

/// Runs `udah raw-send`.
pub(crate) fn run(args: &Args) -> ExitCode {
    match send(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("udah raw-send: {e}");
            ExitCode::FAILURE
        }
    }
}

fn send(args: &Args) -> Result<(), String> {
    let src_mac = match args.src_mac {
        Some(m) => m,
        None => netdev_mac(&args.netdev)?,
    };
    let sock = packet::Socket::bind(&args.netdev).map_err(|e| format!("AF_PACKET socket on {}: {e}", args.netdev))?;
    let mut hdr = UdSendV4 {
        dst_mac: args.dst_mac,
        src_mac,
        src_ip: [0; 4],
        dst_ip: args.dst_ip.octets(),
        tos: 0,
        ttl: 64,
        ip_id: 0,
        udp_src: 0,
        mig_req: false,
        pkey: 0xffff,
        dst_qpn: args.qpn,
        psn: 0,
        qkey: args.qkey,
        src_qpn: args.src_qpn,
    };
    let gap = (args.pps > 0).then(|| Duration::from_nanos(1_000_000_000 / args.pps.max(1)));
    let mut payload = vec![0u8; usize::from(args.size)];
    let mut frame = Vec::new();
    let (start, mut sent, mut errors) = (Instant::now(), 0u64, 0u64);
    let mut first_error = None;
    for round in 0..args.rounds {
        for i in 0..args.sources {
            hdr.src_ip = nth_source(args.src_base.octets(), i);
            // Flow entropy as rxe computes it: a hash of the flow (here
            // the source); any value in the dynamic range will do.
            hdr.udp_src = 0xc000 | (i as u16 & 0x3fff);
            hdr.ip_id = sent as u16;
            hdr.psn = (sent & 0xff_ffff) as u32;
            let tag = format!("raw {round} {i}");
            payload.fill(0);
            let n = tag.len().min(payload.len());
            payload[..n].copy_from_slice(&tag.as_bytes()[..n]);
            hdr.build(&payload, &mut frame).map_err(|e| e.to_string())?;
            if let Some(g) = gap {
                let due = start + g * u32::try_from(sent).unwrap_or(u32::MAX);
                while Instant::now() < due {
                    core::hint::spin_loop();
                }
            }
            match sock.send(&frame) {
                Ok(()) => {}
                Err(e) => {
                    errors += 1;
                    first_error.get_or_insert(e);
                }
            }
            sent += 1;
        }
    }
    let el = start.elapsed();
    println!(
        "raw-send: {sent} frame(s) from {} source(s) ({} to {}) to {} QPN {:#x}, {errors} send error(s), {:.3} s, {:.0} \
         frames/s",
        args.sources,
        args.src_base,
        core::net::Ipv4Addr::from(nth_source(args.src_base.octets(), args.sources - 1)),
        args.dst_ip,
        args.qpn,
        el.as_secs_f64(),
        sent as f64 / el.as_secs_f64().max(1e-9)
    );
    match first_error {
        Some(e) => Err(format!("{errors} of {sent} frame(s) not sent; the first: {e}")),
        None => Ok(()),
    }
}

/// The `AF_PACKET` socket: the only `unsafe` of `raw-send`.
mod packet {
    #![allow(unsafe_code)]

    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    /// A raw `AF_PACKET` socket bound to one netdev, for sending whole
    /// Ethernet frames.
    #[derive(Debug)]
    pub(super) struct Socket {
        fd: OwnedFd,
    }

    impl Socket {
        /// A socket on `netdev` (needs `CAP_NET_RAW`).
        pub(super) fn bind(netdev: &str) -> io::Result<Socket> {
            let name = std::ffi::CString::new(netdev).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            // SAFETY: `name` is a NUL-terminated string that lives across the call.
            let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
            if index == 0 {
                return Err(io::Error::last_os_error());
            }
            // Protocol 0: the socket receives nothing, it only sends.
            // SAFETY: plain system call with constant arguments.
            let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `raw` is a descriptor just opened and owned by no one else.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            // SAFETY: `sockaddr_ll` is plain data; all-zero is a valid value.
            let mut sll: libc::sockaddr_ll = unsafe { core::mem::zeroed() };
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_ifindex = i32::try_from(index).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            let len = core::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            let addr = (&raw const sll).cast::<libc::sockaddr>();
            // SAFETY: `addr` points at a `sockaddr_ll` of `len` bytes that
            // lives across the call; `fd` is open.
            if unsafe { libc::bind(fd.as_raw_fd(), addr, len) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Socket { fd })
        }

        /// Writes one whole frame (the kernel adds no header and no FCS
        /// the NIC does not add anyway).
        pub(super) fn send(&self, frame: &[u8]) -> io::Result<()> {
            // SAFETY: `frame` is valid for reads of its length across the
            // call; `fd` is open.
            let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else if n as usize != frame.len() {
                Err(io::Error::new(io::ErrorKind::WriteZero, format!("{n} of {} bytes sent", frame.len())))
            } else {
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_mac("52:54:00:da:00:0a"), Ok([0x52, 0x54, 0, 0xda, 0, 0x0a]));
        for bad in
            ["", "52:54:00:da:00", "52:54:00:da:00:0a:01", "52:54:00:da:00:0", "52:54:00:da:00:zz", "5:254:00:da:00:0a"]
        {
            assert!(parse_mac(bad).is_err(), "{bad}");
        }
        assert!(netdev_mac("../x").is_err());
        assert!(netdev_mac("").is_err());
    }

    /// Without `CAP_NET_RAW` or with an unknown netdev, an error, never a panic.
    #[test]
    fn an_unknown_netdev_is_an_error() {
        let e = packet::Socket::bind("udah-no-such-dev").unwrap_err();
        assert_ne!(e.raw_os_error(), None, "{e}");
        assert!(packet::Socket::bind("nul\0inside").is_err());
    }
}
