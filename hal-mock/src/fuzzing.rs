//! Fuzzing entry points over the mock backend, for the cargo-fuzz targets in
//! `fuzz/` and their stable replay (`hal-mock/tests/fuzz_replay.rs`). Not a
//! public API.
//!
//! [`fuzz_ah_table_ops`] runs an arbitrary sequence of AH-table operations
//! against a small [`AhTable`] over a [`MockHal`] whose ports inject backend
//! faults, and checks the table after every operation against an exact model
//! of its entries.

use std::collections::{HashMap, HashSet};

use udah_core::ah::{AhAttr, FlowLabel, GlobalRoute, PortNum, Sl};
use udah_core::hal::{Error as _, ErrorKind, Hal};
use udah_core::table::{AhHandle, AhTable, PreparedAttr, Session, TableError, TableStats};
use udah_core::wire::Gid;
use udah_core::{GidEntry, GidTable, GidType, LinkLayer};

use crate::fabric::{Fabric, Faults, MockAh, PortConfig, PortId};
use crate::hal::{MockError, MockHal};

/// Reads bytes; reads past the end give zeros, so every input is valid.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos = self.pos.saturating_add(1);
        b
    }

    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
}

/// The injectable error kinds, chosen by two bits of the input.
const KINDS: [ErrorKind; 4] =
    [ErrorKind::Timeout, ErrorKind::InvalidArgument, ErrorKind::WouldBlock, ErrorKind::OutOfResources];

/// How many attributes the operations choose from.
const ATTRS: u8 = 12;
/// At most this many operations per input.
const MAX_OPS: usize = 512;
/// The responder device's ports: 1 is InfiniBand, 2 is RoCE.
const IB_PORT: u8 = 1;
const ROCE_PORT: u8 = 2;
/// The RoCE peers (each a device with a neighbour-table entry).
const PEERS: [[u8; 4]; 3] = [[10, 0, 0, 11], [10, 0, 0, 12], [10, 0, 0, 13]];
/// The responder's RoCE address: GID entries 2 (v1) and 3 (v2).
const LOCAL_V4: [u8; 4] = [10, 0, 0, 10];
/// A multicast destination: resolves without a neighbour.
const MCAST: [u8; 4] = [239, 1, 1, 1];
/// The InfiniBand peer GID (`fe80::2:c9:0:7`).
const IB_PEER_GUID: u64 = 0x0002_00c9_0000_0007;

fn ib_gid(prefix: u16, guid: u64) -> Gid {
    let mut g = [0u8; 16];
    g[..2].copy_from_slice(&prefix.to_be_bytes());
    g[8..].copy_from_slice(&guid.to_be_bytes());
    Gid(g)
}

fn grh(dgid: Gid, sgid_index: u8, flow: u32) -> Option<GlobalRoute> {
    Some(GlobalRoute {
        dgid,
        flow_label: FlowLabel::new(flow).unwrap_or_default(),
        sgid_index,
        hop_limit: 64,
        traffic_class: 0,
    })
}

/// Attribute `i` (mod [`ATTRS`]): 0–3 InfiniBand without GRH, 4–5
/// InfiniBand with a GRH (same destination, two flow labels), 6–11 RoCE
/// (three unicast peers over the v2 entry, one over the v1 entry, a second
/// flow label, a multicast group).
fn attr(i: u8) -> AhAttr {
    let (port, dlid, route) = match i % ATTRS {
        n @ 0..=3 => (IB_PORT, 0x10 + u16::from(n), None),
        4 => (IB_PORT, 0x20, grh(ib_gid(0xfe80, IB_PEER_GUID), 0, 0)),
        5 => (IB_PORT, 0x20, grh(ib_gid(0xfe80, IB_PEER_GUID), 0, 7)),
        n @ 6..=8 => (ROCE_PORT, 0, grh(Gid::from_ipv4(PEERS[usize::from(n - 6)]), 3, 0)),
        9 => (ROCE_PORT, 0, grh(Gid::from_ipv4(PEERS[0]), 2, 0)),
        10 => (ROCE_PORT, 0, grh(Gid::from_ipv4(PEERS[1]), 3, 0x1_2345)),
        _ => (ROCE_PORT, 0, grh(Gid::from_ipv4(MCAST), 3, 0)),
    };
    AhAttr {
        port: PortNum::new(port).expect("ports 1 and 2"),
        dlid,
        sl: Sl::new(i % 3).unwrap_or_default(),
        src_path_bits: 0,
        static_rate: 0,
        grh: route,
    }
}

