//! The event engine (`udah_hal_ibverbs::events::Events`) on a real RDMA
//! device: taking the netdev under the port down raises `IBV_EVENT_PORT_ERR`
//! (the engine stops creating), up again `IBV_EVENT_PORT_ACTIVE` (it
//! resumes); a neighbour's MAC change retires only that neighbour's AHs.
//! The engine's fd is readable when events wait. `#[ignore]`d; the
//! Soft-RoCE guest runs it as root:
//!
//! ```text
//! UDAH_TEST_DEVICE=rxe0 cargo test -p udah-hal-ibverbs --test hardware_events -- --ignored
//! ```

use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::Instant;

use udah_core::wire::Gid;
use udah_hal_ibverbs::IbverbsHal;
use udah_hal_ibverbs::events::{EventTarget, Events, Happened};
use udah_hal_ibverbs::netevents::gid_of;

fn device() -> String {
    match std::env::var("UDAH_TEST_DEVICE") {
        Ok(d) if !d.is_empty() => d,
        _ => panic!("set UDAH_TEST_DEVICE to an RDMA device (e.g. rxe0) to run the hardware tests"),
    }
}

fn port() -> u8 {
    std::env::var("UDAH_TEST_PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(1)
}

/// The netdev under the device's port (the netdev of its GID 0).
fn netdev() -> String {
    let (dev, port) = (device(), port());
    let p = format!("/sys/class/infiniband/{dev}/ports/{port}/gid_attrs/ndevs/0");
    let nd = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e} (is {dev} a RoCE device?)"));
    nd.trim().to_string()
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip(8)");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// AHs per (GID, MAC), retired as the engine says.
#[derive(Default)]
struct Table {
    ahs: Vec<(Gid, [u8; 6])>,
}

impl EventTarget for Table {
    fn retire_l2_change(&mut self, dgid: &Gid, dmac: [u8; 6]) -> usize {
        let before = self.ahs.len();
        self.ahs.retain(|(g, m)| g != dgid || *m == dmac);
        before - self.ahs.len()
    }
}

/// Whether `fd` is readable within `ms`.
fn readable(fd: i32, ms: i32) -> bool {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, count 1.
    #[allow(unsafe_code)]
    let r = unsafe { libc::poll(&mut pfd, 1, ms) };
    r > 0
}

/// Processes events (polling the engine's fd) until `want` holds for one of
/// them, at most 10 s; returns everything seen and whether it came.
fn until(
    ev: &mut Events,
    hal: &IbverbsHal,
    t: &mut Table,
    want: impl Fn(&Happened) -> bool,
) -> (Vec<Happened>, bool, bool) {
    let end = Instant::now() + Duration::from_secs(10);
    let (mut all, mut saw_readable) = (Vec::new(), false);
    while Instant::now() < end {
        saw_readable |= readable(ev.as_raw_fd(), 100);
        let from = all.len();
        ev.process(hal, t, &mut all);
        if all[from..].iter().any(&want) {
            return (all, true, saw_readable);
        }
    }
    (all, false, saw_readable)
}

#[test]
#[ignore = "needs an RDMA device on a netdev (UDAH_TEST_DEVICE) and root"]
fn port_error_stops_creating_and_port_active_resumes() {
    let (dev, port, nd) = (device(), port(), netdev());
    let hal = IbverbsHal::open_port(Some(&dev), port).unwrap();
    let (mut ev, net) = Events::open(&hal, port).unwrap();
    assert!(net.is_none(), "rtnetlink: {net:?}");
    assert!(ev.creating(), "the port is active");
    let mut t = Table::default();
    ip(&["link", "set", "dev", &nd, "down"]);
    let (seen, down, fd) = until(&mut ev, &hal, &mut t, |h| matches!(h, Happened::Port { up: false, .. }));
    println!("after `ip link set {nd} down`: {seen:?}");
    ip(&["link", "set", "dev", &nd, "up"]);
    assert!(down, "no IBV_EVENT_PORT_ERR within 10 s of {nd} down");
    assert!(fd, "the engine's fd was never readable");
    assert!(!ev.creating());
    let (seen, up, _) = until(&mut ev, &hal, &mut t, |h| matches!(h, Happened::Port { up: true, .. }));
    println!("after `ip link set {nd} up`: {seen:?}");
    assert!(up, "no IBV_EVENT_PORT_ACTIVE within 10 s of {nd} up");
    assert!(ev.creating());
    let c = ev.counts();
    assert_eq!((c.port_errors, c.port_actives), (1, 1), "{c:?}");
    assert!(hal.fault().is_none());
    // The port is usable again.
    let end = Instant::now() + Duration::from_secs(30);
    while !hal.port_attr(port).unwrap().state.is_active() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(hal.port_attr(port).unwrap().state.is_active());
}

#[test]
#[ignore = "needs an RDMA device on a netdev (UDAH_TEST_DEVICE) and root"]
fn a_neighbour_mac_change_retires_only_its_ahs() {
    let (dev, port, nd) = (device(), port(), netdev());
    let hal = IbverbsHal::open_port(Some(&dev), port).unwrap();
    let (mut ev, _) = Events::open(&hal, port).unwrap();
    let (x, y) = (Ipv4Addr::new(198, 18, 0, 78), Ipv4Addr::new(198, 18, 0, 79));
    let (m1, m2, my) = ([2, 0, 0, 0, 0x78, 1], [2, 0, 0, 0, 0x78, 2], [2, 0, 0, 0, 0x79, 1]);
    let mut t = Table { ahs: vec![(gid_of(IpAddr::V4(x)), m1), (gid_of(IpAddr::V4(y)), my)] };
    ip(&["neigh", "replace", "198.18.0.78", "lladdr", "02:00:00:00:78:01", "dev", &nd, "nud", "permanent"]);
    ip(&["neigh", "replace", "198.18.0.79", "lladdr", "02:00:00:00:79:01", "dev", &nd, "nud", "permanent"]);
    ip(&["neigh", "replace", "198.18.0.78", "lladdr", "02:00:00:00:78:02", "dev", &nd, "nud", "permanent"]);
    let (seen, moved, _) = until(&mut ev, &hal, &mut t, |h| matches!(h, Happened::NeighbourMoved { .. }));
    ip(&["neigh", "del", "198.18.0.78", "dev", &nd]);
    ip(&["neigh", "del", "198.18.0.79", "dev", &nd]);
    println!("{seen:?}");
    assert!(moved);
    assert!(seen.contains(&Happened::NeighbourMoved { addr: IpAddr::V4(x), old: m1, new: m2, retired: 1 }));
    assert_eq!(t.ahs, [(gid_of(IpAddr::V4(y)), my)], "y's AH stays");
    assert_eq!(ev.counts().retired, 1);
}
