//! End to end over the mock fabric: peers on IB, RoCE v1, RoCE v2/IPv4 and
//! RoCE v2/IPv6 ports (with and without VLANs, with GID tables that have
//! holes and duplicates) send UD requests to a responder, which turns each
//! completion into an AH through udah-core and replies; every reply must
//! reach the exact sender QP, from the responder's address. The responder
//! tests run on two devices: one that writes the 40-byte area, and one that
//! reports the source address in the completion and leaves the area alone
//! ([`Quirks::gid_in_completion`], EFA's `efadv_wc_read_sgid`).

use udah_core::ah::{AhAttr, FlowLabel, GlobalRoute, PortNum, Sl};
use udah_core::hal::Hal;
use udah_core::wire::{Gid, grh, ipv4};
use udah_core::{GidEntry, GidType};
use udah_hal_mock::responder::{Mode, ReplyError, Responder};
use udah_hal_mock::{Fabric, FrontFill, MockHal, PortConfig, PortId, Qpn, Quirks};

const QKEY: u32 = 0x1111_1111;

struct Peer {
    port: PortId,
    qpn: Qpn,
    ah: udah_hal_mock::MockAh,
}

/// A peer on `port` that talks to `dst` using its own GID entry `sgid_index`
/// (`None`: IB without GRH, to LID `dlid`).
fn peer(fabric: &Fabric, port: PortId, dlid: u16, grh: Option<(u8, Gid)>, tc: u8, flow: u32) -> Peer {
    let hal = MockHal::new(fabric, port.device);
    let attr = AhAttr {
        port: PortNum::new(port.port).unwrap(),
        dlid,
        sl: Sl::new(3).unwrap(),
        src_path_bits: 0,
        static_rate: 0,
        grh: grh.map(|(sgid_index, dgid)| GlobalRoute {
            dgid,
            flow_label: FlowLabel::new(flow).unwrap(),
            sgid_index,
            hop_limit: 64,
            traffic_class: tc,
        }),
    };
    let ah = hal.create_ah(&attr, None).expect("peer AH");
    Peer { port, qpn: fabric.create_qp(port, QKEY).unwrap(), ah }
}

/// Every peer sends `rounds` requests; the responder answers; returns the
/// responder's failures. Checks that every answered request's reply reached
/// the sender's QP with the sender's payload, from the responder's QP.
fn exchange(fabric: &Fabric, resp: &mut Responder, peers: &[Peer], rounds: usize) -> Vec<ReplyError> {
    let mut failures = Vec::new();
    for r in 0..rounds {
        for (i, p) in peers.iter().enumerate() {
            let payload = format!("req {i} round {r}").into_bytes();
            fabric.post_send(p.qpn, p.ah, resp.qpn(), QKEY, &payload).unwrap();
        }
        let (ok, failed) = resp.serve_pending();
        let failed_senders: Vec<u32> = failed.iter().map(|(m, _)| m.wc.ibv.src_qp).collect();
        failures.extend(failed.into_iter().map(|(_, e)| e));
        let mut got = 0;
        for (i, p) in peers.iter().enumerate() {
            match fabric.poll(p.qpn) {
                Some(reply) => {
                    got += 1;
                    assert_eq!(reply.wc.ibv.src_qp, resp.qpn().0, "reply from the responder QP");
                    assert_eq!(reply.payload, format!("req {i} round {r}").into_bytes(), "reply reached the right QP");
                    assert!(fabric.poll(p.qpn).is_none(), "exactly one reply");
                    assert_eq!(fabric.qp_port(p.qpn), Some(p.port));
                }
                None => assert!(
                    failed_senders.contains(&p.qpn.0) || fabric.counters().dropped_vlan > 0,
                    "peer {i} got no reply and the responder reported no failure for it"
                ),
            }
        }
        assert!(got >= ok.saturating_sub(fabric.counters().dropped_vlan as usize));
    }
    failures
}

