//! The parts of a work completion that AH construction reads.

/// `IBV_WC_GRH`: the completion has a valid GRH area (bit 0, both models).
pub const IBV_WC_GRH: u32 = 1 << 0;
/// `IBV_WC_WITH_IMM`.
pub const IBV_WC_WITH_IMM: u32 = 1 << 1;
/// `IBV_WC_IP_CSUM_OK` (userspace bit 2; the kernel's bit 2 means something else).
pub const IBV_WC_IP_CSUM_OK: u32 = 1 << 2;

/// Kernel `IB_WC_GRH`.
pub const IB_WC_GRH: u32 = 1 << 0;
/// Kernel `IB_WC_WITH_IMM`.
pub const IB_WC_WITH_IMM: u32 = 1 << 1;
/// Kernel `IB_WC_WITH_INVALIDATE`.
pub const IB_WC_WITH_INVALIDATE: u32 = 1 << 2;
/// Kernel `IB_WC_IP_CSUM_OK`.
pub const IB_WC_IP_CSUM_OK: u32 = 1 << 3;
/// Kernel `IB_WC_WITH_SMAC`.
pub const IB_WC_WITH_SMAC: u32 = 1 << 4;
/// Kernel `IB_WC_WITH_VLAN`: `vlan_id` is valid.
pub const IB_WC_WITH_VLAN: u32 = 1 << 5;
/// Kernel `IB_WC_WITH_NETWORK_HDR_TYPE`: `network_hdr_type` is valid.
pub const IB_WC_WITH_NETWORK_HDR_TYPE: u32 = 1 << 6;

/// The fields of a userspace `struct ibv_wc` that matter for a UD reply.
///
/// Only `wc_flags` bit 0, `slid`, `sl` and `dlid_path_bits` feed the AH;
/// `src_qp` is where the reply goes (it is not part of the AH) and
/// `pkey_index` is carried for completeness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct IbvWc {
    /// `ibv_wc_flags` bits ([`IBV_WC_GRH`] …).
    pub wc_flags: u32,
    /// Source LID.
    pub slid: u16,
    /// Service level (copied unmasked).
    pub sl: u8,
    /// Destination LID path bits.
    pub dlid_path_bits: u8,
    /// Remote QP number.
    pub src_qp: u32,
    /// P_Key index.
    pub pkey_index: u16,
}

/// The fields of a kernel `struct ib_wc` that `ib_init_ah_attr_from_wc`
/// reads, with the kernel's flag bits ([`IB_WC_GRH`] …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct KernelWc {
    /// `enum ib_wc_flags` bits.
    pub wc_flags: u32,
    /// Source LID (32 bits in the kernel; IB keeps the low 16).
    pub slid: u32,
    /// Service level (copied unmasked).
    pub sl: u8,
    /// Destination LID path bits.
    pub dlid_path_bits: u8,
    /// VLAN id, read only with [`IB_WC_WITH_VLAN`].
    pub vlan_id: u16,
    /// `enum rdma_network_type`, read only with [`IB_WC_WITH_NETWORK_HDR_TYPE`]
    /// on RoCE ports; values above 3 are possible from a driver.
    pub network_hdr_type: u8,
    /// Source MAC (never read by the function).
    pub smac: [u8; 6],
    /// Remote QP number (never read by the function).
    pub src_qp: u32,
    /// P_Key index (never read by the function).
    pub pkey_index: u16,
}

/// A receive completion in either encoding: what a [`Profile`](super::Profile)
/// reads. The core's edge has one type per encoding, [`IbvWc`] (userspace
/// `struct ibv_wc`, `IBV_WC_*` flags) and [`KernelWc`] (kernel `struct
/// ib_wc`, `IB_WC_*` flags); a backend whose completions carry both (a
/// mock NIC, a provider that reports the network type) implements this for
/// its own type. Each encoding converts to the other: flags that have a
/// counterpart are mapped, the kernel-only fields (VLAN, network type, MAC)
/// are absent in the userspace view and not reported in the kernel view of
/// an [`IbvWc`].
pub trait Completion {
    /// The userspace view.
    fn ibv(&self) -> IbvWc;
    /// The kernel view.
    fn kernel(&self) -> KernelWc;
    /// The source address, for a device that reports it in the completion
    /// (EFA's `efadv_wc_read_sgid`) instead of writing the 40-byte area:
    /// the responder then builds the attribute from the area this address
    /// stands for ([`SourceAddress::to_area`](crate::wire::SourceAddress::to_area))
    /// and ignores the area it was given. `None` (the default): the area.
    #[inline(always)]
    fn source(&self) -> Option<crate::wire::SourceAddress> {
        None
    }
}

/// `(userspace bit, kernel bit)` of the flags both encodings have.
const FLAG_PAIRS: [(u32, u32); 3] =
    [(IBV_WC_GRH, IB_WC_GRH), (IBV_WC_WITH_IMM, IB_WC_WITH_IMM), (IBV_WC_IP_CSUM_OK, IB_WC_IP_CSUM_OK)];

impl Completion for IbvWc {
    #[inline(always)]
    fn ibv(&self) -> IbvWc {
        *self
    }

    #[inline]
    fn kernel(&self) -> KernelWc {
        let wc_flags = FLAG_PAIRS.iter().fold(0, |f, &(u, k)| if self.wc_flags & u != 0 { f | k } else { f });
        KernelWc {
            wc_flags,
            slid: u32::from(self.slid),
            sl: self.sl,
            dlid_path_bits: self.dlid_path_bits,
            src_qp: self.src_qp,
            pkey_index: self.pkey_index,
            ..KernelWc::default()
        }
    }
}

impl Completion for KernelWc {
    #[inline]
    fn ibv(&self) -> IbvWc {
        let wc_flags = FLAG_PAIRS.iter().fold(0, |f, &(u, k)| if self.wc_flags & k != 0 { f | u } else { f });
        IbvWc {
            wc_flags,
            slid: self.slid as u16,
            sl: self.sl,
            dlid_path_bits: self.dlid_path_bits,
            src_qp: self.src_qp,
            pkey_index: self.pkey_index,
        }
    }

    #[inline(always)]
    fn kernel(&self) -> KernelWc {
        *self
    }
}

impl KernelWc {
    /// The VLAN id, when the completion reports one (`IB_WC_WITH_VLAN`).
    #[inline]
    pub const fn vlan(&self) -> Option<u16> {
        if self.wc_flags & IB_WC_WITH_VLAN != 0 { Some(self.vlan_id) } else { None }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn encodings_convert_both_ways() {
        let u = IbvWc {
            wc_flags: IBV_WC_GRH | IBV_WC_IP_CSUM_OK,
            slid: 9,
            sl: 3,
            dlid_path_bits: 1,
            src_qp: 77,
            pkey_index: 2,
        };
        let k = u.kernel();
        assert_eq!(k.wc_flags, IB_WC_GRH | IB_WC_IP_CSUM_OK);
        assert_eq!((k.slid, k.sl, k.src_qp, k.pkey_index, k.vlan()), (9, 3, 77, 2, None));
        assert_eq!(k.ibv(), u);
        let v = KernelWc { wc_flags: IB_WC_WITH_VLAN | IB_WC_WITH_INVALIDATE, vlan_id: 100, ..k };
        assert_eq!(v.vlan(), Some(100));
        assert_eq!(v.ibv().wc_flags, 0);
    }
}
