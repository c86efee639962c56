//! Hardware tests: real or Soft-RoCE devices only. All `#[ignore]`; run with
//!
//! ```text
//! UDAH_TEST_DEVICE=rxe0 [UDAH_TEST_PORT=1] \
//!     cargo test -p udah-hal-ibverbs --test hardware -- --ignored --test-threads=1
//! ```
//!
//! A test run without `UDAH_TEST_DEVICE`, or with a device that is missing
//! or whose port is down, fails loudly: a hardware test never passes having
//! tested nothing.

use core::time::Duration;
use std::time::Instant;

use udah_core::ah::{AhAttr, FlowLabel, GlobalRoute, PortNum, Sl, libibverbs};
use udah_core::hal::Hal;
use udah_core::wire::AREA_LEN;
use udah_core::{GidTable, GidType, LinkLayer};
use udah_hal_ibverbs::{
    AddressHandle, DeviceList, GidKind, IbverbsHal, QpCaps, Segment, UdDest, UdQp, VerbsError, WcOpcode, WcStatus,
    WorkCompletion,
};

const QKEY: u32 = 0x1111_1111;

fn device() -> String {
    match std::env::var("UDAH_TEST_DEVICE") {
        Ok(d) if !d.is_empty() => d,
        _ => panic!("set UDAH_TEST_DEVICE to an RDMA device (e.g. rxe0, see hardware.md) to run the hardware tests"),
    }
}

fn port() -> u8 {
    std::env::var("UDAH_TEST_PORT").ok().and_then(|p| p.parse().ok()).unwrap_or(1)
}

fn port_num() -> PortNum {
    PortNum::new(port()).expect("UDAH_TEST_PORT is not 0")
}

fn open() -> IbverbsHal {
    let dev = device();
    IbverbsHal::open_port(Some(&dev), port())
        .unwrap_or_else(|e| panic!("UDAH_TEST_DEVICE={dev} is named but not usable: {e}"))
}

/// The source GID index a loopback uses: the first RoCE v2 entry, else the
/// first entry.
fn sgid_index(hal: &IbverbsHal) -> u32 {
    let gids = hal.port_gids(port()).expect("GID table");
    let e = gids.entries.iter().find(|g| g.record.kind == GidKind::RoceV2).or(gids.entries.first());
    e.expect("the port has at least one GID").record.index
}

fn self_attr(hal: &IbverbsHal) -> AhAttr {
    let info = hal.port_info(port_num()).unwrap();
    let idx = sgid_index(hal);
    let gid = hal.port_gids(port()).unwrap().entries.iter().find(|g| g.record.index == idx).unwrap().record.gid;
    AhAttr {
        port: port_num(),
        dlid: info.lid,
        sl: Sl::new(0).unwrap(),
        src_path_bits: 0,
        static_rate: 0,
        grh: Some(GlobalRoute {
            dgid: gid,
            flow_label: FlowLabel::new(0).unwrap(),
            sgid_index: u8::try_from(idx).unwrap(),
            hop_limit: 64,
            traffic_class: 0,
        }),
    }
}

#[test]
#[ignore = "needs an RDMA device named by UDAH_TEST_DEVICE"]
fn device_and_port() {
    let dev = device();
    let list = DeviceList::new().unwrap_or_else(|e| panic!("UDAH_TEST_DEVICE={dev}: {e}"));
    assert!(list.names().contains(&dev), "device {dev} not in {:?}", list.names());
    let hal = open();
    let attr = hal.context().query_device().unwrap();
    assert!(attr.phys_port_cnt >= port());
    let p = hal.port_attr(port()).unwrap();
    assert!(p.state.is_active());
    assert!(p.link_layer.to_core().is_some(), "{:?}", p.link_layer);
    assert!(p.gid_tbl_len > 0);
    let err = hal.port_attr(attr.phys_port_cnt.saturating_add(1)).unwrap_err();
    assert!(matches!(err, VerbsError::PortNotFound { .. }), "{err:?}");
}

#[test]
#[ignore = "needs an RDMA device named by UDAH_TEST_DEVICE"]
fn gid_snapshot_matches_per_index_queries() {
    let hal = open();
    let gids = hal.port_gids(port()).unwrap();
    assert!(!gids.entries.is_empty());
    for g in &gids.entries {
        let one = hal.context().query_gid_ex(port(), g.record.index).unwrap().expect("entry present");
        assert_eq!(one, g.record);
    }
    let mut table: Box<GidTable<1024>> = Box::new(GidTable::new(port(), LinkLayer::Infiniband, 0));
    hal.snapshot_gids(port_num(), &mut table).unwrap();
    assert_eq!(table.generation(), hal.gid_generation(port_num()));
    assert_eq!(
        table.entries() as usize,
        gids.entries.iter().filter(|g| GidType::try_from(g.record.kind).is_ok()).count()
    );
    let before = hal.gid_generation(port_num());
    hal.refresh(port()).unwrap();
    assert_eq!(hal.gid_generation(port_num()), before + 1);
}