/// The other table's attributes: InfiniBand, no GRH.
fn other_attr(i: u8) -> AhAttr {
    AhAttr {
        port: PortNum::new(1).expect("port 1"),
        dlid: 0x40 + u16::from(i % 4),
        sl: Sl::default(),
        src_path_bits: 0,
        static_rate: 0,
        grh: None,
    }
}

/// The model of one entry of the table under test (live or retired); its
/// backend AH is alive by construction.
#[derive(Debug, Clone, Copy)]
struct Entry {
    attr: u8,
    refs: usize,
    retired: bool,
    born: u64,
    gid_generation: u64,
}

/// The fault configuration of one port, as decoded.
#[derive(Debug, Clone, Default)]
struct PortFaults {
    faults: Faults,
}

impl PortFaults {
    fn injects(&self, kind: ErrorKind) -> bool {
        let f = &self.faults;
        f.fail_every.is_some_and(|(_, k)| k == kind)
            || f.fail_nth.iter().any(|(_, k)| *k == kind)
            || (kind == ErrorKind::OutOfResources && f.max_live_ahs.is_some())
    }
}

struct World<const N: usize> {
    fabric: Fabric,
    hal: MockHal,
    table: AhTable<MockHal, N>,
    /// A second table on another device: its handles are foreign here.
    other_hal: MockHal,
    other: AhTable<MockHal, 16>,
    faults: [PortFaults; 2],
    /// Outstanding handles and the attribute each was asked for.
    held: Vec<(AhHandle<MockAh>, u8)>,
    /// Model: every entry of `table`, by AH.
    entries: HashMap<MockAh, Entry>,
    /// The GID snapshot each port was last swept against, and the initial one.
    swept: [GidTable<16>; 2],
    initial: [GidTable<16>; 2],
    now: u64,
    hits: u64,
    misses: u64,
    creates: u64,
    destroys: u64,
    evictions: u64,
    retirements: u64,
    gid_changes: u8,
    step: usize,
}

fn port_index(port: u8) -> usize {
    usize::from(port == ROCE_PORT)
}

