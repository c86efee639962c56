//! Hardware tests of extended CQs (`ibv_create_cq_ex` and the poll cursor):
//! real or Soft-RoCE devices only, all `#[ignore]`d; run as `hardware.rs`:
//!
//! ```text
//! UDAH_TEST_DEVICE=rxe0 cargo test -p udah-hal-ibverbs --test hardware_cq_ex -- --ignored --test-threads=1
//! ```
//!
//! Without `UDAH_TEST_DEVICE` (or with a device that is not usable) every
//! test fails: none passes having tested nothing.

use core::time::Duration;
use std::time::Instant;

use udah_core::ah::{AhAttr, Completion, FlowLabel, GlobalRoute, PortNum, Sl, libibverbs};
use udah_core::hal::Hal;
use udah_core::wire::AREA_LEN;
use udah_core::{GidTable, LinkLayer};
use udah_hal_ibverbs::verbs::{
    WC_EX_UD_FIELDS, WC_EX_WITH_COMPLETION_TIMESTAMP, WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, WC_EX_WITH_SL,
};
use udah_hal_ibverbs::{CqEx, ExCompletion, GidKind, IbverbsHal, QpCaps, Segment, UdDest, UdQp, WcOpcode, WcStatus};

const QKEY: u32 = 0x1111_1111;

fn open() -> IbverbsHal {
    let dev = match std::env::var("UDAH_TEST_DEVICE") {
        Ok(d) if !d.is_empty() => d,
        _ => panic!("set UDAH_TEST_DEVICE to an RDMA device (e.g. rxe0) to run the hardware tests"),
    };
    IbverbsHal::open_port(Some(&dev), port()).unwrap_or_else(|e| panic!("UDAH_TEST_DEVICE={dev} is not usable: {e}"))
}

