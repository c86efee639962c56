//! GID-table snapshots: one `ibv_query_gid_table` call where the library and
//! kernel have it, else `ibv_query_gid_ex` per index; each entry with its GID
//! type, netdev and VLAN; filled into the core's [`GidTable`].

use std::collections::HashMap;

use udah_core::{GidEntry, GidTable, GidType, LinkLayer};

use crate::enums::GidKind;
use crate::error::VerbsError;
use crate::verbs::{Context, GidRecord, PortAttr};

/// How a snapshot was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GidSource {
    /// One `ibv_query_gid_table` call.
    Table,
    /// `ibv_query_gid_ex` per index (the table call failed; its errno is kept).
    PerIndex {
        /// Why the one-call path was not used.
        table_errno: Option<i32>,
    },
}

/// One valid GID entry with its netdev facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidInfo {
    /// What the device reported.
    pub record: GidRecord,
    /// The netdev name (RoCE), from the ifindex.
    pub netdev: Option<String>,
    /// The VLAN id, when the netdev is a VLAN device.
    pub vlan: Option<u16>,
}

/// A port's GID table as read from the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortGids {
    /// The port.
    pub port: u8,
    /// The table length (`gid_tbl_len`).
    pub len: u32,
    /// The valid entries, by index.
    pub entries: Vec<GidInfo>,
    /// How it was read.
    pub source: GidSource,
}

/// Reads `port`'s GID table. `total_len` bounds the one-call query (the sum
/// of all ports' `gid_tbl_len`).
pub fn read_port_gids(ctx: &Context, port: u8, attr: &PortAttr, total_len: usize) -> Result<PortGids, VerbsError> {
    let (mut records, source) = match ctx.query_gid_table(total_len.max(attr.gid_tbl_len as usize)) {
        Ok(all) => (all.into_iter().filter(|r| r.port == u32::from(port)).collect::<Vec<_>>(), GidSource::Table),
        Err(e) => {
            let mut v = Vec::new();
            for index in 0..attr.gid_tbl_len {
                if let Some(r) = ctx.query_gid_ex(port, index)? {
                    v.push(r);
                }
            }
            (v, GidSource::PerIndex { table_errno: e.errno() })
        }
    };
    records.sort_by_key(|r| r.index);
    let netdevs = Netdevs::load();
    let entries = records
        .into_iter()
        .map(|record| {
            let netdev = netdevs.name(record.ifindex);
            let vlan = netdev.as_deref().and_then(|n| netdevs.vlan(n));
            GidInfo { record, netdev, vlan }
        })
        .collect();
    Ok(PortGids { port, len: attr.gid_tbl_len, entries, source })
}

/// Fills `table` from `gids`, stamped with `generation`. Entries the core
/// cannot hold (an unknown GID type, the zero GID) are skipped and counted;
/// an entry past the capacity `N` is an error.
pub fn fill_table<const N: usize>(
    table: &mut GidTable<N>,
    link_layer: LinkLayer,
    gids: &PortGids,
    generation: u64,
) -> Result<usize, VerbsError> {
    *table = GidTable::new(gids.port, link_layer, gids.len);
    let mut skipped = 0;
    for g in &gids.entries {
        let Ok(ty) = GidType::try_from(g.record.kind) else {
            skipped += 1;
            continue;
        };
        let mut entry = GidEntry::new(g.record.gid, ty).with_ifindex(g.record.ifindex);
        if let Some(v) = g.vlan {
            entry = entry.with_vlan(v);
        }
        match table.set(g.record.index, entry) {
            Ok(()) => {}
            Err(udah_core::GidTableError::OverCapacity { index, capacity }) => {
                return Err(VerbsError::GidTableTooLarge { port: gids.port, index, capacity });
            }
            Err(_) => skipped += 1,
        }
    }
    table.set_generation(generation);
    Ok(skipped)
}

/// ifindex → netdev name, and netdev → VLAN id, read once from sysfs and
/// `/proc/net/vlan/config`.
#[derive(Debug, Default)]
struct Netdevs {
    names: HashMap<u32, String>,
    vlans: HashMap<String, u16>,
}

