//! The errors `serve` and `ping` refuse or stop with: typed, each
//! `Display`ing the message the command prints after `udah <command>: `.

use core::fmt;
use std::process::ExitCode;

use udah_core::wire::Gid;
#[cfg(feature = "ibverbs")]
use udah_hal_ibverbs::VerbsError;

use super::common::{EXIT_USAGE, MIN_SIZE, MOCK_MTU};
#[cfg(feature = "ibverbs")]
use super::pingpong::UD_PINGPONG_PORT;

/// A command-line mistake of `serve` or `ping`: refused before anything runs
/// (or, for `ping --hal ibverbs`, as soon as the port's facts show it), with
/// exit status [`EXIT_USAGE`]. (The variants of `ping --hal ibverbs` are
/// unused in a build without the verbs backend.)
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "ibverbs"), allow(dead_code))]
pub(crate) enum UsageError {
    /// `--port 0`.
    PortZero,
    /// `--port` other than 1 on the mock fabric, whose `side` (`server`,
    /// `client`) is port 1.
    MockPort {
        /// The port asked for.
        port: u8,
        /// Whose port it is.
        side: &'static str,
    },
    /// A flag of the verbs backend with `--hal mock`.
    VerbsOnly {
        /// The flag.
        flag: &'static str,
        /// Why the mock fabric needs none.
        mock: &'static str,
    },
    /// `serve --peers 0` on the mock fabric.
    NoPeers,
    /// `serve --stamp --link ib`.
    StampOnIb,
    /// `ping --size` below the sequence number.
    SizeBelowMin(usize),
    /// `ping --size` above the mock fabric's MTU.
    SizeAboveMockMtu(usize),
    /// `ping --size` above the port's active MTU.
    SizeAboveMtu {
        /// `--size`.
        size: usize,
        /// The port's active MTU.
        mtu: usize,
    },
    /// A flag the command needs (`--dest`, `--qpn`).
    Missing(&'static str),
    /// `ping --ud-pingpong` with `--dest` or `--qpn`.
    DestWithExchange,
    /// A `--dest` that is neither a GID, an IPv4 address nor a LID.
    BadDest(String),
    /// A LID above 0xffff: `--dlid`'s when `dlid`, else `--dest`'s.
    LidTooLarge {
        /// The value.
        lid: u32,
        /// Whether it is `--dlid`'s.
        dlid: bool,
    },
    /// A LID destination on a RoCE port.
    LidOnRoce,
    /// The port has no GID to send from.
    NoGid,
    /// RoCE v2 from a GID of the other address family than the
    /// destination's.
    FamilyMismatch {
        /// The destination.
        dest: Gid,
        /// The local GID's index.
        index: u32,
        /// The local GID.
        local: Gid,
    },
    /// A GID destination on InfiniBand without `--dlid`.
    NeedsDlid,
    /// A GID index above 255 (an AH attribute's is a byte).
    GidIndexTooLarge(u32),
    /// `serve --allow`: more prefixes than an admission holds.
    Admission(String),
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageError::PortZero => f.write_str("--port 0: port numbers start at 1"),
            UsageError::Admission(e) => write!(f, "--allow: {e}"),
            UsageError::MockPort { port, side } => write!(f, "--port {port}: the mock fabric's {side} is port 1"),
            UsageError::VerbsOnly { flag, mock } => write!(f, "{flag} is for --hal ibverbs ({mock})"),
            UsageError::NoPeers => f.write_str("--peers 0: the mock fabric needs at least 1 simulated client"),
            UsageError::StampOnIb => f.write_str(
                "--stamp tells RoCE v2/IPv4 headers apart; an InfiniBand packet always has a GRH: not with --link ib",
            ),
            UsageError::SizeBelowMin(size) => {
                write!(f, "--size {size}: at least {MIN_SIZE} bytes (the sequence number)")
            }
            UsageError::SizeAboveMockMtu(size) => {
                write!(f, "--size {size}: above the MTU ({MOCK_MTU} on the mock fabric)")
            }
            UsageError::SizeAboveMtu { size, mtu } => {
                write!(f, "--size {size}: above the port's active MTU {mtu} (a UD message is one packet)")
            }
            UsageError::Missing(flag) => write!(f, "{flag} is required"),
            UsageError::DestWithExchange => {
                f.write_str("--ud-pingpong takes the destination from the exchange: no --dest/--qpn")
            }
            UsageError::BadDest(s) => write!(f, "--dest {s:?} is neither a GID, an IPv4 address nor a LID"),
            UsageError::LidTooLarge { lid, dlid: true } => write!(f, "--dlid {lid} is above 0xffff"),
            UsageError::LidTooLarge { lid, dlid: false } => write!(f, "LID {lid} is above 0xffff"),
            UsageError::LidOnRoce => f.write_str("a RoCE port needs a GID (or IPv4) destination"),
            UsageError::NoGid => f.write_str("the port has no GID"),
            UsageError::FamilyMismatch { dest, index, local } => {
                let fam = |g: &Gid| if g.is_ipv4_mapped() { "IPv4" } else { "IPv6" };
                write!(
                    f,
                    "GID index {index} is {local} ({}) but the destination {dest} is {}: pick a GID index of the \
                     same address family (see `udah devices`)",
                    fam(local),
                    fam(dest)
                )
            }
            UsageError::NeedsDlid => f.write_str("on InfiniBand a GID destination also needs --dlid"),
            UsageError::GidIndexTooLarge(index) => write!(f, "GID index {index} > 255"),
        }
    }
}

