//! `udah replay`: the shared captures replay to their oracle expectations,
//! hand-built frames of the kinds the shared captures lack (RoCE v2 over
//! IPv6, VLAN-tagged, RoCE v1, InfiniBand with a GRH, ERF, Linux cooked,
//! pcapng, gzip) decode to the right area and completion, and malformed or
//! truncated captures give errors with frame numbers instead of panics.

mod common;

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use udah_cli::capture::decode::{self, DecodeOptions, Decoded, Encap, FrameError, Skip, V6PAD_FRONT, linktype};
use udah_cli::capture::reader::CaptureErrorKind;
use udah_cli::capture::replay::{self, Capture, Outcome, TableSource, TableSpec};
use udah_cli::capture::{Peer, fuzz_capture};
use udah_core::ah::{IBV_WC_GRH, IBV_WC_WITH_IMM, Profile};
use udah_core::wire::bth::{BthRepr, DethRepr};
use udah_core::wire::grh::GrhRepr;
use udah_core::wire::ipv4::Ipv4Repr;
use udah_core::wire::lrh::{Lnh, LrhRepr};
use udah_core::wire::{Gid, grh};
use udah_core::{GidEntry, GidType, IbvError, KernelError, LinkLayer};

// ---------------------------------------------------------------------------
// Frame builders
// ---------------------------------------------------------------------------

const MAC_A: [u8; 6] = [0x08, 0xc0, 0xeb, 0x11, 0x22, 0x33];
const MAC_B: [u8; 6] = [0x08, 0xc0, 0xeb, 0x44, 0x55, 0x66];

fn v6(s: &str) -> Gid {
    Gid::from(s.parse::<core::net::Ipv6Addr>().unwrap())
}

/// BTH + DETH + 4 payload bytes + ICRC.
fn transport(opcode: u8, dest_qp: u32, src_qp: u32) -> Vec<u8> {
    let mut b = [0u8; 12];
    BthRepr { opcode, pkey: 0xffff, dest_qp, psn: 7, ..BthRepr::default() }.emit(&mut b);
    let mut d = [0u8; 8];
    DethRepr { qkey: 0x1111_0000, src_qp }.emit(&mut d);
    let mut v = b.to_vec();
    v.extend_from_slice(&d);
    if opcode == 0x65 {
        v.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]); // ImmDt
    }
    v.extend_from_slice(b"ping");
    v.extend_from_slice(&[0; 4]); // ICRC
    v
}

