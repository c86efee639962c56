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
