//! [`MockHal`]: the core's [`Hal`] over one device of a [`Fabric`].

use core::fmt;
use std::time::Instant;

use udah_core::GidTable;
use udah_core::ah::{AhAttr, PortNum};
use udah_core::error::errno;
use udah_core::hal::{Error, ErrorKind, ErrorType, Hal, L2Info, PortInfo};
use udah_core::wire::Gid;

use crate::fabric::{AhState, Fabric, MockAh, PortId, tos_to_priority};

/// A mock backend error: the verb, the errno a real provider would report, and the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MockError {
    /// The operation that failed.
    pub op: &'static str,
    /// The errno a real provider would set.
    pub errno: i32,
    /// The kind.
    pub kind: ErrorKind,
    /// What was wrong.
    pub what: &'static str,
}

impl MockError {
    const fn new(op: &'static str, kind: ErrorKind, what: &'static str) -> MockError {
        let errno = match kind {
            ErrorKind::OutOfResources => 12, // ENOMEM
            ErrorKind::InvalidArgument => errno::EINVAL,
            ErrorKind::Timeout => 110,     // ETIMEDOUT
            ErrorKind::WouldBlock => 11,   // EAGAIN
            ErrorKind::NotFound => 19,     // ENODEV
            ErrorKind::Unsupported => 95,  // EOPNOTSUPP
            ErrorKind::Unreachable => 113, // EHOSTUNREACH
            _ => 5,                        // EIO
        };
        MockError { op, errno, kind, what }
    }
}

impl MockError {
    /// The error of an operation on a port that does not exist (`ENODEV`).
    pub const fn no_such_port(op: &'static str) -> MockError {
        MockError::new(op, ErrorKind::NotFound, "no such port")
    }
}

impl fmt::Display for MockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} (errno {})", self.op, self.what, self.errno)
    }
}

impl core::error::Error for MockError {}

impl Error for MockError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

/// The [`Hal`] of one device of a fabric. Cheap to clone; `Send + Sync`.
#[derive(Debug, Clone)]
pub struct MockHal {
    fabric: Fabric,
    device: u16,
}

impl MockHal {
    /// The backend of `device` on `fabric`.
    pub fn new(fabric: &Fabric, device: u16) -> MockHal {
        MockHal { fabric: fabric.clone(), device }
    }

    /// The fabric.
    pub fn fabric(&self) -> &Fabric {
        &self.fabric
    }

    fn id(&self, port: PortNum) -> PortId {
        PortId { device: self.device, port: port.get() }
    }
}

impl ErrorType for MockHal {
    type Error = MockError;
}

/// The multicast MAC of a RoCE destination, if it is multicast
/// (`rdma_is_multicast_addr` and `ib_resolve_eth_dmac` rules).
fn multicast_mac(g: &Gid) -> Option<[u8; 6]> {
    if let Some([_, b, c, d]) = g.ipv4().filter(|a| a[0] & 0xf0 == 0xe0) {
        return Some([0x01, 0x00, 0x5e, b & 0x7f, c, d]);
    }
    g.is_multicast().then(|| [0x33, 0x33, g.0[12], g.0[13], g.0[14], g.0[15]])
}

impl Hal for MockHal {
    type Ah = MockAh;

    fn port_info(&self, port: PortNum) -> Result<PortInfo, MockError> {
        self.fabric.port_info(self.id(port)).ok_or(MockError::new("query_port", ErrorKind::NotFound, "no such port"))
    }

    fn snapshot_gids<const N: usize>(&self, port: PortNum, table: &mut GidTable<N>) -> Result<(), MockError> {
        self.fabric.with_state(|s| {
            let (ll, entries, generation, _) = s.port_state(self.id(port)).ok_or(MockError::new(
                "query_gid_table",
                ErrorKind::NotFound,
                "no such port",
            ))?;
            *table = GidTable::new(port.get(), ll, entries.len() as u32);
            for (i, e) in entries.iter().enumerate() {
                if let Some(e) = e {
                    table.set(i as u32, *e).map_err(|_| {
                        MockError::new(
                            "query_gid_table",
                            ErrorKind::OutOfResources,
                            "GID table exceeds the snapshot capacity",
                        )
                    })?;
                }
            }
            table.set_generation(generation);
            Ok(())
        })
    }

