//! Differential test against the real libibverbs.
//!
//! Builds `ibv-oracle` from the repository (`make -C oracle OUT=<target dir>/oracle`;
//! it calls the real `ibv_init_ah_from_wc` of the installed libibverbs 44),
//! generates fresh random cases in the FORMAT.md input format from a seed,
//! pipes all of them through one oracle process and compares every field of
//! each oracle answer with `udah_core::ah::libibverbs` (ret, errno when
//! ret != 0, every `ah_attr` field, `gid_queries`, `signal`).
//!
//! * `UDAH_DIFF_SEED=S` reproduces a run (the default seed comes from the
//!   clock and is printed);
//! * `UDAH_DIFF_CASES=N` sets the number of cases (default 100,000).
//!
//! Mismatching cases are written, with the oracle's answer as `expect`, to
//! `target/oracle/diff-failures-<seed>.jsonl`, a vector file that
//! `udah conform` can rerun.
//!
//! The generator covers every family of FORMAT.md's table: IB/RoCE v1/v2
//! over IPv4 and IPv6, hits and misses, empty slots, duplicate GIDs with
//! other types, zero and multicast destinations, good/bad/random and
//! single-fold-overflow checksums, stale `6` prefixes, other next headers,
//! other version nibbles, garbage, dense tables and tables longer than 256
//! with the match at index ≥ 256, NULL areas, port 0.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use serde_json::Value;
use udah_cli::vectors::{
    Case, CaseInput, GidJson, GidTypeJson, Hex, LinkLayerJson, Mismatch, PortJson, Profile, WcJson,
};

const DEFAULT_CASES: u64 = 100_000;

// ---------------------------------------------------------------------------
// Checksums (FORMAT.md / oracle README: the library folds once, LE words)
// ---------------------------------------------------------------------------

/// The 20-byte IPv4 header's words summed as libibverbs does (LE, check
/// field skipped), before folding.
fn lib_sum(h: &[u8; 20]) -> u32 {
    (0..10).filter(|&i| i != 5).map(|i| u32::from(u16::from_le_bytes([h[2 * i], h[2 * i + 1]]))).sum()
}

/// libibverbs' check value, as the two bytes it must find at offset 10.
fn lib_csum(h: &[u8; 20]) -> [u8; 2] {
    let s = lib_sum(h);
    let s = (s & 0xffff) + (s >> 16);
    (!(s as u16)).to_le_bytes()
}

/// RFC 1071 checksum, network order.
fn rfc_csum(h: &[u8; 20]) -> [u8; 2] {
    let mut s: u32 = (0..10).filter(|&i| i != 5).map(|i| u32::from(u16::from_be_bytes([h[2 * i], h[2 * i + 1]]))).sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    (!(s as u16)).to_be_bytes()
}

fn fold_overflows(h: &[u8; 20]) -> bool {
    let s = lib_sum(h);
    (s & 0xffff) + (s >> 16) > 0xffff
}

// ---------------------------------------------------------------------------
// The generator
// ---------------------------------------------------------------------------

struct Gen {
    rng: StdRng,
}

/// A GID-table under construction: index -> (gid, type).
#[derive(Default)]
struct Table {
    len: u32,
    slots: BTreeMap<u32, ([u8; 16], GidTypeJson)>,
}

impl Table {
    fn put(&mut self, index: u32, gid: [u8; 16], t: GidTypeJson) {
        if index < self.len && gid != [0; 16] {
            self.slots.insert(index, (gid, t));
        }
    }

    fn gids(&self) -> Vec<GidJson> {
        self.slots
            .iter()
            .map(|(&index, &(gid, gid_type))| GidJson { index, gid: Hex(gid), gid_type, vlan: None, ndev: None })
            .collect()
    }
}

fn mapped(a: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&a);
    g
}

