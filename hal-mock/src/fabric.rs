//! The simulated fabric: devices, ports, GID tables, neighbours, UD QPs, AHs.

use core::time::Duration;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use udah_core::ah::{
    AhAttr, IB_WC_GRH, IB_WC_WITH_NETWORK_HDR_TYPE, IB_WC_WITH_SMAC, IB_WC_WITH_VLAN, IBV_WC_GRH, IbvWc, KernelWc,
};
use udah_core::hal::{ErrorKind, L2Info, PortInfo};
use udah_core::wire::{Area, Gid, GrhRepr, Ipv4Repr, NetworkType, SourceAddress, Stamp};
use udah_core::{GidEntry, GidType, LinkLayer};

/// A port of a device on the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortId {
    /// Device number (0-based, in order of creation).
    pub device: u16,
    /// Port number (1-based, as in verbs).
    pub port: u8,
}

/// A QP number. Numbers are unique on the whole fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Qpn(pub u32);

/// An AH created on the mock backend (a token; the fabric holds its state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MockAh(pub u64);

impl udah_core::hal::AhToken for MockAh {
    fn into_token(self) -> u64 {
        self.0
    }
    fn from_token(token: u64) -> MockAh {
        MockAh(token)
    }
}

/// What the 20 undefined bytes in front of a RoCE v2 IPv4 header hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FrontFill {
    /// Zeros (a fresh buffer).
    #[default]
    Zero,
    /// The first 20 bytes of the previous area this QP received (a reused
    /// buffer; after an IPv6 packet they look like an IPv6 header).
    Stale,
    /// Random bytes from the fabric's seeded generator.
    Random,
    /// Random bytes with a first nibble of 6 and next header 17: the worst
    /// case for the header heuristics (forces the checksum test).
    Ipv6Looking,
}

/// Vendor behaviours of a port's NIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quirks {
    /// What the undefined front of an IPv4 area holds.
    pub front_fill: FrontFill,
    /// irdma (and rxe on its loopback path): the IPv4 header is written
    /// with a zero checksum field.
    pub irdma_zero_ipv4_checksum: bool,
    /// rxe: the NIC writes all 40 bytes of an IPv4 area, zeros in bytes
    /// 0..20, so a consumer's stamp is overwritten (see [`Quirks::rxe`]).
    pub rxe_zero_front: bool,
    /// mlx5: RoCE UD completions carry the packet type (0 GRH, 1 IPv6,
    /// 2 IPv4) in the low bits of `wc.sl`.
    pub mlx5_sl_packet_type: bool,
    /// The kernel completion reports `IB_WC_WITH_NETWORK_HDR_TYPE`.
    pub report_network_type: bool,
    /// AHs are built in the kernel, which replaces the hop limit of unicast
    /// RoCE destinations with the route's (irdma); `None` keeps the user's.
    pub route_hop_limit: Option<u8>,
    /// The NIC reports the source and destination GIDs (and the header
    /// type) in the completion ([`Received::source`], like EFA's
    /// `efadv_wc_read_sgid`) and does not write the 40-byte area: the
    /// consumer's buffer keeps [`GID_IN_COMPLETION_FILL`] there.
    pub gid_in_completion: bool,
}

/// What the 40-byte area holds on a [`Quirks::gid_in_completion`] NIC (the
/// area is never written; this pattern is no valid header of any kind, so
/// a consumer that read it would fail).
pub const GID_IN_COMPLETION_FILL: u8 = 0xa5;

impl Quirks {
    /// Soft-RoCE (`rdma_rxe`, Linux 6.1, seen on the project's guest): for a
    /// RoCE v2/IPv4 packet it zeroes bytes 0..20 of the receive area (over
    /// any stamp) and writes the IPv4 header at 20..40 with checksum 0x0000;
    /// no network type is reported and `wc.sl` is 0.
    pub const fn rxe() -> Quirks {
        Quirks {
            front_fill: FrontFill::Zero,
            irdma_zero_ipv4_checksum: true,
            rxe_zero_front: true,
            mlx5_sl_packet_type: false,
            report_network_type: false,
            route_hop_limit: None,
            gid_in_completion: false,
        }
    }

