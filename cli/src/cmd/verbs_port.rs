//! The verbs plumbing of `serve` and `ping --hal ibverbs`: a UD QP at RTS
//! with its CQs and buffers, and the default GID index.

use std::time::Instant;
use udah_core::wire::{AREA_LEN, Area, Stamp};

pub(crate) use super::common::CqKind;

use udah_hal_ibverbs::{
    Cq, CqEx, GidKind, IbverbsHal, PortGids, QpCaps, Segment, UdDest, UdQp, VerbsAh, VerbsError, WorkCompletion,
};

/// The GID index to use by default: the first RoCE v2 entry (IPv4-mapped
/// first when `ipv4` says so), else the first entry.
pub(crate) fn default_gid_index(gids: &PortGids, ipv4: Option<bool>) -> Option<u32> {
    let v2 = |g: &&udah_hal_ibverbs::GidInfo| g.record.kind == GidKind::RoceV2;
    let fam = |g: &&udah_hal_ibverbs::GidInfo| ipv4.is_none_or(|v4| g.record.gid.is_ipv4_mapped() == v4);
    gids.entries
        .iter()
        .find(|g| v2(g) && fam(g))
        .or_else(|| gids.entries.iter().find(v2))
        .or_else(|| gids.entries.first())
        .map(|g| g.record.index)
}

/// A receive completion with when it happened: the host's clock when it
/// was polled, and the device's timestamps when the CQ carries them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamped {
    /// The completion.
    pub(crate) wc: WorkCompletion,
    /// When it was polled (host monotonic clock).
    pub(crate) polled: Instant,
    /// `ibv_wc_read_completion_ts` (device clock ticks).
    pub(crate) device_ts: Option<u64>,
    /// `ibv_wc_read_completion_wallclock_ns`.
    pub(crate) wall_ns: Option<u64>,
}

/// Completions taken per poll of an extended CQ (`Cq::poll` takes 16).
const POLL_MAX: usize = 16;

/// The receive CQ: plain or extended.
#[derive(Debug)]
pub(crate) enum RecvCq {
    /// `ibv_poll_cq`.
    Plain(Cq),
    /// The extended-CQ cursor.
    Ex(CqEx),
}

impl RecvCq {
    /// The CQ to create the QP on.
    fn cq(&self) -> &Cq {
        match self {
            RecvCq::Plain(c) => c,
            RecvCq::Ex(c) => c.cq(),
        }
    }

    /// Polls what is there now, appending to `out`.
    pub(crate) fn poll(&mut self, out: &mut Vec<WorkCompletion>) -> Result<usize, VerbsError> {
        match self {
            RecvCq::Plain(c) => c.poll(out),
            RecvCq::Ex(c) => {
                let mut cur = c.start_poll()?;
                let mut n = 0;
                while let Some(p) = cur {
                    out.push(p.read().wc);
                    n += 1;
                    // At most what `ibv_poll_cq` takes at once (the send CQ
                    // gets its turn under a flood too).
                    cur = if n < POLL_MAX { p.advance()? } else { None };
                }
                Ok(n)
            }
        }
    }

    /// [`RecvCq::poll`] with each completion's stamps.
    pub(crate) fn poll_stamped(&mut self, out: &mut Vec<Stamped>) -> Result<usize, VerbsError> {
        let polled = Instant::now();
        match self {
            RecvCq::Plain(c) => {
                let mut wcs = Vec::new();
                let n = c.poll(&mut wcs)?;
                out.extend(wcs.into_iter().map(|wc| Stamped { wc, polled, device_ts: None, wall_ns: None }));
                Ok(n)
            }
            RecvCq::Ex(c) => {
                let mut cur = c.start_poll()?;
                let mut n = 0;
                while let Some(p) = cur {
                    let e = p.read();
                    out.push(Stamped { wc: e.wc, polled, device_ts: e.completion_ts, wall_ns: e.wallclock_ns });
                    n += 1;
                    cur = if n < POLL_MAX { p.advance()? } else { None };
                }
                Ok(n)
            }
        }
    }

    /// Creates the receive CQ `want` asks for (`None`: extended where the
    /// device supports it), with a line saying what was made and why.
    fn create(hal: &IbverbsHal, depth: u32, want: Option<CqKind>) -> Result<(RecvCq, String), VerbsError> {
        let ctx = hal.context();
        if want == Some(CqKind::Plain) {
            return Ok((RecvCq::Plain(ctx.create_cq(depth)?), "receive CQ: plain (ibv_poll_cq)".to_owned()));
        }
        match ctx.create_cq_ex_best(depth) {
            Ok(made) => {
                let cq = made.cq;
                let refused: Vec<String> =
                    made.refused.iter().map(|(f, e)| format!("{f:#x} (errno {})", e.errno().unwrap_or(0))).collect();
                let line = format!(
                    "receive CQ: extended (ibv_create_cq_ex, wc_flags {:#x}); completion timestamps: device clock {}, \
                     wall clock {}{}",
                    cq.wc_flags(),
                    if cq.has_completion_ts() { "yes" } else { "no" },
                    if cq.has_wallclock() { "yes" } else { "no" },
                    if refused.is_empty() {
                        String::new()
                    } else {
                        format!(" (wc_flags refused: {})", refused.join(", "))
                    }
                );
                Ok((RecvCq::Ex(cq), line))
            }
            Err(e) if want.is_none() => Ok((
                RecvCq::Plain(ctx.create_cq(depth)?),
                format!("receive CQ: plain (extended CQ not available on {}: {e}; falling back)", hal.device()),
            )),
            Err(e) => Err(e),
        }
    }
}

