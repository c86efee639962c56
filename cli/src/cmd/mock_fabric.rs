//! The mock fabric of `serve --hal mock` and `ping --hal mock`: one server
//! port and simulated clients on hal-mock.

use udah_core::GidType;
use udah_core::ah::AhAttr;
use udah_core::hal::Hal;
use udah_core::wire::Gid;
use udah_hal_mock::{Fabric, MockAh, MockError, MockHal, PortConfig, PortId, Qpn};

use super::common::MockLink;

/// A mock fabric with one server port and `peers` client ports, each client
/// with a QP and an AH to the server.
pub(crate) struct MockSetup {
    /// The fabric.
    pub(crate) fabric: Fabric,
    /// The server port.
    pub(crate) server: PortId,
    /// The server's address: its RoCE v2 GID, or its LID.
    pub(crate) server_addr: String,
    /// Clients: port, QP, AH to the server.
    pub(crate) clients: Vec<(PortId, Qpn, MockAh)>,
}

impl core::fmt::Debug for MockSetup {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MockSetup").field("server", &self.server).field("clients", &self.clients.len()).finish()
    }
}

/// The RoCE v2 index of `gid` on `port`.
fn v2_index(fabric: &Fabric, port: PortId, gid: Gid) -> Option<u8> {
    fabric
        .gids(port)
        .iter()
        .find(|(_, e)| e.gid == gid && e.gid_type == GidType::RoceV2)
        .and_then(|(i, _)| u8::try_from(*i).ok())
}

/// Why the mock fabric of `serve`/`ping` could not be built.
#[derive(Debug)]
pub(crate) enum MockSetupError {
    /// A client port has no RoCE v2 GID for its address.
    NoClientGid,
    /// A field of a client's AH attribute is out of range (`what`).
    Field(&'static str),
    /// The fabric refused a client's AH to the server.
    CreateAh(MockError),
    /// The fabric refused a client's QP.
    CreateQp,
}

impl core::fmt::Display for MockSetupError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MockSetupError::NoClientGid => f.write_str("client has no RoCE v2 GID"),
            MockSetupError::Field(what) => f.write_str(what),
            MockSetupError::CreateAh(e) => core::fmt::Display::fmt(e, f),
            MockSetupError::CreateQp => f.write_str("create_qp"),
        }
    }
}

impl core::error::Error for MockSetupError {}

/// Builds the mock fabric of `serve`/`ping`.
pub(crate) fn mock_setup(link: MockLink, peers: u8, qkey: u32) -> Result<MockSetup, MockSetupError> {
    use udah_core::ah::{FlowLabel, GlobalRoute, PortNum, Sl};
    let fabric = Fabric::new(0x0dab);
    let server_ip = [10, 0, 0, 1];
    let (server, server_addr, server_lid) = match link {
        MockLink::Roce => {
            let p = fabric.add_port(PortConfig::roce([0x02, 0, 0, 0, 0, 1]).with_ipv4(server_ip));
            (p, Gid::from_ipv4(server_ip).to_string(), 0)
        }
        MockLink::Ib => (fabric.add_port(PortConfig::ib(1, 0x0002_c903_0000_0001)), "LID 1".to_owned(), 1),
    };
    let mut clients = Vec::new();
    for k in 0..peers {
        let (port, grh) = match link {
            MockLink::Roce => {
                let ip = [10, 0, 0, k.saturating_add(2)];
                let mac = [0x02, 0, 0, 0, 1, k];
                let p = fabric.add_port(PortConfig::roce(mac).with_ipv4(ip));
                let sgid = v2_index(&fabric, p, Gid::from_ipv4(ip)).ok_or(MockSetupError::NoClientGid)?;
                let g = GlobalRoute {
                    dgid: Gid::from_ipv4(server_ip),
                    flow_label: FlowLabel::new(u32::from(k)).ok_or(MockSetupError::Field("flow label"))?,
                    sgid_index: sgid,
                    hop_limit: 64,
                    traffic_class: 0,
                };
                (p, Some(g))
            }
            MockLink::Ib => {
                let lid = 2u16.saturating_add(u16::from(k));
                (fabric.add_port(PortConfig::ib(lid, 0x0002_c903_0000_0100 + u64::from(k))), None)
            }
        };
        let attr = AhAttr {
            port: PortNum::new(port.port).ok_or(MockSetupError::Field("port 0"))?,
            dlid: server_lid,
            sl: Sl::new(0).ok_or(MockSetupError::Field("sl"))?,
            src_path_bits: 0,
            static_rate: 0,
            grh,
        };
        let ah = MockHal::new(&fabric, port.device).create_ah(&attr, None).map_err(MockSetupError::CreateAh)?;
        let qpn = fabric.create_qp(port, qkey).ok_or(MockSetupError::CreateQp)?;
        clients.push((port, qpn, ah));
    }
    Ok(MockSetup { fabric, server, server_addr, clients })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::common::DEFAULT_QKEY;

    #[test]
    fn mock_setup_builds() {
        for link in [MockLink::Roce, MockLink::Ib] {
            let s = mock_setup(link, 3, DEFAULT_QKEY).unwrap();
            assert_eq!(s.clients.len(), 3);
        }
    }
}