/// Ethernet header with VLAN tags `(tpid, pcp, vid)`, outermost first.
fn ethernet(tags: &[(u16, u8, u16)], ether_type: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = MAC_B.to_vec();
    v.extend_from_slice(&MAC_A);
    for (tpid, pcp, vid) in tags {
        v.extend_from_slice(&tpid.to_be_bytes());
        v.extend_from_slice(&((u16::from(*pcp) << 13) | vid).to_be_bytes());
    }
    v.extend_from_slice(&ether_type.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn udp(dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = 0xc123u16.to_be_bytes().to_vec();
    v.extend_from_slice(&dport.to_be_bytes());
    v.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(payload);
    v
}

fn ipv4_header(src: [u8; 4], dst: [u8; 4], tos: u8, ttl: u8, payload_len: usize) -> [u8; 20] {
    let mut area = [0u8; 40];
    Ipv4Repr {
        tos,
        total_len: 20 + payload_len as u16,
        ident: 0x1234,
        flags_frag: 0x4000,
        ttl,
        protocol: 17,
        src,
        dst,
    }
    .emit(&mut area);
    area[20..].try_into().unwrap()
}

fn rocev2_ipv4(tags: &[(u16, u8, u16)], src: [u8; 4], dst: [u8; 4], opcode: u8, src_qp: u32) -> Vec<u8> {
    let u = udp(4791, &transport(opcode, 1, src_qp));
    let mut ip = ipv4_header(src, dst, 0x0a, 63, u.len()).to_vec();
    ip.extend_from_slice(&u);
    ethernet(tags, 0x0800, &ip)
}

fn grh_bytes(nh: u8, sgid: Gid, dgid: Gid, payload_len: usize) -> [u8; 40] {
    let mut a = [0u8; 40];
    GrhRepr {
        traffic_class: 0x28,
        flow_label: 0xabcde,
        payload_len: payload_len as u16,
        next_header: nh,
        hop_limit: 61,
        sgid,
        dgid,
    }
    .emit(&mut a);
    a
}

fn rocev2_ipv6(sgid: Gid, dgid: Gid, src_qp: u32) -> Vec<u8> {
    let u = udp(4791, &transport(0x64, 1, src_qp));
    let mut v = grh_bytes(17, sgid, dgid, u.len()).to_vec();
    v.extend_from_slice(&u);
    ethernet(&[], 0x86dd, &v)
}

fn rocev1(tags: &[(u16, u8, u16)], sgid: Gid, dgid: Gid, src_qp: u32) -> Vec<u8> {
    let t = transport(0x65, 1, src_qp);
    let mut v = grh_bytes(0x1b, sgid, dgid, t.len()).to_vec();
    v.extend_from_slice(&t);
    ethernet(tags, 0x8915, &v)
}

/// A native IB packet: LRH, optional GRH, BTH, DETH, payload, ICRC, VCRC.
fn ib(grh: Option<(Gid, Gid)>, slid: u16, dlid: u16, sl: u8, opcode: u8, src_qp: u32) -> Vec<u8> {
    let t = transport(opcode, 1, src_qp);
    let mut body = Vec::new();
    if let Some((s, d)) = grh {
        body.extend_from_slice(&grh_bytes(0x1b, s, d, t.len()));
    }
    body.extend_from_slice(&t);
    let lnh = if grh.is_some() { Lnh::IbaGlobal } else { Lnh::IbaLocal };
    let mut l = [0u8; 8];
    LrhRepr { vl: 0, sl, lnh, dlid, pkt_len: ((8 + body.len()) / 4) as u16, slid }.emit(&mut l);
    let mut v = l.to_vec();
    v.extend_from_slice(&body);
    v.extend_from_slice(&[0, 0]); // VCRC
    v
}

/// An ERF record of type `ty` around `payload`, with `ext` extension headers.
fn erf(ty: u8, ext: usize, payload: &[u8]) -> Vec<u8> {
    let rlen = 16 + 8 * ext + payload.len();
    let mut v = 0x64e3_30db_b272_9c20u64.to_le_bytes().to_vec();
    v.push(if ext > 0 { ty | 0x80 } else { ty });
    v.push(0x04);
    v.extend_from_slice(&(rlen as u16).to_be_bytes());
    v.extend_from_slice(&[0, 0]);
    v.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    for i in 0..ext {
        let more = if i + 1 < ext { 0x80 } else { 0 };
        v.extend_from_slice(&[more | 0x01, 0, 0, 0, 0, 0, 0, 0]);
    }
    v.extend_from_slice(payload);
    v
}

/// A little-endian microsecond pcap file.
fn pcap(link_type: u32, frames: &[Vec<u8>]) -> Vec<u8> {
    let mut v = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
    v.extend_from_slice(&2u16.to_le_bytes());
    v.extend_from_slice(&4u16.to_le_bytes());
    for x in [0u32, 0, 65535, link_type] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        for x in [1_700_000_000u32 + i as u32, 0, f.len() as u32, f.len() as u32] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(f);
    }
    v
}

fn block(ty: u32, body: &[u8]) -> Vec<u8> {
    let len = (12 + body.len()).next_multiple_of(4) as u32;
    let mut v = ty.to_le_bytes().to_vec();
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(body);
    v.resize(len as usize - 4, 0);
    v.extend_from_slice(&len.to_le_bytes());
    v
}

/// A pcapng file with one interface per link type; frames name their interface.
fn pcapng(link_types: &[u32], frames: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    let mut v = block(0x0a0d_0d0a, &shb);
    for lt in link_types {
        let mut idb = (*lt as u16).to_le_bytes().to_vec();
        idb.extend_from_slice(&[0, 0]);
        idb.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&block(1, &idb));
    }
    for (iface, f) in frames {
        let mut epb = Vec::new();
        for x in [*iface, 0, 0, f.len() as u32, f.len() as u32] {
            epb.extend_from_slice(&x.to_le_bytes());
        }
        epb.extend_from_slice(f);
        epb.resize(epb.len().next_multiple_of(4), 0);
        v.extend_from_slice(&block(6, &epb));
    }
    v
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn read(bytes: Vec<u8>) -> Capture {
    Capture::read(Cursor::new(bytes), &DecodeOptions::default())
}

fn one_ud(link_type: u32, frame: &[u8]) -> udah_cli::capture::UdPacket {
    match decode::decode(link_type, frame, &DecodeOptions::default()) {
        Ok(Decoded::Ud(p)) => p,
        other => panic!("expected a UD packet, got {other:?}"),
    }
}

fn synthesised(cap: &Capture, profile: Profile) -> replay::Replay {
    replay::replay(cap, &TableSource::Synthesised { port_num: 1 }, profile).unwrap()
}

// ---------------------------------------------------------------------------
// The repository's hand-built captures (`vectors/captures/`)
// ---------------------------------------------------------------------------

/// The hand-built RoCE capture: RoCE v2 over IPv4 (plain, with immediate,
/// VLAN-tagged, to a multicast group), RoCE v2 over IPv6, RoCE v1, and an RC
/// frame that is skipped.
fn repo_roce_capture() -> Vec<u8> {
    let (a, b, c) = ([192, 168, 1, 20], [192, 168, 1, 10], [192, 168, 1, 21]);
    pcap(
        linktype::ETHERNET,
        &[
            rocev2_ipv4(&[], a, b, 0x64, 0x12),
            rocev2_ipv4(&[], c, b, 0x65, 0x13),
            rocev2_ipv4(&[], a, b, 0x04, 0x12),
            rocev2_ipv4(&[(0x8100, 3, 100)], a, b, 0x64, 0x12),
            rocev2_ipv4(&[], a, [239, 1, 1, 1], 0x64, 0x12),
            rocev2_ipv6(v6("fd00::20"), v6("fd00::10"), 0x14),
            rocev1(&[], v6("fe80::a"), v6("fe80::b"), 0x15),
            rocev2_ipv4(&[], a, b, 0x64, 0x12),
        ],
    )
}

/// The hand-built InfiniBand capture (raw IB, link type 247): without a GRH,
/// with one, to a multicast GID, and an RC packet that is skipped.
fn repo_ib_capture() -> Vec<u8> {
    pcap(
        linktype::INFINIBAND,
        &[
            ib(None, 18, 12, 2, 0x64, 0x20),
            ib(Some((v6("fe80::2:18"), v6("fe80::2:12"))), 18, 12, 0, 0x65, 0x21),
            ib(Some((v6("fe80::2:18"), v6("ff12:401b:ffff::1"))), 18, 0xc000, 0, 0x64, 0x22),
            ib(None, 18, 12, 0, 0x04, 0x20),
            ib(None, 19, 12, 1, 0x64, 0x23),
        ],
    )
}

/// The repository's captures: file name and bytes.
fn repo_captures() -> [(&'static str, Vec<u8>); 2] {
    [("rocev2-ud.pcap", repo_roce_capture()), ("ib-ud.pcap", repo_ib_capture())]
}

/// `vectors/captures/` holds exactly what the builders above make
/// (`UDAH_WRITE_CAPTURES=1 cargo test -p udah-cli --test replay repo_captures`
/// rewrites them; then regenerate the cases with `vectors/captures/make-cases.sh`).
#[test]
fn repo_captures_are_what_the_generator_builds() {
    let dir = common::repo_vectors().join("captures");
    for (name, bytes) in repo_captures() {
        let path = dir.join(name);
        if std::env::var_os("UDAH_WRITE_CAPTURES").is_some() {
            std::fs::write(&path, &bytes).unwrap();
        }
        let on_disk = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(on_disk == bytes, "{} differs from what the generator builds", path.display());
    }
}

#[test]
fn repo_captures_replay_to_their_oracle_cases() {
    let dir = common::repo_vectors().join("captures");
    let runs = [
        ("rocev2-ud.pcap", "rocev2-ud.pcap.cases.jsonl", "zero", 7),
        ("rocev2-ud.pcap", "rocev2-ud.pcap.v6pad.cases.jsonl", "v6pad", 7),
        ("ib-ud.pcap", "ib-ud.pcap.cases.jsonl", "zero", 4),
    ];
    for (capture, cases, front, n) in runs {
        let cases = dir.join(cases);
        assert_eq!(lines(&cases), n, "{}", cases.display());
        let out = udah()
            .args(["replay", "--no-progress", "--ipv4-front", front, "--check"])
            .arg(&cases)
            .arg(dir.join(capture))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{capture} vs {}:\n{stdout}\n{}",
            cases.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let want = format!("check: {n} passed, 0 failed");
        assert!(stdout.contains(&want), "{capture}: want {want:?} in\n{stdout}");
    }
}

#[test]
fn repo_capture_report_names_peers_and_reasons() {
    let dir = common::repo_vectors().join("captures");
    let out = udah()
        .args(["replay", "--no-progress"])
        .arg(dir.join("rocev2-ud.pcap"))
        .arg(dir.join("ib-ud.pcap"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("8 frames, 7 UD packets"), "{stdout}");
    assert!(stdout.contains("5 frames, 4 UD packets"), "{stdout}");
    assert!(stdout.contains("EINVAL: packet was sent to a multicast address"), "{stdout}");
    assert!(stdout.contains("LID 18"), "{stdout}");
}

// ---------------------------------------------------------------------------
// The shared captures (optional extras) against the oracle
// ---------------------------------------------------------------------------

fn udah() -> Command {
    Command::new(env!("CARGO_BIN_EXE_udah"))
}

fn captures_or_skip(test: &str) -> Option<PathBuf> {
    let shared = common::shared_extra(test)?;
    let dir = shared.join("data").join("captures");
    dir.is_dir().then_some(dir)
}

fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p).unwrap().lines().filter(|l| !l.trim().is_empty()).count()
}

#[test]
fn shared_captures_replay_to_the_oracle_cases() {
    let Some(dir) = captures_or_skip("shared_captures_replay_to_the_oracle_cases") else { return };
    let runs = [
        ("rocev2-ipv4-ud-cm-send.pcap", "rocev2-ipv4-ud-cm-send.pcap.cases.jsonl", "zero"),
        ("rocev2-ipv4-ud-cm-send.pcap", "rocev2-ipv4-ud-cm-send.pcap.v6pad.cases.jsonl", "v6pad"),
        ("ib-erf-ud-mad-ipoib-ib2.pcap", "ib-erf-ud-mad-ipoib-ib2.pcap.cases.jsonl", "zero"),
    ];
    for (capture, cases, front) in runs {
        let cases = dir.join(cases);
        let out = udah()
            .args(["replay", "--no-progress", "--ipv4-front", front, "--check"])
            .arg(&cases)
            .arg(dir.join(capture))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{capture} vs {}:\n{stdout}\n{}",
            cases.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let want = format!("check: {} passed, 0 failed", lines(&cases));
        assert!(stdout.contains(&want), "{capture}: want {want:?} in\n{stdout}");
        assert!(!stdout.contains("MISMATCH"), "{stdout}");
    }
}

#[test]
fn shared_captures_decode_like_the_cases() {
    // The same, through the library: every UD packet's area and completion
    // equal the case's, and every case has its packet.
    let Some(dir) = captures_or_skip("shared_captures_decode_like_the_cases") else { return };
    for (capture, cases, front) in [
        ("rocev2-ipv4-ud-cm-send.pcap", "rocev2-ipv4-ud-cm-send.pcap.cases.jsonl", [0u8; 20]),
        ("rocev2-ipv4-ud-cm-send.pcap", "rocev2-ipv4-ud-cm-send.pcap.v6pad.cases.jsonl", V6PAD_FRONT),
        ("ib-erf-ud-mad-ipoib-ib2.pcap", "ib-erf-ud-mad-ipoib-ib2.pcap.cases.jsonl", [0u8; 20]),
    ] {
        let bytes = std::fs::read(dir.join(capture)).unwrap();
        let cap = Capture::read(Cursor::new(bytes), &DecodeOptions { ipv4_front: front });
        assert!(cap.fatal.is_none() && cap.malformed.is_empty(), "{capture}: {:?} {:?}", cap.fatal, cap.malformed);
        let loaded = udah_cli::vectors::load_file(&dir.join(cases), None).unwrap();
        assert_eq!(cap.packets.len(), loaded.len(), "{capture}: UD packets vs cases");
        for ((frame, p), lc) in cap.packets.iter().zip(&loaded) {
            let c = &lc.case.input;
            assert_eq!(c.name, format!("{capture}#{frame}"));
            assert_eq!(c.grh.map(|h| h.0), Some(p.area), "{}", c.name);
            assert_eq!(
                (c.wc.wc_flags, c.wc.slid, c.wc.sl, c.wc.src_qp, c.wc.pkey_index, c.wc.dlid_path_bits),
                (p.wc.wc_flags, u32::from(p.wc.slid), p.wc.sl, p.wc.src_qp, p.wc.pkey_index, p.wc.dlid_path_bits),
                "{}",
                c.name
            );
        }
    }
}

#[test]
fn emitted_cases_pass_conform_in_both_profiles() {
    let dir = common::repo_vectors().join("captures");
    let tmp = std::env::temp_dir().join(format!("udah-replay-test-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for profile in ["libibverbs", "kernel"] {
        let cases = tmp.join(format!("{profile}.jsonl"));
        let out = udah()
            .args(["replay", "--no-progress", "--profile", profile, "--emit-cases"])
            .arg(&cases)
            .arg(dir.join("rocev2-ud.pcap"))
            .arg(dir.join("ib-ud.pcap"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(lines(&cases), 11, "7 + 4 UD packets");
        let conform = udah().arg("conform").arg(&cases).output().unwrap();
        let stdout = String::from_utf8_lossy(&conform.stdout);
        assert!(conform.status.success(), "{profile}:\n{stdout}");
        assert!(stdout.trim_end().ends_with("11 passed, 0 failed"), "{stdout}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn shared_capture_report_names_peers_and_reasons() {
    let Some(dir) = captures_or_skip("shared_capture_report_names_peers_and_reasons") else { return };
    let out = udah().args(["replay", "--no-progress"]).arg(dir.join("ib-erf-ud-mad-ipoib-ib2.pcap")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(stdout.contains("127 frames, 7 UD packets (IB 5, IB+GRH 2), 5 AH ok, 2 AH failed"), "{stdout}");
    assert!(stdout.contains("EINVAL: packet was sent to a multicast address (ff12:401b:ffff::ffff:ffff)"), "{stdout}");
    assert!(stdout.contains("LID 18"), "{stdout}");
}

// ---------------------------------------------------------------------------
// Hand-built frames
// ---------------------------------------------------------------------------

#[test]
fn rocev2_ipv6_frame() {
    let s = v6("2001:db8::20");
    let d = v6("2001:db8::10");
    let frame = rocev2_ipv6(s, d, 0x4242);
    let p = one_ud(linktype::ETHERNET, &frame);
    assert_eq!(p.encap, Encap::RoceV2Ipv6);
    assert_eq!(&p.area[..], &frame[14..54], "the area is the IPv6 header");
    assert_eq!((p.wc.wc_flags, p.wc.src_qp, p.wc.slid, p.wc.sl), (IBV_WC_GRH, 0x4242, 0, 0));
    assert_eq!((p.vlan, p.pkey, p.qkey, p.dest_qp), (None, 0xffff, 0x1111_0000, 1));
    assert_eq!((p.source(), p.destination()), (Peer::Gid(s), Some(d)));

    let cap = read(pcap(linktype::ETHERNET, &[frame]));
    let r = synthesised(&cap, Profile::Libibverbs);
    assert_eq!(r.tables[0].entries, vec![(0, GidEntry::new(d, GidType::RoceV2))]);
    let Outcome::Libibverbs { result: Ok(a), gid_queries } = r.results[0].2 else { panic!("{:?}", r.results[0]) };
    assert_eq!((Gid(a.grh.dgid), a.grh.sgid_index, a.grh.hop_limit), (s, 0, 61));
    assert_eq!((a.grh.traffic_class, a.grh.flow_label, a.is_global), (0x28, 0xabcde, 1));
    assert_eq!(gid_queries, 2);
    // The kernel profile: network type IPv6 reported, route-resolved hop limit.
    let k = synthesised(&cap, Profile::Kernel);
    assert!(matches!(k.results[0].2, Outcome::Kernel(Ok(_))), "{:?}", k.results[0].2);
}

#[test]
fn vlan_tagged_rocev2_ipv4_frames() {
    let src = [10, 1, 0, 2];
    let dst = [10, 1, 0, 1];
    let single = rocev2_ipv4(&[(0x8100, 5, 100)], src, dst, 0x64, 9);
    let p = one_ud(linktype::ETHERNET, &single);
    assert_eq!((p.encap, p.vlan, p.wc.sl, p.smac), (Encap::RoceV2Ipv4, Some(100), 5, Some(MAC_A)));
    assert_eq!(&p.area[..20], &[0; 20]);
    assert_eq!(&p.area[20..], &single[18..38], "bytes 20..40 are the IPv4 header");
    assert_eq!(p.source(), Peer::Gid(Gid::from_ipv4(src)));
    assert_eq!(p.source().to_string(), "10.1.0.2");

    // QinQ: 802.1ad outer tag, 802.1Q inner tag; the receiver sees the inner one.
    let qinq = rocev2_ipv4(&[(0x88a8, 1, 200), (0x8100, 3, 300)], src, dst, 0x65, 9);
    let q = one_ud(linktype::ETHERNET, &qinq);
    assert_eq!((q.vlan, q.wc.sl, q.wc.wc_flags), (Some(300), 3, IBV_WC_GRH | IBV_WC_WITH_IMM));
    assert_eq!(&q.area[20..], &qinq[22..42]);

    // The kernel profile matches VLANs: a synthesised table carries each
    // packet's VLAN, so both AHs are built ...
    let cap = read(pcap(linktype::ETHERNET, &[single.clone(), qinq.clone()]));
    let r = synthesised(&cap, Profile::Kernel);
    assert_eq!(r.tables[0].entries.len(), 2, "one entry per (address, VLAN)");
    assert!(r.results.iter().all(|x| x.2.is_ok()), "{:?}", r.results);
    // ... while an untagged table entry does not match a tagged packet.
    let untagged = TableSpec {
        port_num: 1,
        link_layer: LinkLayer::Ethernet,
        len: 16,
        entries: vec![(0, GidEntry::new(Gid::from_ipv4(dst), GidType::RoceV2))],
    };
    let r = replay::replay(&cap, &TableSource::Given(untagged.clone()), Profile::Kernel).unwrap();
    for x in &r.results {
        let Outcome::Kernel(Err(f)) = x.2 else { panic!("{:?}", x.2) };
        assert_eq!(f.error, KernelError::GidNotFound);
        assert!(replay::describe(&x.2, &x.1).contains("on VLAN"), "{}", replay::describe(&x.2, &x.1));
    }
    // libibverbs ignores VLANs: found at index 0.
    let r = replay::replay(&cap, &TableSource::Given(untagged), Profile::Libibverbs).unwrap();
    for x in &r.results {
        let Outcome::Libibverbs { result: Ok(a), .. } = x.2 else { panic!("{:?}", x.2) };
        assert_eq!((a.grh.sgid_index, a.grh.hop_limit, a.grh.traffic_class), (0, 63, 0x0a));
        assert_eq!(a.sl, x.1.wc.sl, "SL from the VLAN priority");
    }
}

#[test]
fn rocev1_frame() {
    let s = Gid::link_local_from_mac(MAC_A);
    let d = Gid::link_local_from_mac(MAC_B);
    let frame = rocev1(&[(0x8100, 2, 7)], s, d, 0x77);
    let p = one_ud(linktype::ETHERNET, &frame);
    assert_eq!((p.encap, p.vlan, p.wc.sl), (Encap::RoceV1, Some(7), 2));
    assert_eq!(&p.area[..], &frame[18..58], "the area is the GRH");
    assert_eq!(grh::next_header(&p.area), 0x1b);
    assert_eq!(p.wc.wc_flags, IBV_WC_GRH | IBV_WC_WITH_IMM);

    let cap = read(pcap(linktype::ETHERNET, &[frame]));
    let r = synthesised(&cap, Profile::Libibverbs);
    assert_eq!(r.tables[0].entries, vec![(0, GidEntry::new(d, GidType::RoceV1).with_vlan(7))]);
    let Outcome::Libibverbs { result: Ok(a), .. } = r.results[0].2 else { panic!() };
    assert_eq!((Gid(a.grh.dgid), a.grh.hop_limit), (s, 61));
    // Kernel: link-local RoCE v1 gives the MAC straight from the GID.
    let k = synthesised(&cap, Profile::Kernel);
    let Outcome::Kernel(Ok(ka)) = k.results[0].2 else { panic!("{:?}", k.results[0].2) };
    assert_eq!(ka.roce, Some(udah_core::ah::Dmac::Mac(MAC_A)));
}

#[test]
fn infiniband_with_and_without_grh() {
    let s = v6("fe80::2:c903:0:12");
    let d = v6("fe80::2:c903:0:c");
    let with = ib(Some((s, d)), 18, 12, 4, 0x64, 0x1ce);
    let p = one_ud(linktype::INFINIBAND, &with);
    assert_eq!(p.encap, Encap::IbGrh);
    assert_eq!(&p.area[..], &with[8..48]);
    assert_eq!((p.wc.wc_flags, p.wc.slid, p.wc.sl, p.wc.src_qp, p.dlid), (IBV_WC_GRH, 18, 4, 0x1ce, Some(12)));
    let without = ib(None, 18, 12, 4, 0x64, 1);
    let q = one_ud(linktype::INFINIBAND, &without);
    assert_eq!((q.encap, q.area, q.wc.wc_flags, q.wc.slid), (Encap::Ib, [0; 40], 0, 18));
    assert_eq!(q.source(), Peer::Lid(18));
    assert_eq!(q.destination(), None);

    let cap = read(pcap(linktype::INFINIBAND, &[with.clone(), without.clone()]));
    let r = synthesised(&cap, Profile::Libibverbs);
    assert_eq!(r.tables[0].link_layer, LinkLayer::Infiniband);
    assert_eq!(r.tables[0].entries, vec![(0, GidEntry::new(d, GidType::Ib))]);
    let Outcome::Libibverbs { result: Ok(a), .. } = r.results[0].2 else { panic!() };
    assert_eq!((Gid(a.grh.dgid), a.dlid, a.sl, a.grh.hop_limit), (s, 18, 4, 61));
    let Outcome::Libibverbs { result: Ok(b), .. } = r.results[1].2 else { panic!() };
    assert_eq!((b.is_global, b.dlid), (0, 18));
    let k = synthesised(&cap, Profile::Kernel);
    assert!(k.results.iter().all(|x| x.2.is_ok()), "{:?}", k.results);

    // The same packets inside ERF records (type 21, with and without
    // extension headers, and type 25), as link type 197.
    let erfs = vec![erf(21, 0, &with), erf(21, 2, &with), erf(25, 1, &without), erf(48, 0, &[0; 8])];
    let cap = read(pcap(linktype::ERF, &erfs));
    assert!(cap.fatal.is_none() && cap.malformed.is_empty(), "{:?}", cap.malformed);
    assert_eq!(cap.packets.len(), 3);
    assert_eq!(cap.packets[0].1, p);
    assert_eq!(cap.packets[1].1, p);
    assert_eq!(cap.packets[2].1, q);
    assert_eq!(cap.skipped.get(&Skip::ErfRecord { erf_type: 48 }), Some(&1));
}

#[test]
fn erf_ethernet_and_linux_cooked() {
    let frame = rocev2_ipv4(&[], [192, 0, 2, 1], [192, 0, 2, 2], 0x64, 3);
    let want = one_ud(linktype::ETHERNET, &frame);
    let mut padded = vec![0, 0];
    padded.extend_from_slice(&frame);
    let e = one_ud(linktype::ERF, &erf(2, 0, &padded));
    assert_eq!(e, want);
    // Linux cooked v1: packet type, ARPHRD_ETHER, address length 6, address, protocol.
    let mut sll = vec![0, 0, 0, 1, 0, 6];
    sll.extend_from_slice(&MAC_A);
    sll.extend_from_slice(&[0, 0, 0x08, 0x00]);
    sll.extend_from_slice(&frame[14..]);
    assert_eq!(one_ud(linktype::LINUX_SLL, &sll), want);
    // Linux cooked v2.
    let mut sll2 = vec![0x08, 0x00, 0, 0, 0, 0, 0, 3, 0, 1, 0, 6];
    sll2.extend_from_slice(&MAC_A);
    sll2.extend_from_slice(&[0, 0]);
    sll2.extend_from_slice(&frame[14..]);
    assert_eq!(one_ud(linktype::LINUX_SLL2, &sll2), want);
}

#[test]
fn only_ud_sends_are_kept() {
    let src = [10, 0, 0, 2];
    let dst = [10, 0, 0, 1];
    let frames = vec![
        rocev2_ipv4(&[], src, dst, 0x04, 5), // RC SEND only
        rocev2_ipv4(&[], src, dst, 0x44, 5), // RD SEND only: a DETH too, but not UD
        rocev2_ipv4(&[], src, dst, 0x60, 5), // reserved UD opcode
        rocev2_ipv4(&[], src, dst, 0x64, 5),
        {
            // UDP to another port
            let u = udp(53, &[0; 20]);
            let mut ip = ipv4_header(src, dst, 0, 64, u.len()).to_vec();
            ip.extend_from_slice(&u);
            ethernet(&[], 0x0800, &ip)
        },
        ethernet(&[], 0x0806, &[0; 28]), // ARP
        ib(None, 1, 2, 0, 0x04, 1),      // IB RC, wrong link type for this file: decoded as Ethernet
    ];
    let cap = read(pcap(linktype::ETHERNET, &frames));
    assert!(cap.fatal.is_none());
    assert_eq!(cap.packets.iter().map(|(f, _)| *f).collect::<Vec<_>>(), vec![4]);
    assert_eq!(cap.skipped.get(&Skip::NotUd { opcode: 0x04 }), Some(&1));
    assert_eq!(cap.skipped.get(&Skip::NotUd { opcode: 0x44 }), Some(&1));
    assert_eq!(cap.skipped.get(&Skip::NotUd { opcode: 0x60 }), Some(&1));
    assert_eq!(cap.frames, 7);
    // A raw IB packet (LNH 0) is skipped too.
    let mut raw = ib(None, 1, 2, 0, 0x64, 1);
    raw[1] &= !3;
    assert_eq!(decode::decode_ib(&raw), Ok(Decoded::Skipped(Skip::RawIb)));
    assert_eq!(decode::decode(105, &raw, &DecodeOptions::default()), Ok(Decoded::Skipped(Skip::LinkType(105))));
}

#[test]
fn pcapng_and_gzip_give_the_same_packets() {
    let a = rocev2_ipv6(v6("2001:db8::2"), v6("2001:db8::1"), 11);
    let b = ib(Some((v6("fe80::1"), v6("fe80::2"))), 3, 4, 0, 0x64, 12);
    let c = rocev2_ipv4(&[(0x8100, 0, 5)], [1, 2, 3, 4], [5, 6, 7, 8], 0x64, 13);
    let ng = pcapng(&[linktype::ETHERNET, linktype::INFINIBAND], &[(0, a.clone()), (1, b.clone()), (0, c.clone())]);
    let from_ng = read(ng.clone());
    assert!(from_ng.fatal.is_none(), "{:?}", from_ng.fatal);
    let want = vec![
        (1, one_ud(linktype::ETHERNET, &a)),
        (2, one_ud(linktype::INFINIBAND, &b)),
        (3, one_ud(linktype::ETHERNET, &c)),
    ];
    assert_eq!(from_ng.packets, want);
    assert_eq!(read(gzip(&ng)).packets, want);
    let eth = read(gzip(&pcap(linktype::ETHERNET, &[a.clone(), c.clone()])));
    assert_eq!(eth.packets, vec![want[0], (2, want[2].1)]);
    // A mixed capture gets one synthesised table per link layer.
    let r = synthesised(&from_ng, Profile::Libibverbs);
    assert_eq!(r.tables.len(), 2);
    assert!(r.results.iter().all(|x| x.2.is_ok()), "{:?}", r.results);
    assert_eq!(r.rows.len(), 3);
}

#[test]
fn ipv4_front_option_fills_the_undefined_bytes() {
    let frame = rocev2_ipv4(&[], [10, 0, 0, 2], [10, 0, 0, 1], 0x64, 1);
    let opts = DecodeOptions { ipv4_front: V6PAD_FRONT };
    let Ok(Decoded::Ud(p)) = decode::decode(linktype::ETHERNET, &frame, &opts) else { panic!() };
    assert_eq!(&p.area[..20], &V6PAD_FRONT);
    // libibverbs still sees IPv4 (the checksum is valid).
    let cap = Capture::read(Cursor::new(pcap(linktype::ETHERNET, &[frame])), &opts);
    let r = synthesised(&cap, Profile::Libibverbs);
    let Outcome::Libibverbs { result: Ok(a), .. } = r.results[0].2 else { panic!() };
    assert_eq!(Gid(a.grh.dgid), Gid::from_ipv4([10, 0, 0, 2]));
}

#[test]
fn failures_name_their_reason() {
    // A table without the destination: GID not found, and the report says
    // which GID was looked for.
    let frame = rocev2_ipv4(&[], [10, 0, 0, 2], [10, 0, 0, 1], 0x64, 1);
    let cap = read(pcap(linktype::ETHERNET, &[frame]));
    let t = TableSpec {
        port_num: 1,
        link_layer: LinkLayer::Ethernet,
        len: 16,
        entries: vec![(0, GidEntry::new(Gid::from_ipv4([10, 0, 0, 1]), GidType::RoceV1))],
    };
    let r = replay::replay(&cap, &TableSource::Given(t), Profile::Libibverbs).unwrap();
    let Outcome::Libibverbs { result: Err(f), .. } = r.results[0].2 else { panic!() };
    assert_eq!(f.error, IbvError::GidNotFound);
    let text = replay::render("x.pcap", &cap, &r, "given");
    assert!(text.contains("FAIL EINVAL: local GID not found"), "{text}");
    assert!(text.contains("looked for ::ffff:10.0.0.1 as roce_v2"), "{text}");
    assert!(text.contains("1 AH failed"), "{text}");
}

// ---------------------------------------------------------------------------
// Malformed and truncated input
// ---------------------------------------------------------------------------

#[test]
fn truncated_capture_reports_the_frame() {
    let frames: Vec<Vec<u8>> = (0..4).map(|i| rocev2_ipv4(&[], [10, 0, 0, 2], [10, 0, 0, 1], 0x64, i)).collect();
    let whole = pcap(linktype::ETHERNET, &frames);
    // Cut inside the third record's data.
    let cut = 24 + 2 * (16 + frames[0].len()) + 16 + 10;
    let cap = read(whole[..cut].to_vec());
    let e = cap.fatal.as_ref().expect("a truncated capture is an error");
    assert_eq!(e.frame, 3);
    assert!(matches!(e.kind, CaptureErrorKind::Truncated), "{e}");
    assert!(e.to_string().starts_with("frame 3: capture truncated"), "{e}");
    assert_eq!(cap.packets.len(), 2, "what came before is kept");
    // Cut inside the third record's header.
    let cap = read(whole[..24 + 2 * (16 + frames[0].len()) + 5].to_vec());
    assert_eq!(cap.fatal.as_ref().map(|e| e.frame), Some(3));

    // Through the binary: the report, then the error on stderr, exit 1.
    let path = std::env::temp_dir().join(format!("udah-replay-trunc-{}.pcap", std::process::id()));
    std::fs::write(&path, &whole[..cut]).unwrap();
    let out = udah().args(["replay", "--no-progress"]).arg(&path).output().unwrap();
    let _ = std::fs::remove_file(&path);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("frame 3: capture truncated"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 UD packets"));
}

#[test]
fn not_a_capture_is_an_error_at_the_header() {
    for bytes in [b"hello world, not a pcap".to_vec(), vec![], vec![0xd4, 0xc3], gzip(b"garbage inside gzip")] {
        let cap = read(bytes.clone());
        let e = cap.fatal.as_ref().unwrap_or_else(|| panic!("{bytes:?} was accepted"));
        assert_eq!(e.frame, 0);
        assert!(e.to_string().starts_with("file header: "), "{e}");
    }
    // pcapng with a packet for an interface that was never described.
    let ng = pcapng(&[linktype::ETHERNET], &[(3, vec![0; 60])]);
    let cap = read(ng);
    let e = cap.fatal.expect("bad interface id");
    assert_eq!(e.frame, 1);
    assert!(e.to_string().contains("interface 3"), "{e}");
}

#[test]
fn malformed_frames_are_listed_with_their_numbers() {
    let good = rocev2_ipv4(&[], [10, 0, 0, 2], [10, 0, 0, 1], 0x64, 1);
    // RoCE v2 with the BTH cut short: the IP and UDP lengths say so too.
    let short = {
        let u = udp(4791, &[0x64, 0, 0xff]);
        let mut ip = ipv4_header([10, 0, 0, 2], [10, 0, 0, 1], 0, 64, u.len()).to_vec();
        ip.extend_from_slice(&u);
        ethernet(&[], 0x0800, &ip)
    };
    // IPv4 with options (IHL 6).
    let options = {
        let u = udp(4791, &transport(0x64, 1, 1));
        let mut h = ipv4_header([10, 0, 0, 2], [10, 0, 0, 1], 0, 64, u.len() + 4).to_vec();
        h[0] = 0x46;
        h.extend_from_slice(&[1, 1, 1, 0]); // NOP NOP NOP EOL
        h.extend_from_slice(&u);
        ethernet(&[], 0x0800, &h)
    };
    // IB: GRH announced but missing; bad link version.
    let ib_short = ib(Some((v6("fe80::1"), v6("fe80::2"))), 1, 2, 0, 0x64, 1)[..30].to_vec();
    let mut ib_ver = ib(None, 1, 2, 0, 0x64, 1);
    ib_ver[0] |= 1;
    let cap = read(pcap(linktype::ETHERNET, &[good.clone(), short, options, good]));
    assert_eq!(cap.packets.iter().map(|(f, _)| *f).collect::<Vec<_>>(), vec![1, 4]);
    assert_eq!(cap.malformed.len(), 2, "{:?}", cap.malformed);
    assert_eq!(cap.malformed[0].0, 2);
    assert!(matches!(cap.malformed[0].1, FrameError::Bth(_)), "{:?}", cap.malformed[0]);
    assert_eq!(cap.malformed[1], (3, FrameError::Ipv4Options { ihl: 6 }));
    let cap = read(pcap(linktype::INFINIBAND, &[ib_short, ib_ver, vec![]]));
    assert_eq!(cap.malformed.len(), 3);
    assert!(matches!(cap.malformed[0], (1, FrameError::Truncated { layer: "GRH", .. })), "{:?}", cap.malformed);
    assert!(matches!(cap.malformed[1], (2, FrameError::Lrh(_))));
    let r = synthesised(&cap, Profile::Libibverbs);
    assert!(replay::render("ib.pcap", &cap, &r, "synthesised").contains("frame 2: malformed: LRH link version 1"));
    // ERF: record length shorter than the header; extension header cut off.
    assert!(matches!(
        decode::decode_erf(&erf(21, 0, &[])[..15], &DecodeOptions::default()),
        Err(FrameError::Truncated { .. })
    ));
    let mut bad = erf(21, 0, &[0; 8]);
    bad[10..12].copy_from_slice(&[0, 4]);
    assert!(matches!(decode::decode_erf(&bad, &DecodeOptions::default()), Err(FrameError::Erf(_))));
    let ext = erf(21, 2, &[]);
    assert!(matches!(decode::decode_erf(&ext[..28], &DecodeOptions::default()), Err(FrameError::Truncated { .. })));
}

/// xorshift64*: deterministic mutations without a dev-dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[test]
fn no_input_panics() {
    let mut seeds = vec![
        pcap(
            linktype::ETHERNET,
            &[rocev2_ipv6(v6("::2"), v6("::1"), 1), rocev1(&[(0x8100, 1, 1)], v6("fe80::1"), v6("fe80::2"), 2)],
        ),
        pcap(linktype::ERF, &[erf(21, 1, &ib(Some((v6("fe80::1"), v6("fe80::2"))), 1, 2, 0, 0x65, 1))]),
        pcapng(&[linktype::ETHERNET], &[(0, rocev2_ipv4(&[(0x88a8, 0, 1), (0x8100, 0, 2)], [1; 4], [2; 4], 0x64, 3))]),
    ];
    if let Ok(shared) = common::shared_dir() {
        for f in ["rocev2-ipv4-ud-cm-send.pcap", "ib-erf-ud-mad-ipoib-ib2.pcap"] {
            if let Ok(b) = std::fs::read(shared.join("data").join("captures").join(f)) {
                seeds.push(b);
            }
        }
    }
    // Every prefix of a small capture.
    let small = &seeds[1];
    for n in 0..=small.len() {
        fuzz_capture(&small[..n]);
    }
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    for i in 0..1500 {
        let mut d = seeds[i % seeds.len()].clone();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(d.len());
            match rng.below(4) {
                0 => d[at] = rng.next() as u8,
                1 => d[at] ^= 1 << rng.below(8),
                2 => d.truncate(at),
                _ => {
                    let b = [0xff, 0x00, 0x7f, 0x80][rng.below(4)];
                    for x in d.iter_mut().skip(at).take(4) {
                        *x = b;
                    }
                }
            }
            if d.is_empty() {
                break;
            }
        }
        fuzz_capture(&d);
    }
}