/// A UD QP at RTS on a port of a backend, its CQs and buffers. The backend
/// is borrowed, not owned, so that the QP's sends and receives (which write
/// the buffers: `&mut self`) and a [`Pipeline`](super::pipeline::Pipeline) (whose AHs they send
/// through) share it, and so that it outlives both: the QP and every AH
/// are gone before the backend closes its PD and context.
pub(crate) struct VerbsPort<'h> {
    pub(crate) hal: &'h IbverbsHal,
    pub(crate) qp: UdQp,
    pub(crate) send_cq: udah_hal_ibverbs::Cq,
    pub(crate) recv_cq: RecvCq,
    /// What [`RecvCq::create`] made (for the start-up lines).
    pub(crate) cq_line: String,
    pub(crate) recv_mr: udah_hal_ibverbs::Mr,
    pub(crate) send_mr: udah_hal_ibverbs::Mr,
    pub(crate) slot: usize,
    pub(crate) mtu: usize,
}

impl core::fmt::Debug for VerbsPort<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("VerbsPort").field("device", &self.hal.device()).field("qpn", &self.qp.qp_num()).finish()
    }
}

impl<'h> VerbsPort<'h> {
    /// Brings a UD QP on `port` of `hal` to RTS (open the backend with
    /// [`IbverbsHal::open_port`], which checks that the port is active).
    /// `cq`: the receive CQ (`None`: extended where supported).
    pub(crate) fn open(
        hal: &'h IbverbsHal,
        port: u8,
        qkey: u32,
        depth: u32,
        cq: Option<CqKind>,
    ) -> Result<VerbsPort<'h>, VerbsError> {
        let pa = hal.port_attr(port)?;
        let mtu = pa.active_mtu.bytes().unwrap_or(1024) as usize;
        let slot = AREA_LEN + mtu;
        let ctx = hal.context().clone();
        let depth = depth.max(1);
        let send_cq = ctx.create_cq(depth)?;
        let (recv_cq, cq_line) = RecvCq::create(hal, depth, cq)?;
        let qp = UdQp::create(hal.pd(), &send_cq, recv_cq.cq(), QpCaps { max_send_wr: depth, max_recv_wr: depth })?;
        qp.to_rts(port, 0, qkey)?;
        let recv_mr = hal.pd().reg_mr(slot * depth as usize)?;
        let send_mr = hal.pd().reg_mr(mtu * depth as usize)?;
        Ok(VerbsPort { hal, qp, send_cq, recv_cq, cq_line, recv_mr, send_mr, slot, mtu })
    }

    /// Posts receive slot `i` (stamping its area first when asked).
    pub(crate) fn post_recv(&mut self, i: usize, stamp: Option<Stamp>) -> Result<(), VerbsError> {
        let off = i * self.slot;
        if let Some(s) = stamp {
            self.recv_mr.write(off, s.bytes())?;
        }
        let seg = Segment { mr: &self.recv_mr, offset: off, len: self.slot as u32 };
        self.qp.post_recv(seg, i as u64)
    }

    /// Reads receive slot `i`: the area and `byte_len - 40` payload bytes.
    pub(crate) fn read_recv(&self, i: usize, byte_len: u32) -> Result<(Area, Vec<u8>), VerbsError> {
        let off = i * self.slot;
        let mut area = [0u8; AREA_LEN];
        self.recv_mr.read(off, &mut area)?;
        let n = (byte_len as usize).saturating_sub(AREA_LEN).min(self.mtu);
        let mut payload = vec![0u8; n];
        self.recv_mr.read(off + AREA_LEN, &mut payload)?;
        Ok((area, payload))
    }

    /// Sends `payload` from send slot `i` through `ah`.
    pub(crate) fn send(&mut self, i: usize, ah: VerbsAh, dest: UdDest, payload: &[u8]) -> Result<(), VerbsError> {
        let off = i * self.mtu;
        let n = payload.len().min(self.mtu);
        self.send_mr.write(off, payload.get(..n).unwrap_or_default())?;
        let seg = Segment { mr: &self.send_mr, offset: off, len: n as u32 };
        self.hal.post_send(&self.qp, ah, dest, seg, i as u64)
    }
}
