//! `ibv_ud_pingpong`'s TCP address exchange, both sides: `serve
//! --ud-pingpong` answers it, `ping --ud-pingpong` starts it.

use core::sync::atomic::{AtomicBool, Ordering};
use core::time::Duration;

use udah_core::wire::Gid;

/// The TCP port `ibv_ud_pingpong` exchanges addresses on.
pub(crate) const UD_PINGPONG_PORT: u16 = 18515;

/// Length of one exchange message: `LLLL:QQQQQQ:PPPPPP:` then 32 hex digits
/// of GID and a NUL.
const UD_PINGPONG_MSG: usize = 52;

/// One side's address as `ibv_ud_pingpong` exchanges it over TCP: the text
/// `%04x:%06x:%06x:` + the GID's 16 bytes as 32 hex digits (in wire order),
/// NUL-padded to [`UD_PINGPONG_MSG`] bytes. The client writes its message
/// first, the server answers with its own, the client then writes `done`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PingpongAddr {
    /// Port LID (0 on RoCE).
    pub(crate) lid: u16,
    /// UD QP number.
    pub(crate) qpn: u32,
    /// Packet sequence number (unused by UD, exchanged anyway).
    pub(crate) psn: u32,
    /// The GID the side sends from (all zero: no GRH, IB only).
    pub(crate) gid: Gid,
}

impl PingpongAddr {
    /// The message bytes.
    pub(crate) fn to_wire(self) -> [u8; UD_PINGPONG_MSG] {
        let mut text = format!("{:04x}:{:06x}:{:06x}:", self.lid, self.qpn & 0xff_ffff, self.psn & 0xff_ffff);
        for b in self.gid.0 {
            text.push_str(&format!("{b:02x}"));
        }
        let mut out = [0u8; UD_PINGPONG_MSG];
        let n = text.len().min(UD_PINGPONG_MSG - 1);
        out[..n].copy_from_slice(&text.as_bytes()[..n]);
        out
    }

    /// Parses a message (up to its first NUL).
    pub(crate) fn parse(msg: &[u8]) -> Result<PingpongAddr, AddrError> {
        let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
        let text = core::str::from_utf8(&msg[..end]).map_err(|_| AddrError::NotText)?;
        let bad = || AddrError::Format(text.to_owned());
        let mut f = text.split(':');
        let (Some(lid), Some(qpn), Some(psn), Some(gid), None) = (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            return Err(bad());
        };
        let hex = |v: &str| u32::from_str_radix(v, 16).map_err(|_| bad());
        if gid.len() != 32 {
            return Err(bad());
        }
        let mut g = [0u8; 16];
        for (i, b) in g.iter_mut().enumerate() {
            *b = u8::from_str_radix(gid.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16).map_err(|_| bad())?;
        }
        Ok(PingpongAddr {
            lid: u16::try_from(hex(lid)?).map_err(|_| bad())?,
            qpn: hex(qpn)?,
            psn: hex(psn)?,
            gid: Gid(g),
        })
    }
}

/// Why an `ibv_ud_pingpong` address message did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AddrError {
    /// The bytes before the first NUL are not UTF-8.
    NotText,
    /// The text (here) is not `LID:QPN:PSN:GID`.
    Format(String),
}

impl core::fmt::Display for AddrError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AddrError::NotText => f.write_str("the address is not text"),
            AddrError::Format(text) => {
                write!(f, "{text:?} is not LID:QPN:PSN:GID (ibv_ud_pingpong's address format)")
            }
        }
    }
}

impl core::error::Error for AddrError {}

impl core::fmt::Display for PingpongAddr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "LID {:#06x}, QPN {:#08x}, PSN {:#08x}, GID {}", self.lid, self.qpn, self.psn, self.gid)
    }
}