fn port() -> u8 {
    std::env::var("UDAH_TEST_PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(1)
}

fn self_attr(hal: &IbverbsHal) -> AhAttr {
    let port_num = PortNum::new(port()).unwrap();
    let info = hal.port_info(port_num).unwrap();
    let gids = hal.port_gids(port()).unwrap();
    let e = gids.entries.iter().find(|g| g.record.kind == GidKind::RoceV2).or(gids.entries.first()).unwrap();
    AhAttr {
        port: port_num,
        dlid: info.lid,
        sl: Sl::new(0).unwrap(),
        src_path_bits: 0,
        static_rate: 0,
        grh: Some(GlobalRoute {
            dgid: e.record.gid,
            flow_label: FlowLabel::new(0).unwrap(),
            sgid_index: u8::try_from(e.record.index).unwrap(),
            hop_limit: 64,
            traffic_class: 0,
        }),
    }
}

/// Polls `cq` until a receive completion: the cursor's `Completion` view
/// (read inside the poll) and the whole completion.
fn wait_recv(cq: &mut CqEx) -> (udah_core::ah::IbvWc, ExCompletion) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut cur = cq.start_poll().unwrap();
        while let Some(c) = cur {
            let full = c.read();
            if full.wc.opcode == WcOpcode::Recv {
                assert_eq!(full.wc.status, WcStatus::Success, "{full:?}");
                return (c.ibv(), full);
            }
            cur = c.advance().unwrap();
        }
        assert!(Instant::now() < deadline, "no receive completion within 5 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
#[ignore = "needs an RDMA device named by UDAH_TEST_DEVICE"]
fn cq_ex_loopback_matches_libibverbs() {
    let hal = open();
    let ctx = hal.context();
    let made = ctx.create_cq_ex_best(16).expect("the device creates an extended CQ with the UD fields");
    for (flags, e) in &made.refused {
        eprintln!("ibv_create_cq_ex refused wc_flags {flags:#x}: {e}");
    }
    let mut rcq = made.cq;
    eprintln!(
        "extended CQ: wc_flags {:#x}, completion timestamp {}, wall clock {}",
        rcq.wc_flags(),
        rcq.has_completion_ts(),
        rcq.has_wallclock()
    );
    assert_eq!(rcq.wc_flags() & WC_EX_UD_FIELDS, WC_EX_UD_FIELDS);
    let scq = ctx.create_cq(16).unwrap();
    let qp = UdQp::create(hal.pd(), &scq, rcq.cq(), QpCaps { max_send_wr: 4, max_recv_wr: 4 }).unwrap();
    qp.to_rts(port(), 0, QKEY).unwrap();
    let mut mr = hal.pd().reg_mr(4096).unwrap();
    let payload = b"udah cq_ex loopback";
    mr.write(2048, payload).unwrap();
    qp.post_recv(Segment { mr: &mr, offset: 0, len: 1024 }, 7).unwrap();
    let attr = self_attr(&hal);
    let ah = hal.create_ah(&attr, None).unwrap();
    let dest = UdDest { qpn: qp.qp_num(), qkey: QKEY };
    hal.post_send(&qp, ah, dest, Segment { mr: &mr, offset: 2048, len: payload.len() as u32 }, 2).unwrap();
    let (view, full) = wait_recv(&mut rcq);
    assert_eq!(full.wc.wr_id, 7);
    assert_eq!(full.wc.byte_len as usize, AREA_LEN + payload.len());
    assert_eq!((full.wc.src_qp, full.wc.qp_num), (qp.qp_num(), qp.qp_num()));
    assert_eq!(view, full.wc.ibv());
    assert_eq!(full.completion_ts.is_some(), rcq.has_completion_ts());
    assert_eq!(full.wallclock_ns.is_some(), rcq.has_wallclock());
    let mut area = [0u8; AREA_LEN];
    mr.read(0, &mut area).unwrap();
    let mut table: Box<GidTable<1024>> = Box::new(GidTable::new(port(), LinkLayer::Infiniband, 0));
    hal.snapshot_gids(PortNum::new(port()).unwrap(), &mut table).unwrap();
    let ours = libibverbs::init_ah_from_wc(&table, port(), &view, Some(&area)).expect("core resolves the WC");
    let theirs = ctx.init_ah_from_wc(port(), &full.wc, &area).expect("libibverbs resolves the WC");
    assert_eq!(ours, theirs, "udah (read through the cq_ex readers) against ibv_init_ah_from_wc");
    hal.destroy_ah(ah).unwrap();
}

/// The C API's EINVAL for a field the CQ was not created with rests on the
/// provider leaving that reader NULL: checked here on the device.
#[test]
#[ignore = "needs an RDMA device named by UDAH_TEST_DEVICE"]
fn unrequested_fields_have_no_reader() {
    let hal = open();
    let ctx = hal.context();
    let cq = ctx.create_cq_ex(16, WC_EX_UD_FIELDS & !WC_EX_WITH_SL).expect("an extended CQ without SL");
    assert!(!cq.has_completion_ts() && !cq.has_wallclock());
    let scq = ctx.create_cq(16).unwrap();
    let mut cq = cq;
    let qp = UdQp::create(hal.pd(), &scq, cq.cq(), QpCaps { max_send_wr: 4, max_recv_wr: 4 }).unwrap();
    qp.to_rts(port(), 0, QKEY).unwrap();
    let mut mr = hal.pd().reg_mr(4096).unwrap();
    mr.write(2048, b"x").unwrap();
    qp.post_recv(Segment { mr: &mr, offset: 0, len: 1024 }, 1).unwrap();
    let ah = hal.create_ah(&self_attr(&hal), None).unwrap();
    let dest = UdDest { qpn: qp.qp_num(), qkey: QKEY };
    hal.post_send(&qp, ah, dest, Segment { mr: &mr, offset: 2048, len: 1 }, 2).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let c = loop {
        if let Some(c) = cq.start_poll().unwrap() {
            break c;
        }
        assert!(Instant::now() < deadline, "no receive completion within 5 s");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(c.status(), WcStatus::Success);
    assert_eq!(c.sl(), None, "SL was not requested: the provider must leave its reader NULL");
    assert!(c.slid().is_some() && c.src_qp().is_some() && c.wc_flags().is_some());
    assert_eq!(c.completion_ts_raw(), None);
    drop(c);
    hal.destroy_ah(ah).unwrap();
    // And the timestamp flags, one by one: reported, not asserted (a device
    // may refuse either).
    for (name, f) in [
        ("IBV_WC_EX_WITH_COMPLETION_TIMESTAMP", WC_EX_WITH_COMPLETION_TIMESTAMP),
        ("IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK", WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK),
    ] {
        match ctx.create_cq_ex(16, WC_EX_UD_FIELDS | f) {
            Ok(_) => eprintln!("cq_ex timestamps: {name}: accepted"),
            Err(e) => eprintln!("cq_ex timestamps: {name}: refused ({e})"),
        }
    }
}
