//! Instructions of an extended-CQ completion → AH attribute against the
//! plain `struct ibv_wc` form, in the same run: `udah_init_ah_from_cq_ex`
//! (five reads through the CQ's function pointers, then the `ibv_wc` form's
//! code) and `udah_init_ah_from_wc`, through the C entry points, on a
//! responder made with `udah_responder_from_gids` (no device), over 64
//! RoCE v2 completions (IPv4 and IPv6, one local GID each). The CQ is a
//! software `ibv_cq_ex` whose readers are plain functions returning the
//! fields of a `struct ibv_wc` (a provider's readers are the same kind of
//! indirect call, each a few loads).
//!
//! ```text
//! cargo bench -p udah-capi --bench cq_ex                          # the figures (needs valgrind)
//! UDAH_CQ_EX_ICOUNT_GATE=1 cargo bench -p udah-capi --bench cq_ex # and the gate below
//! ```
//!
//! Each target runs `K1` and `K2` times under `valgrind --tool=callgrind`;
//! `(Ir(K2) - Ir(K1)) / (K2 - K1)` of its inclusive count is one call with
//! the loop around it (`udah_cq_ex_icount_loop` is the loop alone).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use core::hint::black_box;
use std::process::Command;

use udah::ffi::{ibv_ah_attr, ibv_gid, ibv_gid_entry, ibv_grh, ibv_wc};
use udah::udah_responder;
use udah_benches::callgrind::inclusive_ir;

const K1: u64 = 2_000;
const K2: u64 = 18_000;
/// The most the extended-CQ form may cost over the `ibv_wc` form, per call
/// (five indirect reads, their NULL checks and the closure around them;
/// 91.0 measured with rustc 1.95).
const GATE_EXTRA: f64 = 100.0;

#[path = "../tests/common/soft_cq.rs"]
mod soft_cq;
use soft_cq::{SoftCq, soft};

struct Case {
    cq: Box<SoftCq>,
    wc: ibv_wc,
    grh: ibv_grh,
}

fn gid_v4(a: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&a);
    g
}

fn gid_v6(last: u8) -> [u8; 16] {
    [0xfd, 0, 0, 0xda, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last]
}

fn responder() -> *mut udah_responder {
    let e =
        |i: u32, raw| ibv_gid_entry { gid: ibv_gid { raw }, gid_index: i, port_num: 1, gid_type: 2, ndev_ifindex: 3 };
    let entries = [e(0, gid_v4([10, 0, 0, 1])), e(1, gid_v6(1))];
    // SAFETY: two valid entries; no PD (attributes only).
    let r = unsafe { udah::udah_responder_from_gids(1, 2, 4, entries.as_ptr(), 2, core::ptr::null_mut()) };
    assert!(!r.is_null());
    r
}

fn cases() -> Vec<Case> {
    (0..64u8)
        .map(|i| {
            let mut area = [0u8; 40];
            if i % 2 == 0 {
                area[20] = 0x45;
                area[28] = 64;
                area[29] = 17;
                area[32..36].copy_from_slice(&[10, 0, 1, i]);
                area[36..40].copy_from_slice(&[10, 0, 0, 1]);
                let h: [u8; 20] = area[20..].try_into().unwrap();
                let sum = udah_core::wire::ipv4::checksum_rfc1071(&h).to_be_bytes();
                area[30..32].copy_from_slice(&sum);
            } else {
                area[0] = 0x60;
                area[6] = 17;
                area[7] = 64;
                area[8..24].copy_from_slice(&gid_v6(i + 2));
                area[24..40].copy_from_slice(&gid_v6(1));
            }
            // SAFETY: integers only; all-zero is valid.
            let mut wc: ibv_wc = unsafe { core::mem::zeroed() };
            (wc.wc_flags, wc.src_qp, wc.sl) = (1, 0x100 + u32::from(i), 0);
            Case { cq: soft(wc), wc, grh: ibv_grh { bytes: area } }
        })
        .collect()
}

#[inline(always)]
fn drive(cases: &mut [Case], k: u64, mut f: impl FnMut(&mut Case) -> i32) {
    let mask = cases.len() - 1;
    let mut i = 0usize;
    for _ in 0..k {
        let c = black_box(&mut cases[i & mask]);
        let r = f(c);
        black_box(r);
        i = i.wrapping_add(1);
    }
}

fn bytes(a: ibv_ah_attr) -> [u8; 32] {
    // SAFETY: `ibv_ah_attr` is 32 bytes of integers (pinned in udah::ffi).
    unsafe { core::mem::transmute::<ibv_ah_attr, [u8; 32]>(a) }
}

fn out() -> ibv_ah_attr {
    // SAFETY: integers and a GID; all-zero is valid.
    unsafe { core::mem::zeroed() }
}

#[unsafe(no_mangle)]
#[inline(never)]
fn udah_cq_ex_icount_loop(_r: *mut udah_responder, cases: &mut [Case], k: u64) {
    drive(cases, k, |c| c.wc.src_qp as i32);
}