fn roce_fabric(quirks: Quirks) -> (Fabric, PortId, Vec<(PortId, u8, Gid)>) {
    let f = Fabric::new(42);
    // Responder: link-local (0,1), a hole at 2..4, IPv4 10.0.0.1 (4,5), IPv6 (6,7).
    let v6: Gid = "2001:db8::1".parse::<core::net::Ipv6Addr>().unwrap().into();
    let r = f.add_port(
        PortConfig::roce([0x02, 0, 0, 0, 0, 1])
            .with_gid(4, GidEntry::new(Gid::from_ipv4([10, 0, 0, 1]), GidType::RoceV1))
            .with_gid(5, GidEntry::new(Gid::from_ipv4([10, 0, 0, 1]), GidType::RoceV2))
            .with_address(v6, None)
            .with_table_len(64)
            .with_quirks(quirks),
    );
    let mut peers = Vec::new();
    for k in 2..6u8 {
        let mac = [0x02, 0, 0, 0, 0, k];
        let p6: Gid = format!("2001:db8::{k}").parse::<core::net::Ipv6Addr>().unwrap().into();
        let p = f.add_port(PortConfig::roce(mac).with_ipv4([10, 0, 0, k]).with_address(p6, None).with_quirks(quirks));
        // index 2/3: v1/v2 of the IPv4 address; 4/5: v1/v2 of the IPv6 address.
        peers.push((p, k, p6));
    }
    (f, r, peers)
}

/// The two devices: the area written (`false`), or the address in the
/// completion (`true`).
const DEVICES: [bool; 2] = [false, true];

#[test]
fn infiniband_with_and_without_grh() {
    for (mode, dev) in [Mode::Libibverbs, Mode::Kernel].into_iter().flat_map(|m| DEVICES.map(|d| (m, d))) {
        let f = Fabric::new(1);
        let q = Quirks { gid_in_completion: dev, ..Quirks::default() };
        let r = f.add_port(PortConfig::ib(1, 0x0002_c903_0011_2233).with_lmc(1).with_quirks(q));
        let rgid = f.gids(r)[0].1.gid;
        let mut resp = Responder::new(&f, r, QKEY, mode).unwrap();
        let mut peers = Vec::new();
        for (k, lid) in [(0u64, 4u16), (1, 8), (2, 12)] {
            let p = f.add_port(PortConfig::ib(lid, 0x0002_c903_0000_0100 + k).with_lmc(2));
            peers.push(peer(&f, p, 1, None, 0, 0));
            peers.push(peer(&f, p, 2, Some((0, rgid)), 0x20, 0x12345));
        }
        let failures = exchange(&f, &mut resp, &peers, 3);
        assert!(failures.is_empty(), "{mode:?} {dev}: {failures:?}");
        assert_eq!(f.counters().dropped_no_route, 0);
    }
}

#[test]
fn roce_v2_ipv4_ipv6_and_v1_all_modes() {
    let fills = [FrontFill::Zero, FrontFill::Stale, FrontFill::Random];
    for mode in [Mode::Libibverbs, Mode::LibibverbsStamped, Mode::Kernel, Mode::LibibverbsMlx5Sl] {
        for (fill, dev) in fills.into_iter().flat_map(|f| DEVICES.map(|d| (f, d))) {
            let quirks = Quirks {
                front_fill: fill,
                report_network_type: true,
                mlx5_sl_packet_type: mode == Mode::LibibverbsMlx5Sl && !dev,
                gid_in_completion: dev,
                ..Quirks::default()
            };
            let (f, r, ps) = roce_fabric(quirks);
            let v6: Gid = "2001:db8::1".parse::<core::net::Ipv6Addr>().unwrap().into();
            let ll = Gid::link_local_from_mac([0x02, 0, 0, 0, 0, 1]);
            let mut resp = Responder::new(&f, r, QKEY, mode).unwrap();
            let mut peers = Vec::new();
            for (p, _, _) in &ps {
                peers.push(peer(&f, *p, 0, Some((3, Gid::from_ipv4([10, 0, 0, 1]))), 0x68, 0));
                peers.push(peer(&f, *p, 0, Some((5, v6)), 0xb8, 0xabcde));
                peers.push(peer(&f, *p, 0, Some((0, ll)), 0, 7)); // RoCE v1 link-local
            }
            let failures = exchange(&f, &mut resp, &peers, 4);
            // Stale fronts after IPv6 packets look like IPv6 headers; only the
            // libibverbs heuristic can then be fooled, and only through its
            // single-fold checksum; every other mode must answer everything.
            if mode != Mode::Libibverbs || dev {
                assert!(failures.is_empty(), "{mode:?} {fill:?} {dev}: {failures:?}");
            }
            assert_eq!(f.counters().dropped_mac + f.counters().dropped_vlan, 0);
            if fill == FrontFill::Zero {
                // Identical attributes share one AH; with undefined front
                // bytes the flow label of IPv4 requests varies (SEMANTICS Q3).
                assert!(resp.ahs_created() <= peers.len());
            }
        }
    }
}

