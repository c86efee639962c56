use udah_core::ah::{AhAttr, PortNum};
use udah_core::hal::Hal;

use super::*;
use crate::MockHal;

fn ib_attr(port: PortId, dlid: u16) -> AhAttr {
    let port = PortNum::new(port.port).unwrap();
    AhAttr { dlid, sl: Default::default(), src_path_bits: 0, static_rate: 0, port, grh: None }
}

#[test]
fn a_destroyed_ah_stays_stale_when_its_slot_is_reused() {
    let fabric = Fabric::new(1);
    let port = fabric.add_port(PortConfig::ib(8, 1));
    let qp = fabric.create_qp(port, 1).unwrap();
    let hal = MockHal::new(&fabric, port.device);
    let attr = ib_attr(port, 8);
    let (a, b) = (hal.create_ah(&attr, None).unwrap(), hal.create_ah(&attr, None).unwrap());
    assert_eq!((a, b), (MockAh(1), MockAh(2)));
    hal.destroy_ah(a).unwrap();
    let c = hal.create_ah(&attr, None).unwrap();
    assert_ne!(c, a, "the slot is reused under a new generation");
    assert_eq!(fabric.ah_attr(c), Some(attr));
    assert_eq!(fabric.ah_attr(a), None);
    assert_eq!(fabric.post_send(qp, a, qp, 1, b"x"), Err(SendError::StaleAh(a)));
    assert!(hal.destroy_ah(a).is_err(), "a double destroy is refused, the new AH untouched");
    assert_eq!(fabric.ah_attr(c), Some(attr));
    for t in [0, u64::MAX, 1 << 32] {
        assert_eq!(fabric.ah_attr(MockAh(t)), None, "{t:#x}");
        assert!(hal.destroy_ah(MockAh(t)).is_err(), "{t:#x}");
    }
    let c = fabric.counters();
    assert_eq!((c.ah_creates, c.ah_destroys, c.live_ahs(), c.ah_bad_destroys), (3, 1, 2, 4));
}

#[test]
fn an_emptied_queue_gives_its_memory_back() {
    let fabric = Fabric::new(1);
    let a = fabric.add_port(PortConfig::ib(8, 1));
    let b = fabric.add_port(PortConfig::ib(12, 2));
    let (qa, qb) = (fabric.create_qp(a, 1).unwrap(), fabric.create_qp(b, 1).unwrap());
    assert_eq!(fabric.create_qp(PortId { device: 9, port: 1 }, 1), None);
    let hal = MockHal::new(&fabric, a.device);
    let attr = ib_attr(a, 12);
    let ah = hal.create_ah(&attr, None).unwrap();
    for _ in 0..3 {
        fabric.post_send(qa, ah, qb, 1, b"hello").unwrap();
    }
    let capacity = |q: Qpn| fabric.with_state(|s| s.qp(q).map(|q| q.rq.capacity()));
    assert!(capacity(qb).is_some_and(|c| c >= 3));
    assert!(fabric.poll(qb).is_some());
    let mut out = Vec::new();
    assert_eq!(fabric.poll_batch(qb, 8, &mut out), 2);
    assert_eq!(capacity(qb), Some(0));
    assert_eq!(fabric.poll(qb), None);
    assert_eq!(fabric.poll(Qpn(0)), None);
    assert_eq!(fabric.poll(Qpn(u32::MAX)), None);
}