impl<const N: usize> World<N> {
    fn new(seed: u64, faults: [PortFaults; 2]) -> World<N> {
        let fabric = Fabric::new(seed);
        let dev = fabric.add_device();
        let [ib_faults, roce_faults] = faults.clone();
        fabric.add_port_to(dev, PortConfig::ib(1, 0x0002_00c9_0000_0001).with_faults(ib_faults.faults));
        fabric.add_port_to(
            dev,
            PortConfig::roce([0x02, 0, 0, 0, 0, 0x0a]).with_ipv4(LOCAL_V4).with_faults(roce_faults.faults),
        );
        for (i, p) in PEERS.iter().enumerate() {
            fabric.add_port(PortConfig::roce([0x02, 0, 0, 0, 1, i as u8]).with_ipv4(*p));
        }
        let other_dev = fabric.add_device();
        fabric.add_port_to(other_dev, PortConfig::ib(0x99, 0x0002_00c9_0000_0099));
        let hal = MockHal::new(&fabric, dev);
        let other_hal = MockHal::new(&fabric, other_dev);
        let snap = |port: u8| {
            let mut t = GidTable::new(port, LinkLayer::Infiniband, 0);
            let p = PortNum::new(port).expect("IB_PORT and ROCE_PORT are nonzero");
            if let Err(e) = hal.snapshot_gids(p, &mut t) {
                panic!("ah_table_ops: snapshot of port {port} failed: {e}");
            }
            t
        };
        let initial = [snap(IB_PORT), snap(ROCE_PORT)];
        World {
            fabric,
            table: AhTable::new(),
            other: AhTable::new(),
            hal,
            other_hal,
            faults,
            held: Vec::new(),
            entries: HashMap::new(),
            swept: initial.clone(),
            initial,
            now: 0,
            hits: 0,
            misses: 0,
            creates: 0,
            destroys: 0,
            evictions: 0,
            retirements: 0,
            gid_changes: 0,
            step: 0,
        }
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "ah_table_ops: step {}: {what}\n  table: {:?}\n  fabric: {:?}\n  model: {:?}",
            self.step,
            self.table.stats(),
            self.fabric.counters(),
            self.entries
        );
    }

    fn snapshot(&self, port: u8) -> GidTable<16> {
        let mut t = GidTable::new(port, LinkLayer::Infiniband, 0);
        let Some(p) = PortNum::new(port) else { self.fail("snapshot of port 0") };
        if let Err(e) = self.hal.snapshot_gids(p, &mut t) {
            self.fail(&format!("snapshot of port {port} failed: {e}"));
        }
        t
    }

    /// The non-retired entry of attribute `a`, if any.
    fn live_entry(&self, a: u8) -> Option<MockAh> {
        let mut found = self.entries.iter().filter(|(_, e)| e.attr == a && !e.retired).map(|(ah, _)| *ah);
        let first = found.next();
        if found.next().is_some() {
            self.fail(&format!("two live entries for attribute {a}"));
        }
        first
    }

    /// Whether a create of attribute `a` can succeed given the port's GID
    /// table now (the mock's `resolve_l2` and `create_ah` rules).
    fn valid(&self, a: u8) -> bool {
        let at = attr(a);
        let Some(g) = at.grh else { return true };
        let gids = self.fabric.gids(PortId { device: 0, port: at.port.get() });
        let Some((_, src)) = gids.iter().find(|(i, _)| *i == u32::from(g.sgid_index)) else { return false };
        if at.port.get() == IB_PORT || g.dgid.ipv4().is_some_and(|v| v[0] & 0xf0 == 0xe0) {
            return true;
        }
        src.gid.is_ipv4_mapped() == g.dgid.is_ipv4_mapped()
    }

    /// Entries the backend no longer has: only unreferenced, non-retired
    /// entries may vanish, and only by eviction during a look-up.
    fn sync(&mut self, may_evict: bool) {
        let gone: Vec<(MockAh, Entry)> =
            self.entries.iter().filter(|(ah, _)| self.fabric.ah_attr(**ah).is_none()).map(|(a, e)| (*a, *e)).collect();
        for (ah, e) in gone {
            if e.refs > 0 {
                self.fail(&format!("AH {ah:?} of attribute {} destroyed with {} references out", e.attr, e.refs));
            }
            if e.retired {
                self.fail(&format!("retired unreferenced entry {ah:?} still in the model"));
            }
            if !may_evict {
                self.fail(&format!("AH {ah:?} evicted outside a look-up"));
            }
            self.entries.remove(&ah);
            self.evictions += 1;
            self.destroys += 1;
        }
    }

    fn referenced(&self) -> usize {
        self.entries.values().filter(|e| e.refs > 0).count()
    }

    fn check(&self) {
        let c = self.fabric.counters();
        if c.ah_bad_destroys != 0 {
            self.fail("an AH was destroyed twice (or a foreign AH was destroyed)");
        }
        for (h, a) in &self.held {
            let want = attr(*a);
            match self.fabric.ah_attr(h.ah()) {
                Some(got) if got == want => {}
                Some(got) => self.fail(&format!("handle {h:?} for {want:?} reads the AH of {got:?}")),
                None => self.fail(&format!("handle {h:?} for {want:?}: its AH was destroyed")),
            }
            match self.entries.get(&h.ah()) {
                Some(e) if e.attr == *a => {}
                _ => self.fail(&format!("handle {h:?} not in the model")),
            }
            match self.table.l2(h) {
                Ok(l2) if l2.is_some() == (want.port.get() == ROCE_PORT) => {}
                r => self.fail(&format!("l2 of held handle {h:?}: {r:?}")),
            }
        }
        let mut refs: HashMap<MockAh, usize> = HashMap::new();
        let mut places: HashMap<MockAh, (usize, u64)> = HashMap::new();
        for (h, _) in &self.held {
            *refs.entry(h.ah()).or_default() += 1;
            if h.slot() >= N {
                self.fail(&format!("handle {h:?} names a slot beyond the capacity {N}"));
            }
            if *places.entry(h.ah()).or_insert((h.slot(), h.generation())) != (h.slot(), h.generation()) {
                self.fail(&format!("handles of one AH {:?} name different slots or generations", h.ah()));
            }
        }
        let mut slots: Vec<usize> = places.values().map(|(slot, _)| *slot).collect();
        slots.sort_unstable();
        if slots.windows(2).any(|w| w[0] == w[1]) {
            self.fail(&format!("two referenced entries in one slot: {places:?}"));
        }
        for (ah, e) in &self.entries {
            if refs.get(ah).copied().unwrap_or(0) != e.refs {
                self.fail(&format!("model refcount of {ah:?} disagrees with the held handles"));
            }
            if e.retired && e.refs == 0 {
                self.fail(&format!("retired entry {ah:?} without references kept"));
            }
            if self.fabric.ah_attr(*ah) != Some(attr(e.attr)) {
                self.fail(&format!("entry {ah:?} of attribute {} is not alive in the backend", e.attr));
            }
        }
        for a in 0..ATTRS {
            let _ = self.live_entry(a);
        }
        let s = self.table.stats_exact();
        let o = self.other.stats();
        let n = self.entries.len() as u64;
        let want = (self.creates, self.destroys, n, n, self.evictions, self.retirements, self.hits, self.misses, 0);
        let got = (s.creates, s.destroys, s.live, s.entries, s.evictions, s.retirements, s.hits, s.misses, s.pending);
        if got != want {
            self.fail(&format!(
                "stats (creates, destroys, live, entries, evictions, retirements, hits, misses, pending) = {got:?}, model {want:?}"
            ));
        }
        if s.creates - s.destroys != s.live {
            self.fail("created − destroyed ≠ live");
        }
        if (c.ah_creates, c.ah_destroys, c.live_ahs())
            != (s.creates + o.creates, s.destroys + o.destroys, s.live + o.live)
        {
            self.fail("backend counters disagree with the two tables' statistics");
        }
    }

    fn lookup(&mut self, a: u8, kind: u8) {
        let at = attr(a);
        let expect = self.live_entry(a);
        let valid = self.valid(a);
        let pf = self.faults[port_index(at.port.get())].clone();
        let r = match kind {
            0 => self.table.get_or_create(&self.hal, &at),
            1 => self.table.try_get_or_create(&self.hal, &at),
            _ => {
                let r = self.table.get(&at);
                match (r, expect) {
                    (Some(h), Some(ah)) if h.ah() == ah => {
                        self.hits += 1;
                        self.take(h, a);
                    }
                    (None, None) => {}
                    (r, _) => self.fail(&format!("get({a}) = {r:?}, model {expect:?}")),
                }
                self.sync(false);
                return;
            }
        };
        // A live entry is found by the lock-free probe; anything else is a miss.
        if expect.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        match (r, expect) {
            (Ok(h), Some(ah)) if h.ah() == ah => self.take(h, a),
            (r, Some(ah)) => self.fail(&format!("look-up of {a} gave {r:?}, but {ah:?} is live for it")),
            (Ok(h), None) => {
                if !valid {
                    self.fail(&format!("created an AH for {a} whose source GID cannot resolve"));
                }
                if self.entries.contains_key(&h.ah()) {
                    self.fail(&format!("new entry for {a} reuses the AH {:?} of another entry", h.ah()));
                }
                let port = PortId { device: 0, port: at.port.get() };
                let e = Entry {
                    attr: a,
                    refs: 0,
                    retired: false,
                    born: self.now,
                    gid_generation: self.fabric.gid_generation(port),
                };
                self.entries.insert(h.ah(), e);
                self.creates += 1;
                self.take(h, a);
            }
            (Err(TableError::Full), None) => {
                self.sync(true);
                if self.referenced() < AhTable::<MockHal, N>::WINDOW {
                    self.fail(&format!("Full with {} referenced entries", self.referenced()));
                }
            }
            (Err(TableError::Backend(e)), None) => self.backend_error(a, e, valid, pf),
            (Err(e), None) => self.fail(&format!("look-up of {a}: undocumented error {e:?}")),
        }
        self.sync(true);
    }

    fn backend_error(&mut self, a: u8, e: MockError, valid: bool, pf: PortFaults) {
        let k = e.kind();
        let ok = match k {
            ErrorKind::InvalidArgument => !valid || pf.injects(k),
            ErrorKind::Timeout | ErrorKind::WouldBlock => pf.injects(k),
            ErrorKind::OutOfResources => pf.injects(k),
            _ => false,
        };
        if !ok {
            self.fail(&format!("look-up of {a}: backend error {e:?} not explained (valid {valid}, {pf:?})"));
        }
        if k == ErrorKind::OutOfResources {
            self.sync(true);
            if self.entries.values().any(|e| e.refs == 0) {
                self.fail("OutOfResources with an evictable entry left");
            }
        }
    }

    fn take(&mut self, h: AhHandle<MockAh>, a: u8) {
        match self.entries.get_mut(&h.ah()) {
            Some(e) => e.refs += 1,
            None => self.fail(&format!("handle {h:?} not in the model")),
        }
        self.held.push((h, a));
    }

    fn release(&mut self, i: usize) {
        if self.held.is_empty() {
            return;
        }
        let (h, a) = self.held.swap_remove(i % self.held.len());
        let ah = h.ah();
        let r = self.table.release(&self.hal, h);
        if r.is_err() {
            self.fail(&format!("release of a held handle of {a} failed: {r:?}"));
        }
        let Some(e) = self.entries.get_mut(&ah) else { self.fail("released handle not in the model") };
        e.refs -= 1;
        if e.refs == 0 && e.retired {
            self.entries.remove(&ah);
            self.destroys += 1;
            if self.fabric.ah_attr(ah).is_some() {
                self.fail(&format!("last release of retired {ah:?} did not destroy it"));
            }
        }
        self.sync(false);
    }

    fn retain(&mut self, i: usize) {
        if self.held.is_empty() {
            return;
        }
        let j = i % self.held.len();
        let (h, a) = &self.held[j];
        let a = *a;
        match self.table.retain(h) {
            Ok(h2) if h2.ah() == h.ah() && h2.slot() == h.slot() && h2.generation() == h.generation() => {
                self.take(h2, a)
            }
            r => self.fail(&format!("retain of {h:?}: {r:?}")),
        }
        self.sync(false);
    }

    /// A handle of the other table: stale here, and changes nothing.
    fn foreign(&mut self, b: u8) {
        let Ok(h) = self.other.get_or_create(&self.other_hal, &other_attr(b)) else {
            self.fail("the other table failed a plain create")
        };
        let before: (TableStats, _) = (self.table.stats(), self.fabric.counters());
        if self.table.retain(&h) != Err(TableError::StaleHandle) {
            self.fail(&format!("retain of foreign {h:?} was not StaleHandle"));
        }
        if self.table.l2(&h) != Err(TableError::StaleHandle) {
            self.fail(&format!("l2 of foreign {h:?} was not StaleHandle"));
        }
        if b & 0x10 != 0 {
            if self.other.release(&self.other_hal, h).is_err() {
                self.fail("the other table failed a release");
            }
        } else {
            let r = self.table.release(&self.hal, h);
            if r != Err(TableError::StaleHandle) {
                self.fail(&format!("release of a foreign handle gave {r:?}"));
            }
            // The other table's reference leaks (the handle was consumed).
            if (self.table.stats(), self.fabric.counters()) != before {
                self.fail("a stale release changed the table or the backend");
            }
        }
        self.sync(false);
    }

    /// Marks `victims` retired in the model (destroying the unreferenced).
    fn retire_model(&mut self, victims: &[MockAh], got: usize, what: &str) {
        if got != victims.len() {
            self.fail(&format!("{what} retired {got} entries, model {}", victims.len()));
        }
        for ah in victims {
            self.retirements += 1;
            let Some(e) = self.entries.get_mut(ah) else { continue };
            e.retired = true;
            if e.refs == 0 {
                self.entries.remove(ah);
                self.destroys += 1;
            }
        }
        self.sync(false);
    }

    fn live_entries(&self, pred: impl Fn(&Entry) -> bool) -> Vec<MockAh> {
        self.entries.iter().filter(|(_, e)| !e.retired && pred(e)).map(|(ah, _)| *ah).collect()
    }

    fn retire_all(&mut self) {
        let victims = self.live_entries(|_| true);
        let got = self.table.retire_all(&self.hal);
        self.retire_model(&victims, got, "retire_all");
    }

    fn retire_older_than(&mut self, age: u64) {
        let now = self.now;
        let victims = self.live_entries(|e| now.saturating_sub(e.born) >= age);
        let got = self.table.retire_older_than(&self.hal, age);
        self.retire_model(&victims, got, "retire_older_than");
    }

    /// Changes a GID entry of a port; `b` picks the port, the index, the new
    /// entry and whether to sweep now.
    fn gid_change(&mut self, b: u8) {
        let port = if b & 1 == 0 { IB_PORT } else { ROCE_PORT };
        let index = u32::from((b >> 1) & 3);
        self.gid_changes = self.gid_changes.wrapping_add(1);
        let n = self.gid_changes;
        let entry = match (b >> 3) & 3 {
            0 => None,
            1 => self.initial[port_index(port)].get(index),
            2 if port == IB_PORT => Some(GidEntry::new(ib_gid(0xfec0, u64::from(n)), GidType::Ib)),
            2 => Some(GidEntry::new(Gid::from_ipv4([10, 0, 1, n]), GidType::RoceV2)),
            _ if port == IB_PORT => Some(GidEntry::new(ib_gid(0xfe80, u64::from(n) << 8), GidType::Ib)),
            _ => {
                let mut g = ib_gid(0x2001, u64::from(n));
                g.0[2..4].copy_from_slice(&[0x0d, 0xb8]);
                Some(GidEntry::new(g, GidType::RoceV2))
            }
        };
        if !self.fabric.set_gid(PortId { device: 0, port }, index, entry) {
            self.fail(&format!("set_gid({port}, {index}) refused"));
        }
        self.sync(false);
        if (b >> 5) & 3 != 3 {
            self.sweep(port);
        }
    }

    /// `retire_gid_change` of `port` from the last swept snapshot to a fresh one.
    fn sweep(&mut self, port: u8) {
        let old = self.swept[port_index(port)].clone();
        let new = self.snapshot(port);
        let (g_old, g_new) = (old.generation(), new.generation());
        let mut victims = Vec::new();
        let mut restamp = Vec::new();
        for (ah, e) in &self.entries {
            let at = attr(e.attr);
            if e.retired || at.port.get() != port || e.gid_generation == g_new {
                continue;
            }
            let keep = match at.grh {
                None => true,
                Some(g) => {
                    let i = u32::from(g.sgid_index);
                    e.gid_generation == g_old && old.get(i) == new.get(i)
                }
            };
            if keep { restamp.push(*ah) } else { victims.push(*ah) }
        }
        for ah in restamp {
            if let Some(e) = self.entries.get_mut(&ah) {
                e.gid_generation = g_new;
            }
        }
        let got = self.table.retire_gid_change(&self.hal, &old, &new);
        self.swept[port_index(port)] = new;
        self.retire_model(&victims, got, "retire_gid_change");
    }

    fn finish(mut self) {
        while !self.held.is_empty() {
            self.release(0);
        }
        self.retire_all();
        self.check();
        let s = self.table.stats();
        if s.live != 0 || s.entries != 0 || s.creates != s.destroys || !self.entries.is_empty() {
            self.fail("after releasing everything and retire_all, AHs are left");
        }
        let o = self.other.stats();
        if self.fabric.counters().live_ahs() != o.live {
            self.fail("backend AHs left besides the other table's");
        }
    }
}

