//! C enums as Rust enums. Every conversion from C is total: a value this
//! crate does not know (a newer kernel or provider) becomes `Unknown(raw)`
//! and goes back to C unchanged; nothing here panics (STYLE §4 pitfalls 2–3).

use core::fmt;

macro_rules! c_enum {
    (
        $(#[$meta:meta])*
        $name:ident : $raw:ty { $( $(#[$vmeta:meta])* $variant:ident = $value:literal => $text:literal ),* $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A value this crate does not know, kept as the C side reported it.
            Unknown($raw),
        }

        impl From<$raw> for $name {
            fn from(v: $raw) -> $name {
                match v {
                    $( $value => $name::$variant, )*
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for $raw {
            fn from(v: $name) -> $raw {
                match v {
                    $( $name::$variant => $value, )*
                    $name::Unknown(other) => other,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $( $name::$variant => f.write_str($text), )*
                    $name::Unknown(v) => write!(f, "unknown({v})"),
                }
            }
        }
    };
}

c_enum! {
    /// `enum ibv_port_state`.
    PortState: u32 {
        /// `IBV_PORT_NOP`
        Nop = 0 => "NOP",
        /// `IBV_PORT_DOWN`
        Down = 1 => "DOWN",
        /// `IBV_PORT_INIT`
        Init = 2 => "INIT",
        /// `IBV_PORT_ARMED`
        Armed = 3 => "ARMED",
        /// `IBV_PORT_ACTIVE`
        Active = 4 => "ACTIVE",
        /// `IBV_PORT_ACTIVE_DEFER`
        ActiveDefer = 5 => "ACTIVE_DEFER",
    }
}

impl PortState {
    /// Whether the port can carry traffic (`ACTIVE` or `ACTIVE_DEFER`).
    pub fn is_active(self) -> bool {
        matches!(self, PortState::Active | PortState::ActiveDefer)
    }
}

c_enum! {
    /// The port's link layer (`IBV_LINK_LAYER_*`).
    PortLinkLayer: u8 {
        /// `IBV_LINK_LAYER_UNSPECIFIED` (old providers; libibverbs treats it as InfiniBand).
        Unspecified = 0 => "Unspecified",
        /// `IBV_LINK_LAYER_INFINIBAND`
        Infiniband = 1 => "InfiniBand",
        /// `IBV_LINK_LAYER_ETHERNET`
        Ethernet = 2 => "Ethernet",
    }
}

impl PortLinkLayer {
    /// The core's link layer: `Unspecified` counts as InfiniBand, as in
    /// libibverbs; an unknown value has none.
    pub fn to_core(self) -> Option<udah_core::LinkLayer> {
        match self {
            PortLinkLayer::Unspecified | PortLinkLayer::Infiniband => Some(udah_core::LinkLayer::Infiniband),
            PortLinkLayer::Ethernet => Some(udah_core::LinkLayer::Ethernet),
            PortLinkLayer::Unknown(_) => None,
        }
    }
}

c_enum! {
    /// `enum ibv_gid_type` of a GID-table entry.
    GidKind: u32 {
        /// `IBV_GID_TYPE_IB`
        Ib = 0 => "IB",
        /// `IBV_GID_TYPE_ROCE_V1`
        RoceV1 = 1 => "RoCE v1",
        /// `IBV_GID_TYPE_ROCE_V2`
        RoceV2 = 2 => "RoCE v2",
    }
}

impl TryFrom<GidKind> for udah_core::GidType {
    type Error = GidKind;
    fn try_from(k: GidKind) -> Result<udah_core::GidType, GidKind> {
        udah_core::GidType::from_raw(u32::from(k)).ok_or(k)
    }
}

c_enum! {
    /// `enum ibv_mtu`.
    Mtu: u32 {
        /// `IBV_MTU_256`
        Mtu256 = 1 => "256",
        /// `IBV_MTU_512`
        Mtu512 = 2 => "512",
        /// `IBV_MTU_1024`
        Mtu1024 = 3 => "1024",
        /// `IBV_MTU_2048`
        Mtu2048 = 4 => "2048",
        /// `IBV_MTU_4096`
        Mtu4096 = 5 => "4096",
    }
}

impl Mtu {
    /// The MTU in bytes; `None` for an unknown value.
    pub fn bytes(self) -> Option<u32> {
        match self {
            Mtu::Mtu256 => Some(256),
            Mtu::Mtu512 => Some(512),
            Mtu::Mtu1024 => Some(1024),
            Mtu::Mtu2048 => Some(2048),
            Mtu::Mtu4096 => Some(4096),
            Mtu::Unknown(_) => None,
        }
    }
}

c_enum! {
    /// `enum ibv_wc_status`.
    WcStatus: u32 {
        /// `IBV_WC_SUCCESS`
        Success = 0 => "success",
        /// `IBV_WC_LOC_LEN_ERR`
        LocLenErr = 1 => "local length error",
        /// `IBV_WC_LOC_QP_OP_ERR`
        LocQpOpErr = 2 => "local QP operation error",
        /// `IBV_WC_LOC_EEC_OP_ERR`
        LocEecOpErr = 3 => "local EE context operation error",
        /// `IBV_WC_LOC_PROT_ERR`
        LocProtErr = 4 => "local protection error",
        /// `IBV_WC_WR_FLUSH_ERR`
        WrFlushErr = 5 => "work request flushed",
        /// `IBV_WC_MW_BIND_ERR`
        MwBindErr = 6 => "memory window bind error",
        /// `IBV_WC_BAD_RESP_ERR`
        BadRespErr = 7 => "bad response",
        /// `IBV_WC_LOC_ACCESS_ERR`
        LocAccessErr = 8 => "local access error",
        /// `IBV_WC_REM_INV_REQ_ERR`
        RemInvReqErr = 9 => "remote invalid request",
        /// `IBV_WC_REM_ACCESS_ERR`
        RemAccessErr = 10 => "remote access error",
        /// `IBV_WC_REM_OP_ERR`
        RemOpErr = 11 => "remote operation error",
        /// `IBV_WC_RETRY_EXC_ERR`
        RetryExcErr = 12 => "transport retry counter exceeded",
        /// `IBV_WC_RNR_RETRY_EXC_ERR`
        RnrRetryExcErr = 13 => "RNR retry counter exceeded",
        /// `IBV_WC_LOC_RDD_VIOL_ERR`
        LocRddViolErr = 14 => "local RDD violation",
        /// `IBV_WC_REM_INV_RD_REQ_ERR`
        RemInvRdReqErr = 15 => "remote invalid RD request",
        /// `IBV_WC_REM_ABORT_ERR`
        RemAbortErr = 16 => "remote aborted",
        /// `IBV_WC_INV_EECN_ERR`
        InvEecnErr = 17 => "invalid EE context number",
        /// `IBV_WC_INV_EEC_STATE_ERR`
        InvEecStateErr = 18 => "invalid EE context state",
        /// `IBV_WC_FATAL_ERR`
        FatalErr = 19 => "fatal error",
        /// `IBV_WC_RESP_TIMEOUT_ERR`
        RespTimeoutErr = 20 => "response timeout",
        /// `IBV_WC_GENERAL_ERR`
        GeneralErr = 21 => "general error",
        /// `IBV_WC_TM_ERR`
        TmErr = 22 => "tag matching error",
        /// `IBV_WC_TM_RNDV_INCOMPLETE`
        TmRndvIncomplete = 23 => "tag matching rendezvous incomplete",
    }
}

c_enum! {
    /// `enum ibv_wc_opcode`.
    WcOpcode: u32 {
        /// `IBV_WC_SEND`
        Send = 0 => "SEND",
        /// `IBV_WC_RDMA_WRITE`
        RdmaWrite = 1 => "RDMA_WRITE",
        /// `IBV_WC_RDMA_READ`
        RdmaRead = 2 => "RDMA_READ",
        /// `IBV_WC_COMP_SWAP`
        CompSwap = 3 => "COMP_SWAP",
        /// `IBV_WC_FETCH_ADD`
        FetchAdd = 4 => "FETCH_ADD",
        /// `IBV_WC_BIND_MW`
        BindMw = 5 => "BIND_MW",
        /// `IBV_WC_LOCAL_INV`
        LocalInv = 6 => "LOCAL_INV",
        /// `IBV_WC_TSO`
        Tso = 7 => "TSO",
        /// `IBV_WC_RECV`
        Recv = 128 => "RECV",
        /// `IBV_WC_RECV_RDMA_WITH_IMM`
        RecvRdmaWithImm = 129 => "RECV_RDMA_WITH_IMM",
    }
}

c_enum! {
    /// `enum ibv_event_type` of an asynchronous event.
    EventType: u32 {
        /// `IBV_EVENT_CQ_ERR`
        CqErr = 0 => "CQ_ERR",
        /// `IBV_EVENT_QP_FATAL`
        QpFatal = 1 => "QP_FATAL",
        /// `IBV_EVENT_QP_REQ_ERR`
        QpReqErr = 2 => "QP_REQ_ERR",
        /// `IBV_EVENT_QP_ACCESS_ERR`
        QpAccessErr = 3 => "QP_ACCESS_ERR",
        /// `IBV_EVENT_COMM_EST`
        CommEst = 4 => "COMM_EST",
        /// `IBV_EVENT_SQ_DRAINED`
        SqDrained = 5 => "SQ_DRAINED",
        /// `IBV_EVENT_PATH_MIG`
        PathMig = 6 => "PATH_MIG",
        /// `IBV_EVENT_PATH_MIG_ERR`
        PathMigErr = 7 => "PATH_MIG_ERR",
        /// `IBV_EVENT_DEVICE_FATAL`
        DeviceFatal = 8 => "DEVICE_FATAL",
        /// `IBV_EVENT_PORT_ACTIVE`
        PortActive = 9 => "PORT_ACTIVE",
        /// `IBV_EVENT_PORT_ERR`
        PortErr = 10 => "PORT_ERR",
        /// `IBV_EVENT_LID_CHANGE`
        LidChange = 11 => "LID_CHANGE",
        /// `IBV_EVENT_PKEY_CHANGE`
        PkeyChange = 12 => "PKEY_CHANGE",
        /// `IBV_EVENT_SM_CHANGE`
        SmChange = 13 => "SM_CHANGE",
        /// `IBV_EVENT_SRQ_ERR`
        SrqErr = 14 => "SRQ_ERR",
        /// `IBV_EVENT_SRQ_LIMIT_REACHED`
        SrqLimitReached = 15 => "SRQ_LIMIT_REACHED",
        /// `IBV_EVENT_QP_LAST_WQE_REACHED`
        QpLastWqeReached = 16 => "QP_LAST_WQE_REACHED",
        /// `IBV_EVENT_CLIENT_REREGISTER`
        ClientReregister = 17 => "CLIENT_REREGISTER",
        /// `IBV_EVENT_GID_CHANGE`
        GidChange = 18 => "GID_CHANGE",
        /// `IBV_EVENT_WQ_FATAL`
        WqFatal = 19 => "WQ_FATAL",
        /// `IBV_EVENT_DEVICE_SPEED_CHANGE`
        DeviceSpeedChange = 20 => "DEVICE_SPEED_CHANGE",
    }
}

impl EventType {
    /// Whether the event's element is a port number (rather than a CQ, QP,
    /// SRQ or WQ).
    pub fn is_port_event(self) -> bool {
        matches!(
            self,
            EventType::PortActive
                | EventType::PortErr
                | EventType::LidChange
                | EventType::PkeyChange
                | EventType::SmChange
                | EventType::ClientReregister
                | EventType::GidChange
                | EventType::DeviceSpeedChange
        )
    }

    /// Whether the event leaves the device, or one of its queues, unusable
    /// until it is rebuilt: `DEVICE_FATAL` (the device failed or is being
    /// removed), `QP_FATAL`, `QP_REQ_ERR`, `QP_ACCESS_ERR` (the QP went to
    /// the error state), `CQ_ERR` (a CQ overran), `WQ_FATAL`, `SRQ_ERR`. A
    /// `PORT_ERR` is not fatal: the port may come back (`PORT_ACTIVE`).
    pub fn is_fatal(self) -> bool {
        matches!(
            self,
            EventType::DeviceFatal
                | EventType::QpFatal
                | EventType::QpReqErr
                | EventType::QpAccessErr
                | EventType::CqErr
                | EventType::WqFatal
                | EventType::SrqErr
        )
    }

    /// Whether AHs built against the port's GID table or addresses may now be
    /// stale: the GID table changed, the port went up or down (a RoCE port
    /// that comes back may have new addresses), or the LID or SM changed.
    pub fn invalidates_gids(self) -> bool {
        matches!(
            self,
            EventType::GidChange
                | EventType::PortActive
                | EventType::PortErr
                | EventType::LidChange
                | EventType::ClientReregister
                | EventType::SmChange
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_round_trip_and_unknown_are_kept() {
        for raw in 0..=300u32 {
            assert_eq!(u32::from(PortState::from(raw)), raw);
            assert_eq!(u32::from(GidKind::from(raw)), raw);
            assert_eq!(u32::from(Mtu::from(raw)), raw);
            assert_eq!(u32::from(WcStatus::from(raw)), raw);
            assert_eq!(u32::from(WcOpcode::from(raw)), raw);
            assert_eq!(u32::from(EventType::from(raw)), raw);
            // Display never panics.
            let _ = format!("{} {} {}", PortState::from(raw), WcStatus::from(raw), EventType::from(raw));
        }
        for raw in 0..=255u8 {
            assert_eq!(u8::from(PortLinkLayer::from(raw)), raw);
        }
        assert_eq!(u32::from(EventType::from(u32::MAX)), u32::MAX);
        assert_eq!(EventType::from(99), EventType::Unknown(99));
        assert_eq!(PortState::from(4), PortState::Active);
        assert_eq!(PortState::from(6), PortState::Unknown(6));
        assert_eq!(WcOpcode::from(128), WcOpcode::Recv);
        assert_eq!(EventType::from(18), EventType::GidChange);
        assert_eq!(PortLinkLayer::from(2), PortLinkLayer::Ethernet);
        assert_eq!(PortLinkLayer::from(7), PortLinkLayer::Unknown(7));
        assert_eq!(format!("{}", GidKind::from(9)), "unknown(9)");
    }

    #[test]
    fn to_core() {
        use udah_core::{GidType, LinkLayer};
        assert_eq!(GidType::try_from(GidKind::Ib), Ok(GidType::Ib));
        assert_eq!(GidType::try_from(GidKind::RoceV1), Ok(GidType::RoceV1));
        assert_eq!(GidType::try_from(GidKind::RoceV2), Ok(GidType::RoceV2));
        assert_eq!(GidType::try_from(GidKind::Unknown(3)), Err(GidKind::Unknown(3)));
        assert_eq!(PortLinkLayer::Unspecified.to_core(), Some(LinkLayer::Infiniband));
        assert_eq!(PortLinkLayer::Ethernet.to_core(), Some(LinkLayer::Ethernet));
        assert_eq!(PortLinkLayer::Unknown(9).to_core(), None);
        assert_eq!(Mtu::from(5).bytes(), Some(4096));
        assert_eq!(Mtu::from(0).bytes(), None);
        assert!(PortState::ActiveDefer.is_active() && !PortState::Down.is_active());
        assert!(EventType::GidChange.invalidates_gids() && EventType::GidChange.is_port_event());
        assert!(!EventType::CqErr.invalidates_gids() && !EventType::QpFatal.is_port_event());
        for fatal in [1, 2, 3, 0, 8, 19, 14] {
            assert!(EventType::from(fatal).is_fatal(), "{}", EventType::from(fatal));
        }
        for benign in [4, 5, 9, 10, 11, 15, 16, 18, 20, 99] {
            assert!(!EventType::from(benign).is_fatal(), "{}", EventType::from(benign));
        }
    }
}