/// Reads until `buf` is full or the peer closes; returns the bytes read.
fn read_msg(s: &mut std::net::TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut n = 0;
    while n < buf.len() {
        match s.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The server side of the exchange on `listener`: waits for one client
/// (giving up, `Ok(None)`, once `stop` is set), reads its address, answers
/// with `ours`, reads its `done`.
pub(crate) fn pingpong_serve_exchange(
    listener: &std::net::TcpListener,
    ours: PingpongAddr,
    stop: &AtomicBool,
) -> std::io::Result<Option<PingpongAddr>> {
    use std::io::Write;
    listener.set_nonblocking(true)?;
    let mut s = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted => {
                if stop.load(Ordering::Relaxed) {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    };
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut msg = [0u8; UD_PINGPONG_MSG];
    let n = read_msg(&mut s, &mut msg)?;
    if n != UD_PINGPONG_MSG {
        return Err(std::io::Error::other(format!("the client sent {n} of the {UD_PINGPONG_MSG} address bytes")));
    }
    let theirs = PingpongAddr::parse(&msg).map_err(std::io::Error::other)?;
    s.write_all(&ours.to_wire())?;
    // `done` (5 bytes from ibv_ud_pingpong; whatever comes, until EOF).
    let _ = read_msg(&mut s, &mut msg);
    Ok(Some(theirs))
}

/// The client side: connects to `server` (`host` or `host:port`; port
/// [`UD_PINGPONG_PORT`] by default), sends `ours`, reads the server's
/// address, says `done` (5 bytes with the NUL).
pub(crate) fn pingpong_client_exchange(server: &str, ours: PingpongAddr) -> std::io::Result<PingpongAddr> {
    use std::io::Write;
    use std::net::ToSocketAddrs;
    let addrs: Vec<_> = match server.to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(_) => (server, UD_PINGPONG_PORT).to_socket_addrs()?.collect(),
    };
    let mut last = std::io::Error::other(format!("{server}: no address"));
    for a in addrs {
        match std::net::TcpStream::connect_timeout(&a, Duration::from_secs(10)) {
            Ok(mut s) => {
                s.set_read_timeout(Some(Duration::from_secs(30)))?;
                s.write_all(&ours.to_wire())?;
                let mut msg = [0u8; UD_PINGPONG_MSG];
                let n = read_msg(&mut s, &mut msg)?;
                if n != UD_PINGPONG_MSG {
                    return Err(std::io::Error::other(format!(
                        "the server sent {n} of the {UD_PINGPONG_MSG} address bytes"
                    )));
                }
                let theirs = PingpongAddr::parse(&msg).map_err(std::io::Error::other)?;
                // `done` and its NUL, exactly as ibv_ud_pingpong's client
                // writes it: its server checks that it read 5 bytes (seen on
                // rdma-core 44: a padded 52-byte `done` makes it give up).
                s.write_all(b"done\0")?;
                return Ok(theirs);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(feature = "ibverbs")]
/// A PSN for the exchange (UD does not use it; ibv_ud_pingpong draws one).
pub(crate) fn pingpong_psn() -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    (t ^ std::process::id().rotate_left(12)) & 0xff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ud_pingpong_address_text() {
        let a = PingpongAddr { lid: 0x12, qpn: 0x11, psn: 0xabcdef, gid: Gid::from_ipv4([198, 18, 0, 1]) };
        let w = a.to_wire();
        assert_eq!(w.len(), 52);
        assert_eq!(&w[..51], b"0012:000011:abcdef:00000000000000000000ffffc6120001".as_slice());
        assert_eq!(w[51], 0);
        assert_eq!(PingpongAddr::parse(&w), Ok(a));
        let v6: Gid = "fe80::1:2".parse::<core::net::Ipv6Addr>().unwrap().into();
        let b = PingpongAddr { lid: 0, qpn: 0xff_ffff, psn: 0, gid: v6 };
        assert_eq!(PingpongAddr::parse(&b.to_wire()), Ok(b));
        for bad in [&b"0012:000011:abcdef"[..], b"0012:11:0:00ff", b"zz:1:2:00000000000000000000ffffc6120001", b""] {
            assert!(PingpongAddr::parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// Both sides of the TCP exchange against each other over loopback.
    #[test]
    fn ud_pingpong_exchange_over_loopback() {
        let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let srv = PingpongAddr { lid: 1, qpn: 0x42, psn: 7, gid: Gid::from_ipv4([10, 0, 0, 1]) };
        let cli = PingpongAddr { lid: 2, qpn: 0x43, psn: 8, gid: Gid::from_ipv4([10, 0, 0, 2]) };
        let stop = AtomicBool::new(false);
        let t = std::thread::spawn(move || pingpong_client_exchange(&format!("127.0.0.1:{port}"), cli).unwrap());
        let got = pingpong_serve_exchange(&l, srv, &stop).unwrap();
        assert_eq!(got, Some(cli));
        assert_eq!(t.join().unwrap(), srv);
        // A set stop flag ends the wait for a client.
        stop.store(true, Ordering::Relaxed);
        assert_eq!(pingpong_serve_exchange(&l, srv, &stop).unwrap(), None);
    }

    /// The client's last word is exactly `done\0` (5 bytes), as rdma-core's
    /// client writes it: ibv_ud_pingpong's server (rdma-core 44) refuses a
    /// `done` of any other length ("Couldn't send/recv local address").
    #[test]
    fn ud_pingpong_client_says_done_like_ibv_ud_pingpong() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        let cli = PingpongAddr { lid: 0, qpn: 0x43, psn: 8, gid: Gid::from_ipv4([10, 0, 0, 2]) };
        let t = std::thread::spawn(move || pingpong_client_exchange(&format!("127.0.0.1:{port}"), cli));
        let (mut c, _) = l.accept().unwrap();
        let mut msg = [0u8; UD_PINGPONG_MSG];
        c.read_exact(&mut msg).unwrap();
        assert_eq!(PingpongAddr::parse(&msg), Ok(cli));
        let srv = PingpongAddr { lid: 0, qpn: 0x42, psn: 7, gid: Gid::from_ipv4([10, 0, 0, 1]) };
        c.write_all(&srv.to_wire()).unwrap();
        assert_eq!(t.join().unwrap().unwrap(), srv);
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"done\0");
    }
}