    /// A NIC that gives the source address in the completion and leaves the
    /// area alone ([`Quirks::gid_in_completion`]), reporting the network
    /// type to the kernel.
    pub const fn gid_in_completion() -> Quirks {
        Quirks {
            front_fill: FrontFill::Zero,
            irdma_zero_ipv4_checksum: false,
            rxe_zero_front: false,
            mlx5_sl_packet_type: false,
            report_network_type: true,
            route_hop_limit: None,
            gid_in_completion: true,
        }
    }
}

/// Fault injection and cost model for AH creation on a port.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Faults {
    /// Creates fail with `OutOfResources` (ENOMEM) while this many AHs live.
    pub max_live_ahs: Option<usize>,
    /// The n-th create attempt on this port (1-based) fails with this kind.
    pub fail_nth: Vec<(u64, ErrorKind)>,
    /// Every k-th create attempt fails with this kind.
    pub fail_every: Option<(u64, ErrorKind)>,
    /// How long a create takes (slept outside the fabric lock): microseconds
    /// for RoCE on real NICs, nothing for IB. A latency below
    /// [`SLEEP_QUANTUM`] is owed and slept once a quantum is due (a sleep
    /// costs tens of µs more than asked), so that many short creates take
    /// their total time, not their count of sleeps.
    pub create_latency: Duration,
}

/// The shortest sleep of the create cost model: shorter latencies add up
/// until this much is owed (see [`Faults::create_latency`]).
pub const SLEEP_QUANTUM: Duration = Duration::from_millis(1);

/// Configuration of one port.
#[derive(Debug, Clone)]
pub struct PortConfig {
    link_layer: LinkLayer,
    lid: u16,
    lmc: u8,
    mac: [u8; 6],
    gid_tbl_len: u32,
    gids: Vec<(u32, GidEntry)>,
    pkeys: Cow<'static, [u16]>,
    quirks: Quirks,
    /// `None`: no fault and no create cost (a port of a peer, most of them
    /// at scale, holds one pointer instead of a [`Faults`]).
    faults: Option<Box<Faults>>,
}

/// The P_Key table of a port unless set: the default full-member P_Key.
const DEFAULT_PKEYS: &[u16] = &[0xffff];

impl PortConfig {
    /// An InfiniBand port with base LID `lid`; GID 0 is `fe80::<guid>`.
    pub fn ib(lid: u16, guid: u64) -> PortConfig {
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[8..].copy_from_slice(&guid.to_be_bytes());
        PortConfig {
            link_layer: LinkLayer::Infiniband,
            lid,
            lmc: 0,
            mac: [0; 6],
            gid_tbl_len: 16,
            gids: vec![(0, GidEntry::new(Gid(g), GidType::Ib))],
            pkeys: Cow::Borrowed(DEFAULT_PKEYS),
            quirks: Quirks::default(),
            faults: None,
        }
    }

    /// A RoCE port with MAC `mac`; entries 0 and 1 are its link-local GID as
    /// RoCE v1 and v2.
    pub fn roce(mac: [u8; 6]) -> PortConfig {
        let ll = Gid::link_local_from_mac(mac);
        PortConfig {
            link_layer: LinkLayer::Ethernet,
            lid: 0,
            lmc: 0,
            mac,
            gid_tbl_len: 16,
            gids: vec![(0, GidEntry::new(ll, GidType::RoceV1)), (1, GidEntry::new(ll, GidType::RoceV2))],
            pkeys: Cow::Borrowed(DEFAULT_PKEYS),
            quirks: Quirks::default(),
            faults: None,
        }
    }

    fn next_free(&self) -> u32 {
        self.gids.iter().map(|(i, _)| i + 1).max().unwrap_or(0)
    }

    /// Adds a GID entry at `index`, replacing what was there; grows the table
    /// length if needed.
    pub fn with_gid(mut self, index: u32, entry: GidEntry) -> PortConfig {
        self.gids.retain(|(i, _)| *i != index);
        self.gids.push((index, entry));
        self.gid_tbl_len = self.gid_tbl_len.max(index + 1);
        self
    }

    /// Adds the RoCE v1 and v2 entries of IPv4 address `addr` (untagged) at
    /// the next free indices.
    pub fn with_ipv4(self, addr: [u8; 4]) -> PortConfig {
        self.with_address(Gid::from_ipv4(addr), None)
    }