impl Netdevs {
    fn load() -> Netdevs {
        let mut names = HashMap::new();
        if let Ok(dir) = std::fs::read_dir("/sys/class/net") {
            for e in dir.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let ifindex = std::fs::read_to_string(e.path().join("ifindex")).ok();
                if let Some(i) = ifindex.and_then(|s| s.trim().parse::<u32>().ok()) {
                    names.insert(i, name);
                }
            }
        }
        let vlans = std::fs::read_to_string("/proc/net/vlan/config").map(|s| parse_vlan_config(&s)).unwrap_or_default();
        Netdevs { names, vlans }
    }

    fn name(&self, ifindex: u32) -> Option<String> {
        if ifindex == 0 { None } else { self.names.get(&ifindex).cloned() }
    }

    fn vlan(&self, name: &str) -> Option<u16> {
        self.vlans.get(name).copied()
    }
}

/// Parses `/proc/net/vlan/config`: two header lines, then
/// `name | VID | real device` per VLAN device.
pub fn parse_vlan_config(text: &str) -> HashMap<String, u16> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split('|').map(str::trim);
            let name = parts.next()?;
            let vid = parts.next()?.parse::<u16>().ok()?;
            parts.next()?;
            (vid <= 4095 && !name.is_empty()).then(|| (name.to_owned(), vid))
        })
        .collect()
}

/// The display name of a GID type, as `show_gids` prints it.
pub fn kind_label(kind: GidKind) -> String {
    match kind {
        GidKind::Ib => "IB".to_owned(),
        GidKind::RoceV1 => "RoCE v1".to_owned(),
        GidKind::RoceV2 => "RoCE v2".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use udah_core::wire::Gid;

    #[test]
    fn vlan_config() {
        let text = "VLAN Dev name    | VLAN ID\nName-Type: VLAN_NAME_TYPE_RAW_PLUS_VID_NO_PAD\n\
                    eth0.100       | 100  | eth0\nvlan7          | 7  | ens1f0\nbad | x | y\nhuge | 5000 | z\n";
        let m = parse_vlan_config(text);
        assert_eq!(m.get("eth0.100"), Some(&100));
        assert_eq!(m.get("vlan7"), Some(&7));
        assert_eq!(m.len(), 2);
        assert!(parse_vlan_config("").is_empty());
    }

    fn info(index: u32, gid: Gid, kind: GidKind, vlan: Option<u16>) -> GidInfo {
        GidInfo { record: GidRecord { gid, index, port: 1, kind, ifindex: 4 }, netdev: Some("eth0".into()), vlan }
    }

    #[test]
    fn fill() {
        let v4 = Gid::from_ipv4([10, 0, 0, 1]);
        let gids = PortGids {
            port: 1,
            len: 16,
            entries: vec![
                info(0, Gid::link_local_from_mac([2, 0, 0, 0, 0, 1]), GidKind::RoceV1, None),
                info(3, v4, GidKind::RoceV2, Some(100)),
                info(4, v4, GidKind::Unknown(7), None),
                info(5, Gid::ZERO, GidKind::RoceV2, None),
            ],
            source: GidSource::Table,
        };
        let mut t: GidTable<16> = GidTable::new(1, LinkLayer::Infiniband, 0);
        assert_eq!(fill_table(&mut t, LinkLayer::Ethernet, &gids, 9), Ok(2));
        assert_eq!(t.generation(), 9);
        assert_eq!(t.len(), 16);
        assert_eq!(t.link_layer(), LinkLayer::Ethernet);
        let e = t.get(3).unwrap();
        assert_eq!((e.gid, e.gid_type, e.vlan, e.ifindex), (v4, GidType::RoceV2, Some(100), 4));
        assert!(t.get(4).is_none() && t.get(5).is_none());

        let mut small: GidTable<2> = GidTable::new(1, LinkLayer::Infiniband, 0);
        assert_eq!(
            fill_table(&mut small, LinkLayer::Ethernet, &gids, 1),
            Err(VerbsError::GidTableTooLarge { port: 1, index: 3, capacity: 2 })
        );
    }

    #[test]
    fn labels() {
        assert_eq!(kind_label(GidKind::RoceV2), "RoCE v2");
        assert_eq!(kind_label(GidKind::Unknown(5)), "unknown(5)");
    }
}