fn kind(bits: u8) -> ErrorKind {
    KINDS[usize::from(bits & 3)]
}

/// Runs an AH-table operation sequence decoded from `data` against an exact
/// model and panics on the first violated invariant (never because of the
/// input).
///
/// Layout (reads past the end give zeros):
///
/// * byte 0: bit 0 the capacity (8 or 16); bits 1–3 `max_live_ahs` (0: none);
///   bits 4–5 which ports get the faults (1 InfiniBand, 2 RoCE, 0 or 3 both);
/// * byte 1: `fail_every`: period in the low nibble (below 2: none), kind in
///   bits 4–5 (Timeout, InvalidArgument, WouldBlock, OutOfResources);
/// * byte 2: how many `fail_nth` entries (low 3 bits), then one byte each:
///   attempt `(b & 63) + 1`, kind `b >> 6`;
/// * then operations, one opcode byte (`% 20`) and its argument byte each, at
///   most 512: get_or_create (0–5), try_get_or_create (6–7), release of a held
///   handle (8–10), retain (11), lock-free get (12), a handle of another table
///   (13), retire_all (14), clock (15: `+b`, or `b & 127` when bit 7 is set),
///   retire_older_than (16: `b & 63`), a GID change (17, see
///   `World::gid_change`), a sweep of a port (18), releasing every handle (19).
///
/// Invariants checked after every operation: no panic inside the table;
/// every handle's AH is alive with the attribute asked for; the table's
/// statistics (creates, destroys, live, entries, evictions, retirements,
/// hits, misses, no pending) equal the model's and created − destroyed =
/// live = the backend's; no double destroy; no referenced entry destroyed;
/// handles of one AH name one slot and generation, no two entries share a
/// slot; at most one live entry per attribute and a look-up returns it
/// (a hit); `l2` of every handle; foreign handles give `StaleHandle` and
/// change nothing; results of sweeps equal the model's; errors are only
/// `Full` (with a window of referenced entries) and backend errors that the
/// faults or the GID table explain. At the end everything is released and
/// `retire_all` must leave no AH.
#[doc(hidden)]
pub fn fuzz_ah_table_ops(data: &[u8]) {
    let mut c = Cursor { data, pos: 0 };
    let (small, seed, ports) = header(&mut c);
    if small { run::<8>(&mut c, seed, ports) } else { run::<16>(&mut c, seed, ports) }
}

