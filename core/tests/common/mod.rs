//! A test-only counting backend for the AH-table tests (`table_model`,
//! `table_stress`, `no_alloc`).
//!
//! Tokens are indices into a preallocated array of atomics that records, per
//! token, the id of the key it was created for plus one (0 = not alive), so
//! the checks "this handle's AH is alive" and "this handle's AH belongs to
//! its key" are lock-free and do not disturb the table's concurrency.

#![allow(dead_code, unreachable_pub)]

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use core::time::Duration;

use udah_core::GidTable;
use udah_core::ah::{AhAttr, PortNum};
use udah_core::hal::{ErrorKind, ErrorType, Hal, L2Info, PortInfo};
use udah_core::wire::Gid;

/// The attribute of key `id`: a RoCE v2 peer 10.x.y.z (by id), local GID
/// index `id % 4`.
pub fn attr(id: u32) -> AhAttr {
    let [_, b, c, d] = id.to_be_bytes();
    AhAttr::routed(PortNum::new(1).unwrap(), Gid::from_ipv4([10, b, c, d]), (id % 4) as u8, 64)
}

/// The key id back from an attribute made by [`attr`].
pub fn id_of(a: &AhAttr) -> u32 {
    let g = a.grh.unwrap().dgid.0;
    u32::from_be_bytes([0, g[13], g[14], g[15]])
}

/// The counting backend.
pub struct CountingHal {
    next: AtomicU64,
    /// token → key id + 1 (0: not alive).
    owner: Vec<AtomicU64>,
    pub creates: AtomicU64,
    pub destroys: AtomicU64,
    /// Destroys of an AH that was not alive (double or unknown destroy).
    pub bad_destroys: AtomicU64,
    /// At most this many live AHs (0: unlimited); beyond, `OutOfResources`.
    pub limit: AtomicUsize,
    live: AtomicUsize,
    /// The next create fails with `InvalidArgument`.
    pub fail_next: AtomicBool,
    pub gid_generation: AtomicU64,
    /// Sleep in `create_ah`, like a RoCE create waiting for neighbour
    /// resolution.
    pub create_sleep: Option<Duration>,
}

impl CountingHal {
    /// A backend for at most `max_creates` creates over its lifetime.
    pub fn new(max_creates: usize) -> CountingHal {
        CountingHal {
            next: AtomicU64::new(0),
            owner: (0..max_creates.saturating_add(1)).map(|_| AtomicU64::new(0)).collect(),
            creates: AtomicU64::new(0),
            destroys: AtomicU64::new(0),
            bad_destroys: AtomicU64::new(0),
            limit: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            fail_next: AtomicBool::new(false),
            gid_generation: AtomicU64::new(0),
            create_sleep: None,
        }
    }

    /// The key id of a live AH, `None` if it is not alive.
    pub fn owner(&self, token: u64) -> Option<u32> {
        let v = self.owner.get(token as usize)?.load(Ordering::Acquire);
        (v != 0).then(|| (v - 1) as u32)
    }

    /// Live AHs.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Live AHs, counted from the owner array (must equal [`Self::live`]).
    pub fn live_scan(&self) -> usize {
        self.owner.iter().filter(|o| o.load(Ordering::Acquire) != 0).count()
    }
}

impl ErrorType for CountingHal {
    type Error = ErrorKind;
}

impl Hal for CountingHal {
    type Ah = u64;
    fn port_info(&self, port: PortNum) -> Result<PortInfo, ErrorKind> {
        Ok(PortInfo::new(port.get(), udah_core::LinkLayer::Ethernet, 16))
    }
    fn snapshot_gids<const N: usize>(&self, _: PortNum, _: &mut GidTable<N>) -> Result<(), ErrorKind> {
        Ok(())
    }
    fn gid_generation(&self, _: PortNum) -> u64 {
        self.gid_generation.load(Ordering::Acquire)
    }
    fn resolve_l2(&self, a: &AhAttr) -> Result<Option<L2Info>, ErrorKind> {
        Ok(Some(L2Info { dmac: [2, 0, 0, 0, 0, id_of(a) as u8], vlan_tag: None, hop_limit: None }))
    }
    fn create_ah(&self, a: &AhAttr, _: Option<&L2Info>) -> Result<u64, ErrorKind> {
        if let Some(d) = self.create_sleep {
            std::thread::sleep(d);
        }
        if self.fail_next.swap(false, Ordering::Relaxed) {
            return Err(ErrorKind::InvalidArgument);
        }
        let limit = self.limit.load(Ordering::Relaxed);
        let live = self.live.fetch_add(1, Ordering::AcqRel);
        if limit != 0 && live >= limit {
            self.live.fetch_sub(1, Ordering::AcqRel);
            return Err(ErrorKind::OutOfResources);
        }
        let t = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(slot) = self.owner.get(t as usize) else {
            self.live.fetch_sub(1, Ordering::AcqRel);
            return Err(ErrorKind::OutOfResources);
        };
        slot.store(u64::from(id_of(a)) + 1, Ordering::Release);
        self.creates.fetch_add(1, Ordering::Relaxed);
        Ok(t)
    }
    fn destroy_ah(&self, t: u64) -> Result<(), ErrorKind> {
        self.destroys.fetch_add(1, Ordering::Relaxed);
        match self.owner.get(t as usize).map(|o| o.swap(0, Ordering::AcqRel)) {
            Some(v) if v != 0 => {
                self.live.fetch_sub(1, Ordering::AcqRel);
                Ok(())
            }
            _ => {
                self.bad_destroys.fetch_add(1, Ordering::Relaxed);
                Err(ErrorKind::NotFound)
            }
        }
    }
}
