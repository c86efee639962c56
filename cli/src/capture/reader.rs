//! Reading capture files: pcap (micro- or nanosecond, either byte order) and
//! pcapng, optionally gzip-compressed, one frame at a time.
//!
//! The container formats are parsed by the `pcap-file` crate; this module
//! detects the format, undoes gzip (`flate2`), numbers the frames as
//! Wireshark does (every packet record from 1) and keeps each pcapng
//! interface's link type.

use core::fmt;
use std::io::{self, Read};

use pcap_file::PcapError;
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};

/// The container format of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Classic pcap.
    Pcap,
    /// pcapng.
    PcapNg,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Pcap => "pcap",
            Format::PcapNg => "pcapng",
        })
    }
}

/// A fatal error while reading a capture: the file cannot be read on from
/// here. `frame` is the number of the frame being read (0: the file header).
#[derive(Debug)]
pub struct CaptureError {
    /// The frame being read when it happened (1-based; 0 for the header).
    pub frame: u64,
    /// What happened.
    pub kind: CaptureErrorKind,
}

/// What went wrong in a [`CaptureError`].
#[derive(Debug)]
#[non_exhaustive]
pub enum CaptureErrorKind {
    /// An I/O error of the underlying reader (or of gzip decompression).
    Io(io::Error),
    /// The file starts with neither a pcap nor a pcapng magic number.
    NotACapture {
        /// The first bytes of the (decompressed) file.
        magic: [u8; 4],
    },
    /// The file (after gzip decompression, if any) is empty.
    Empty,
    /// The file ends inside a record.
    Truncated,
    /// The container is malformed (the `pcap-file` crate's complaint).
    Malformed(String),
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.frame == 0 {
            f.write_str("file header: ")?;
        } else {
            write!(f, "frame {}: ", self.frame)?;
        }
        match &self.kind {
            CaptureErrorKind::Io(e) => write!(f, "read error: {e}"),
            CaptureErrorKind::NotACapture { magic } => {
                write!(f, "not a pcap or pcapng file (starts with {:02x?})", magic)
            }
            CaptureErrorKind::Empty => f.write_str("the file is empty: not a pcap or pcapng capture"),
            CaptureErrorKind::Truncated => f.write_str("capture truncated: the file ends inside a record"),
            CaptureErrorKind::Malformed(s) => write!(f, "malformed capture: {s}"),
        }
    }
}

impl core::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match &self.kind {
            CaptureErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

fn pcap_error(frame: u64, e: PcapError) -> CaptureError {
    let kind = match e {
        PcapError::IncompleteBuffer => CaptureErrorKind::Truncated,
        PcapError::IoError(e) if e.kind() == io::ErrorKind::UnexpectedEof => CaptureErrorKind::Truncated,
        PcapError::IoError(e) => CaptureErrorKind::Io(e),
        other => CaptureErrorKind::Malformed(other.to_string()),
    };
    CaptureError { frame, kind }
}

/// One captured frame.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// The frame number, from 1, as Wireshark counts.
    pub number: u64,
    /// The link type (`LINKTYPE_*`) of the frame.
    pub link_type: u32,
    /// The captured bytes.
    pub data: &'a [u8],
    /// The frame's length on the wire.
    pub orig_len: u32,
}

enum Inner<R: Read> {
    Pcap { reader: PcapReader<R>, link_type: u32 },
    PcapNg { reader: PcapNgReader<R>, links: Vec<u32> },
}

/// A capture being read, frame by frame.
pub struct CaptureReader<R: Read> {
    inner: Inner<R>,
    format: Format,
    next: u64,
    failed: bool,
    buf: Vec<u8>,
}

impl<R: Read> fmt::Debug for CaptureReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureReader").field("format", &self.format).field("next", &self.next).finish()
    }
}

const PCAP_MAGICS: [[u8; 4]; 4] =
    [[0xd4, 0xc3, 0xb2, 0xa1], [0xa1, 0xb2, 0xc3, 0xd4], [0x4d, 0x3c, 0xb2, 0xa1], [0xa1, 0xb2, 0x3c, 0x4d]];
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Reads up to 4 bytes (fewer only at the end of the input).
fn read_magic(r: &mut dyn Read) -> io::Result<([u8; 4], usize)> {
    let mut magic = [0u8; 4];
    let mut n = 0;
    while n < 4 {
        let Some(buf) = magic.get_mut(n..) else { break };
        match r.read(buf) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((magic, n))
}

/// Puts the first bytes back in front of a reader.
fn unread<R: Read>(magic: [u8; 4], n: usize, r: R) -> io::Chain<io::Cursor<Vec<u8>>, R> {
    io::Cursor::new(magic.get(..n).unwrap_or_default().to_vec()).chain(r)
}

impl CaptureReader<Box<dyn Read>> {
    /// Opens a capture from a byte stream: gzip is undone when the stream
    /// starts with the gzip magic, then pcap or pcapng is chosen by magic.
    pub fn open<R: Read + 'static>(mut r: R) -> Result<CaptureReader<Box<dyn Read>>, CaptureError> {
        let io_err = |e| CaptureError { frame: 0, kind: CaptureErrorKind::Io(e) };
        let (magic, n) = read_magic(&mut r).map_err(io_err)?;
        let mut stream: Box<dyn Read> = Box::new(unread(magic, n, r));
        let (magic, n) = if magic.starts_with(&GZIP_MAGIC) && n == 4 {
            let mut gz = flate2::read::MultiGzDecoder::new(stream);
            let (m, k) = read_magic(&mut gz).map_err(io_err)?;
            stream = Box::new(unread(m, k, gz));
            (m, k)
        } else {
            (magic, n)
        };
        if n == 0 {
            return Err(CaptureError { frame: 0, kind: CaptureErrorKind::Empty });
        }
        if n < 4 {
            return Err(CaptureError { frame: 0, kind: CaptureErrorKind::Truncated });
        }
        CaptureReader::with_magic(magic, stream)
    }
}