    /// Adds the RoCE v1 and v2 entries of IPv4 address `addr` on VLAN `vlan`.
    pub fn with_vlan_ipv4(self, addr: [u8; 4], vlan: u16) -> PortConfig {
        self.with_address(Gid::from_ipv4(addr), Some(vlan))
    }

    /// Adds the RoCE v1 and v2 entries of `gid` (an IPv6 address, or IPv4-mapped)
    /// on VLAN `vlan` (`None` = untagged) at the next free indices.
    pub fn with_address(self, gid: Gid, vlan: Option<u16>) -> PortConfig {
        let i = self.next_free();
        let mk = |t| {
            let e = GidEntry::new(gid, t);
            if let Some(v) = vlan { e.with_vlan(v) } else { e }
        };
        self.with_gid(i, mk(GidType::RoceV1)).with_gid(i + 1, mk(GidType::RoceV2))
    }

    /// Adds an InfiniBand GID (e.g. a second subnet prefix) at the next free index.
    pub fn with_ib_gid(self, gid: Gid) -> PortConfig {
        let i = self.next_free();
        self.with_gid(i, GidEntry::new(gid, GidType::Ib))
    }

    /// Sets the GID table length (slots above the entries are empty).
    pub fn with_table_len(mut self, len: u32) -> PortConfig {
        self.gid_tbl_len = len.max(self.next_free());
        self
    }

    /// Sets the LID mask count (IB): the port answers `2^lmc` LIDs.
    pub fn with_lmc(mut self, lmc: u8) -> PortConfig {
        self.lmc = lmc.min(7);
        self
    }

    /// Sets the vendor quirks.
    pub fn with_quirks(mut self, quirks: Quirks) -> PortConfig {
        self.quirks = quirks;
        self
    }

    /// Sets fault injection and the create cost model.
    pub fn with_faults(mut self, faults: Faults) -> PortConfig {
        self.faults = (faults != Faults::default()).then(|| Box::new(faults));
        self
    }

    /// Sets the P_Key table.
    pub fn with_pkeys(mut self, pkeys: Vec<u16>) -> PortConfig {
        self.pkeys = Cow::Owned(pkeys);
        self
    }
}

/// An asynchronous event, as `ibv_get_async_event` would report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncEvent {
    /// `IBV_EVENT_GID_CHANGE`: the port's GID table changed.
    GidChange(PortId),
    /// `IBV_EVENT_PORT_ACTIVE`.
    PortActive(PortId),
    /// `IBV_EVENT_PORT_ERR`.
    PortError(PortId),
}

/// The completion fields a NIC reports for a UD receive, in both the
/// userspace and the kernel encoding: the userspace `struct ibv_wc` fields
/// (core's [`IbvWc`]) and what only the kernel's `struct ib_wc` or the mock
/// adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MockWc {
    /// The userspace fields: `wc_flags` (`ibv_wc_flags`), `slid` (0 on
    /// RoCE), `sl` as reported (mlx5 quirk: packet-type bits),
    /// `dlid_path_bits`, `src_qp`, `pkey_index`.
    pub ibv: IbvWc,
    /// Kernel `ib_wc_flags`.
    pub kernel_flags: u32,
    /// VLAN id (kernel, with `IB_WC_WITH_VLAN`).
    pub vlan_id: u16,
    /// Network type (kernel, with `IB_WC_WITH_NETWORK_HDR_TYPE`).
    pub network_hdr_type: u8,
    /// Source MAC (RoCE).
    pub smac: [u8; 6],
    /// Received byte count (payload + 40-byte area).
    pub byte_len: u32,
}

impl MockWc {
    /// The userspace view (`struct ibv_wc`): the [`ibv`](Self::ibv) field.
    pub fn ibv(&self) -> IbvWc {
        self.ibv
    }

    /// The kernel view (`struct ib_wc`).
    pub fn kernel(&self) -> KernelWc {
        let i = &self.ibv;
        KernelWc {
            wc_flags: self.kernel_flags,
            slid: u32::from(i.slid),
            sl: i.sl,
            dlid_path_bits: i.dlid_path_bits,
            vlan_id: self.vlan_id,
            network_hdr_type: self.network_hdr_type,
            smac: self.smac,
            src_qp: i.src_qp,
            pkey_index: i.pkey_index,
        }
    }
}

