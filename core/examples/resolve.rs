//! From a UD receive completion to an address handle's attribute, with the
//! libibverbs profile: a RoCE v2 / IPv4 request and an InfiniBand request
//! without a GRH, answered from one port's GID-table snapshot.
//!
//! ```sh
//! cargo run -p udah-core --example resolve
//! ```

use udah_core::ah::{IBV_WC_GRH, IbvWc, libibverbs};
use udah_core::wire::{Gid, Ipv4Repr};
use udah_core::{GidEntry, GidTable, GidType, LinkLayer};

fn main() {
    // RoCE: port 1's GID table holds our address at index 3.
    let mut roce: GidTable<16> = GidTable::new(1, LinkLayer::Ethernet, 16);
    roce.set(3, GidEntry::new(Gid::from_ipv4([192, 168, 1, 10]), GidType::RoceV2)).expect("index 3 fits");

    // What the NIC writes in front of the payload: 20 undefined bytes, then the IPv4 header.
    let mut area = [0u8; 40];
    Ipv4Repr { ttl: 64, protocol: 17, src: [192, 168, 1, 20], dst: [192, 168, 1, 10], ..Default::default() }
        .emit(&mut area);
    let wc = IbvWc { wc_flags: IBV_WC_GRH, src_qp: 0x1234, ..IbvWc::default() };
    match libibverbs::init_ah_from_wc(&roce, 1, &wc, Some(&area)) {
        Ok(attr) => println!(
            "RoCE v2/IPv4 from 192.168.1.20: is_global {} dgid {} sgid_index {} hop_limit {}",
            attr.is_global,
            Gid(attr.grh.dgid),
            attr.grh.sgid_index,
            attr.grh.hop_limit
        ),
        Err(f) => println!("RoCE v2/IPv4: {}", f.error),
    }

    // InfiniBand without a GRH: the return address is the completion's SLID and SL.
    let ib: GidTable<16> = GidTable::new(1, LinkLayer::Infiniband, 16);
    let wc = IbvWc { slid: 0x12, sl: 3, src_qp: 0x99, ..IbvWc::default() };
    match libibverbs::init_ah_from_wc(&ib, 1, &wc, Some(&[0u8; 40])) {
        Ok(attr) => println!("IB from LID 0x12: is_global {} dlid {:#x} sl {}", attr.is_global, attr.dlid, attr.sl),
        Err(f) => println!("IB: {}", f.error),
    }

    // A request to an address the port does not have.
    let mut area = [0u8; 40];
    Ipv4Repr { ttl: 64, protocol: 17, src: [192, 168, 1, 20], dst: [10, 0, 0, 1], ..Default::default() }
        .emit(&mut area);
    let wc = IbvWc { wc_flags: IBV_WC_GRH, src_qp: 0x1234, ..IbvWc::default() };
    match libibverbs::init_ah_from_wc(&roce, 1, &wc, Some(&area)) {
        Ok(attr) => println!("to 10.0.0.1: unexpectedly resolved to sgid_index {}", attr.grh.sgid_index),
        Err(f) => println!("to 10.0.0.1: {}", f.error),
    }
}