#[test]
fn libibverbs_heuristic_fails_only_through_the_single_fold_quirk() {
    let quirks = Quirks { front_fill: FrontFill::Ipv6Looking, ..Quirks::default() };
    let (f, r, ps) = roce_fabric(quirks);
    let mut resp = Responder::new(&f, r, QKEY, Mode::Libibverbs).unwrap();
    let mut peers = Vec::new();
    for (p, _, _) in &ps {
        // Different TOS values shift the checksum so that some headers hit the carry.
        for tos in [0u8, 0x04, 0x28, 0x68, 0xb8, 0xfc] {
            peers.push(peer(&f, *p, 0, Some((3, Gid::from_ipv4([10, 0, 0, 1]))), tos, 0));
        }
    }
    let resp_qpn = resp.qpn();
    let mut answered = 0;
    let mut quirk_failures = 0;
    for round in 0..50u32 {
        for p in &peers {
            f.post_send(p.qpn, p.ah, resp_qpn, QKEY, &round.to_be_bytes()).unwrap();
        }
        while let Some(msg) = f.poll(resp_qpn) {
            match resp.reply(&msg, &msg.payload.clone()) {
                Ok(_) => answered += 1,
                Err(e) => {
                    let h = ipv4::header(&msg.area);
                    assert_eq!(grh::version(&msg.area), 6);
                    assert!(ipv4::verify_rfc1071(h) && !ipv4::verify_libibverbs(h), "unexpected failure {e}");
                    quirk_failures += 1;
                }
            }
        }
        for p in &peers {
            while f.poll(p.qpn).is_some() {}
        }
    }
    assert!(answered > 0);
    eprintln!("libibverbs heuristic: {answered} answered, {quirk_failures} lost to the single-fold checksum");
}

#[test]
fn vlan_and_duplicate_addresses() {
    // The responder has 10.0.100.1 untagged at 2/3 and on VLAN 100 at 4/5; the peer is on VLAN 100.
    let f = Fabric::new(3);
    let addr = [10, 0, 100, 1];
    let r = f.add_port(PortConfig::roce([0x02, 0, 0, 0, 1, 1]).with_ipv4(addr).with_vlan_ipv4(addr, 100));
    let p = f.add_port(PortConfig::roce([0x02, 0, 0, 0, 1, 2]).with_vlan_ipv4([10, 0, 100, 2], 100));
    let quirks_peer = peer(&f, p, 0, Some((3, Gid::from_ipv4(addr))), 0, 0);
    // The peer's packets reach the responder's VLAN entry.
    let mut kernel = Responder::new(&f, r, QKEY, Mode::Kernel).unwrap();
    let failures = exchange(&f, &mut kernel, core::slice::from_ref(&quirks_peer), 3);
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(f.counters().dropped_vlan, 0);
    // libibverbs ignores the VLAN and picks the lowest index, the untagged
    // duplicate (SEMANTICS Q11): its replies leave untagged and are dropped.
    let mut lib = Responder::new(&f, r, QKEY, Mode::Libibverbs).unwrap();
    f.post_send(quirks_peer.qpn, quirks_peer.ah, lib.qpn(), QKEY, b"x").unwrap();
    let msg = f.poll(lib.qpn()).unwrap();
    let attr = lib.reply(&msg, b"y").unwrap();
    assert_eq!(attr.grh.unwrap().sgid_index, 3);
    assert_eq!(f.counters().dropped_vlan, 1);
    assert!(f.poll(quirks_peer.qpn).is_none());
}

