//! A UD responder over the mock fabric: each received completion goes
//! through the core's pipeline ([`udah_core::responder::Responder`]: GID
//! snapshot, evidence, profile, admission, AH cache) and the reply goes to
//! the sender. Used by the end-to-end tests, `udah serve` and `udah ping`.

use udah_core::ah::{AhAttr, AttrError, Completion, IbvWc, KernelWc, ProfileError};
use udah_core::attr::PortNum;
use udah_core::responder::{self as core_responder, Config, EvidenceSource, ResolveError};
use udah_core::table::{AhTable, Shared, TableError, TableStats};
use udah_core::wire::Stamp;

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

impl Mode {
    /// The core pipeline's configuration for this mode (the mock's route hop
    /// limit is 64).
    pub fn config(self) -> Config {
        let (profile, evidence) = match self {
            Mode::Libibverbs => (udah_core::ah::Profile::Libibverbs, EvidenceSource::None),
            Mode::LibibverbsMlx5Sl => (udah_core::ah::Profile::Libibverbs, EvidenceSource::Mlx5Sl),
            Mode::LibibverbsStamped => (udah_core::ah::Profile::Libibverbs, EvidenceSource::Stamp(Stamp::DEFAULT)),
            Mode::Kernel => (udah_core::ah::Profile::Kernel, EvidenceSource::None),
        };
        Config { profile, evidence, route_hop_limit: 64, ..Config::default() }
    }
}

/// A mock completion carries both encodings' flags, as the mock NIC reports
/// them to userspace and to the kernel.
impl Completion for MockWc {
    #[inline]
    fn ibv(&self) -> IbvWc {
        MockWc::ibv(self)
    }
    #[inline]
    fn kernel(&self) -> KernelWc {
        MockWc::kernel(self)
    }
}

/// A received message is a completion too: [`MockWc`]'s fields, and the
/// source address a [`Quirks::gid_in_completion`](crate::Quirks) NIC reports.
impl Completion for Received {
    #[inline]
    fn ibv(&self) -> IbvWc {
        self.wc.ibv()
    }
    #[inline]
    fn kernel(&self) -> KernelWc {
        self.wc.kernel()
    }
    #[inline]
    fn source(&self) -> Option<udah_core::wire::SourceAddress> {
        self.source
    }
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
    /// The admission policy refused the completion.
    Refused(core_responder::Refusal),
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
            ReplyError::Refused(e) => write!(f, "refused: {e}"),
            ReplyError::Table(e) => write!(f, "AH table: {e:?}"),
            ReplyError::Backend(e) => write!(f, "backend: {e}"),
            ReplyError::Send(e) => write!(f, "send: {e}"),
        }
    }
}

impl core::error::Error for ReplyError {}

impl From<ProfileError> for ReplyError {
    fn from(e: ProfileError) -> ReplyError {
        match e {
            ProfileError::Libibverbs(f) => ReplyError::Libibverbs(f.error),
            ProfileError::Kernel(f) => ReplyError::Kernel(f.error),
            ProfileError::Attr(e) => ReplyError::Attr(e),
            _ => ReplyError::Attr(AttrError::Unresolved),
        }
    }
}

impl From<ResolveError<MockError>> for ReplyError {
    fn from(e: ResolveError<MockError>) -> ReplyError {
        match e {
            ResolveError::Profile(p) => p.into(),
            ResolveError::Refused(r) => ReplyError::Refused(r),
            ResolveError::Table(TableError::InvalidAttr(a)) => ReplyError::Attr(a),
            ResolveError::Table(t) => ReplyError::Table(t),
            _ => ReplyError::Attr(AttrError::Unresolved),
        }
    }
}

/// AH-table capacity of a [`Responder`].
pub const RESPONDER_AH_SLOTS: usize = 1024;

/// GID-snapshot capacity of a [`Responder`].
pub const RESPONDER_GID_SLOTS: usize = 1024;

/// The core pipeline a [`Responder`] runs: the mock backend and its own AH
/// table.
pub type Pipeline = core_responder::Responder<PipelineCache, RESPONDER_GID_SLOTS>;

/// The AH cache of a [`Pipeline`]: the shared calls of its own table.
pub type PipelineCache = Shared<MockHal, Box<AhTable<MockHal, RESPONDER_AH_SLOTS>>>;

/// Messages [`Responder::serve_pending`] polls and answers together.
pub const SERVE_BATCH: usize = 64;

/// A UD responder on one port of the mock fabric: the core pipeline (GID
/// snapshot, profile, the lock-free [`AhTable`]: identical attributes share
/// one AH, a GID change retires the AHs built on the changed entries) and a
/// QP to reply from.
#[derive(Debug)]
pub struct Responder {
    qpn: Qpn,
    qkey: u32,
    pipeline: Box<Pipeline>,
}

impl Responder {
    /// A responder with a new QP on `port`, its AH table's hash seeded 0
    /// ([`AhTable::new`]: fine for the trusted senders of a test;
    /// [`with_seed`](Responder::with_seed) for anything else).
    pub fn new(fabric: &Fabric, port: PortId, qkey: u32, mode: Mode) -> Result<Responder, MockError> {
        Responder::with_seed(fabric, port, qkey, mode, 0)
    }