impl Gen {
    fn chance(&mut self, p: f64) -> bool {
        self.rng.gen_bool(p)
    }

    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        self.rng.fill_bytes(&mut b);
        b
    }

    fn ipv4_unicast(&mut self) -> [u8; 4] {
        let first = match self.rng.gen_range(0..6) {
            0 => 10,
            1 => 192,
            2 => 172,
            3 => 240 + self.rng.gen_range(0..16), // class E: not multicast for libibverbs
            _ => self.rng.gen_range(1..224),
        };
        let [_, b, c, d] = self.bytes::<4>();
        [first, b, c, d]
    }

    fn ipv4_multicast(&mut self) -> [u8; 4] {
        let [_, b, c, d] = self.bytes::<4>();
        [self.rng.gen_range(224..240), b, c, d]
    }

    fn gid_unicast(&mut self) -> [u8; 16] {
        match self.rng.gen_range(0..5) {
            0 => {
                // Link-local, modified EUI-64.
                let mac = self.bytes::<6>();
                let mut g = [0u8; 16];
                g[0] = 0xfe;
                g[1] = 0x80;
                g[8..].copy_from_slice(&[mac[0] ^ 2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]]);
                g
            }
            1 => {
                let mut g = self.bytes::<16>();
                g[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
                g
            }
            2 => mapped(self.ipv4_unicast()),
            3 => {
                // fe80::x with a non-EUI-64 interface id, or an IB-style GUID.
                let mut g = [0u8; 16];
                g[0] = 0xfe;
                g[1] = 0x80;
                g[8..].copy_from_slice(&self.bytes::<8>());
                g
            }
            _ => {
                let mut g = self.bytes::<16>();
                if g[0] == 0xff {
                    g[0] = 0xfd;
                }
                g
            }
        }
    }

    fn gid_multicast(&mut self) -> [u8; 16] {
        let mut g = self.bytes::<16>();
        g[0] = 0xff;
        g
    }

    /// Puts `gid` into the table at a random index (any type), so that a
    /// multicast destination is also a table entry: libibverbs refuses it
    /// before searching, and udah must too (its hot path leaves that test
    /// to the search unless the table holds a multicast GID).
    fn plant(&mut self, t: &mut Table, gid: [u8; 16]) -> bool {
        if t.len == 0 {
            return false;
        }
        let at = self.rng.gen_range(0..t.len.min(256));
        let ty = self.any_type();
        t.slots.insert(at, (gid, ty));
        true
    }

    fn any_type(&mut self) -> GidTypeJson {
        [GidTypeJson::Ib, GidTypeJson::RoceV1, GidTypeJson::RoceV2][self.rng.gen_range(0..3)]
    }

    /// A table of length `len` with `n` addresses, each placed as a v1/v2
    /// pair, a lone entry, or duplicated with another type further on, with
    /// holes between. Returns the table and the addresses placed.
    fn table(&mut self, len: u32, n: usize, ib: bool, v4: f64) -> (Table, Vec<[u8; 16]>) {
        let mut t = Table { len, slots: BTreeMap::new() };
        let mut addrs = Vec::new();
        let mut i = 0u32;
        for _ in 0..n {
            if i >= len {
                break;
            }
            let a = if self.chance(v4) { mapped(self.ipv4_unicast()) } else { self.gid_unicast() };
            addrs.push(a);
            i += self.rng.gen_range(0..3).min(1) * self.rng.gen_range(0..4); // holes
            match self.rng.gen_range(0..6) {
                0 | 1 if !ib => {
                    let (x, y) = if self.chance(0.8) {
                        (GidTypeJson::RoceV1, GidTypeJson::RoceV2)
                    } else {
                        (GidTypeJson::RoceV2, GidTypeJson::RoceV1)
                    };
                    t.put(i, a, x);
                    t.put(i + 1, a, y);
                    i += 2;
                }
                2 => {
                    // The same GID again later with another (or the same) type.
                    let ty = self.any_type();
                    t.put(i, a, ty);
                    let later = i + 1 + self.rng.gen_range(0..8);
                    let ty2 = self.any_type();
                    t.put(later, a, ty2);
                    i += 1;
                }
                _ => {
                    let ty = if ib && self.chance(0.9) { GidTypeJson::Ib } else { self.any_type() };
                    t.put(i, a, ty);
                    i += 1;
                }
            }
        }
        (t, addrs)
    }

    fn wc(&mut self) -> WcJson {
        let wc_flags = match self.rng.gen_range(0..20) {
            0 => 0,
            1 => self.rng.next_u32(),
            2 => 1 | (self.rng.next_u32() & !1),
            _ => 1,
        };
        WcJson {
            wc_flags,
            slid: if self.chance(0.5) { 0 } else { u32::from(self.rng.next_u32() as u16) },
            sl: if self.chance(0.9) { self.rng.gen_range(0..16) } else { self.rng.r#gen() },
            dlid_path_bits: if self.chance(0.8) { 0 } else { self.rng.r#gen() },
            src_qp: self.rng.next_u32() & 0xff_ffff,
            pkey_index: self.rng.gen_range(0..128),
            ..WcJson::default()
        }
    }

    fn grh6(&mut self, nh: u8, sgid: [u8; 16], dgid: [u8; 16]) -> [u8; 40] {
        let mut g = [0u8; 40];
        let vtf: u32 = (6 << 28) | (self.rng.next_u32() & 0x0fff_ffff);
        g[..4].copy_from_slice(&vtf.to_be_bytes());
        g[4..6].copy_from_slice(&self.rng.gen_range(0u16..4097).to_be_bytes());
        g[6] = nh;
        g[7] = [64, 255, 1, 0, 2, self.rng.r#gen()][self.rng.gen_range(0..6)];
        g[8..24].copy_from_slice(&sgid);
        g[24..].copy_from_slice(&dgid);
        g
    }

    fn ipv4_header_from_random(&mut self, daddr: [u8; 4]) -> [u8; 20] {
        let saddr = self.ipv4_unicast();
        self.ipv4_header(saddr, daddr)
    }

    fn ipv4_header(&mut self, saddr: [u8; 4], daddr: [u8; 4]) -> [u8; 20] {
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[1] = self.rng.r#gen();
        h[2..4].copy_from_slice(&self.rng.gen_range(40u16..4200).to_be_bytes());
        h[4..6].copy_from_slice(&self.bytes::<2>());
        h[6..8].copy_from_slice(&[[0x40, 0], [0, 0], self.bytes::<2>()][self.rng.gen_range(0..3)]);
        h[8] = [64, 255, 1, 0, 128, self.rng.r#gen()][self.rng.gen_range(0..6)];
        h[9] = 17;
        h[12..16].copy_from_slice(&saddr);
        h[16..].copy_from_slice(&daddr);
        h
    }

    /// Sets the identification field so that libibverbs' single fold carries
    /// (its check value then differs from the RFC one). `None` if the other
    /// words cannot reach the overflow region.
    fn force_fold_overflow(&mut self, h: &mut [u8; 20]) -> Option<()> {
        h[4] = 0;
        h[5] = 0;
        let s0 = lib_sum(h);
        let mut cands = Vec::new();
        for hi in 1u32..9 {
            let lo_min = 0x10000 - hi;
            let t_min = (hi << 16) | lo_min;
            let t_max = (hi << 16) | 0xffff;
            // t in [t_min, t_max] and t - s0 in [0, 0xffff].
            let lo = t_min.max(s0);
            let up = t_max.min(s0 + 0xffff);
            if lo <= up {
                cands.push(self.rng.gen_range(lo..=up) - s0);
            }
        }
        let w = *cands.get(self.rng.gen_range(0..cands.len().max(1)))?;
        h[4..6].copy_from_slice(&(w as u16).to_le_bytes());
        debug_assert!(fold_overflows(h));
        Some(())
    }

    fn prefix(&mut self, kind: u8) -> ([u8; 20], &'static str) {
        match kind {
            0 => ([0; 20], "zero"),
            1 => {
                let mut p = self.bytes::<20>();
                while p[0] >> 4 == 6 {
                    p[0] = self.rng.r#gen();
                }
                (p, "garbage")
            }
            _ => {
                // A stale IPv6 header's first half: nibble 6.
                let mut p = self.bytes::<20>();
                p[0] = 0x60 | (p[0] & 15);
                if self.chance(0.5) {
                    p[6] = [0x1b, 17][self.rng.gen_range(0..2)];
                }
                (p, "stale6")
            }
        }
    }

    /// One case. `i` only names it.
    fn case(&mut self, i: u64) -> CaseInput {
        let family = self.rng.gen_range(0..1000u32);
        let mut wc = self.wc();
        let mut port_num: u32 = if self.chance(0.8) { 1 } else { self.rng.gen_range(1..=255) };
        if self.chance(0.002) {
            port_num = 0;
        }
        let ib = self.chance(0.3);
        let link_layer = if ib { LinkLayerJson::Infiniband } else { LinkLayerJson::Ethernet };

        // Table size class.
        let (len, n) = match self.rng.gen_range(0..100) {
            0..=59 => {
                let len = self.rng.gen_range(1..=32);
                (len, self.rng.gen_range(1..=(len as usize).min(10)))
            }
            60..=84 => (self.rng.gen_range(33..=256), self.rng.gen_range(1..=20)),
            85..=89 => (0, 0),
            _ => (self.rng.gen_range(1..=8), self.rng.gen_range(0..=8)),
        };
        let (mut table, mut addrs) = self.table(len, n, ib, if ib { 0.05 } else { 0.5 });
        let name;
        let grh: Option<[u8; 40]>;

        // Picks the local address: from the table (maybe with the wrong
        // type), absent, or as given.
        let pick = |g: &mut Gen, addrs: &Vec<[u8; 16]>, want_v4: bool| -> ([u8; 16], &'static str) {
            let pool: Vec<[u8; 16]> =
                addrs.iter().copied().filter(|a| (a[..12] == mapped([0; 4])[..12]) == want_v4).collect();
            if !pool.is_empty() && g.chance(0.75) {
                (pool[g.rng.gen_range(0..pool.len())], "table")
            } else if want_v4 {
                (mapped(g.ipv4_unicast()), "absent")
            } else {
                (g.gid_unicast(), "absent")
            }
        };

        match family {
            // ---- NULL area ----
            0..=1 => {
                name = "null-grh".to_owned();
                grh = None;
            }
            // ---- garbage ----
            2..=49 => {
                name = "garbage".to_owned();
                grh = Some(self.bytes::<40>());
            }
            // ---- GRH / IPv6, next header 0x1B or 17 ----
            50..=399 => {
                let nh = if ib || self.chance(0.5) { 0x1b } else { 17 };
                let sub = self.rng.gen_range(0..10);
                let (dgid, how) = match sub {
                    0 => ([0; 16], "zero-dgid"),
                    1 => {
                        let g = self.gid_multicast();
                        let planted = self.chance(0.5) && self.plant(&mut table, g);
                        (g, if planted { "multicast-in-table" } else { "multicast" })
                    }
                    _ => {
                        let v4 = self.chance(0.3);
                        pick(self, &addrs, v4)
                    }
                };
                let sgid = if self.chance(0.05) { self.gid_multicast() } else { self.gid_unicast() };
                let g = self.grh6(nh, sgid, dgid);
                let fam = match (ib, nh) {
                    (true, _) => "ib-grh",
                    (false, 0x1b) => "rocev1",
                    _ => "rocev2-ip6",
                };
                name = format!("{fam}-{how}");
                grh = Some(g);
            }
            // ---- RoCE v2 / IPv4 ----
            400..=649 => {
                let (daddr, how) = if self.chance(0.1) {
                    let d = self.ipv4_multicast();
                    let planted = self.chance(0.5) && self.plant(&mut table, mapped(d));
                    (d, if planted { "multicast-in-table" } else { "multicast" })
                } else {
                    let (a, how) = pick(self, &addrs, true);
                    ([a[12], a[13], a[14], a[15]], how)
                };
                let saddr = self.ipv4_unicast();
                let mut h = self.ipv4_header(saddr, daddr);
                let csum = self.rng.gen_range(0..6);
                let csum_name = match csum {
                    0 => {
                        let c = self.bytes::<2>();
                        h[10..12].copy_from_slice(&c);
                        "csum-random"
                    }
                    1 => {
                        let c = rfc_csum(&h);
                        h[10..12].copy_from_slice(&[c[0] ^ 1, c[1]]);
                        "csum-bad"
                    }
                    _ => {
                        let c = rfc_csum(&h);
                        h[10..12].copy_from_slice(&c);
                        "csum-ok"
                    }
                };
                let kind = self.rng.gen_range(0..3);
                let (p, pname) = self.prefix(kind);
                let mut g = [0u8; 40];
                g[..20].copy_from_slice(&p);
                g[20..].copy_from_slice(&h);
                name = format!("rocev2-ip4-{how}-{pname}-{csum_name}");
                grh = Some(g);
            }
            // ---- first nibble 6 in front of an IPv4-like header ----
            650..=749 => {
                let (a, how) = pick(self, &addrs, true);
                let daddr = [a[12], a[13], a[14], a[15]];
                let mut h = self.ipv4_header_from_random(daddr);
                h[0] = [0x45, 0x45, 0x46, 0x44, 0x65, self.rng.r#gen()][self.rng.gen_range(0..6)];
                let detail;
                if self.chance(0.4) && self.force_fold_overflow(&mut h).is_some() {
                    if self.chance(0.5) {
                        let c = lib_csum(&h);
                        h[10..12].copy_from_slice(&c);
                        detail = "fold-overflow-libcsum";
                    } else {
                        let c = rfc_csum(&h);
                        h[10..12].copy_from_slice(&c);
                        detail = "fold-overflow-rfccsum";
                    }
                } else if self.chance(0.7) {
                    let c = lib_csum(&h);
                    h[10..12].copy_from_slice(&c);
                    detail = "csum-ok";
                } else {
                    let c = self.bytes::<2>();
                    h[10..12].copy_from_slice(&c);
                    detail = "csum-random";
                }
                let (p, _) = self.prefix(2);
                let mut g = [0u8; 40];
                g[..20].copy_from_slice(&p);
                g[20..].copy_from_slice(&h);
                name = format!("ip6nibble-ip4-{how}-{detail}");
                grh = Some(g);
            }
            // ---- a real IPv6 header whose tail passes the IPv4 checksum ----
            750..=799 => {
                let nh = [0x1b, 17][self.rng.gen_range(0..2)];
                let mut sgid = self.gid_unicast();
                sgid[12] = (sgid[12] & 0xf0) | 5;
                let mut dgid = self.gid_unicast();
                if dgid[0] == 0xff {
                    dgid[0] = 0xfe;
                }
                let mut g = self.grh6(nh, sgid, dgid);
                let mut h: [u8; 20] = g[20..].try_into().expect("20 bytes");
                let c = lib_csum(&h);
                h[10..12].copy_from_slice(&c);
                g[20..].copy_from_slice(&h);
                // Sometimes make the IPv4 reading of it a hit.
                if self.chance(0.5) && len > 0 {
                    let v4 = mapped([h[16], h[17], h[18], h[19]]);
                    let idx = self.rng.gen_range(0..len);
                    table.put(idx, v4, if self.chance(0.8) { GidTypeJson::RoceV2 } else { GidTypeJson::RoceV1 });
                    addrs.push(v4);
                }
                name = "ip6-looks-ip4".to_owned();
                grh = Some(g);
            }
            // ---- next header neither 0x1B nor 17 ----
            800..=849 => {
                let mut nh: u8 = self.rng.r#gen();
                while nh == 0x1b || nh == 17 {
                    nh = self.rng.r#gen();
                }
                let (dgid, _) = pick(self, &addrs, false);
                let dgid = if self.chance(0.1) { self.gid_multicast() } else { dgid };
                let sgid = self.gid_unicast();
                name = format!("ip6-nexthdr-{nh}");
                let g = self.grh6(nh, sgid, dgid);
                grh = Some(g);
            }
            // ---- version nibble other than 6 ----
            850..=899 => {
                let mut v = self.rng.gen_range(0..16u8);
                while v == 6 {
                    v = self.rng.gen_range(0..16);
                }
                let mut g = self.bytes::<40>();
                g[0] = (v << 4) | (g[0] & 15);
                if self.chance(0.5) {
                    let (a, _) = pick(self, &addrs, true);
                    let mut h = self.ipv4_header_from_random([a[12], a[13], a[14], a[15]]);
                    let c = rfc_csum(&h);
                    h[10..12].copy_from_slice(&c);
                    g[20..].copy_from_slice(&h);
                }
                if self.chance(0.3) {
                    g[20] = (4 << 4) | (g[20] & 15);
                }
                name = format!("version-{v}-ip4v{}", g[20] >> 4);
                grh = Some(g);
            }
            // ---- dense tables (worst-case scans) ----
            900..=909 => {
                let dense_len = [128u32, 255, 256][self.rng.gen_range(0..3)];
                // Sometimes the device table goes on past the full part: the
                // first empty slot is then `dense_len`.
                let extra = if self.chance(0.3) { self.rng.gen_range(1..=60) } else { 0 };
                table = Table { len: dense_len + extra, slots: BTreeMap::new() };
                addrs.clear();
                for k in 0..dense_len {
                    let a = if !ib && self.chance(0.5) { mapped(self.ipv4_unicast()) } else { self.gid_unicast() };
                    let ty = if ib { GidTypeJson::Ib } else { self.any_type() };
                    table.put(k, a, ty);
                    addrs.push(a);
                }
                let want_v4 = !ib && self.chance(0.5);
                let (local, how) = if self.chance(0.2) { ([0; 16], "zero") } else { pick(self, &addrs, want_v4) };
                let sgid = self.gid_unicast();
                let g = if want_v4 && local != [0; 16] {
                    let mut h = self.ipv4_header_from_random([local[12], local[13], local[14], local[15]]);
                    let c = rfc_csum(&h);
                    h[10..12].copy_from_slice(&c);
                    let mut g = [0u8; 40];
                    g[20..].copy_from_slice(&h);
                    g
                } else {
                    let nh = if ib || self.chance(0.5) { 0x1b } else { 17 };
                    self.grh6(nh, sgid, local)
                };
                name = format!("dense-{dense_len}-{how}");
                grh = Some(g);
            }
            // ---- long tables, match at index >= 256 ----
            // ---- huge tables (up to the oracle's 65536 slots), few entries ----
            975..=979 => {
                let huge_len = if self.chance(0.2) { 65536 } else { self.rng.gen_range(700..=65536u32) };
                let n = self.rng.gen_range(0..12);
                let (t, a) = self.table(huge_len.min(1000), n, ib, 0.5);
                table = Table { len: huge_len, slots: t.slots };
                let v4 = !ib && self.chance(0.5);
                let (local, how) = if self.chance(0.2) { ([0; 16], "zero") } else { pick(self, &a, v4) };
                let g = if v4 && local != [0; 16] {
                    let mut h = self.ipv4_header_from_random([local[12], local[13], local[14], local[15]]);
                    let c = rfc_csum(&h);
                    h[10..12].copy_from_slice(&c);
                    let mut g = [0u8; 40];
                    g[20..].copy_from_slice(&h);
                    g
                } else {
                    let sgid = self.gid_unicast();
                    let nh = if ib || self.chance(0.5) { 0x1b } else { 17 };
                    self.grh6(nh, sgid, local)
                };
                name = format!("hugetable-{how}");
                grh = Some(g);
            }
            910..=974 => {
                let big_len = self.rng.gen_range(257..700u32);
                let idx = self.rng.gen_range(256..big_len);
                let n = self.rng.gen_range(0..6);
                let (t, a) = self.table(big_len, n, ib, 0.5);
                table = t;
                addrs = a; // not used below; kept for symmetry
                let _ = &addrs;
                let v4 = !ib && self.chance(0.5);
                let local = if v4 { mapped(self.ipv4_unicast()) } else { self.gid_unicast() };
                let (ty, nh) = match (v4, ib, self.chance(0.5)) {
                    (true, _, _) => (GidTypeJson::RoceV2, 0),
                    (false, true, _) | (false, false, true) => (GidTypeJson::Ib, 0x1b),
                    (false, false, false) => (GidTypeJson::RoceV2, 17),
                };
                table.put(idx, local, ty);
                let g = if v4 {
                    let mut h = self.ipv4_header_from_random([local[12], local[13], local[14], local[15]]);
                    let c = rfc_csum(&h);
                    h[10..12].copy_from_slice(&c);
                    let mut g = [0u8; 40];
                    g[20..].copy_from_slice(&h);
                    g
                } else {
                    let sgid = self.gid_unicast();
                    self.grh6(nh, sgid, local)
                };
                name = format!("bigtable-idx{idx}");
                grh = Some(g);
            }
            // ---- no GRH flag ----
            _ => {
                wc.wc_flags &= !1;
                let sgid = self.gid_unicast();
                let dgid = self.gid_unicast();
                name = "ib-nogrh".to_owned();
                grh = Some(if self.chance(0.5) { self.grh6(0x1b, sgid, dgid) } else { self.bytes::<40>() });
            }
        }
        // Sometimes put an empty-looking hole on purpose: zero-DGID searches
        // match the first empty slot.
        if self.chance(0.05) && !table.slots.is_empty() {
            let k = self.rng.gen_range(0..table.slots.len());
            if let Some(&i) = table.slots.keys().nth(k) {
                table.slots.remove(&i);
            }
        }
        CaseInput {
            name: format!("{i:06}-{name}"),
            profile: None,
            port: PortJson { num: port_num, link_layer, gid_tbl_len: table.len, gids: table.gids() },
            wc,
            grh: grh.map(Hex),
        }
    }
}

// ---------------------------------------------------------------------------
// Oracle plumbing
// ---------------------------------------------------------------------------

/// The directory for the oracle's build and the failure files:
/// `<target dir>/oracle`.
fn oracle_out() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { common::workspace_root().join(t) })
        .unwrap_or_else(|| common::workspace_root().join("target"));
    target.join("oracle")
}

/// Builds the repository's oracle (`oracle/`) into [`oracle_out`], once per
/// test process: the tests run in parallel, and one test's `make` relinking
/// the binary while another executes it fails with ETXTBSY ("Text file
/// busy"). `Err` says why not.
fn build_oracle() -> Result<PathBuf, String> {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_oracle_now).clone()
}

fn build_oracle_now() -> Result<PathBuf, String> {
    let out = oracle_out();
    let status = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(common::workspace_root().join("oracle"))
        .arg(format!("OUT={}", out.display()))
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run make: {e}"))?;
    let bin = out.join("ibv-oracle");
    if !status.success() || !bin.is_file() {
        return Err(format!(
            "building {} failed ({status}); it needs gcc, make and libibverbs-dev (apt-get install -y libibverbs-dev gcc make)",
            bin.display()
        ));
    }
    Ok(bin)
}

/// The oracle, or `None` after [`common::skip_or_fail`] (it needs C tools
/// and libibverbs-dev, which a Rust-only machine lacks).
fn oracle_or_skip(test: &str) -> Option<PathBuf> {
    match build_oracle() {
        Ok(o) => Some(o),
        Err(why) => {
            common::skip_or_fail(test, &why);
            None
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(v.trim().parse().unwrap_or_else(|_| panic!("{name}={v:?} is not an unsigned integer")))
}

#[test]
fn checksum_helpers_agree_with_the_oracle_readme() {
    // Hand case 14a/14b header (oracle README): library check fc ff, RFC fb ff.
    let mut g = Gen { rng: StdRng::seed_from_u64(1) };
    let mut n = 0;
    for _ in 0..1000 {
        let mut h = g.ipv4_header([255, 255, 1, 2], [10, 255, 255, 2]);
        if g.force_fold_overflow(&mut h).is_some() {
            assert!(fold_overflows(&h));
            let (l, r) = (lib_csum(&h), rfc_csum(&h));
            assert_ne!(l, r, "the single fold must differ from RFC here");
            n += 1;
        } else {
            // Without overflow both agree (byte-order independence of the sum).
            assert_eq!(lib_csum(&h), rfc_csum(&h));
        }
    }
    assert!(n > 500, "only {n} overflow headers");
}

#[test]
fn differential_against_real_libibverbs() {
    let Some(oracle) = oracle_or_skip("differential_against_real_libibverbs") else { return };
    let seed = env_u64("UDAH_DIFF_SEED").unwrap_or_else(|| {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        t.as_secs() ^ u64::from(t.subsec_nanos()).rotate_left(32)
    });
    let count = env_u64("UDAH_DIFF_CASES").unwrap_or(DEFAULT_CASES);
    let repro = format!("UDAH_DIFF_SEED={seed} UDAH_DIFF_CASES={count} cargo test -p udah-cli --test oracle_diff");
    let _ = writeln!(std::io::stderr(), "oracle_diff: {count} cases, seed {seed} (reproduce: {repro})");
    let start = Instant::now();

    let mut child = Command::new(&oracle)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", oracle.display()));
    let stdin = child.stdin.take().expect("oracle stdin");
    let stdout = child.stdout.take().expect("oracle stdout");

    // The writer thread generates each case once, sends it to the oracle
    // and hands it to the checking loop below through a bounded channel.
    let (tx, rx) = std::sync::mpsc::sync_channel::<CaseInput>(4096);
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        let mut g = Gen { rng: StdRng::seed_from_u64(seed) };
        let mut w = BufWriter::with_capacity(1 << 16, stdin);
        for i in 0..count {
            let c = g.case(i);
            serde_json::to_writer(&mut w, &c)?;
            w.write_all(b"\n")?;
            if tx.send(c).is_err() {
                break; // the checker gave up
            }
        }
        w.flush()
    });

    let mut lines = BufReader::with_capacity(1 << 16, stdout).lines();
    let mut failures: Vec<(CaseInput, Value, Vec<Mismatch>)> = Vec::new();
    let mut failed = 0u64;
    let mut families: BTreeMap<String, u64> = BTreeMap::new();
    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..count {
        let Ok(input) = rx.recv() else { panic!("the generator thread stopped at case {i}") };
        let line = match lines.next() {
            Some(Ok(l)) => l,
            other => panic!("oracle output ended early at case {i} ({other:?}); seed {seed}"),
        };
        let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("oracle line {line:?}: {e}"));
        assert!(answer.get("error").is_none(), "oracle rejected case {i}: {line}\ncase: {}", json(&input));
        assert_eq!(
            answer.get("name").and_then(Value::as_str),
            Some(input.name.as_str()),
            "oracle answers out of order"
        );
        // Family with the numbers taken out ("bigtable-idxN", "version-N-ip4v4").
        let fam: Vec<String> = input.name.split('-').skip(1).map(family_part).collect();
        let fam = fam.join("-");
        *families.entry(fam).or_default() += 1;
        let outcome = match (answer.get("signal").and_then(Value::as_str), answer.get("ret").and_then(Value::as_i64)) {
            (Some(sig), _) => sig.to_owned(),
            (None, Some(0)) => "ret 0".to_owned(),
            _ => answer.get("errno").and_then(Value::as_str).unwrap_or("?").to_owned(),
        };
        *outcomes.entry(outcome).or_default() += 1;
        let case = Case::from_parts(input.clone(), Some(answer.clone()), Some(Profile::Libibverbs))
            .unwrap_or_else(|e| panic!("oracle answer not understood: {e}: {line}"));
        let mismatches = case.check().unwrap_or_else(|e| panic!("case {} cannot run: {e}", json(&input)));
        if !mismatches.is_empty() {
            failed += 1;
            if failures.len() < 1000 {
                failures.push((input, answer, mismatches));
            }
        }
    }
    writer.join().expect("writer thread").expect("writing to the oracle");
    let status = child.wait().expect("oracle exit");
    assert!(status.success(), "oracle exited with {status}");
    let elapsed = start.elapsed();
    let _ = writeln!(
        std::io::stderr(),
        "oracle_diff: {count} cases in {:.1} s, {failed} mismatching (seed {seed})\noutcomes: {outcomes:?}\nfamilies ({}): {families:?}",
        elapsed.as_secs_f64(),
        families.len()
    );

    if failed > 0 {
        let path = oracle_out().join(format!("diff-failures-{seed}.jsonl"));
        let mut text = String::new();
        for (input, answer, _) in &failures {
            let mut v = serde_json::to_value(input).expect("serialize");
            let mut expect = answer.clone();
            if let Some(o) = expect.as_object_mut() {
                o.remove("name");
                o.remove("port_queries");
            }
            v["expect"] = expect;
            text.push_str(&v.to_string());
            text.push('\n');
        }
        let _ = std::fs::write(&path, text);
        let shown: Vec<String> = failures
            .iter()
            .take(10)
            .map(|(input, _, m)| {
                format!("{}\n  case: {}", m.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"), json(input))
            })
            .collect();
        panic!(
            "{failed} of {count} cases differ from the real libibverbs (seed {seed}; reproduce: {repro}; \
             failing cases with the oracle's answers in {}):\n{}",
            path.display(),
            shown.join("\n")
        );
    }
}

/// A part of a case name with its number taken out, for the statistics.
fn family_part(p: &str) -> String {
    if p.bytes().all(|b| b.is_ascii_digit()) {
        "N".to_owned()
    } else if let Some(rest) = p.strip_prefix("idx") {
        format!("{}N", &p[..p.len() - rest.len()])
    } else if p.starts_with("ip4v") && p != "ip4v4" {
        "ip4vW".to_owned()
    } else {
        p.to_owned()
    }
}

fn json(c: &CaseInput) -> String {
    serde_json::to_string(c).unwrap_or_default()
}

/// Every libibverbs-profile case the repository holds (the public set, the
/// hand checks, the edge-case document, the hand-built captures' cases) gets
/// from the real libibverbs what the core computes for it.
#[test]
fn repo_vectors_match_the_real_libibverbs() {
    let Some(oracle) = oracle_or_skip("repo_vectors_match_the_real_libibverbs") else { return };
    let dir = common::repo_vectors();
    let mut files = common::required_files(&dir, ".jsonl", 4);
    files.extend(common::required_files(&dir.join("captures"), ".cases.jsonl", 2));
    files.push(dir.join("ah_from_wc_edge_cases.json"));
    let mut compared = 0;
    for f in &files {
        let cases: Vec<_> = udah_cli::vectors::load_file(f, None)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .filter(|lc| lc.case.profile() == Profile::Libibverbs)
            .collect();
        if cases.is_empty() {
            continue;
        }
        let mut input = String::new();
        for lc in &cases {
            input.push_str(&serde_json::to_string(&lc.case.input).expect("serialize"));
            input.push('\n');
        }
        let mut child = Command::new(&oracle)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", oracle.display()));
        let mut stdin = child.stdin.take().expect("oracle stdin");
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child.wait_with_output().expect("oracle output");
        writer.join().expect("writer thread").expect("writing to the oracle");
        assert!(out.status.success(), "oracle exited with {}", out.status);
        let answers: Vec<&str> = core::str::from_utf8(&out.stdout).expect("UTF-8").lines().collect();
        assert_eq!(answers.len(), cases.len(), "{}: oracle answers", f.display());
        let mut problems = Vec::new();
        for (lc, line) in cases.iter().zip(answers) {
            let answer: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("oracle line {line:?}: {e}"));
            let oracle_case = Case::from_parts(lc.case.input.clone(), Some(answer), Some(Profile::Libibverbs))
                .unwrap_or_else(|e| panic!("oracle answer not understood: {e}: {line}"));
            // The core gives the oracle's answer (under FORMAT.md's rules of
            // comparison), as it gives the file's `expect` (tests/conformance.rs).
            let core_vs_oracle = oracle_case.check().unwrap_or_else(|e| panic!("{}: {e}", lc.case.name()));
            if !core_vs_oracle.is_empty() {
                problems.push(format!("{} line {} {}: oracle {line}", f.display(), lc.line, lc.case.name()));
            }
            compared += 1;
        }
        assert!(
            problems.is_empty(),
            "{} cases differ from the real libibverbs:\n{}",
            problems.len(),
            problems.join("\n")
        );
    }
    assert!(compared >= 2030, "only {compared} libibverbs cases compared");
}
