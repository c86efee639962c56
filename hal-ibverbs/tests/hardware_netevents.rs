//! The rtnetlink watcher (`udah_hal_ibverbs::netevents`) on the netdev under
//! a real RDMA device: neighbour entries made with `ip neigh` on that netdev
//! arrive as events, and [`Neighbours`] reports a new MAC, a changed MAC and
//! a lost entry. `#[ignore]`d; the Soft-RoCE guest runs it as root:
//!
//! ```text
//! UDAH_TEST_DEVICE=rxe0 cargo test -p udah-hal-ibverbs --test hardware_netevents -- --ignored
//! ```

use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;
use std::process::Command;
use std::time::Instant;

use udah_hal_ibverbs::netevents::{NeighChange, Neighbours, NetEvent, NetWatch};

fn device() -> String {
    match std::env::var("UDAH_TEST_DEVICE") {
        Ok(d) if !d.is_empty() => d,
        _ => panic!("set UDAH_TEST_DEVICE to an RDMA device (e.g. rxe0) to run the hardware tests"),
    }
}

/// The netdev under the device's port 1 (the netdev of its GID 0) and its
/// interface index.
fn netdev() -> (String, u32) {
    let dev = device();
    let p = format!("/sys/class/infiniband/{dev}/ports/1/gid_attrs/ndevs/0");
    let nd = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e} (is {dev} a RoCE device?)"));
    let nd = nd.trim().to_string();
    let idx = std::fs::read_to_string(format!("/sys/class/net/{nd}/ifindex")).unwrap();
    (nd, idx.trim().parse().unwrap())
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip(8)");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Waits (at most 5 s) for a neighbour event about `addr` and applies it.
fn next_change(w: &mut NetWatch, n: &mut Neighbours, addr: IpAddr) -> Option<NeighChange> {
    let end = Instant::now() + Duration::from_secs(5);
    let mut evs = Vec::new();
    while Instant::now() < end {
        evs.clear();
        w.read(&mut evs).unwrap();
        for ev in &evs {
            if matches!(ev, NetEvent::Neighbour { addr: a, .. } if *a == addr) {
                return Some(n.apply(ev));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
#[ignore = "needs an RDMA device on a netdev (UDAH_TEST_DEVICE) and root"]
fn neighbour_events_tell_a_changed_mac_from_a_refresh() {
    let (nd, ifindex) = netdev();
    let addr = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 77));
    let a = "02:00:00:00:77:01";
    let b = "02:00:00:00:77:02";
    let mut w = NetWatch::open().unwrap();
    let mut n = Neighbours::new();
    ip(&["neigh", "replace", "198.18.0.77", "lladdr", a, "dev", &nd, "nud", "permanent"]);
    assert_eq!(next_change(&mut w, &mut n, addr), Some(NeighChange::New([2, 0, 0, 0, 0x77, 1])));
    assert_eq!(n.get(ifindex, addr), Some([2, 0, 0, 0, 0x77, 1]), "the event names {nd}'s ifindex {ifindex}");
    // The same MAC again: no event, or one that changes nothing.
    ip(&["neigh", "replace", "198.18.0.77", "lladdr", a, "dev", &nd, "nud", "reachable"]);
    let same = next_change(&mut w, &mut n, addr);
    assert!(matches!(same, None | Some(NeighChange::Same)), "{same:?}");
    ip(&["neigh", "replace", "198.18.0.77", "lladdr", b, "dev", &nd, "nud", "permanent"]);
    assert_eq!(
        next_change(&mut w, &mut n, addr),
        Some(NeighChange::Changed { old: [2, 0, 0, 0, 0x77, 1], new: [2, 0, 0, 0, 0x77, 2] })
    );
    ip(&["neigh", "del", "198.18.0.77", "dev", &nd]);
    assert_eq!(next_change(&mut w, &mut n, addr), Some(NeighChange::Lost { old: [2, 0, 0, 0, 0x77, 2] }));
}

#[test]
#[ignore = "needs an RDMA device on a netdev (UDAH_TEST_DEVICE) and root"]
fn an_address_added_and_removed_arrives_as_two_events() {
    let (nd, ifindex) = netdev();
    let mut w = NetWatch::open().unwrap();
    ip(&["addr", "add", "198.18.0.78/32", "dev", &nd]);
    ip(&["addr", "del", "198.18.0.78/32", "dev", &nd]);
    let want = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 78));
    let (mut added, mut removed) = (false, false);
    let end = Instant::now() + Duration::from_secs(5);
    let mut evs = Vec::new();
    while Instant::now() < end && !(added && removed) {
        w.read(&mut evs).unwrap();
        for ev in evs.drain(..) {
            if let NetEvent::Address { ifindex: i, addr, gone } = ev
                && i == ifindex
                && addr == want
            {
                if gone { removed = true } else { added = true }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(added && removed, "added {added}, removed {removed}");
}