#[unsafe(no_mangle)]
#[inline(never)]
fn udah_cq_ex_icount_wc(r: *mut udah_responder, cases: &mut [Case], k: u64) {
    let mut a = out();
    drive(cases, k, |c| {
        // SAFETY: a live responder, valid structs.
        unsafe { udah::udah_init_ah_from_wc(r, &c.wc, &c.grh, 0, 0, &mut a) }
    });
}

#[unsafe(no_mangle)]
#[inline(never)]
fn udah_cq_ex_icount_cq_ex(r: *mut udah_responder, cases: &mut [Case], k: u64) {
    let mut a = out();
    drive(cases, k, |c| {
        // SAFETY: a live responder, a software CQ holding its completion.
        unsafe { udah::udah_init_ah_from_cq_ex(r, &raw mut c.cq.ex, &c.grh, 0, 0, &mut a) }
    });
}

type Target = fn(*mut udah_responder, &mut [Case], u64);
const TARGETS: [(&str, Target); 3] = [
    ("udah_cq_ex_icount_loop", udah_cq_ex_icount_loop),
    ("udah_cq_ex_icount_wc", udah_cq_ex_icount_wc),
    ("udah_cq_ex_icount_cq_ex", udah_cq_ex_icount_cq_ex),
];

fn run_targets(k: u64) {
    let r = responder();
    let mut cs = cases();
    // Both forms agree on every case before anything is counted.
    for c in &mut cs {
        let (mut a, mut b) = (out(), out());
        // SAFETY: as in the targets.
        let x = unsafe { udah::udah_init_ah_from_wc(r, &c.wc, &c.grh, 0, 0, &mut a) };
        // SAFETY: as in the targets.
        let y = unsafe { udah::udah_init_ah_from_cq_ex(r, &raw mut c.cq.ex, &c.grh, 0, 0, &mut b) };
        assert_eq!((x, y), (0, 0));
        assert_eq!(bytes(a), bytes(b));
    }
    for (_, f) in TARGETS {
        f(black_box(r), black_box(&mut cs), black_box(k));
    }
}

fn counts(exe: &std::path::Path, k: u64, dir: &std::path::Path) -> std::collections::BTreeMap<String, u64> {
    let file = dir.join(format!("callgrind.cq_ex.{k}.out"));
    let o = Command::new("valgrind")
        .args(["--tool=callgrind", "--dump-line=no", "--compress-strings=no"])
        .arg(format!("--callgrind-out-file={}", file.display()))
        .arg(exe)
        .env("UDAH_CQ_EX_ICOUNT_RUN", k.to_string())
        .output()
        .expect("run valgrind");
    assert!(o.status.success(), "valgrind failed: {}", String::from_utf8_lossy(&o.stderr));
    inclusive_ir(&std::fs::read_to_string(&file).expect("callgrind output"))
}

fn main() {
    if let Ok(k) = std::env::var("UDAH_CQ_EX_ICOUNT_RUN") {
        run_targets(k.parse().expect("UDAH_CQ_EX_ICOUNT_RUN=K"));
        return;
    }
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("cq_ex bench: valgrind not found; nothing measured");
        assert!(std::env::var_os("UDAH_CQ_EX_ICOUNT_GATE").is_none(), "the gate needs valgrind");
        return;
    }
    let exe = std::env::current_exe().expect("own path");
    let dir = std::env::temp_dir().join(format!("udah-cq-ex-icount-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let (a, b) = (counts(&exe, K1, &dir), counts(&exe, K2, &dir));
    let _ = std::fs::remove_dir_all(&dir);
    let per = |name: &str| {
        let (x, y) = (a.get(name).copied().unwrap_or(0), b.get(name).copied().unwrap_or(0));
        assert!(y > x, "{name}: no instructions counted");
        (y - x) as f64 / (K2 - K1) as f64
    };
    let (lp, wc, ex) = (per(TARGETS[0].0), per(TARGETS[1].0), per(TARGETS[2].0));
    println!("| row | per call | net of the loop |");
    println!("|---|---|---|");
    println!("| loop alone | {lp:.1} | |");
    println!("| `udah_init_ah_from_wc` (struct ibv_wc) | {wc:.1} | {:.1} |", wc - lp);
    println!("| `udah_init_ah_from_cq_ex` (software ibv_cq_ex) | {ex:.1} | {:.1} |", ex - lp);
    println!("| extended-CQ form over the ibv_wc form | {:.1} | |", ex - wc);
    if std::env::var_os("UDAH_CQ_EX_ICOUNT_GATE").is_some() {
        assert!(
            ex - wc <= GATE_EXTRA,
            "the extended-CQ form costs {:.1} instructions over the ibv_wc form (gate {GATE_EXTRA})",
            ex - wc
        );
        println!("gate: extended-CQ form at most {GATE_EXTRA} over the ibv_wc form: met");
    }
}