/// The input's header: the table size (8 or 16 slots), the fabric's seed and
/// the faults each port injects.
fn header(c: &mut Cursor<'_>) -> (bool, u64, [PortFaults; 2]) {
    let b0 = c.u8();
    let mut faults = Faults {
        max_live_ahs: match (b0 >> 1) & 7 {
            0 => None,
            k => Some(usize::from(k)),
        },
        ..Faults::default()
    };
    let b1 = c.u8();
    if b1 & 15 >= 2 {
        faults.fail_every = Some((u64::from(b1 & 15), kind(b1 >> 4)));
    }
    for _ in 0..(c.u8() & 7) {
        let b = c.u8();
        faults.fail_nth.push((u64::from(b & 63) + 1, kind(b >> 6)));
    }
    let pf = PortFaults { faults };
    let ports = match (b0 >> 4) & 3 {
        1 => [pf, PortFaults::default()],
        2 => [PortFaults::default(), pf],
        _ => [pf.clone(), pf],
    };
    let seed = u64::from(b0) | (u64::from(b1) << 8);
    (b0 & 1 == 0, seed, ports)
}

fn run<const N: usize>(c: &mut Cursor<'_>, seed: u64, faults: [PortFaults; 2]) {
    let mut w = World::<N>::new(seed, faults);
    w.check();
    while !c.done() && w.step < MAX_OPS {
        w.step += 1;
        let (op, b) = (c.u8() % 20, c.u8());
        match op {
            0..=5 => w.lookup(b % ATTRS, 0),
            6..=7 => w.lookup(b % ATTRS, 1),
            8..=10 => w.release(usize::from(b)),
            11 => w.retain(usize::from(b)),
            12 => w.lookup(b % ATTRS, 2),
            13 => w.foreign(b),
            14 => w.retire_all(),
            15 => {
                w.now = if b & 0x80 != 0 { u64::from(b & 0x7f) } else { w.now + u64::from(b) };
                w.table.advance_clock(w.now);
            }
            16 => w.retire_older_than(u64::from(b & 63)),
            17 => w.gid_change(b),
            18 => w.sweep(if b & 1 == 0 { IB_PORT } else { ROCE_PORT }),
            _ => {
                while !w.held.is_empty() {
                    w.release(usize::from(b));
                }
            }
        }
        w.check();
    }
    w.finish();
}

