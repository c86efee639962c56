//! The rxe quirk ([`Quirks::rxe`]): the mock reproduces the receive area
//! Soft-RoCE writes for a RoCE v2/IPv4 packet (as dumped on Linux 6.1: a zeroed
//! front over the stamp, the IPv4 header with checksum 0), and a stamped
//! responder on such a port answers every request.

use udah_core::GidType;
use udah_core::ah::{AhAttr, PortNum};
use udah_core::hal::Hal;
use udah_core::wire::{Gid, Stamp};
use udah_hal_mock::responder::{Mode, Responder};
use udah_hal_mock::{Fabric, MockHal, PortConfig, PortId, Qpn, Quirks};

const QKEY: u32 = 0x1111_1111;
const SERVER: [u8; 4] = [198, 18, 0, 1];
const CLIENT: [u8; 4] = [198, 18, 0, 2];

fn v2_index(fabric: &Fabric, port: PortId, gid: Gid) -> u8 {
    let (i, _) = fabric.gids(port).into_iter().find(|(_, e)| e.gid == gid && e.gid_type == GidType::RoceV2).unwrap();
    u8::try_from(i).unwrap()
}

/// An rxe server port and a client with a QP and an AH to it.
fn setup(server_quirks: Quirks) -> (Fabric, PortId, Qpn, udah_hal_mock::MockAh) {
    let fabric = Fabric::new(12);
    let server = fabric.add_port(PortConfig::roce([2, 0, 0, 0, 0, 1]).with_ipv4(SERVER).with_quirks(server_quirks));
    let client = fabric.add_port(PortConfig::roce([2, 0, 0, 0, 0, 2]).with_ipv4(CLIENT));
    let attr = AhAttr::routed(
        PortNum::new(client.port).unwrap(),
        Gid::from_ipv4(SERVER),
        v2_index(&fabric, client, Gid::from_ipv4(CLIENT)),
        64,
    );
    let ah = MockHal::new(&fabric, client.device).create_ah(&attr, None).unwrap();
    let qpn = fabric.create_qp(client, QKEY).unwrap();
    (fabric, server, qpn, ah)
}

#[test]
fn the_mock_writes_the_area_rxe_writes() {
    let (fabric, server, client, ah) = setup(Quirks::rxe());
    let rx = fabric.create_qp(server, QKEY).unwrap();
    fabric.set_receive_stamp(rx, Some(Stamp::DEFAULT));
    // 72 bytes of payload: IPv4 total length 20 + 8 + 12 + 72 + 4 = 0x74, as
    // in the dump.
    fabric.post_send(client, ah, rx, QKEY, &[0x5a; 72]).unwrap();
    let m = fabric.poll(rx).expect("delivered");
    assert_eq!(&m.area[..20], &[0u8; 20], "the front is zeroed over the stamp");
    // 45000074 ....4000 40110000 c6120002 c6120001 (ident left out: the
    // fabric numbers its packets).
    assert_eq!(&m.area[20..24], &[0x45, 0, 0, 0x74]);
    assert_eq!(&m.area[26..32], &[0x40, 0, 0x40, 0x11, 0, 0], "DF, TTL 64, UDP, checksum 0x0000");
    assert_eq!(&m.area[32..36], &CLIENT);
    assert_eq!(&m.area[36..40], &SERVER);
    assert_eq!(m.wc.ibv.sl, 0);
    // Without the quirk the stamp survives (what mlx5/irdma-style NICs do).
    let (fabric, server, client, ah) = setup(Quirks::default());
    let rx = fabric.create_qp(server, QKEY).unwrap();
    fabric.set_receive_stamp(rx, Some(Stamp::DEFAULT));
    fabric.post_send(client, ah, rx, QKEY, &[0x5a; 72]).unwrap();
    assert_eq!(&fabric.poll(rx).unwrap().area[..20], Stamp::DEFAULT.bytes());
}

/// `udah serve --stamp` on rxe refused every RoCE v2/IPv4 request ("header
/// type is ambiguous or contradicts the evidence") until the zero-front
/// rule in `udah_core::wire::detect`: with it every request is answered, to
/// the sender's QP.
#[test]
fn a_stamped_responder_answers_every_request_on_rxe() {
    for mode in [Mode::LibibverbsStamped, Mode::Libibverbs] {
        let (fabric, server, client, ah) = setup(Quirks::rxe());
        let mut resp = Responder::new(&fabric, server, QKEY, mode).unwrap();
        for i in 0..20u8 {
            fabric.post_send(client, ah, resp.qpn(), QKEY, &[i; 16]).unwrap();
        }
        let (ok, failed) = resp.serve_pending();
        assert!(failed.is_empty(), "{mode:?}: {:?}", failed.first().map(|(_, e)| e));
        assert_eq!(ok, 20, "{mode:?}");
        for i in 0..20u8 {
            let r = fabric.poll(client).expect("reply");
            assert_eq!((r.payload, r.wc.ibv.src_qp), (vec![i; 16], resp.qpn().0), "{mode:?}");
        }
    }
}