#[test]
fn gid_change_retires_the_address() {
    let (f, r, ps) = roce_fabric(Quirks::default());
    let mut resp = Responder::new(&f, r, QKEY, Mode::Kernel).unwrap();
    let p = peer(&f, ps[0].0, 0, Some((3, Gid::from_ipv4([10, 0, 0, 1]))), 0, 0);
    assert!(exchange(&f, &mut resp, core::slice::from_ref(&p), 1).is_empty());
    // The RoCE v2 entry goes; the NIC still accepts the address (its v1 entry).
    assert!(f.set_gid(r, 5, None));
    assert_eq!(f.next_event(r.device), Some(udah_hal_mock::AsyncEvent::GidChange(r)));
    f.post_send(p.qpn, p.ah, resp.qpn(), QKEY, b"again").unwrap();
    let msg = f.poll(resp.qpn()).expect("delivered");
    // The responder sees the new generation, re-snapshots, and no longer has a v2 entry.
    assert_eq!(resp.reply(&msg, b"x").unwrap_err(), ReplyError::Kernel(udah_core::KernelError::GidNotFound));
    // Without any entry for the address the packet is not delivered at all.
    assert!(f.set_gid(r, 4, None));
    f.post_send(p.qpn, p.ah, resp.qpn(), QKEY, b"again").unwrap();
    assert!(f.poll(resp.qpn()).is_none());
    assert_eq!(f.counters().dropped_no_route, 1);
}

#[test]
fn scenario_with_every_family_answers_every_request() {
    use udah_hal_mock::scenario::{Family, Scenario};
    for mode in [Mode::Kernel, Mode::LibibverbsStamped, Mode::Libibverbs] {
        for quirks in [
            Quirks { front_fill: FrontFill::Random, report_network_type: true, ..Quirks::default() },
            Quirks { front_fill: FrontFill::Zero, irdma_zero_ipv4_checksum: true, ..Quirks::default() },
            Quirks::gid_in_completion(),
        ] {
            let s = Scenario::build(5, &Family::ALL, 48, quirks).unwrap();
            let mut ib = Responder::new(&s.fabric, s.ib_port, s.qkey, mode).unwrap();
            let mut roce = Responder::new(&s.fabric, s.roce_port, s.qkey, mode).unwrap();
            let sent = s.send_requests(ib.qpn(), roce.qpn(), 3);
            assert_eq!(sent, 48 * 3);
            let (a, fa) = ib.serve_pending();
            let (b, fb) = roce.serve_pending();
            let (got, wrong) = s.collect_replies();
            assert_eq!(wrong, 0, "{mode:?}: a reply reached the wrong QP");
            let vlan_requests = s.peers.iter().filter(|p| p.family == Family::RoceV2Vlan).count() * 3;
            let dropped_vlan = s.fabric.counters().dropped_vlan as usize;
            if mode == Mode::Kernel {
                assert!(fa.is_empty() && fb.is_empty(), "{mode:?} {quirks:?}: {fa:?} {fb:?}");
                assert_eq!((a + b, got, dropped_vlan), (sent, sent, 0), "{mode:?} {quirks:?}");
            } else {
                // libibverbs ignores the VLAN and answers VLAN peers from the
                // untagged duplicate of the address (SEMANTICS Q11): the
                // switch drops exactly those replies.
                assert_eq!(dropped_vlan, vlan_requests, "{mode:?} {quirks:?}");
                assert_eq!(got, a + b - dropped_vlan);
                if mode == Mode::LibibverbsStamped {
                    assert!(fa.is_empty() && fb.is_empty(), "{mode:?} {quirks:?}: {fa:?} {fb:?}");
                }
            }
        }
    }
}