/// A received UD message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The completion.
    pub wc: MockWc,
    /// The 40-byte area in front of the payload, as the NIC wrote it.
    pub area: Area,
    /// The payload.
    pub payload: Vec<u8>,
    /// The addresses, on a NIC that reports them in the completion
    /// ([`Quirks::gid_in_completion`]); a [`Received`] is the completion the
    /// responder reads (it implements `Completion`), so the [`MockWc`]
    /// stays the size of what an area-writing NIC reports.
    pub source: Option<SourceAddress>,
}

/// Why a send was refused locally (UD drops on the wire are not errors; they
/// are counted in [`Counters`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendError {
    /// No such QP.
    NoSuchQp(Qpn),
    /// The AH does not exist (destroyed, or never created).
    StaleAh(MockAh),
    /// The AH belongs to another port than the QP.
    WrongPort,
}

impl core::fmt::Display for SendError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SendError::NoSuchQp(q) => write!(f, "no QP {:#x}", q.0),
            SendError::StaleAh(a) => write!(f, "AH {} does not exist", a.0),
            SendError::WrongPort => f.write_str("the AH belongs to another port than the QP"),
        }
    }
}

impl core::error::Error for SendError {}

/// Fabric-wide counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// AHs created.
    pub ah_creates: u64,
    /// AHs destroyed.
    pub ah_destroys: u64,
    /// Create attempts that failed.
    pub ah_create_failures: u64,
    /// Destroys of AHs that did not exist (double destroys).
    pub ah_bad_destroys: u64,
    /// Nanoseconds spent in the create cost model.
    pub ah_create_ns: u64,
    /// Sends posted.
    pub sent: u64,
    /// Messages delivered.
    pub delivered: u64,
    /// Dropped: no port or QP at the destination, port down.
    pub dropped_no_route: u64,
    /// Dropped: Q_Key mismatch.
    pub dropped_qkey: u64,
    /// Dropped: the AH's destination MAC is not the destination port's.
    pub dropped_mac: u64,
    /// Dropped: the VLANs of the two GID entries differ.
    pub dropped_vlan: u64,
    /// Dropped: the AH's source GID entry is gone.
    pub dropped_sgid: u64,
    /// Dropped: the P_Keys of the two QPs do not admit each other.
    pub dropped_pkey: u64,
}

impl Counters {
    /// AHs alive now.
    pub fn live_ahs(&self) -> u64 {
        self.ah_creates - self.ah_destroys
    }
}

#[derive(Debug)]
struct PortState {
    /// The configuration, without its GID entries (they are in `table`).
    cfg: PortConfig,
    table: Box<[Option<GidEntry>]>,
    active: bool,
    generation: u64,
    create_attempts: u64,
}

#[derive(Debug)]
struct QpState {
    port: PortId,
    qkey: u32,
    pkey_index: u16,
    rq: VecDeque<Received>,
    last_front: [u8; 20],
    stamp: Option<[u8; 20]>,
}

/// A slot of the AH slab: the AH, if one lives there, and how many AHs it
/// held before.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AhSlot {
    generation: u32,
    ah: Option<AhState>,
}

/// The number of the first QP.
const FIRST_QPN: u32 = 0x100;

/// The token of the AH in slot `slot` (0-based) at `generation`: the first
/// AHs of a fabric are 1, 2, 3, …
fn ah_token(slot: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | (u64::from(slot) + 1)
}

