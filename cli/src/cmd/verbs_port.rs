//! The verbs plumbing of `serve` and `ping --hal ibverbs`: a UD QP at RTS
//! with its CQs and buffers, and the default GID index.

use udah_core::wire::{AREA_LEN, Area, Stamp};
use udah_hal_ibverbs::{GidKind, IbverbsHal, PortGids, QpCaps, Segment, UdDest, UdQp, VerbsAh, VerbsError};

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

/// A UD QP at RTS on a port of a backend, its CQs and buffers. The backend
/// is borrowed, not owned, so that the QP's sends and receives (which write
/// the buffers: `&mut self`) and a [`Pipeline`](super::pipeline::Pipeline) (whose AHs they send
/// through) share it, and so that it outlives both: the QP and every AH
/// are gone before the backend closes its PD and context.
pub(crate) struct VerbsPort<'h> {
    pub(crate) hal: &'h IbverbsHal,
    pub(crate) qp: UdQp,
    pub(crate) send_cq: udah_hal_ibverbs::Cq,
    pub(crate) recv_cq: udah_hal_ibverbs::Cq,
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
    pub(crate) fn open(hal: &'h IbverbsHal, port: u8, qkey: u32, depth: u32) -> Result<VerbsPort<'h>, VerbsError> {
        let pa = hal.port_attr(port)?;
        let mtu = pa.active_mtu.bytes().unwrap_or(1024) as usize;
        let slot = AREA_LEN + mtu;
        let ctx = hal.context().clone();
        let depth = depth.max(1);
        let send_cq = ctx.create_cq(depth)?;
        let recv_cq = ctx.create_cq(depth)?;
        let qp = UdQp::create(hal.pd(), &send_cq, &recv_cq, QpCaps { max_send_wr: depth, max_recv_wr: depth })?;
        qp.to_rts(port, 0, qkey)?;
        let recv_mr = hal.pd().reg_mr(slot * depth as usize)?;
        let send_mr = hal.pd().reg_mr(mtu * depth as usize)?;
        Ok(VerbsPort { hal, qp, send_cq, recv_cq, recv_mr, send_mr, slot, mtu })
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