#[test]
fn pkeys_admit_full_members_only() {
    // Port P_Key tables: index 0 the default full member, 1 a limited 0x1234, 2 a full 0x9234.
    let pkeys = vec![0xffff, 0x1234, 0x9234];
    let f = Fabric::new(11);
    let r = f.add_port(PortConfig::ib(1, 0x0002_c903_0000_0001).with_pkeys(pkeys.clone()));
    let p = f.add_port(PortConfig::ib(2, 0x0002_c903_0000_0002).with_pkeys(pkeys));
    let hal = MockHal::new(&f, p.device);
    let attr = AhAttr {
        port: PortNum::new(1).unwrap(),
        dlid: 1,
        sl: Sl::default(),
        src_path_bits: 0,
        static_rate: 0,
        grh: None,
    };
    let ah = hal.create_ah(&attr, None).unwrap();
    let recv_limited = f.create_qp_with_pkey(r, QKEY, 1).unwrap();
    let recv_full = f.create_qp_with_pkey(r, QKEY, 2).unwrap();
    let send_limited = f.create_qp_with_pkey(p, QKEY, 1).unwrap();
    let send_full = f.create_qp_with_pkey(p, QKEY, 2).unwrap();
    assert!(f.create_qp_with_pkey(p, QKEY, 3).is_none(), "no P_Key at index 3");
    // limited -> limited: dropped; limited -> full and full -> limited: delivered.
    f.post_send(send_limited, ah, recv_limited, QKEY, b"a").unwrap();
    assert!(f.poll(recv_limited).is_none());
    assert_eq!(f.counters().dropped_pkey, 1);
    f.post_send(send_limited, ah, recv_full, QKEY, b"b").unwrap();
    let m = f.poll(recv_full).expect("limited to full member is delivered");
    assert_eq!(m.wc.ibv.pkey_index, 2, "the receiver's P_Key index");
    f.post_send(send_full, ah, recv_limited, QKEY, b"c").unwrap();
    assert_eq!(f.poll(recv_limited).map(|m| m.wc.ibv.pkey_index), Some(1));
}

/// The completion-borne-address device really leaves the area alone (the
/// responder reads the address from the completion), and for requests whose
/// traffic class and flow label are 0 (what the completion does not carry)
/// both profiles answer with the attribute the area-writing device (zeros in
/// the undefined IPv4 front) gets. (With a stamp, libibverbs takes an IPv4
/// request's flow label from the stamp's bytes, SEMANTICS Q3; a completion's
/// address has none, so its flow label is 0 there.)
#[test]
fn the_completion_address_device_gives_the_area_devices_attributes() {
    let v6: Gid = "2001:db8::1".parse::<core::net::Ipv6Addr>().unwrap().into();
    let ll = Gid::link_local_from_mac([0x02, 0, 0, 0, 0, 1]);
    for mode in [Mode::Libibverbs, Mode::Kernel] {
        let mut attrs: Vec<Vec<AhAttr>> = Vec::new();
        for dev in DEVICES {
            let quirks = Quirks { gid_in_completion: dev, report_network_type: true, ..Quirks::default() };
            let (f, r, ps) = roce_fabric(quirks);
            let mut resp = Responder::new(&f, r, QKEY, mode).unwrap();
            let mut got = Vec::new();
            for (p, _, _) in &ps {
                for to in [(3, Gid::from_ipv4([10, 0, 0, 1])), (5, v6), (0, ll)] {
                    let peer = peer(&f, *p, 0, Some(to), 0, 0);
                    f.post_send(peer.qpn, peer.ah, resp.qpn(), QKEY, b"x").unwrap();
                    let msg = f.poll(resp.qpn()).expect("the request arrived");
                    assert_eq!(msg.source.is_some(), dev);
                    if dev {
                        assert_eq!(msg.area, [udah_hal_mock::GID_IN_COMPLETION_FILL; 40], "the area is not written");
                    }
                    got.push(resp.reply_attr(&msg).unwrap_or_else(|e| panic!("{mode:?} {dev}: {e}")));
                }
            }
            attrs.push(got);
        }
        assert_eq!(attrs[0].len(), 12);
        assert_eq!(attrs[0], attrs[1], "{mode:?}");
    }
}
