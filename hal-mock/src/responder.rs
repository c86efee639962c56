//! A UD responder over the mock fabric: turns each received completion into
//! an AH through the core and replies to the sender. Used by the end-to-end
//! tests and by `udah demo`.

use udah_core::GidTable;
use udah_core::LinkLayer;
use udah_core::ah::{AhAttr, AttrError, Profile, kernel, libibverbs};
use udah_core::hal::Hal;
use udah_core::table::{AhTable, TableError, TableStats};
use udah_core::wire::{Area, Evidence, NetworkType, Stamp};

use crate::fabric::{Fabric, MockWc, PortId, Qpn, Received, SendError};
use crate::hal::{MockError, MockHal};

/// Which profile the responder builds attributes with, and from what evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// libibverbs `ibv_init_ah_from_wc`, header type by its heuristic.
    Libibverbs,
    /// libibverbs profile, header type from mlx5's packet-type bits in `wc.sl`.
    LibibverbsMlx5Sl,
    /// libibverbs profile, receive areas pre-stamped.
    LibibverbsStamped,
    /// Kernel `ib_init_ah_attr_from_wc` (driver-reported network type when
    /// the NIC reports it, else the kernel heuristic).
    Kernel,
}

/// Why a completion could not be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplyError {
    /// The libibverbs profile failed.
    Libibverbs(udah_core::IbvError),
    /// The kernel profile failed.
    Kernel(udah_core::KernelError),
    /// The attribute is not valid for an AH.
    Attr(AttrError),
    /// The AH table (or the backend behind it) refused the AH.
    Table(TableError<MockError>),
    /// The backend failed outside the table (GID snapshot).
    Backend(MockError),
    /// The fabric refused the send.
    Send(SendError),
}

impl core::fmt::Display for ReplyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReplyError::Libibverbs(e) => write!(f, "libibverbs profile: {e}"),
            ReplyError::Kernel(e) => write!(f, "kernel profile: {e}"),
            ReplyError::Attr(e) => write!(f, "attribute: {e}"),
            ReplyError::Table(e) => write!(f, "AH table: {e:?}"),
            ReplyError::Backend(e) => write!(f, "backend: {e}"),
            ReplyError::Send(e) => write!(f, "send: {e}"),
        }
    }
}

impl core::error::Error for ReplyError {}

/// Where a responder takes the header type of the 40-byte area from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvidenceSource {
    /// The profile's own heuristic.
    None,
    /// The receive areas were pre-stamped with [`Stamp::DEFAULT`].
    Stamp,
    /// mlx5's packet-type bits in `wc.sl` (RoCE ports; the libibverbs profile).
    Mlx5Sl,
}

/// The attribute a responder on port `port` (GID snapshot `gids`) replies to
/// a completion with: the completion through `profile`, the header type from
/// `evidence`. Pure, and allocation-free: the part of the responder that the
/// tests and `udah demo` share.
///
/// The kernel profile leaves the route hop limit to the backend; the mock's
/// is 64. With [`EvidenceSource::Mlx5Sl`] on a RoCE port the SL is taken as
/// 0, since mlx5 reports the packet type in that field, not an SL; the kernel
/// profile ignores that source (the kernel gets the type with the completion).
pub fn completion_attr<const N: usize>(
    gids: &GidTable<N>,
    port: u8,
    wc: &MockWc,
    area: &Area,
    profile: Profile,
    evidence: EvidenceSource,
) -> Result<AhAttr, ReplyError> {
    match profile {
        Profile::Kernel => {
            let ev = match evidence {
                EvidenceSource::Stamp => Evidence::Stamped(Stamp::DEFAULT),
                EvidenceSource::None | EvidenceSource::Mlx5Sl => Evidence::None,
            };
            let a = kernel::init_ah_attr_from_wc_with(gids, &wc.kernel(), Some(area), ev)
                .map_err(|f| ReplyError::Kernel(f.error))?;
            a.to_ah_attr(64).map_err(ReplyError::Attr)
        }
        Profile::Libibverbs => {
            let mut ibv = wc.ibv();
            let ev = match evidence {
                EvidenceSource::None => Evidence::None,
                EvidenceSource::Stamp => Evidence::Stamped(Stamp::DEFAULT),
                EvidenceSource::Mlx5Sl if gids.link_layer() == LinkLayer::Ethernet => {
                    ibv.sl = 0;
                    NetworkType::from_mlx5_sl(wc.sl).map_or(Evidence::None, Evidence::NetworkType)
                }
                EvidenceSource::Mlx5Sl => Evidence::None,
            };
            let a = libibverbs::init_ah_from_wc_with(gids, port, &ibv, Some(area), ev)
                .map_err(|f| ReplyError::Libibverbs(f.error))?;
            AhAttr::try_from(&a).map_err(ReplyError::Attr)
        }
    }
}