    /// A responder with a new QP on `port`, its AH table's hash keyed with
    /// `seed` ([`AhTable::with_seed`]: a sender who does not know it cannot
    /// aim its addresses at one window of the table).
    pub fn with_seed(fabric: &Fabric, port: PortId, qkey: u32, mode: Mode, seed: u64) -> Result<Responder, MockError> {
        let hal = MockHal::new(fabric, port.device);
        let qpn = fabric.create_qp(port, qkey).ok_or(MockError::no_such_port("create_qp"))?;
        if mode == Mode::LibibverbsStamped {
            fabric.set_receive_stamp(qpn, Some(Stamp::DEFAULT));
        }
        let p = PortNum::new(port.port).ok_or(MockError::no_such_port("port 0"))?;
        let cache = Shared::new(hal, Box::new(AhTable::with_seed(seed)));
        let pipeline = Box::new(core_responder::Responder::new(cache, p, mode.config())?);
        Ok(Responder { qpn, qkey, pipeline })
    }

    /// The responder's QP.
    pub fn qpn(&self) -> Qpn {
        self.qpn
    }

    /// AHs created so far.
    pub fn ahs_created(&self) -> usize {
        self.stats().creates as usize
    }

    /// The AH table's statistics.
    pub fn stats(&self) -> TableStats {
        self.pipeline.cache().table().stats()
    }

    /// The core pipeline (admission policy, counters, GID snapshot).
    pub fn pipeline(&mut self) -> &mut Pipeline {
        &mut self.pipeline
    }

    /// The attribute the responder would reply with (after re-taking the GID
    /// snapshot if the port's GID generation moved).
    pub fn reply_attr(&mut self, msg: &Received) -> Result<AhAttr, ReplyError> {
        self.pipeline.refresh().map_err(ReplyError::Backend)?;
        let words = self.pipeline.words(msg, &msg.area)?;
        words.to_attr().map_err(ReplyError::Attr)
    }

    /// Answers one received message: AH from the completion, then a reply
    /// carrying `payload` to the sender's QP.
    pub fn reply(&mut self, msg: &Received, payload: &[u8]) -> Result<AhAttr, ReplyError> {
        self.pipeline.refresh().map_err(ReplyError::Backend)?;
        let words = self.pipeline.words(msg, &msg.area)?;
        let handle = self.pipeline.lookup(msg, &words)?;
        let hal = self.pipeline.backend();
        let sent = hal.fabric().post_send(self.qpn, handle.ah(), Qpn(msg.wc.ibv.src_qp), self.qkey, payload);
        // The send is complete once posted on the mock: the reference goes back.
        self.pipeline.release(handle).map_err(ReplyError::Table)?;
        sent.map_err(ReplyError::Send)?;
        // Only valid attributes reach the cache.
        words.to_attr().map_err(ReplyError::Attr)
    }

    /// Polls and answers everything queued, [`SERVE_BATCH`] messages at a
    /// time: the GID snapshot refreshed once per group, the group's AHs
    /// through the pipeline's staged batch
    /// ([`Responder::resolve_batch`](core_responder::Responder::resolve_batch)),
    /// then each reply (its payload echoed); returns (answered, failed).
    pub fn serve_pending(&mut self) -> (usize, Vec<(Received, ReplyError)>) {
        let mut ok = 0;
        let mut failed = Vec::new();
        let mut msgs = Vec::with_capacity(SERVE_BATCH);
        let mut out: [Option<core_responder::ResolveResult<PipelineCache>>; SERVE_BATCH] =
            core::array::from_fn(|_| None);
        loop {
            msgs.clear();
            if self.pipeline.backend().fabric().poll_batch(self.qpn, SERVE_BATCH, &mut msgs) == 0 {
                break;
            }
            if let Err(e) = self.pipeline.refresh() {
                failed.extend(msgs.drain(..).map(|m| (m, ReplyError::Backend(e))));
                continue;
            }
            let n = self.pipeline.resolve_batch(msgs.iter().map(|m| (m, &m.area)), &mut out);
            for (m, o) in msgs.drain(..).zip(out.iter_mut()).take(n) {
                let h = match o.take() {
                    Some(Ok(h)) => h,
                    Some(Err(e)) => {
                        failed.push((m, e.into()));
                        continue;
                    }
                    None => continue,
                };
                let fabric = self.pipeline.backend().fabric();
                let sent = fabric.post_send(self.qpn, h.ah(), Qpn(m.wc.ibv.src_qp), self.qkey, &m.payload);
                // The send is complete once posted on the mock: the reference goes back.
                match (sent, self.pipeline.release(h)) {
                    (Ok(()), Ok(())) => ok += 1,
                    (Err(e), _) => failed.push((m, ReplyError::Send(e))),
                    (_, Err(e)) => failed.push((m, ReplyError::Table(e))),
                }
            }
        }
        (ok, failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Family, Scenario};

    #[test]
    fn a_seeded_responder_answers_like_the_default_one() {
        for seed in [0, 0x5eed_u64, u64::MAX] {
            let s = Scenario::build(3, &[Family::Ib, Family::RoceV2Ipv4], 24, crate::Quirks::default()).unwrap();
            let mut ib = Responder::with_seed(&s.fabric, s.ib_port, s.qkey, Mode::Kernel, seed).unwrap();
            let mut roce = Responder::with_seed(&s.fabric, s.roce_port, s.qkey, Mode::Kernel, seed).unwrap();
            let sent = s.send_requests(ib.qpn(), roce.qpn(), 2);
            let (a, fa) = ib.serve_pending();
            let (b, fb) = roce.serve_pending();
            assert!(fa.is_empty() && fb.is_empty(), "seed {seed:#x}: {fa:?} {fb:?}");
            assert_eq!((a + b, s.collect_replies()), (sent, (sent, 0)), "seed {seed:#x}");
            assert_eq!(ib.ahs_created() + roce.ahs_created(), 24, "seed {seed:#x}");
        }
    }
}