impl<R: Read> CaptureReader<R> {
    fn with_magic(magic: [u8; 4], stream: R) -> Result<CaptureReader<R>, CaptureError> {
        if PCAP_MAGICS.contains(&magic) {
            let reader = PcapReader::new(stream).map_err(|e| pcap_error(0, e))?;
            let link_type = u32::from(reader.header().datalink);
            Ok(CaptureReader {
                inner: Inner::Pcap { reader, link_type },
                format: Format::Pcap,
                next: 1,
                failed: false,
                buf: Vec::new(),
            })
        } else if magic == PCAPNG_MAGIC {
            let reader = PcapNgReader::new(stream).map_err(|e| pcap_error(0, e))?;
            Ok(CaptureReader {
                inner: Inner::PcapNg { reader, links: Vec::new() },
                format: Format::PcapNg,
                next: 1,
                failed: false,
                buf: Vec::new(),
            })
        } else {
            Err(CaptureError { frame: 0, kind: CaptureErrorKind::NotACapture { magic } })
        }
    }

    /// The container format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The link type of a pcap file (`None` for pcapng, where each
    /// interface has its own).
    pub fn link_type(&self) -> Option<u32> {
        match &self.inner {
            Inner::Pcap { link_type, .. } => Some(*link_type),
            Inner::PcapNg { .. } => None,
        }
    }

    /// The next frame, `None` at the end of the file. After an error the
    /// reader stops (returns `None`).
    pub fn next_frame(&mut self) -> Option<Result<Frame<'_>, CaptureError>> {
        if self.failed {
            return None;
        }
        let number = self.next;
        let buf = &mut self.buf;
        let keep = |d: &[u8], buf: &mut Vec<u8>| {
            buf.clear();
            buf.extend_from_slice(d);
        };
        let r: Result<(u32, u32), CaptureError> = match &mut self.inner {
            // The raw record: a snapshot length smaller than the frames is
            // common and not an error (`pcap-file`'s checked packet would
            // refuse it).
            Inner::Pcap { reader, link_type } => match reader.next_raw_packet()? {
                Ok(p) => {
                    keep(&p.data, buf);
                    Ok((*link_type, p.orig_len))
                }
                Err(e) => Err(pcap_error(number, e)),
            },
            Inner::PcapNg { reader, links } => loop {
                let bad_interface = |id: u32, n: usize| CaptureError {
                    frame: number,
                    kind: CaptureErrorKind::Malformed(format!(
                        "packet of interface {id} but only {n} interfaces are described"
                    )),
                };
                match reader.next_block()? {
                    Ok(Block::SectionHeader(_)) => links.clear(),
                    Ok(Block::InterfaceDescription(idb)) => links.push(u32::from(idb.linktype)),
                    Ok(Block::EnhancedPacket(epb)) => match links.get(epb.interface_id as usize) {
                        Some(&l) => {
                            keep(&epb.data, buf);
                            break Ok((l, epb.original_len));
                        }
                        None => break Err(bad_interface(epb.interface_id, links.len())),
                    },
                    Ok(Block::SimplePacket(spb)) => match links.first() {
                        Some(&l) => {
                            keep(&spb.data, buf);
                            break Ok((l, spb.original_len));
                        }
                        None => break Err(bad_interface(0, 0)),
                    },
                    Ok(Block::Packet(pb)) => match links.get(usize::from(pb.interface_id)) {
                        Some(&l) => {
                            keep(&pb.data, buf);
                            break Ok((l, pb.original_len));
                        }
                        None => break Err(bad_interface(u32::from(pb.interface_id), links.len())),
                    },
                    Ok(_) => {}
                    Err(e) => break Err(pcap_error(number, e)),
                }
            },
        };
        match r {
            Ok((link_type, orig_len)) => {
                self.next = number.saturating_add(1);
                Some(Ok(Frame { number, link_type, data: &self.buf, orig_len }))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
