//! Loader for the public libibverbs corpus
//! (`shared/vectors/libibverbs-v44-public.jsonl`, format in `FORMAT.md`):
//! every case with its own GID table, ready for `init_ah_from_wc`.
//!
//! Cases with a NULL `grh` are skipped, as the oracle's `--bench` skips them.

use std::path::Path;

use serde::Deserialize;
use udah_core::ah::IbvWc;
use udah_core::ah::libibverbs::{self, IbvResult};
use udah_core::wire::Area;
use udah_core::{Gid, GidEntry, GidTable, GidType, LinkLayer};

#[derive(Deserialize)]
struct RawCase {
    name: String,
    port: RawPort,
    wc: RawWc,
    grh: Option<String>,
    expect: Option<RawExpect>,
}

#[derive(Deserialize)]
struct RawPort {
    num: u8,
    gid_tbl_len: u32,
    gids: Vec<RawGid>,
}

#[derive(Deserialize)]
struct RawGid {
    index: u32,
    gid: String,
    #[serde(rename = "type")]
    ty: String,
}

#[derive(Deserialize)]
struct RawWc {
    wc_flags: u32,
    #[serde(default)]
    slid: u16,
    #[serde(default)]
    sl: u8,
    #[serde(default)]
    dlid_path_bits: u8,
    #[serde(default)]
    src_qp: u32,
    #[serde(default)]
    pkey_index: u16,
}

#[derive(Deserialize)]
struct RawExpect {
    ret: Option<i32>,
    ah_attr: RawAttr,
}

#[derive(Deserialize)]
struct RawAttr {
    grh: RawGrh,
}

#[derive(Deserialize)]
struct RawGrh {
    sgid_index: u8,
}

/// A case's GID table, in the smallest of three capacities that holds its
/// entries (the corpus has 1,973 tables: one capacity for all would not fit
/// in any cache).
#[derive(Debug, Clone)]
pub enum CorpusTable {
    /// Entries below index 16 (1,247 cases).
    Small(Box<GidTable<16>>),
    /// Entries below index 128 (508 cases).
    Medium(Box<GidTable<128>>),
    /// Entries below index 1024 (218 cases).
    Large(Box<GidTable<1024>>),
}

impl CorpusTable {
    /// `libibverbs::init_ah_from_wc` against this table.
    #[inline]
    pub fn init_ah_from_wc(&self, port: u8, wc: &IbvWc, area: &Area) -> IbvResult {
        match self {
            CorpusTable::Small(t) => libibverbs::init_ah_from_wc(t, port, wc, Some(area)),
            CorpusTable::Medium(t) => libibverbs::init_ah_from_wc(t, port, wc, Some(area)),
            CorpusTable::Large(t) => libibverbs::init_ah_from_wc(t, port, wc, Some(area)),
        }
    }
}

/// One corpus case.
#[derive(Debug, Clone)]
pub struct CorpusCase {
    /// The case name.
    pub name: String,
    /// The port number passed to the function.
    pub port: u8,
    /// The port's GID table.
    pub table: CorpusTable,
    /// The completion.
    pub wc: IbvWc,
    /// The receive area.
    pub area: Area,
    /// The expected return value (0 or -1).
    pub expect_ret: i32,
    /// The expected `sgid_index`.
    pub expect_sgid_index: u8,
}

fn unhex<const L: usize>(s: &str) -> Result<[u8; L], String> {
    let b = s.as_bytes();
    if b.len() != 2 * L {
        return Err(format!("expected {} hex digits, got {}", 2 * L, b.len()));
    }
    let mut out = [0u8; L];
    for (i, o) in out.iter_mut().enumerate() {
        let pair = s.get(2 * i..2 * i + 2).ok_or("bad hex")?;
        *o = u8::from_str_radix(pair, 16).map_err(|e| format!("bad hex {pair:?}: {e}"))?;
    }
    Ok(out)
}

fn fill<const N: usize>(port: &RawPort) -> Result<GidTable<N>, String> {
    let mut t = GidTable::new(port.num, LinkLayer::Ethernet, port.gid_tbl_len);
    for g in &port.gids {
        let ty = match g.ty.as_str() {
            "ib" => GidType::Ib,
            "roce_v1" => GidType::RoceV1,
            "roce_v2" => GidType::RoceV2,
            other => return Err(format!("unknown GID type {other:?}")),
        };
        let gid = Gid(unhex::<16>(&g.gid)?);
        if gid == Gid::ZERO {
            continue; // an empty slot, as in the kernel
        }
        t.set(g.index, GidEntry::new(gid, ty)).map_err(|e| format!("index {}: {e}", g.index))?;
    }
    Ok(t)
}

/// Parses a corpus file. Returns the cases and the number skipped (NULL
/// `grh`, or a table index at or above 1024).
pub fn load(path: &Path) -> Result<(Vec<CorpusCase>, usize), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut cases = Vec::new();
    let mut skipped = 0;
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let raw: RawCase = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        let Some(grh) = raw.grh.as_deref() else {
            skipped += 1;
            continue;
        };
        let top = raw.port.gids.iter().map(|g| g.index).max().unwrap_or(0);
        let table = match top {
            0..16 => CorpusTable::Small(Box::new(fill(&raw.port)?)),
            16..128 => CorpusTable::Medium(Box::new(fill(&raw.port)?)),
            128..1024 => CorpusTable::Large(Box::new(fill(&raw.port)?)),
            _ => {
                skipped += 1;
                continue;
            }
        };
        let w = &raw.wc;
        let (expect_ret, expect_sgid_index) =
            raw.expect.as_ref().map_or((0, 0), |e| (e.ret.unwrap_or(0), e.ah_attr.grh.sgid_index));
        cases.push(CorpusCase {
            name: raw.name,
            port: raw.port.num,
            table,
            wc: IbvWc {
                wc_flags: w.wc_flags,
                slid: w.slid,
                sl: w.sl,
                dlid_path_bits: w.dlid_path_bits,
                src_qp: w.src_qp,
                pkey_index: w.pkey_index,
            },
            area: unhex::<40>(grh).map_err(|e| format!("line {}: {e}", n + 1))?,
            expect_ret,
            expect_sgid_index,
        });
    }
    Ok((cases, skipped))
}

/// The public corpus, if the shared folder is there.
pub fn load_public() -> Option<Result<(Vec<CorpusCase>, usize), String>> {
    crate::oracle::public_corpus_path().map(|p| load(&p))
}

#[cfg(test)]
mod test {
    #[test]
    fn public_corpus_matches_expectations() {
        let Some(loaded) = super::load_public() else {
            eprintln!("public corpus not found (set UDAH_SHARED): skipped");
            return;
        };
        let (cases, skipped) = loaded.expect("corpus parses");
        assert!(cases.len() > 1900, "{} cases, {skipped} skipped", cases.len());
        for c in &cases {
            let r = c.table.init_ah_from_wc(c.port, &c.wc, &c.area);
            let (ret, idx) = match r {
                Ok(a) => (0, a.grh.sgid_index),
                Err(f) => (-1, f.attr.grh.sgid_index),
            };
            assert_eq!((ret, idx), (c.expect_ret, c.expect_sgid_index), "{}", c.name);
        }
    }
}
