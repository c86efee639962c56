//! Injected create faults: the typed errors the mock's `MockHal` returns,
//! and what `AhTable` (the create path libudah and `udah serve` both use)
//! does when a create fails with ENOMEM (the device's AH limit,
//! `Faults::max_live_ahs`): it evicts an idle entry and retries, never
//! evicts a held one, and returns the typed error when nothing idle is left.

use udah_core::ah::{AhAttr, FlowLabel, GlobalRoute, PortNum, Sl};
use udah_core::hal::{ErrorKind, Hal};
use udah_core::table::{AhTable, TableError};
use udah_core::wire::Gid;
use udah_hal_mock::{Fabric, Faults, MockHal, PortConfig};

/// A RoCE port whose device holds at most `limit` AHs, with `faults` besides,
/// and neighbours for peers 10.1.0.2 to 10.1.0.9.
fn port(limit: usize, faults: Faults) -> (Fabric, MockHal) {
    let f = Fabric::new(7);
    let faults = Faults { max_live_ahs: Some(limit), ..faults };
    let r = f.add_port(PortConfig::roce([0x02, 0, 0, 0, 2, 1]).with_ipv4([10, 1, 0, 1]).with_faults(faults));
    for k in 2..10 {
        f.set_neighbour(Gid::from_ipv4([10, 1, 0, k]), [2, 0, 0, 0, 2, k]);
    }
    let hal = MockHal::new(&f, r.device);
    (f, hal)
}

fn attr(k: u8) -> AhAttr {
    AhAttr {
        port: PortNum::new(1).unwrap(),
        dlid: 0,
        sl: Sl::default(),
        src_path_bits: 0,
        static_rate: 0,
        grh: Some(GlobalRoute {
            dgid: Gid::from_ipv4([10, 1, 0, k]),
            flow_label: FlowLabel::default(),
            sgid_index: 3,
            hop_limit: 64,
            traffic_class: 0,
        }),
    }
}

type Table = AhTable<MockHal, 64>;

/// A port of `limit` AHs with `faults`, and a table holding the AHs of
/// peers 2 and 3.
fn two_entries(
    limit: usize,
    faults: Faults,
) -> (
    Fabric,
    MockHal,
    Table,
    udah_core::table::AhHandle<udah_hal_mock::MockAh>,
    udah_core::table::AhHandle<udah_hal_mock::MockAh>,
) {
    let (f, hal) = port(limit, faults);
    let t = Table::new();
    let a = t.get_or_create(&hal, &attr(2)).unwrap();
    let b = t.get_or_create(&hal, &attr(3)).unwrap();
    (f, hal, t, a, b)
}

fn kind<T>(r: Result<T, TableError<udah_hal_mock::MockError>>) -> Option<ErrorKind> {
    match r {
        Err(TableError::Backend(e)) => Some(e.kind),
        _ => None,
    }
}

#[test]
fn enomem_evicts_an_idle_entry_and_retries_once() {
    let (f, hal, t, a, b) = two_entries(2, Faults::default());
    t.release(&hal, a).unwrap();
    t.release(&hal, b).unwrap();
    // The device is full of idle entries: the third create fails once,
    // one idle entry goes, and the retry succeeds.
    let c = t.get_or_create(&hal, &attr(4)).unwrap();
    let (s, fc) = (t.stats(), f.counters());
    assert_eq!((s.creates, s.evictions, s.backend_failures, s.live), (3, 1, 1, 2));
    assert_eq!((fc.ah_creates, fc.ah_create_failures, fc.ah_destroys, fc.live_ahs()), (3, 1, 1, 2));
    assert!(t.is_current(&c));
    t.release(&hal, c).unwrap();
}

#[test]
fn enomem_never_evicts_a_held_entry() {
    let (f, hal, t, a, b) = two_entries(2, Faults::default());
    // Both held: nothing to evict, so no retry, and the typed error.
    assert_eq!(kind(t.get_or_create(&hal, &attr(4))), Some(ErrorKind::OutOfResources));
    let (s, fc) = (t.stats(), f.counters());
    assert_eq!((s.evictions, s.backend_failures, s.live), (0, 1, 2));
    assert_eq!((fc.ah_create_failures, fc.ah_destroys, fc.live_ahs()), (1, 0, 2));
    assert!(t.is_current(&a) && t.is_current(&b));
    // One held and one idle: only the idle one goes.
    t.release(&hal, b).unwrap();
    let c = t.get_or_create(&hal, &attr(4)).unwrap();
    assert_eq!(t.stats().evictions, 1);
    assert!(t.is_current(&a));
    let again = t.get_or_create(&hal, &attr(2)).unwrap();
    assert_eq!(again.ah(), a.ah(), "the held entry is still the cached one");
    for h in [a, again, c] {
        t.release(&hal, h).unwrap();
    }
    assert_eq!(f.counters().ah_destroys, 1);
}

#[test]
fn a_second_enomem_is_the_callers() {
    // Attempt 4 (the retry of the third peer's create) fails as if another
    // user of the device had taken the AH the eviction freed.
    let faults = Faults { fail_nth: vec![(4, ErrorKind::OutOfResources)], ..Faults::default() };
    let (f, hal, t, a, b) = two_entries(2, faults);
    t.release(&hal, b).unwrap();
    assert_eq!(kind(t.get_or_create(&hal, &attr(4))), Some(ErrorKind::OutOfResources));
    // Two attempts for that look-up, one eviction between them, no third.
    let (s, fc) = (t.stats(), f.counters());
    assert_eq!((s.creates, s.evictions, s.backend_failures), (2, 1, 2));
    assert_eq!((fc.ah_creates, fc.ah_create_failures, fc.live_ahs()), (2, 2, 1));
    assert!(t.is_current(&a));
    // The next look-up finds room (the evicted entry's AH is free).
    let c = t.get_or_create(&hal, &attr(4)).unwrap();
    t.release(&hal, c).unwrap();
    t.release(&hal, a).unwrap();
}

#[test]
fn injected_faults_surface_as_typed_errors() {
    let f = Fabric::new(9);
    let faults = Faults { max_live_ahs: Some(1), fail_nth: vec![(2, ErrorKind::Timeout)], ..Faults::default() };
    let r = f.add_port(PortConfig::roce([0x02, 0, 0, 0, 2, 1]).with_ipv4([10, 1, 0, 1]).with_faults(faults));
    let hal = MockHal::new(&f, r.device);
    f.set_neighbour(Gid::from_ipv4([10, 1, 0, 2]), [2, 0, 0, 0, 2, 2]);
    f.set_neighbour(Gid::from_ipv4([10, 1, 0, 3]), [2, 0, 0, 0, 2, 3]);
    let a = hal.create_ah(&attr(2), None).unwrap();
    assert_eq!(hal.create_ah(&attr(3), None).unwrap_err().kind, ErrorKind::Timeout);
    assert_eq!(hal.create_ah(&attr(3), None).unwrap_err().kind, ErrorKind::OutOfResources);
    assert_eq!(hal.create_ah(&attr(9), None).unwrap_err().kind, ErrorKind::OutOfResources);
    hal.destroy_ah(a).unwrap();
    assert_eq!(hal.destroy_ah(a).unwrap_err().kind, ErrorKind::InvalidArgument);
    assert_eq!(hal.create_ah(&attr(9), None).unwrap_err().kind, ErrorKind::Unreachable);
    let c = f.counters();
    assert_eq!((c.ah_creates, c.ah_destroys, c.ah_bad_destroys, c.live_ahs()), (1, 1, 1, 0));
}