/// Runs an arbitrary sequence of AH-table operations made through two
/// [`Session`]s (two leases, and the default 256) and through the table
/// itself, interleaved, over the faulting mock backend of
/// [`fuzz_ah_table_ops`] (same input header). Operation bytes: look-ups of
/// one of [`ATTRS`] attributes through the small session (plain, `try_`,
/// prepared), the big one, or the table; releases of a held handle through
/// either session or the table (references are interchangeable); sweeps
/// (`retire_all`, `retire_older_than`); a session's `flush`.
///
/// Invariants checked after every operation: no panic; every handle's AH is
/// alive with the attribute asked for; no double destroy; created −
/// destroyed = live, for the table and the backend; every look-up is one hit
/// or one miss once the sessions' unpublished hits are counted; no look-up
/// after a `retire_all` returns an AH that existed before it (a lease must
/// not serve a retired entry); errors are only `Full`, `Pending` and backend
/// errors. At the end the sessions are dropped, every handle is released,
/// and `retire_all` must leave no AH and no entry.
#[doc(hidden)]
pub fn fuzz_session_ops(data: &[u8]) {
    let mut c = Cursor { data, pos: 0 };
    let (small, seed, ports) = header(&mut c);
    if small { session_run::<8>(&mut c, seed, ports) } else { session_run::<16>(&mut c, seed, ports) }
}

