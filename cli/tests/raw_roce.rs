//! `udah_cli::raw_roce` against frames a real NIC sent: the ICRCs of the
//! shared ConnectX capture (`shared/data/captures`, an optional extra), and
//! its first UD SEND Only rebuilt from its fields byte for byte.

mod common;

use udah_cli::raw_roce::{HEADERS_LEN, ICRC_LEN, UdSendV4, icrc_ok};

/// The records of a little-endian microsecond pcap, in order.
fn pcap_frames(d: &[u8]) -> Vec<&[u8]> {
    let mut v = Vec::new();
    let mut off = 24;
    while let Some(h) = d.get(off..off + 16) {
        let cl = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
        let Some(f) = d.get(off + 16..off + 16 + cl) else { break };
        v.push(f);
        off += 16 + cl;
    }
    v
}

#[test]
fn connectx_capture_icrcs_are_reproduced() {
    let Some(shared) = common::shared_extra("connectx_capture_icrcs_are_reproduced") else { return };
    let path = shared.join("data/captures/rocev2-ipv4-ud-cm-send.pcap");
    let d = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let frames = pcap_frames(&d);
    // Five UD SEND Only (RDMA-CM) and four RC packets, each with its ICRC.
    assert_eq!(frames.len(), 9);
    for (i, f) in frames.iter().enumerate() {
        assert!(icrc_ok(f), "frame {}", i + 1);
    }
    // The first, a ConnectRequest from 172.17.242.47 to QP1 of
    // 172.17.242.56, rebuilt from its fields and its MAD.
    let f = frames[0];
    let send = UdSendV4 {
        dst_mac: [0x08, 0xc0, 0xeb, 0xda, 0xe2, 0xca],
        src_mac: [0x08, 0xc0, 0xeb, 0xda, 0xe2, 0xe6],
        src_ip: [172, 17, 242, 47],
        dst_ip: [172, 17, 242, 56],
        tos: 0x02,
        ttl: 64,
        ip_id: 0x4804,
        udp_src: 0xf412,
        mig_req: true,
        pkey: 0xffff,
        dst_qpn: 1,
        psn: 9,
        qkey: 0x8001_0000,
        src_qpn: 1,
    };
    let mut out = Vec::new();
    send.build(&f[HEADERS_LEN..f.len() - ICRC_LEN], &mut out).unwrap();
    assert_eq!(out, f);
}