#[test]
#[ignore = "needs an RDMA device named by UDAH_TEST_DEVICE"]
fn ah_create_and_destroy() {
    let hal = open();
    let attr = self_attr(&hal);
    let ah = hal.create_ah(&attr, None).unwrap();
    assert_eq!(hal.stats().live_ahs, 1);
    hal.destroy_ah(ah).unwrap();
    assert!(matches!(hal.destroy_ah(ah), Err(VerbsError::UnknownAh(_))));
    let explicit = AddressHandle::create(hal.pd(), &attr).unwrap();
    assert_eq!(explicit.attr(), &attr);
    explicit.destroy().unwrap();
    drop(AddressHandle::create(hal.pd(), &attr).unwrap());
    assert_eq!(udah_hal_ibverbs::teardown_failures(), 0);
}

fn wait(cq: &udah_hal_ibverbs::Cq, opcode: WcOpcode) -> WorkCompletion {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    loop {
        cq.poll(&mut out).unwrap();
        if let Some(wc) = out.iter().find(|w| w.opcode == opcode) {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            return *wc;
        }
        assert!(Instant::now() < deadline, "no {opcode} completion within 5 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
#[ignore = "needs an RDMA device named by UDAH_TEST_DEVICE"]
fn ud_loopback_resolves_through_the_core() {
    let hal = open();
    hal.start_event_listener().unwrap();
    let ctx = hal.context();
    let (scq, rcq) = (ctx.create_cq(16).unwrap(), ctx.create_cq(16).unwrap());
    let qp = UdQp::create(hal.pd(), &scq, &rcq, QpCaps { max_send_wr: 4, max_recv_wr: 4 }).unwrap();
    qp.to_rts(port(), 0, QKEY).unwrap();
    let mut mr = hal.pd().reg_mr(4096).unwrap();
    let payload = b"udah loopback";
    mr.write(2048, payload).unwrap();
    qp.post_recv(Segment { mr: &mr, offset: 0, len: 1024 }, 1).unwrap();
    let attr = self_attr(&hal);
    let ah = hal.create_ah(&attr, None).unwrap();
    let dest = UdDest { qpn: qp.qp_num(), qkey: QKEY };
    hal.post_send(&qp, ah, dest, Segment { mr: &mr, offset: 2048, len: payload.len() as u32 }, 2).unwrap();
    wait(&scq, WcOpcode::Send);
    let wc = wait(&rcq, WcOpcode::Recv);
    assert_eq!(wc.byte_len as usize, AREA_LEN + payload.len());
    assert_eq!(wc.src_qp, qp.qp_num());
    let mut area = [0u8; AREA_LEN];
    mr.read(0, &mut area).unwrap();
    let mut got = vec![0u8; payload.len()];
    mr.read(AREA_LEN, &mut got).unwrap();
    assert_eq!(&got, payload);
    let mut table: Box<GidTable<1024>> = Box::new(GidTable::new(port(), LinkLayer::Infiniband, 0));
    hal.snapshot_gids(port_num(), &mut table).unwrap();
    let reply = libibverbs::init_ah_from_wc(&table, port(), &wc.ibv(), Some(&area)).expect("core resolves the WC");
    let reply = AhAttr::try_from(&reply).unwrap();
    // The reply goes back to ourselves: same GID (GRH) and, on IB, same LID.
    assert_eq!(reply.grh.map(|g| g.dgid), attr.grh.map(|g| g.dgid));
    if table.link_layer() == LinkLayer::Infiniband {
        assert_eq!(reply.dlid, attr.dlid);
    }
    let back = hal.create_ah(&reply, None).unwrap();
    qp.post_recv(Segment { mr: &mr, offset: 0, len: 1024 }, 3).unwrap();
    hal.post_send(&qp, back, dest, Segment { mr: &mr, offset: 2048, len: payload.len() as u32 }, 4).unwrap();
    wait(&rcq, WcOpcode::Recv);
    hal.destroy_ah(back).unwrap();
    hal.destroy_ah(ah).unwrap();
}

/// N threads send through one backend and one shared AH (each on its own QP
/// and CQ) while the main thread keeps creating and destroying other AHs:
/// every send completes, nothing leaks. With the old backend every post
/// serialised on one mutex (shared with create/destroy); now a post takes no
/// lock (see `slots.rs` for the unit test that fails if one returns).
#[test]
#[ignore = "needs an RDMA device named by UDAH_TEST_DEVICE"]
fn n_threads_send_through_one_backend() {
    const THREADS: usize = 4;
    const SENDS: u64 = 200;
    let hal = std::sync::Arc::new(open());
    let attr = self_attr(&hal);
    let shared = hal.create_ah(&attr, None).unwrap();
    let stop = std::sync::Arc::new(core::sync::atomic::AtomicBool::new(false));
    let mut threads = Vec::new();
    for t in 0..THREADS {
        let hal = hal.clone();
        threads.push(std::thread::spawn(move || {
            let ctx = hal.context();
            let (scq, rcq) = (ctx.create_cq(16).unwrap(), ctx.create_cq(16).unwrap());
            let qp = UdQp::create(hal.pd(), &scq, &rcq, QpCaps { max_send_wr: 4, max_recv_wr: 4 }).unwrap();
            qp.to_rts(port(), 0, QKEY).unwrap();
            let mut mr = hal.pd().reg_mr(256).unwrap();
            mr.write(0, format!("thread {t}").as_bytes()).unwrap();
            // To our own QP with no receive posted: the receiver drops it,
            // the send still completes.
            let dest = UdDest { qpn: qp.qp_num(), qkey: QKEY };
            for i in 0..SENDS {
                hal.post_send(&qp, shared, dest, Segment { mr: &mr, offset: 0, len: 16 }, i).unwrap();
                let wc = wait(&scq, WcOpcode::Send);
                assert_eq!(wc.wr_id, i);
            }
            SENDS
        }));
    }
    let churn = {
        let (hal, stop) = (hal.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(core::sync::atomic::Ordering::Relaxed) {
                let ah = hal.create_ah(&attr, None).unwrap();
                hal.destroy_ah(ah).unwrap();
                n += 1;
            }
            n
        })
    };
    let sent: u64 = threads.into_iter().map(|h| h.join().unwrap()).sum();
    stop.store(true, core::sync::atomic::Ordering::Relaxed);
    let churned = churn.join().unwrap();
    assert_eq!(sent, THREADS as u64 * SENDS);
    assert!(churned > 0);
    hal.destroy_ah(shared).unwrap();
    assert_eq!(hal.stats().live_ahs, 0);
    assert!(hal.ah_capacity() >= 1);
    println!("n_threads_send_through_one_backend: {sent} sends on {THREADS} threads, {churned} AH create/destroy");
}

/// An application's own context and PD, borrowed by udah: AHs udah creates
/// live on the application's PD (a QP of the application on that PD sends
/// through them), and after the backend is dropped the application still
/// uses, deallocates and closes its objects successfully.
#[test]
#[ignore = "needs an RDMA device named by UDAH_TEST_DEVICE"]
#[allow(unsafe_code)]
fn borrowed_context_and_pd() {
    use rdma_mummy_sys as sys;
    let dev = device();
    let mut n = 0;
    // SAFETY: `n` is writable; the list is freed below.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    assert!(!list.is_null(), "ibv_get_device_list");
    // SAFETY: `list` holds `n` device pointers.
    let devs = unsafe { core::slice::from_raw_parts(list, usize::try_from(n).unwrap()) };
    let d = devs
        .iter()
        .copied()
        .find(|&d| {
            // SAFETY: `d` is a device of the live list.
            let p = unsafe { sys::ibv_get_device_name(d) };
            // SAFETY: a device's name is a NUL-terminated string in it.
            let name = unsafe { core::ffi::CStr::from_ptr(p) };
            name.to_str() == Ok(dev.as_str())
        })
        .expect("device in the list");
    // SAFETY: `d` is a device of the live list.
    let ctx = unsafe { sys::ibv_open_device(d) };
    // SAFETY: the list is not used after this (the context stays valid).
    unsafe { sys::ibv_free_device_list(list) };
    assert!(!ctx.is_null());
    // SAFETY: `ctx` is open.
    let pd = unsafe { sys::ibv_alloc_pd(ctx) };
    assert!(!pd.is_null());
    {
        // SAFETY: `ctx` and `pd` stay valid until after this block, which
        // drops the backend and everything made through it.
        let hal = unsafe { IbverbsHal::from_raw_borrowed(ctx, pd, port()) }.unwrap();
        assert_eq!(hal.pd().as_raw(), pd);
        assert!(!hal.context().is_owned() && !hal.pd().is_owned());
        let cq = hal.context().create_cq(4).unwrap();
        let qp = UdQp::create(hal.pd(), &cq, &cq, QpCaps { max_send_wr: 2, max_recv_wr: 2 }).unwrap();
        qp.to_rts(port(), 0, QKEY).unwrap();
        let mr = hal.pd().reg_mr(64).unwrap();
        let ah = hal.create_ah(&self_attr(&hal), None).unwrap();
        hal.post_send(&qp, ah, UdDest { qpn: qp.qp_num(), qkey: QKEY }, Segment { mr: &mr, offset: 0, len: 8 }, 1)
            .unwrap();
        wait(&cq, WcOpcode::Send);
        // The AH is left alive: dropping the backend destroys it (on the
        // application's PD), not the PD.
        // SAFETY: as above (refused before anything is kept).
        let bad = unsafe { IbverbsHal::from_raw_borrowed(ctx, pd, 0) };
        assert!(matches!(bad, Err(VerbsError::PortNotFound { .. })), "{bad:?}");
    }
    // The application's PD is still allocated (udah did not free it) and
    // empty (udah destroyed its AH, QP and MR: else EBUSY).
    // SAFETY: `pd` is live and unused by anything else now.
    assert_eq!(unsafe { sys::ibv_dealloc_pd(pd) }, 0, "udah left the PD allocated and empty");
    // SAFETY: `ctx` is open and has no children left.
    assert_eq!(unsafe { sys::ibv_close_device(ctx) }, 0, "udah left the context open");
    assert_eq!(udah_hal_ibverbs::teardown_failures(), 0);
}