/// AH-table capacity of a [`Responder`].
pub const RESPONDER_AH_SLOTS: usize = 1024;

/// A UD responder on one port of the mock fabric: GID snapshot, profile, and
/// the core's lock-free [`AhTable`] (identical attributes share one AH; a GID
/// change retires the AHs built on the changed entries).
#[derive(Debug)]
pub struct Responder {
    hal: MockHal,
    port: PortId,
    qpn: Qpn,
    qkey: u32,
    mode: Mode,
    table: Box<GidTable<1024>>,
    ahs: Box<AhTable<MockHal, RESPONDER_AH_SLOTS>>,
}

impl Responder {
    /// A responder with a new QP on `port`.
    pub fn new(fabric: &Fabric, port: PortId, qkey: u32, mode: Mode) -> Result<Responder, MockError> {
        let hal = MockHal::new(fabric, port.device);
        let qpn = fabric.create_qp(port, qkey).ok_or(MockError::no_such_port("create_qp"))?;
        if mode == Mode::LibibverbsStamped {
            fabric.set_receive_stamp(qpn, Some(Stamp::DEFAULT));
        }
        let mut table = Box::new(GidTable::new(port.port, udah_core::LinkLayer::Infiniband, 0));
        hal.snapshot_gids(port.port, &mut table)?;
        Ok(Responder { hal, port, qpn, qkey, mode, table, ahs: Box::new(AhTable::new()) })
    }

    /// The responder's QP.
    pub fn qpn(&self) -> Qpn {
        self.qpn
    }

    /// AHs created so far.
    pub fn ahs_created(&self) -> usize {
        self.ahs.stats().creates as usize
    }

    /// The AH table's statistics.
    pub fn stats(&self) -> TableStats {
        self.ahs.stats()
    }

    /// The attribute the responder would reply with.
    pub fn reply_attr(&mut self, msg: &Received) -> Result<AhAttr, ReplyError> {
        if self.table.generation() != self.hal.gid_generation(self.port.port) {
            let mut fresh = Box::new(GidTable::new(self.port.port, self.table.link_layer(), 0));
            self.hal.snapshot_gids(self.port.port, &mut fresh).map_err(ReplyError::Backend)?;
            self.ahs.retire_gid_change(&self.hal, &self.table, &fresh);
            self.table = fresh;
        }
        let (profile, evidence) = match self.mode {
            Mode::Libibverbs => (Profile::Libibverbs, EvidenceSource::None),
            Mode::LibibverbsMlx5Sl => (Profile::Libibverbs, EvidenceSource::Mlx5Sl),
            Mode::LibibverbsStamped => (Profile::Libibverbs, EvidenceSource::Stamp),
            Mode::Kernel => (Profile::Kernel, EvidenceSource::None),
        };
        completion_attr(&self.table, self.port.port, &msg.wc, &msg.area, profile, evidence)
    }

    /// Answers one received message: AH from the completion, then a reply
    /// carrying `payload` to the sender's QP.
    pub fn reply(&mut self, msg: &Received, payload: &[u8]) -> Result<AhAttr, ReplyError> {
        let attr = self.reply_attr(msg)?;
        let handle = self.ahs.get_or_create(&self.hal, &attr).map_err(ReplyError::Table)?;
        let sent = self.hal.fabric().post_send(self.qpn, handle.ah(), Qpn(msg.wc.src_qp), self.qkey, payload);
        // The send is complete once posted on the mock: the reference goes back.
        self.ahs.release(&self.hal, handle).map_err(ReplyError::Table)?;
        sent.map_err(ReplyError::Send)?;
        Ok(attr)
    }

    /// Polls and answers everything queued; returns (answered, failed).
    pub fn serve_pending(&mut self) -> (usize, Vec<(Received, ReplyError)>) {
        let mut ok = 0;
        let mut failed = Vec::new();
        while let Some(msg) = self.hal.fabric().poll(self.qpn) {
            let payload = msg.payload.clone();
            match self.reply(&msg, &payload) {
                Ok(_) => ok += 1,
                Err(e) => failed.push((msg, e)),
            }
        }
        (ok, failed)
    }
}