/// The slot and generation of an AH token, if it can be one.
fn ah_slot(token: u64) -> Option<(usize, u32)> {
    let slot = (token & 0xffff_ffff).checked_sub(1)?;
    Some((slot as usize, (token >> 32) as u32))
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct AhState {
    pub(crate) port: PortId,
    pub(crate) attr: AhAttr,
    pub(crate) l2: Option<L2Info>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    devices: Vec<Vec<PortState>>,
    events: Vec<VecDeque<AsyncEvent>>,
    /// The QPs, QP number [`FIRST_QPN`] first (numbers are given in order
    /// and never taken back).
    qps: Vec<QpState>,
    /// The AHs: a slab of slots, the token being the slot's generation and
    /// number ([`ah_token`]), so that a destroyed AH's token stays stale
    /// after its slot is reused.
    ahs: Vec<AhSlot>,
    /// Slots of destroyed AHs, reused last in, first out.
    free_ahs: Vec<u32>,
    /// AHs alive per device (index: device number), kept with `ahs` so that
    /// a create's `max_live_ahs` check is O(1) at any AH count.
    live_ahs: Vec<usize>,
    neighbours: HashMap<Gid, [u8; 6]>,
    rng: u64,
    /// Create latency owed and not slept yet, ns (negative: slept ahead).
    create_debt_ns: i64,
    counters: Counters,
    ident: u16,
}

impl State {
    fn next_random(&mut self) -> u64 {
        // SplitMix64: deterministic for a seed.
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn port(&self, id: PortId) -> Option<&PortState> {
        self.devices.get(usize::from(id.device))?.get(usize::from(id.port).checked_sub(1)?)
    }

    fn port_mut(&mut self, id: PortId) -> Option<&mut PortState> {
        self.devices.get_mut(usize::from(id.device))?.get_mut(usize::from(id.port).checked_sub(1)?)
    }

    fn qp(&self, qpn: Qpn) -> Option<&QpState> {
        self.qps.get(qpn.0.checked_sub(FIRST_QPN)? as usize)
    }

    fn qp_mut(&mut self, qpn: Qpn) -> Option<&mut QpState> {
        self.qps.get_mut(qpn.0.checked_sub(FIRST_QPN)? as usize)
    }

    /// The live AH of token `token`.
    pub(crate) fn ah(&self, token: u64) -> Option<&AhState> {
        let (slot, generation) = ah_slot(token)?;
        let s = self.ahs.get(slot)?;
        if s.generation == generation { s.ah.as_ref() } else { None }
    }
}

/// Gives the memory of an emptied receive queue back: a fabric of a million
/// peers holds a million queues, nearly all of them empty between messages.
fn release_if_empty(rq: &mut VecDeque<Received>) {
    if rq.is_empty() && rq.capacity() > 0 {
        *rq = VecDeque::new();
    }
}

/// The linux `rt_tos2priority` mapping of a TOS byte to a VLAN priority.
pub(crate) fn tos_to_priority(tos: u8) -> u16 {
    const MAP: [u16; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];
    MAP[usize::from((tos & 0x1e) >> 1)]
}

/// The simulated fabric. Cloning gives another handle to the same fabric.
#[derive(Debug, Clone)]
pub struct Fabric {
    pub(crate) state: Arc<Mutex<State>>,
    /// Destinations whose [`resolve_l2`](udah_core::hal::Hal::resolve_l2)
    /// blocks ([`Fabric::stall_resolve`]), and the condition their callers
    /// wait on. Apart from `state`, so that a blocked resolution holds no
    /// lock the rest of the fabric needs.
    stalls: Arc<(Mutex<std::collections::HashSet<udah_core::wire::Gid>>, std::sync::Condvar)>,
}

impl Fabric {
    /// An empty fabric whose random choices come from `seed`.
    pub fn new(seed: u64) -> Fabric {
        Fabric { state: Arc::new(Mutex::new(State { rng: seed, ..State::default() })), stalls: Arc::default() }
    }

    /// Makes every [`resolve_l2`](udah_core::hal::Hal::resolve_l2) of an AH
    /// to `dgid` block until [`release_resolve`](Self::release_resolve):
    /// an address whose neighbour never answers, deterministically (no
    /// timer).
    pub fn stall_resolve(&self, dgid: udah_core::wire::Gid) {
        let (set, _) = &*self.stalls;
        set.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(dgid);
    }

    /// Lets the resolutions blocked on `dgid` (and later ones) go on: they
    /// then fail with `Unreachable` unless the fabric has a neighbour entry
    /// for it.
    pub fn release_resolve(&self, dgid: &udah_core::wire::Gid) {
        let (set, cv) = &*self.stalls;
        set.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(dgid);
        cv.notify_all();
    }

    /// Blocks while `dgid` is stalled ([`stall_resolve`](Self::stall_resolve)).
    pub(crate) fn wait_resolve(&self, dgid: &udah_core::wire::Gid) {
        let (set, cv) = &*self.stalls;
        let mut g = set.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while g.contains(dgid) {
            g = cv.wait(g).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state inconsistent
        // in a way that matters to a simulation; keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a device with no ports; returns its number.
    pub fn add_device(&self) -> u16 {
        let mut s = self.lock();
        s.devices.push(Vec::new());
        s.events.push(VecDeque::new());
        s.live_ahs.push(0);
        (s.devices.len() - 1) as u16
    }

    /// Adds a port to `device`.
    pub fn add_port_to(&self, device: u16, mut cfg: PortConfig) -> PortId {
        let mut s = self.lock();
        let mut table = vec![None; cfg.gid_tbl_len as usize].into_boxed_slice();
        for (i, e) in &core::mem::take(&mut cfg.gids) {
            if let Some(slot) = table.get_mut(*i as usize) {
                *slot = Some(*e);
            }
            if cfg.link_layer == LinkLayer::Ethernet && !e.gid.is_link_local() {
                s.neighbours.insert(e.gid, cfg.mac);
            }
        }
        let ports = &mut s.devices[usize::from(device)];
        ports.push(PortState { cfg, table, active: true, generation: 1, create_attempts: 0 });
        PortId { device, port: ports.len() as u8 }
    }

    /// Adds a single-port device and returns the port.
    pub fn add_port(&self, cfg: PortConfig) -> PortId {
        let d = self.add_device();
        self.add_port_to(d, cfg)
    }

    /// The number of devices.
    pub fn devices(&self) -> u16 {
        self.lock().devices.len() as u16
    }

    /// The ports of `device`.
    pub fn ports(&self, device: u16) -> Vec<PortId> {
        let s = self.lock();
        let n = s.devices.get(usize::from(device)).map_or(0, Vec::len);
        (1..=n as u8).map(|port| PortId { device, port }).collect()
    }

    /// Facts about a port.
    pub fn port_info(&self, id: PortId) -> Option<PortInfo> {
        let s = self.lock();
        let p = s.port(id)?;
        Some(
            PortInfo::new(id.port, p.cfg.link_layer, p.table.len() as u32)
                .with_lid(p.cfg.lid, p.cfg.lmc)
                .with_active(p.active),
        )
    }

    /// The port's MAC address (RoCE).
    pub fn port_mac(&self, id: PortId) -> Option<[u8; 6]> {
        self.lock().port(id).map(|p| p.cfg.mac)
    }

    /// The GID table of a port: `(index, entry)` for the valid slots.
    pub fn gids(&self, id: PortId) -> Vec<(u32, GidEntry)> {
        let s = self.lock();
        s.port(id)
            .map(|p| p.table.iter().enumerate().filter_map(|(i, e)| e.map(|e| (i as u32, e))).collect())
            .unwrap_or_default()
    }

    /// The GID-table generation of a port (bumped on every change).
    pub fn gid_generation(&self, id: PortId) -> u64 {
        self.lock().port(id).map_or(0, |p| p.generation)
    }

    /// Sets or clears a GID entry, bumps the generation and queues
    /// [`AsyncEvent::GidChange`]. Returns false for a bad port or index.
    pub fn set_gid(&self, id: PortId, index: u32, entry: Option<GidEntry>) -> bool {
        let mut s = self.lock();
        let mac = match s.port(id) {
            Some(p) => p.cfg.mac,
            None => return false,
        };
        let Some(p) = s.port_mut(id) else { return false };
        let Some(slot) = p.table.get_mut(index as usize) else { return false };
        *slot = entry;
        p.generation += 1;
        let ll = p.cfg.link_layer;
        if let Some(e) = entry.filter(|e| ll == LinkLayer::Ethernet && !e.gid.is_link_local()) {
            s.neighbours.insert(e.gid, mac);
        }
        s.events[usize::from(id.device)].push_back(AsyncEvent::GidChange(id));
        true
    }

    /// Takes a port down or up, queueing the event.
    pub fn set_port_active(&self, id: PortId, active: bool) -> bool {
        let mut s = self.lock();
        let Some(p) = s.port_mut(id) else { return false };
        p.active = active;
        let ev = if active { AsyncEvent::PortActive(id) } else { AsyncEvent::PortError(id) };
        s.events[usize::from(id.device)].push_back(ev);
        true
    }

    /// Sets the neighbour-table MAC of a remote address (a GID, IPv4-mapped for IPv4).
    pub fn set_neighbour(&self, gid: Gid, mac: [u8; 6]) {
        self.lock().neighbours.insert(gid, mac);
    }

    /// Removes a neighbour-table entry.
    pub fn remove_neighbour(&self, gid: Gid) {
        self.lock().neighbours.remove(&gid);
    }

    /// The next queued asynchronous event of `device`, like a non-blocking
    /// `ibv_get_async_event`.
    pub fn next_event(&self, device: u16) -> Option<AsyncEvent> {
        self.lock().events.get_mut(usize::from(device))?.pop_front()
    }

    /// Creates a UD QP on `port` with Q_Key `qkey` and P_Key index 0.
    pub fn create_qp(&self, port: PortId, qkey: u32) -> Option<Qpn> {
        self.create_qp_with_pkey(port, qkey, 0)
    }

    /// Creates a UD QP on `port` with Q_Key `qkey` using the port's P_Key at
    /// `pkey_index`; `None` for a bad port or index.
    pub fn create_qp_with_pkey(&self, port: PortId, qkey: u32, pkey_index: u16) -> Option<Qpn> {
        let mut s = self.lock();
        s.port(port)?.cfg.pkeys.get(usize::from(pkey_index))?;
        let n = FIRST_QPN.checked_add(u32::try_from(s.qps.len()).ok()?)?;
        s.qps.push(QpState { port, qkey, pkey_index, rq: VecDeque::new(), last_front: [0; 20], stamp: None });
        Some(Qpn(n))
    }

    /// Pre-stamps every receive buffer of `qpn` with `stamp` (bytes 0..20,
    /// see `udah_core::wire::detect::stamp`), as a consumer does before
    /// posting its receives; `None` stops stamping.
    pub fn set_receive_stamp(&self, qpn: Qpn, stamp: Option<Stamp>) -> bool {
        match self.lock().qp_mut(qpn) {
            Some(q) => {
                q.stamp = stamp.map(|s| *s.bytes());
                true
            }
            None => false,
        }
    }

    /// The port of a QP.
    pub fn qp_port(&self, qpn: Qpn) -> Option<PortId> {
        self.lock().qp(qpn).map(|q| q.port)
    }

    /// The next received message of `qpn`, if any.
    pub fn poll(&self, qpn: Qpn) -> Option<Received> {
        let mut s = self.lock();
        let q = s.qp_mut(qpn)?;
        let m = q.rq.pop_front();
        release_if_empty(&mut q.rq);
        m
    }

    /// Moves up to `max` received messages of `qpn` into `out`; returns how many.
    pub fn poll_batch(&self, qpn: Qpn, max: usize, out: &mut Vec<Received>) -> usize {
        let mut s = self.lock();
        let Some(q) = s.qp_mut(qpn) else { return 0 };
        let n = max.min(q.rq.len());
        out.extend(q.rq.drain(..n));
        release_if_empty(&mut q.rq);
        n
    }

    /// The counters.
    pub fn counters(&self) -> Counters {
        self.lock().counters
    }

    /// The attributes an AH was created with.
    pub fn ah_attr(&self, ah: MockAh) -> Option<AhAttr> {
        self.lock().ah(ah.0).map(|a| a.attr)
    }

    pub(crate) fn insert_ah(&self, st: AhState) -> MockAh {
        let mut s = self.lock();
        let token = match s.free_ahs.pop() {
            Some(slot) => {
                let a = &mut s.ahs[slot as usize];
                a.ah = Some(st);
                ah_token(slot, a.generation)
            }
            None => {
                let slot = s.ahs.len() as u32;
                s.ahs.push(AhSlot { generation: 0, ah: Some(st) });
                ah_token(slot, 0)
            }
        };
        if let Some(n) = s.live_ahs.get_mut(usize::from(st.port.device)) {
            *n += 1;
        }
        s.counters.ah_creates += 1;
        MockAh(token)
    }

    /// Sends `payload` from `src` through `ah` to QP `remote_qpn` with Q_Key
    /// `remote_qkey`. A message the fabric drops (no route, wrong Q_Key, stale
    /// MAC, VLAN mismatch) is counted, not reported: UD is unreliable.
    pub fn post_send(
        &self,
        src: Qpn,
        ah: MockAh,
        remote_qpn: Qpn,
        remote_qkey: u32,
        payload: &[u8],
    ) -> Result<(), SendError> {
        let mut s = self.lock();
        let src_port = s.qp(src).ok_or(SendError::NoSuchQp(src))?.port;
        let a = *s.ah(ah.0).ok_or(SendError::StaleAh(ah))?;
        if a.port != src_port {
            return Err(SendError::WrongPort);
        }
        s.counters.sent += 1;
        match route(&mut s, src, src_port, &a, remote_qpn, remote_qkey, payload) {
            Ok(()) => s.counters.delivered += 1,
            Err(Drop::NoRoute) => s.counters.dropped_no_route += 1,
            Err(Drop::Qkey) => s.counters.dropped_qkey += 1,
            Err(Drop::Mac) => s.counters.dropped_mac += 1,
            Err(Drop::Vlan) => s.counters.dropped_vlan += 1,
            Err(Drop::Sgid) => s.counters.dropped_sgid += 1,
            Err(Drop::Pkey) => s.counters.dropped_pkey += 1,
        }
        Ok(())
    }

    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.lock())
    }
}

mod switch;

use self::switch::{Drop, route};

impl State {
    pub(crate) fn port_state(&self, id: PortId) -> Option<(LinkLayer, &[Option<GidEntry>], u64, Quirks)> {
        self.port(id).map(|p| (p.cfg.link_layer, &p.table[..], p.generation, p.cfg.quirks))
    }

    pub(crate) fn neighbour(&self, gid: &Gid) -> Option<[u8; 6]> {
        self.neighbours.get(gid).copied()
    }

    /// Counts a create attempt; returns the injected fault, if any, and the latency.
    pub(crate) fn create_attempt(&mut self, id: PortId) -> (Option<ErrorKind>, Duration) {
        let live = self.live_ahs.get(usize::from(id.device)).copied().unwrap_or(0);
        let Some(p) = self.port_mut(id) else { return (Some(ErrorKind::NotFound), Duration::ZERO) };
        p.create_attempts += 1;
        let n = p.create_attempts;
        let Some(f) = p.cfg.faults.as_deref() else { return (None, Duration::ZERO) };
        let fault = f
            .fail_nth
            .iter()
            .find(|(k, _)| *k == n)
            .map(|(_, e)| *e)
            .or_else(|| f.fail_every.and_then(|(k, e)| (k > 0 && n % k == 0).then_some(e)))
            .or_else(|| f.max_live_ahs.and_then(|m| (live >= m).then_some(ErrorKind::OutOfResources)));
        (fault, f.create_latency)
    }

    /// How long a create of `latency` sleeps now: all of it from
    /// [`SLEEP_QUANTUM`] on; below, what is owed once a quantum is due
    /// (then [`settle_sleep`](Self::settle_sleep) with the time slept).
    pub(crate) fn owe_create(&mut self, latency: Duration) -> Duration {
        if latency >= SLEEP_QUANTUM {
            return latency;
        }
        let owed = self.create_debt_ns.saturating_add(latency.as_nanos() as i64);
        if owed >= SLEEP_QUANTUM.as_nanos() as i64 {
            self.create_debt_ns = 0;
            Duration::from_nanos(owed as u64)
        } else {
            self.create_debt_ns = owed;
            Duration::ZERO
        }
    }

    /// Counts `slept_ns` for a sleep of `asked` ([`owe_create`](Self::owe_create)):
    /// an overshoot is taken off what later short creates owe.
    pub(crate) fn settle_sleep(&mut self, asked: Duration, slept_ns: u64) {
        self.counters.ah_create_ns += slept_ns;
        if asked < SLEEP_QUANTUM * 2 {
            let over = slept_ns as i64 - asked.as_nanos() as i64;
            self.create_debt_ns = self.create_debt_ns.saturating_sub(over.max(0));
        }
    }

    pub(crate) fn count_create_failure(&mut self) {
        self.counters.ah_create_failures += 1;
    }

    pub(crate) fn remove_ah(&mut self, id: u64) -> bool {
        let live = ah_slot(id).and_then(|(slot, generation)| {
            let s = self.ahs.get_mut(slot).filter(|s| s.generation == generation)?;
            let a = s.ah.take()?;
            // A slot whose generations are used up is never reused.
            if let Some(g) = s.generation.checked_add(1) {
                s.generation = g;
                self.free_ahs.push(slot as u32);
            }
            Some(a)
        });
        if let Some(a) = live {
            if let Some(n) = self.live_ahs.get_mut(usize::from(a.port.device)) {
                *n = n.saturating_sub(1);
            }
            self.counters.ah_destroys += 1;
            true
        } else {
            self.counters.ah_bad_destroys += 1;
            false
        }
    }
}

#[cfg(test)]
mod tests;
