//! Capture replay: which AH would a UD responder build for the packets of a
//! capture, and why does it fail for some of them.
//!
//! * [`reader`] reads pcap and pcapng files (gzip too) frame by frame;
//! * [`decode`] turns one frame (Ethernet with 802.1Q/802.1ad tags, Linux
//!   cooked capture, raw InfiniBand, ERF carrying InfiniBand or Ethernet)
//!   into what the receiving NIC hands a UD consumer: the 40-byte area and
//!   the completion fields ([`decode::UdPacket`]);
//! * [`replay`] builds or takes the receiver's GID table, runs each packet
//!   through a profile of `udah-core` and groups the outcomes per peer.
//!
//! Only UD packets are kept: BTH opcode `0x64` (SEND only) or `0x65` (SEND
//! only with immediate), with a DETH. Reliable-datagram packets also carry a
//! DETH but are not UD.
//!
//! No input makes these functions panic: a malformed frame is a
//! [`decode::FrameError`] for that frame, a malformed container a
//! [`reader::CaptureError`] with the frame number where reading stopped.

pub mod decode;
pub mod reader;
pub mod replay;

pub use decode::{DecodeOptions, Decoded, Encap, FrameError, Peer, Skip, UdPacket};
pub use reader::{CaptureError, CaptureReader, Format, Frame};
pub use replay::{Capture, Outcome, Replay, TableSource, TableSpec};

/// Fuzzing entry point: reads `data` as a capture, decodes every frame,
/// replays the UD packets through both profiles against synthesised tables
/// and renders the report. Must never panic.
#[doc(hidden)]
pub fn fuzz_capture(data: &[u8]) {
    let cap = Capture::read(std::io::Cursor::new(data.to_vec()), &DecodeOptions::default());
    for profile in [udah_core::ah::Profile::Libibverbs, udah_core::ah::Profile::Kernel] {
        if let Ok(r) = replay::replay(&cap, &TableSource::Synthesised { port_num: 1 }, profile) {
            let _ = replay::render("fuzz", &cap, &r, "synthesised");
        }
    }
    // Every decoder on the raw bytes, too.
    for lt in [
        decode::linktype::ETHERNET,
        decode::linktype::LINUX_SLL,
        decode::linktype::LINUX_SLL2,
        decode::linktype::ERF,
        decode::linktype::INFINIBAND,
    ] {
        let _ = decode::decode(lt, data, &DecodeOptions { ipv4_front: decode::V6PAD_FRONT });
    }
}