fn session_run<const N: usize>(c: &mut Cursor<'_>, seed: u64, faults: [PortFaults; 2]) {
    let w = World::<N>::new(seed, faults);
    let (table, hal, fabric) = (&w.table, &w.hal, &w.fabric);
    let mut small: Session<'_, MockHal, N, 2> = Session::new(table, hal);
    let mut big: Session<'_, MockHal, N> = table.session(hal);
    let mut held: Vec<(AhHandle<MockAh>, u8)> = Vec::new();
    // Every AH a look-up returned since the last `retire_all`, and every one
    // before it (which no later look-up may return).
    let (mut seen, mut retired) = (HashSet::new(), HashSet::new());
    let (mut lookups, mut now, mut step) = (0u64, 0u64, 0usize);
    let fail = |step: usize, what: &str| -> ! {
        panic!("session_ops: step {step}: {what}\n  table: {:?}\n  fabric: {:?}", table.stats(), fabric.counters())
    };
    while !c.done() && step < MAX_OPS {
        step += 1;
        let (op, b) = (c.u8() % 12, c.u8());
        match op {
            0..=6 => {
                let a = b % ATTRS;
                let at = attr(a);
                let prepared = PreparedAttr::new(&at);
                lookups += 1;
                let r = match (op, b >> 6) {
                    (0..=2, 0) => small.try_get_or_create(&at),
                    (0..=2, 1) => small.get_or_create(&prepared),
                    (0..=2, _) => small.get_or_create(&at),
                    (3..=5, 0) => big.try_get_or_create(&prepared),
                    (3..=5, 1) => big.get_or_create(&prepared),
                    (3..=5, _) => big.get_or_create(&at),
                    _ => table.get_or_create(hal, &at),
                };
                match r {
                    Ok(h) => {
                        if retired.contains(&h.ah()) {
                            fail(step, &format!("a look-up of {a} returned {h:?}, retired by an earlier retire_all"));
                        }
                        seen.insert(h.ah());
                        held.push((h, a));
                    }
                    Err(TableError::Full | TableError::Pending | TableError::Backend(_)) => {}
                    Err(e) => fail(step, &format!("look-up of {a}: unexpected {e:?}")),
                }
            }
            7..=8 if !held.is_empty() => {
                let (h, _) = held.swap_remove(usize::from(b) % held.len());
                let r = match b >> 6 {
                    0 => small.release(h),
                    1 => big.release(h),
                    _ => table.release(hal, h),
                };
                if let Err(e) = r {
                    fail(step, &format!("release of a held handle: {e:?}"));
                }
            }
            9 => {
                table.retire_all(hal);
                retired.extend(seen.drain());
            }
            10 => {
                now = now.wrapping_add(u64::from(b));
                table.advance_clock(now);
                table.retire_older_than(hal, u64::from(b & 63));
            }
            11 => {
                let r = if b & 1 == 0 { small.flush() } else { big.flush() };
                if let Err(TableError::StaleHandle) = r {
                    fail(step, "a flush found its references gone");
                }
            }
            _ => {}
        }
        session_check(step, table, fabric, &held, lookups, small.unpublished_hits() + big.unpublished_hits());
    }
    drop((small, big));
    session_check(step, table, fabric, &held, lookups, 0);
    for (h, _) in held.drain(..) {
        if let Err(e) = table.release(hal, h) {
            fail(step, &format!("final release: {e:?}"));
        }
    }
    table.retire_all(hal);
    let (st, fc) = (table.stats(), fabric.counters());
    if st.live != 0 || st.entries != 0 || fc.ah_creates != fc.ah_destroys {
        fail(step, "AHs or entries left after the sessions, every handle and retire_all went");
    }
}

fn session_check<const N: usize>(
    step: usize,
    table: &AhTable<MockHal, N>,
    fabric: &Fabric,
    held: &[(AhHandle<MockAh>, u8)],
    lookups: u64,
    unpublished: u64,
) {
    let (st, fc) = (table.stats_exact(), fabric.counters());
    let fail = |what: String| -> ! { panic!("session_ops: step {step}: {what}\n  table: {st:?}\n  fabric: {fc:?}") };
    if fc.ah_bad_destroys != 0 {
        fail("an AH was destroyed twice".into());
    }
    if (st.creates, st.destroys, st.live) != (fc.ah_creates, fc.ah_destroys, fc.ah_creates.wrapping_sub(fc.ah_destroys))
    {
        fail("the table's creates / destroys / live disagree with the backend's".into());
    }
    if st.hits + unpublished + st.misses != lookups {
        fail(format!("{} hits ({unpublished} unpublished) + {} misses for {lookups} look-ups", st.hits, st.misses));
    }
    for (h, a) in held {
        if fabric.ah_attr(h.ah()) != Some(attr(*a)) {
            fail(format!("handle {h:?} for attribute {a} does not hold its AH"));
        }
    }
}