impl core::error::Error for UsageError {}

impl UsageError {
    /// Prints `udah <command>: <self>` and returns [`EXIT_USAGE`].
    pub(crate) fn exit(&self, command: &str) -> ExitCode {
        eprintln!("udah {command}: {self}");
        ExitCode::from(EXIT_USAGE)
    }
}

/// Why `serve --hal ibverbs` or `ping --hal ibverbs` stopped.
#[cfg(feature = "ibverbs")]
#[derive(Debug)]
pub(crate) enum VerbsCmdError {
    /// A command-line mistake.
    Usage(UsageError),
    /// The device, the port or a verb failed.
    Verbs(VerbsError),
    /// `--ud-pingpong`: cannot listen on the exchange's TCP port.
    Listen(std::io::Error),
    /// `--ud-pingpong`: the TCP address exchange failed (with the server at
    /// `server`, on the client side).
    Exchange {
        /// The server (the client side's `--ud-pingpong SERVER`).
        server: Option<String>,
        /// What failed.
        source: std::io::Error,
    },
    /// The AH table could not be built.
    Table(super::table_box::TableBoxError),
}

#[cfg(feature = "ibverbs")]
impl fmt::Display for VerbsCmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerbsCmdError::Usage(e) => fmt::Display::fmt(e, f),
            VerbsCmdError::Verbs(e) => fmt::Display::fmt(e, f),
            VerbsCmdError::Listen(e) => write!(f, "--ud-pingpong: cannot listen on TCP port {UD_PINGPONG_PORT}: {e}"),
            VerbsCmdError::Exchange { server: Some(s), source } => {
                write!(f, "--ud-pingpong {s}: address exchange: {source}")
            }
            VerbsCmdError::Exchange { server: None, source } => write!(f, "--ud-pingpong address exchange: {source}"),
            VerbsCmdError::Table(e) => fmt::Display::fmt(e, f),
        }
    }
}

#[cfg(feature = "ibverbs")]
impl core::error::Error for VerbsCmdError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            VerbsCmdError::Usage(e) => Some(e),
            VerbsCmdError::Verbs(e) => Some(e),
            VerbsCmdError::Listen(e) | VerbsCmdError::Exchange { source: e, .. } => Some(e),
            VerbsCmdError::Table(e) => Some(e),
        }
    }
}

#[cfg(feature = "ibverbs")]
impl From<VerbsError> for VerbsCmdError {
    fn from(e: VerbsError) -> VerbsCmdError {
        VerbsCmdError::Verbs(e)
    }
}

#[cfg(feature = "ibverbs")]
impl From<UsageError> for VerbsCmdError {
    fn from(e: UsageError) -> VerbsCmdError {
        VerbsCmdError::Usage(e)
    }
}

#[cfg(feature = "ibverbs")]
impl VerbsCmdError {
    /// Prints the error and returns the exit status: a usage error's
    /// [`EXIT_USAGE`], a verbs error's ([`fail`](super::devices::fail):
    /// `udah: <error>`), 1 for the address exchange and the AH table.
    pub(crate) fn exit(&self, command: &str) -> ExitCode {
        match self {
            VerbsCmdError::Usage(e) => e.exit(command),
            VerbsCmdError::Verbs(e) => super::devices::fail(e),
            VerbsCmdError::Listen(_) | VerbsCmdError::Exchange { .. } | VerbsCmdError::Table(_) => {
                eprintln!("udah {command}: {self}");
                ExitCode::FAILURE
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts the commands printed when these were strings.
    #[test]
    fn usage_errors_say_what_they_said() {
        let v4 = Gid::from_ipv4([10, 0, 0, 1]);
        let v6: Gid = "fd00::1".parse::<core::net::Ipv6Addr>().unwrap().into();
        let cases = [
            (UsageError::PortZero, "--port 0: port numbers start at 1".to_owned()),
            (UsageError::MockPort { port: 9, side: "client" }, "--port 9: the mock fabric's client is port 1".into()),
            (
                UsageError::VerbsOnly { flag: "--qpn", mock: "the mock fabric has its own server" },
                "--qpn is for --hal ibverbs (the mock fabric has its own server)".into(),
            ),
            (UsageError::SizeBelowMin(4), "--size 4: at least 8 bytes (the sequence number)".into()),
            (UsageError::SizeAboveMockMtu(5000), "--size 5000: above the MTU (4096 on the mock fabric)".into()),
            (
                UsageError::SizeAboveMtu { size: 2000, mtu: 1024 },
                "--size 2000: above the port's active MTU 1024 (a UD message is one packet)".into(),
            ),
            (UsageError::Missing("--dest"), "--dest is required".into()),
            (UsageError::BadDest("nope".into()), "--dest \"nope\" is neither a GID, an IPv4 address nor a LID".into()),
            (UsageError::LidTooLarge { lid: 70000, dlid: false }, "LID 70000 is above 0xffff".into()),
            (UsageError::LidTooLarge { lid: 70000, dlid: true }, "--dlid 70000 is above 0xffff".into()),
            (UsageError::GidIndexTooLarge(300), "GID index 300 > 255".into()),
            (
                UsageError::FamilyMismatch { dest: v4, index: 2, local: v6 },
                format!(
                    "GID index 2 is {v6} (IPv6) but the destination {v4} is IPv4: pick a GID index of the same \
                     address family (see `udah devices`)"
                ),
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
    }
}