    fn gid_generation(&self, port: PortNum) -> u64 {
        self.fabric.gid_generation(self.id(port))
    }

    fn resolve_l2(&self, attr: &AhAttr) -> Result<Option<L2Info>, MockError> {
        const OP: &str = "resolve_l2";
        if let Some(g) = attr.grh {
            self.fabric.wait_resolve(&g.dgid);
        }
        self.fabric.with_state(|s| {
            let (ll, entries, _, quirks) =
                s.port_state(self.id(attr.port)).ok_or(MockError::new(OP, ErrorKind::NotFound, "no such port"))?;
            if ll != udah_core::LinkLayer::Ethernet {
                return Ok(None);
            }
            let g = attr.grh.ok_or(MockError::new(OP, ErrorKind::InvalidArgument, "RoCE AH without GRH"))?;
            let src = entries.get(usize::from(g.sgid_index)).copied().flatten().ok_or(MockError::new(
                OP,
                ErrorKind::InvalidArgument,
                "source GID slot is empty (ENODATA)",
            ))?;
            let vlan_tag = src.vlan.map(|v| v | (tos_to_priority(g.traffic_class) << 13));
            if let Some(mac) = multicast_mac(&g.dgid) {
                return Ok(Some(L2Info { dmac: mac, vlan_tag, hop_limit: None }));
            }
            if g.dgid.is_link_local() && src.gid_type == udah_core::GidType::RoceV1 {
                return Ok(Some(L2Info { dmac: g.dgid.link_local_mac(), vlan_tag, hop_limit: None }));
            }
            if src.gid.is_ipv4_mapped() != g.dgid.is_ipv4_mapped() {
                return Err(MockError::new(OP, ErrorKind::InvalidArgument, "address family mismatch"));
            }
            let dmac = s.neighbour(&g.dgid).ok_or(MockError::new(
                OP,
                ErrorKind::Unreachable,
                "no neighbour entry (EHOSTUNREACH)",
            ))?;
            Ok(Some(L2Info { dmac, vlan_tag, hop_limit: quirks.route_hop_limit }))
        })
    }

    fn create_ah(&self, attr: &AhAttr, l2: Option<&L2Info>) -> Result<MockAh, MockError> {
        const OP: &str = "create_ah";
        let port = self.id(attr.port);
        let (fault, sleep) = self.fabric.with_state(|s| {
            let (fault, latency) = s.create_attempt(port);
            (fault, s.owe_create(latency))
        });
        if !sleep.is_zero() {
            // The cost model: outside the fabric lock, like a blocking verbs call.
            let t = Instant::now();
            std::thread::sleep(sleep);
            let ns = t.elapsed().as_nanos() as u64;
            self.fabric.with_state(|s| s.settle_sleep(sleep, ns));
        }
        let fail = |kind, what| {
            self.fabric.with_state(|s| s.count_create_failure());
            Err(MockError::new(OP, kind, what))
        };
        if let Some(kind) = fault {
            return fail(kind, "injected fault");
        }
        let info = match self.fabric.port_info(port) {
            Some(i) => i,
            None => return fail(ErrorKind::NotFound, "no such port"),
        };
        let roce = info.link_layer == udah_core::LinkLayer::Ethernet;
        if roce && attr.grh.is_none() {
            return fail(ErrorKind::InvalidArgument, "RoCE AH without GRH");
        }
        if let Some(g) = attr.grh {
            let present = self.fabric.gids(port).iter().any(|(i, _)| *i == u32::from(g.sgid_index));
            if !present {
                return fail(ErrorKind::InvalidArgument, "source GID slot is empty (ENODATA)");
            }
        }
        let l2 = if roce {
            match l2 {
                Some(l) => Some(*l),
                None => match self.resolve_l2(attr) {
                    Ok(l) => l,
                    Err(e) => {
                        self.fabric.with_state(|s| s.count_create_failure());
                        return Err(e);
                    }
                },
            }
        } else {
            None
        };
        Ok(self.fabric.insert_ah(AhState { port, attr: *attr, l2 }))
    }

    fn destroy_ah(&self, ah: MockAh) -> Result<(), MockError> {
        if self.fabric.with_state(|s| s.remove_ah(ah.0)) {
            Ok(())
        } else {
            Err(MockError::new("destroy_ah", ErrorKind::InvalidArgument, "no such AH (double destroy?)"))
        }
    }
}
