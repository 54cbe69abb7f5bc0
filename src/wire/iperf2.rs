//! iperf 2's bytes as an iperf 2 *server* reads and writes them: the client test header
//! (TCP: the connection's first bytes; UDP: inside every datagram), the datagram's
//! sequence number and send time, the header acknowledgement a TCP server sends back
//! (`client_hdr_ack`), the bounceback header, and the server report datagram that
//! answers a UDP test's FIN (`write_UDP_AckFIN`). Also the first-bytes test that tells
//! an iperf 2 peer from an iperf3 one on a shared port ([`classify_tcp`],
//! [`classify_udp`]).
//!
//! The client side's layouts (what netmeter sends as an iperf 2 client) are in
//! `wire::iperf2_client`; both are re-exported through this module, so the rest of
//! netmeter names `wire::iperf2::X` and never an offset.
//!
//! Facts from iperf 2.1.8 and 2.2.1: `include/payloads.h` (layouts, flags),
//! `src/Settings.cpp` `Settings_ClientTestHdrLen` (the header's length),
//! `src/Listener.cpp` `apply_client_settings_tcp`/`_udp` and `client_test_ack`,
//! `src/Reports.c` `write_UDP_AckFIN`. All fields are big-endian. Every length read
//! from the wire is capped ([`MAX_HEADER_LEN`], [`MAX_BB_LEN`]) before anything is
//! allocated; parse errors are a typed [`HdrError`].
//!
//! iperf 2.2 widened `client_hdrext` from 36 to 40 bytes by moving a reserved word out of
//! `client_hdrext_starttime_fq` (iperf2 commit 9dc1d86b, 2024-01-06): the start time
//! stays at the same offset in both versions, only the length in the flags differs.

#[path = "iperf2_plausible.rs"]
pub mod plausible;

pub use super::iperf2_client::{
    Amount, CLIENT_HDR_V1_LEN, CLIENT_HDREXT_LEN, CLIENTHDRACK, ClientHdr, HDR_ACK_LEN,
    HEADER_EXTEND, HEADER_LEN_BIT, HEADER_LEN_MASK, HEADER_SEQNO64B, ISOCH_MIN_LEN, Iperf2Error,
    IsochLayout, IsochPayload, SERVER_HDR_LEN, SERVER_HEADER_EXTEND, SERVER_REPORT_LEN,
    SERVER_REPORT_MIN_LEN, ServerReport, TCP_BURST_LEN, TCP_HDR_LEN, TcpBurstHdr, Transit,
    UDP_DATAGRAM_LEN, UDP_HDR_LEN, UPPER_ISOCH, VERSION_L, VERSION_U, udp_start_datagram,
    write_datagram_id,
};

/// `client_hdr_v1.flags`: a 1.7-style header (dual/tradeoff tests, `RUN_NOW`).
pub const HEADER_VERSION1: u32 = 0x8000_0000;
/// `client_hdr_v1.flags`: the settings in every UDP datagram are a UDP test's.
pub const HEADER_UDPTESTS: u32 = 0x2000_0000;
/// `client_hdr_v1.flags`: a permit key follows the header (`--permit-key`).
pub const HEADER_KEYCHECK: u32 = 0x1000_0000;
/// `client_hdr_v1.flags`: 2.0.x extension flags (reverse, full duplex) are valid.
pub const HEADER_VERSION2: u32 = 0x0400_0000;
/// `client_hdr_v1.flags`: the client waits for a header acknowledgement (2.0.14+).
pub const HEADER_V2PEERDETECT: u32 = 0x0200_0000;
/// `client_hdr_v1.flags`: a bounceback test; a [`BbHdr`] starts the connection.
pub const HEADER_BOUNCEBACK: u32 = 0x0080_0000;
/// `client_hdr_v1.flags`: the small UDP trip-times header (`client_udpsmall_testhdr`).
pub const HEADER32_SMALL_TRIPTIMES: u32 = 0x0002_0000;
/// `client_hdr_v1.flags` with `HEADER_VERSION1`: dual test (`-d`) rather than tradeoff (`-r`).
pub const RUN_NOW: u32 = 0x0000_0001;
/// `Settings_ClientTestHdrLen`'s cap on a header's length.
pub const MAX_HEADER_LEN: usize = 256;

/// `numThreads`: its top bit says the rest carries a transfer id.
pub const HEADER_HASTRANSFERID: u32 = 0x8000_0000;

/// `client_hdrext.upperflags` (`UPPER_ISOCH`, which the client's header reads too, is
/// defined beside it in `iperf2_client`).
pub const UPPER_L2LENCHECK: u16 = 0x0004;
pub const UPPER_NOUDPFIN: u16 = 0x0008;
pub const UPPER_TRIPTIME: u16 = 0x0010;
pub const UPPER_ISOCH_SETTINGS: u16 = 0x0040;
pub const UPPER_UNITS_PPS: u16 = 0x0080;
pub const UPPER_BWSET: u16 = 0x0100;
pub const UPPER_FQRATESET: u16 = 0x0200;
pub const UPPER_REVERSE: u16 = 0x0400;
pub const UPPER_FULLDUPLEX: u16 = 0x0800;
pub const UPPER_EPOCH_START: u16 = 0x1000;
pub const UPPER_PERIODICBURST: u16 = 0x2000;
pub const UPPER_WRITEPREFETCH: u16 = 0x4000;
pub const UPPER_TCPQUICKACK: u16 = 0x8000;
/// `client_hdrext.lowerflags`.
pub const LOWER_CCA: u16 = 0x8000;
pub const LOWER_BARRIER_TIME: u16 = 0x4000;
pub const LOWER_UDPL4S: u16 = 0x2000;

/// `bounceback_hdr.bbflags`.
pub const BB_QUICKACK: u16 = 0x8000;
pub const BB_CLOCKSYNCED: u16 = 0x4000;
pub const BB_TOS: u16 = 0x2000;
pub const BB_STOP: u16 = 0x1000;
pub const BB_REPLYSIZE: u16 = 0x0800;

/// `struct bounceback_hdr` with its optional tail (rtt, read time, reply size), as
/// iperf 2.2.1 lays it out; 2.1.8's lacks the reply size (60 bytes).
pub const BB_HDR_LEN: usize = 64;
/// The mandatory part of `bounceback_hdr` (through `bbhold`).
pub const BB_HDR_MIN_LEN: usize = 48;
/// netmeter's cap on a bounceback request or reply (`--bounceback` sizes). iperf 2 grows
/// its buffer to whatever the header says; a server must not.
pub const MAX_BB_LEN: u32 = 1 << 20;

/// `client_hdr_ack` with its six timestamps (sent with `--trip-times`).
pub const HDR_ACK_TS_LEN: usize = HDR_ACK_LEN + 24;

/// Offset of `client_hdrext` from the base header's start.
const EXT: usize = CLIENT_HDR_V1_LEN;
/// Offset of `client_hdrext_starttime_fq.start_tv_sec` from the base header's start,
/// TCP (right after the 40-byte extension, the same in 2.1.8 and 2.2.1: see above).
const TCP_START_AT: usize = EXT + 40;
/// The same for UDP: `isoch_payload` (32 bytes) sits between extension and start time.
const UDP_START_AT: usize = EXT + 40 + 32;

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Bytes from an iperf 2 peer that do not make a test.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HdrError {
    #[error("an iperf 2 header needs {need} bytes, got {got}")]
    Short { need: usize, got: usize },
    #[error("iperf 2 header flags {0:#010x} announce no test settings")]
    NoSettings(u32),
    #[error("an iperf 2 header of {0} bytes is longer than {MAX_HEADER_LEN}")]
    TooLong(usize),
    #[error("an iperf 2 header of {0} bytes is shorter than its base ({CLIENT_HDR_V1_LEN})")]
    TooShort(usize),
    #[error("an iperf 2 bounceback header is not a test header")]
    Bounceback,
    #[error("an iperf 2 bounceback size of {0} bytes is outside {BB_HDR_MIN_LEN}..={MAX_BB_LEN}")]
    BounceSize(u32),
    /// Parsed, but no real iperf 2.1/2.2 client sends it (`wire::iperf2_plausible`).
    #[error("not what an iperf 2.1 or 2.2 client sends: {0}")]
    Implausible(&'static str),
}

/// An iperf 2 release as its header names it (`IPERF_VERSION_MAJORHEX`/`MINORHEX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    pub major: u16,
    pub minor: u16,
    pub patch: u16,
    /// The release kind, `version_l`'s low bits: 0 dev, 1 rc, 2 rc2, 3 final, 4 private
    /// (`ReportOutputs.c` `reporter_peerversion`).
    pub kind: u16,
}

impl Version {
    /// From `version_u`/`version_l`; `None` when both are zero (not sent).
    pub fn from_words(u: u32, l: u32) -> Option<Version> {
        (u != 0 || l != 0).then_some(Version {
            major: (u >> 16) as u16,
            minor: u as u16,
            patch: (l >> 16) as u16,
            kind: l as u16,
        })
    }

    /// The words as they go on the wire.
    pub fn words(self) -> (u32, u32) {
        (
            u32::from(self.major) << 16 | u32::from(self.minor),
            u32::from(self.patch) << 16 | u32::from(self.kind),
        )
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        match self.kind {
            0 => write!(f, "-dev"),
            1 => write!(f, "-rc"),
            2 => write!(f, "-rc2"),
            4 => write!(f, "-private"),
            _ => Ok(()),
        }
    }
}

/// The legacy second test of `-d`/`-r`: the server connects back to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Legacy {
    /// `-d`: both tests at once.
    Dual,
    /// `-r`: the server's test after the client's.
    Tradeoff,
}

/// A client's test header, as a server reads it (TCP or UDP).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestHdr {
    /// The raw `client_hdr_v1.flags`.
    pub flags: u32,
    pub udp: bool,
    /// `numThreads` (`-P`), the transfer-id bits removed.
    pub threads: u32,
    /// `mPort`: for `-d`/`-r`, the client's port the server connects back to.
    pub port: u16,
    /// `mBufLen` (`-l`; 0: not given).
    pub buf_len: u32,
    /// `mWinBand`: the window (`-w`) the legacy second test should use.
    pub win_band: u32,
    pub amount: Amount,
    /// `client_hdrext.upperflags`/`lowerflags` (0 without the extension).
    pub upper: u16,
    pub lower: u16,
    pub version: Option<Version>,
    pub tos: u16,
    /// `lRate`/`uRate`: the client's `-b`, bits (or, with [`UPPER_UNITS_PPS`], packets)
    /// per second.
    pub rate: u64,
    /// `start_tv_sec`/`usec`: the client's wall clock when it started (trip-times) or
    /// when it will start (`--txstart-time`), if it said.
    pub start: Option<(u32, u32)>,
    pub legacy: Option<Legacy>,
    /// The header's length on a TCP connection (UDP: from the datagram's start).
    pub len: usize,
}

/// How many header bytes a TCP test's first four bytes announce (`Settings_ClientTestHdrLen`):
/// the flags' length field, or the base plus extension for older clients. Refuses a
/// header that names no settings, or is longer than [`MAX_HEADER_LEN`]. A bounceback
/// request's is the [`BbHdr`] ([`BB_HDR_LEN`]; [`is_bounceback`] tells).
pub fn tcp_header_len(first: [u8; 4]) -> Result<usize, HdrError> {
    let flags = u32::from_be_bytes(first);
    if flags & HEADER_BOUNCEBACK != 0 {
        return Ok(BB_HDR_LEN);
    }
    if flags & (HEADER_VERSION1 | HEADER_VERSION2 | HEADER_EXTEND) == 0 {
        return Err(HdrError::NoSettings(flags));
    }
    let len = if flags & HEADER_LEN_BIT != 0 {
        ((flags & HEADER_LEN_MASK) >> 1) as usize
    } else {
        let mut l = 0;
        if flags & (HEADER_VERSION1 | HEADER_EXTEND) != 0 {
            l = CLIENT_HDR_V1_LEN;
        }
        if flags & (HEADER_VERSION2 | HEADER_EXTEND) != 0 {
            l += CLIENT_HDREXT_LEN;
        }
        l
    };
    if len > MAX_HEADER_LEN {
        return Err(HdrError::TooLong(len));
    }
    if len < CLIENT_HDR_V1_LEN {
        return Err(HdrError::TooShort(len));
    }
    Ok(len)
}

/// The first four bytes open a bounceback test (read a [`BbHdr`], not a [`TestHdr`]).
pub fn is_bounceback(first: [u8; 4]) -> bool {
    u32::from_be_bytes(first) & HEADER_BOUNCEBACK != 0
}

impl TestHdr {
    /// Read a TCP test's header: `b` holds at least [`tcp_header_len`]'s bytes.
    pub fn parse_tcp(b: &[u8]) -> Result<TestHdr, HdrError> {
        if b.len() < 4 {
            return Err(HdrError::Short {
                need: 4,
                got: b.len(),
            });
        }
        if is_bounceback([b[0], b[1], b[2], b[3]]) {
            return Err(HdrError::Bounceback);
        }
        let len = tcp_header_len([b[0], b[1], b[2], b[3]])?;
        if b.len() < len {
            return Err(HdrError::Short {
                need: len,
                got: b.len(),
            });
        }
        let h = Self::parse_at(&b[..len], false, len, TCP_START_AT);
        plausible::test_hdr(&b[..len], &h)?;
        Ok(h)
    }

    /// Read the header in a UDP datagram (after its 16-byte id and send time). The
    /// small trip-times header (`client_udpsmall_testhdr`, `-l` below the full header)
    /// carries only its flags: 2.2.1 appends a start time, 2.1.8 does not, and nothing
    /// tells them apart, so the datagram's own send time stands for it.
    pub fn parse_udp(d: &[u8]) -> Result<TestHdr, HdrError> {
        let need = UDP_DATAGRAM_LEN + CLIENT_HDR_V1_LEN;
        if d.len() < UDP_DATAGRAM_LEN + 4 {
            return Err(HdrError::Short { need, got: d.len() });
        }
        let b = &d[UDP_DATAGRAM_LEN..];
        let flags = be32(b, 0);
        if flags & HEADER32_SMALL_TRIPTIMES != 0 {
            if flags != plausible::SMALL_TRIPTIMES_WORD {
                return Err(HdrError::Implausible(
                    "small trip-times flags with other bits",
                ));
            }
            let mut h = Self::parse_at(&[], true, d.len().min(UDP_DATAGRAM_LEN + 4), 0);
            h.flags = flags;
            h.upper = UPPER_TRIPTIME;
            return Ok(h);
        }
        if flags & (HEADER_VERSION1 | HEADER_VERSION2 | HEADER_EXTEND) == 0 {
            return Err(HdrError::NoSettings(flags));
        }
        if b.len() < CLIENT_HDR_V1_LEN {
            return Err(HdrError::Short { need, got: d.len() });
        }
        // The datagram is all there: the length in the flags only says how much of it
        // is header, and fields past the datagram's end read as absent.
        let len = if flags & HEADER_LEN_BIT != 0 {
            ((flags & HEADER_LEN_MASK) >> 1) as usize
        } else {
            d.len()
        };
        let h = Self::parse_at(b, true, len, UDP_START_AT);
        plausible::test_hdr(b, &h)?;
        Ok(h)
    }

    /// The fields common to TCP and UDP; `b` starts at `client_hdr_v1`, fields past its
    /// end are zero.
    fn parse_at(b: &[u8], udp: bool, len: usize, start_at: usize) -> TestHdr {
        let f = |at: usize| if b.len() >= at + 4 { be32(b, at) } else { 0 };
        let flags = f(0);
        let raw_threads = f(4);
        let threads = if raw_threads & HEADER_HASTRANSFERID != 0 {
            0
        } else {
            raw_threads
        };
        let legacy = (flags & HEADER_VERSION1 != 0
            && flags & HEADER_VERSION2 == 0
            && raw_threads & HEADER_HASTRANSFERID == 0)
            .then_some(if flags & RUN_NOW != 0 {
                Legacy::Dual
            } else {
                Legacy::Tradeoff
            });
        let raw_amount = f(20) as i32;
        let amount = if raw_amount < 0 {
            Amount::TimeCentis(raw_amount.unsigned_abs())
        } else {
            Amount::Bytes(raw_amount as u64)
        };
        let ext = flags & HEADER_EXTEND != 0 && b.len() >= EXT + 32;
        let (upper, lower) = if ext {
            (be16(b, EXT + 8), be16(b, EXT + 10))
        } else {
            (0, 0)
        };
        let start_flagged = upper & (UPPER_TRIPTIME | UPPER_EPOCH_START) != 0;
        let start = (ext && start_flagged && b.len() >= start_at + 8)
            .then(|| (be32(b, start_at), be32(b, start_at + 4)));
        TestHdr {
            flags,
            udp,
            threads,
            port: f(8) as u16,
            buf_len: f(12),
            win_band: f(16),
            amount,
            upper,
            lower,
            version: if ext {
                Version::from_words(f(EXT + 12), f(EXT + 16))
            } else {
                None
            },
            tos: if ext { be16(b, EXT + 22) } else { 0 },
            rate: if ext {
                u64::from(f(EXT + 28) >> 8) << 32 | u64::from(f(EXT + 24))
            } else {
                0
            },
            start,
            legacy,
            len,
        }
    }

    /// `-R`: the server sends (2.0.x extension flags only).
    pub fn reverse(&self) -> bool {
        self.flags & HEADER_VERSION2 != 0 && self.upper & UPPER_REVERSE != 0
    }

    /// `--full-duplex`: both ends send on the one socket.
    pub fn full_duplex(&self) -> bool {
        self.flags & HEADER_VERSION2 != 0 && self.upper & UPPER_FULLDUPLEX != 0
    }

    /// `--trip-times`: the client's clock is in its payloads.
    pub fn trip_times(&self) -> bool {
        self.upper & UPPER_TRIPTIME != 0
    }

    /// `--isochronous`.
    pub fn isochronous(&self) -> bool {
        self.upper & UPPER_ISOCH != 0
    }

    /// Where this UDP client's datagrams carry the frame fields: as its version's own
    /// server reads them (2.2 and later: [`IsochLayout::Iperf22`]; older or no
    /// version: 2.1's).
    pub fn isoch_layout(&self) -> IsochLayout {
        match self.version {
            Some(v) if (v.major, v.minor) >= (2, 2) => IsochLayout::Iperf22,
            _ => IsochLayout::Iperf21,
        }
    }

    /// The client's reverse reader (`-R`, `--full-duplex`) takes the sender's first
    /// datagram or header for its start time (`Server::ClientReverseFirstRead`):
    /// with `--trip-times`, `--isochronous` or periodic bursts.
    pub fn reverse_reads_a_start(&self) -> bool {
        self.trip_times() || self.isochronous() || self.upper & UPPER_PERIODICBURST != 0
    }

    /// The client asked for a permit key (`--permit-key`).
    pub fn keyed(&self) -> bool {
        self.flags & HEADER_KEYCHECK != 0
    }

    /// The client's `-b` is in packets per second.
    pub fn rate_is_pps(&self) -> bool {
        self.upper & UPPER_UNITS_PPS != 0
    }

    /// A UDP client does not expect the server report (`HEADER_NOUDPFIN`).
    pub fn no_udp_fin(&self) -> bool {
        self.upper & UPPER_NOUDPFIN != 0
    }

    /// A TCP client waits for the header acknowledgement before it measures
    /// (`apply_client_settings_tcp`'s condition).
    pub fn wants_ack(&self) -> bool {
        !self.udp
            && ((self.flags & HEADER_VERSION2 == 0 && self.flags & HEADER_EXTEND != 0)
                || self.flags & HEADER_V2PEERDETECT != 0)
    }
}

/// A datagram's sequence number and send time (`struct UDP_datagram`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramId {
    /// 64-bit when the flags say so ([`HEADER_SEQNO64B`]), else the sign-extended `id`;
    /// negative: the client's FIN.
    pub seq: i64,
    pub sec: u32,
    pub usec: u32,
}

impl DatagramId {
    /// Read the first 16 bytes; `seq64` from the header's flags. `None` when short.
    pub fn parse(d: &[u8], seq64: bool) -> Option<DatagramId> {
        if d.len() < UDP_DATAGRAM_LEN {
            return None;
        }
        let low = be32(d, 0);
        let seq = if seq64 {
            (u64::from(be32(d, 12)) << 32 | u64::from(low)) as i64
        } else {
            i64::from(low as i32)
        };
        Some(DatagramId {
            seq,
            sec: be32(d, 4),
            usec: be32(d, 8),
        })
    }

    /// The datagram's `id2` says 64-bit sequence numbers even without a header (the
    /// flags sit past a small datagram's end): iperf 2 reads `id2` whenever it can.
    pub fn flags_seq64(d: &[u8]) -> bool {
        d.len() >= UDP_DATAGRAM_LEN + 4
            && be32(d, UDP_DATAGRAM_LEN) & HEADER_SEQNO64B != 0
            && be32(d, UDP_DATAGRAM_LEN) & HEADER32_SMALL_TRIPTIMES == 0
    }
}

/// The six timestamps of a trip-times header acknowledgement (wall clock, sec/usec):
/// the client's start time echoed, when the server accepted, when it acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckTimes {
    pub sent: (u32, u32),
    pub sent_rx: (u32, u32),
    pub ack: (u32, u32),
}

/// `client_hdr_ack`: what a server answers a TCP header with (`client_test_ack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HdrAck {
    pub version: Version,
    pub times: Option<AckTimes>,
}

impl HdrAck {
    /// The acknowledgement's bytes: [`HDR_ACK_LEN`], or [`HDR_ACK_TS_LEN`] with times.
    pub fn encode(&self) -> Vec<u8> {
        let len = if self.times.is_some() {
            HDR_ACK_TS_LEN
        } else {
            HDR_ACK_LEN
        };
        let mut b = vec![0u8; len];
        put32(&mut b, 0, CLIENTHDRACK);
        put32(&mut b, 4, len as u32);
        let (u, l) = self.version.words();
        put32(&mut b, 12, u);
        put32(&mut b, 16, l);
        if let Some(t) = self.times {
            for (i, (s, us)) in [t.sent, t.sent_rx, t.ack].into_iter().enumerate() {
                put32(&mut b, HDR_ACK_LEN + 8 * i, s);
                put32(&mut b, HDR_ACK_LEN + 8 * i + 4, us);
            }
        }
        b
    }

    /// Read an acknowledgement (a client waiting for its server's version). `None`
    /// when `b` is not one.
    pub fn parse(b: &[u8]) -> Option<HdrAck> {
        if b.len() < HDR_ACK_LEN || be32(b, 0) != CLIENTHDRACK {
            return None;
        }
        let version = Version::from_words(be32(b, 12), be32(b, 16))?;
        let declared = be32(b, 4) as usize;
        let times = (declared >= HDR_ACK_TS_LEN && b.len() >= HDR_ACK_TS_LEN).then(|| {
            let p = |i: usize| {
                (
                    be32(b, HDR_ACK_LEN + 8 * i),
                    be32(b, HDR_ACK_LEN + 8 * i + 4),
                )
            };
            AckTimes {
                sent: p(0),
                sent_rx: p(1),
                ack: p(2),
            }
        });
        Some(HdrAck { version, times })
    }
}

/// `struct bounceback_hdr`: a bounceback request (client) or reply (server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BbHdr {
    pub flags: u32,
    /// `bbsize`: the request's length, header included.
    pub size: u32,
    pub id: u32,
    pub bbflags: u16,
    pub tos: u16,
    /// `bbRunTime`, hundredths of a second.
    pub run_time_centis: u32,
    pub client_tx: (u32, u32),
    pub server_rx: (u32, u32),
    pub server_tx: (u32, u32),
    /// `bbhold`: microseconds the server waits between read and reply.
    pub hold_us: u32,
    /// `bbreplysize` when [`BB_REPLYSIZE`] is set, else the request's size.
    pub reply_size: u32,
}

impl BbHdr {
    /// Read a bounceback header; sizes outside [`BB_HDR_MIN_LEN`]`..=`[`MAX_BB_LEN`]
    /// are refused before the caller allocates for them.
    pub fn parse(b: &[u8]) -> Result<BbHdr, HdrError> {
        if b.len() < BB_HDR_LEN {
            return Err(HdrError::Short {
                need: BB_HDR_LEN,
                got: b.len(),
            });
        }
        let ts = |at: usize| (be32(b, at), be32(b, at + 4));
        let bbflags = be16(b, 12);
        let size = be32(b, 4);
        let reply_size = if bbflags & BB_REPLYSIZE != 0 {
            be32(b, 60)
        } else {
            size
        };
        for s in [size, reply_size] {
            if !(BB_HDR_MIN_LEN as u32..=MAX_BB_LEN).contains(&s) {
                return Err(HdrError::BounceSize(s));
            }
        }
        Ok(BbHdr {
            flags: be32(b, 0),
            size,
            id: be32(b, 8),
            bbflags,
            tos: be16(b, 14),
            run_time_centis: be32(b, 16),
            client_tx: ts(20),
            server_rx: ts(28),
            server_tx: ts(36),
            hold_us: be32(b, 44),
            reply_size,
        })
    }

    /// Write the header into the first [`BB_HDR_LEN`] bytes of `b` (a reply reuses
    /// the request's buffer, as iperf 2's server does).
    pub fn write(&self, b: &mut [u8]) {
        put32(b, 0, self.flags);
        put32(b, 4, self.size);
        put32(b, 8, self.id);
        put32(b, 12, u32::from(self.bbflags) << 16 | u32::from(self.tos));
        put32(b, 16, self.run_time_centis);
        for (i, (s, us)) in [self.client_tx, self.server_rx, self.server_tx]
            .into_iter()
            .enumerate()
        {
            put32(b, 20 + 8 * i, s);
            put32(b, 24 + 8 * i, us);
        }
        put32(b, 44, self.hold_us);
        if self.bbflags & BB_REPLYSIZE != 0 {
            put32(b, 60, self.reply_size);
        }
    }
}

/// Seconds as `write_UDP_AckFIN`'s integer/microsecond pair.
fn split_s(s: f64) -> (u32, u32) {
    let s = if s.is_finite() { s.max(0.0) } else { 0.0 };
    let whole = s.trunc().min(f64::from(i32::MAX));
    (
        whole as u32,
        ((s - whole) * 1e6).round().min(999_999.0) as u32,
    )
}

impl ServerReport {
    /// The server report datagram (`write_UDP_AckFIN`): the FIN's id and send time
    /// echoed (iperf 2 leaves them zero; its client reads only what follows), then
    /// `server_hdr` with the extension (when `transit` is given) and the 64-bit counts.
    /// iperf 2 sends it again each time the client's FIN comes again, up to 10 times,
    /// waiting 250 ms for silence between.
    pub fn encode(&self, fin: &DatagramId) -> Vec<u8> {
        let mut d = vec![0u8; SERVER_REPORT_LEN];
        write_datagram_id(&mut d, fin.seq, fin.sec, fin.usec);
        let h = UDP_DATAGRAM_LEN;
        let mut flags = 0x8000_0000 | HEADER_SEQNO64B;
        if self.transit.is_some() {
            flags |= SERVER_HEADER_EXTEND;
        }
        let mut set = |i: usize, v: u32| put32(&mut d, h + 4 * i, v);
        set(0, flags);
        set(1, (self.bytes >> 32) as u32);
        set(2, self.bytes as u32);
        let (s, us) = split_s(self.stop_s);
        set(3, s);
        set(4, us);
        set(5, self.lost as u32);
        set(6, self.out_of_order as u32);
        set(7, self.datagrams as u32);
        let (s, us) = split_s(self.jitter_s);
        set(8, s);
        set(9, us);
        if let Some(t) = self.transit {
            let pairs = [
                (10, t.min_s),
                (12, t.max_s),
                (14, t.mean_s * f64::from(t.count)),
                (16, t.mean_s),
                (18, t.m2_s2 * 1e12),
            ];
            for (i, v) in pairs {
                let (s, us) = split_s(v);
                set(i, s);
                set(i + 1, us);
            }
            set(22, t.count);
            // cntIPG: datagrams per second over the test; IPGsum is always 1.
            if self.stop_s > 0.0 {
                set(
                    23,
                    (self.datagrams as f64 / self.stop_s).min(f64::from(u32::MAX)) as u32,
                );
            }
            set(24, 1);
        }
        set(25, (self.lost >> 32) as u32);
        set(26, (self.out_of_order >> 32) as u32);
        set(27, (self.datagrams >> 32) as u32);
        d
    }
}

/// netmeter's cap on one such write's `burst_size` (iperf 2's `-l` tops out well below).
pub const MAX_TCP_BURST: u32 = 16 << 20;
/// The part of `TCP_burst_payload` the framer reads: through `burst_size`.
const BURST_HEAD: usize = 52;

/// Splits a `--trip-times` TCP stream (after its test header) into the client's writes:
/// each opens with `TCP_burst_payload`, whose `burst_size` is the write's length and
/// whose `send_tt.write_tv_sec/usec` is when the client wrote it. Pure: bytes in, the
/// send times of the writes that completed out. A size outside
/// [`TCP_BURST_LEN`]`..=`[`MAX_TCP_BURST`] loses the framing for good
/// ([`BurstFramer::lost`]): the bytes are still the client's, just not timed.
#[derive(Debug, Clone)]
pub struct BurstFramer {
    head: [u8; BURST_HEAD],
    have: usize,
    /// Bytes of the current write still to come (after its head).
    left: u64,
    sent: (u32, u32),
    lost: bool,
}

impl Default for BurstFramer {
    fn default() -> Self {
        BurstFramer {
            head: [0; BURST_HEAD],
            have: 0,
            left: 0,
            sent: (0, 0),
            lost: false,
        }
    }
}

impl BurstFramer {
    /// Take bytes as they were read; `done(sec, usec)` for each write they complete.
    pub fn feed(&mut self, mut b: &[u8], mut done: impl FnMut(u32, u32)) {
        while !b.is_empty() && !self.lost {
            if self.have < BURST_HEAD {
                let n = (BURST_HEAD - self.have).min(b.len());
                self.head[self.have..self.have + n].copy_from_slice(&b[..n]);
                self.have += n;
                b = &b[n..];
                if self.have < BURST_HEAD {
                    return;
                }
                let size = be32(&self.head, 48);
                if !(TCP_BURST_LEN as u32..=MAX_TCP_BURST).contains(&size) {
                    self.lost = true;
                    return;
                }
                self.sent = (be32(&self.head, 20), be32(&self.head, 24));
                self.left = u64::from(size) - BURST_HEAD as u64;
            }
            let n = (self.left.min(b.len() as u64)) as usize;
            self.left -= n as u64;
            b = &b[n..];
            if self.left == 0 {
                done(self.sent.0, self.sent.1);
                self.have = 0;
            }
        }
    }

    /// The framing was lost (a write size out of range): no more send times.
    pub fn lost(&self) -> bool {
        self.lost
    }
}

/// What the first bytes of a TCP connection on netmeter's port are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOpening {
    /// Not enough bytes to tell yet: read at least this many in all.
    NeedMore(usize),
    /// An iperf3 (or netmeter) cookie: 36 printable characters and a NUL.
    Iperf3,
    /// An iperf 2 test header of this many bytes (a bounceback test: its [`BbHdr`]).
    Iperf2 { header_len: usize },
    /// Neither.
    Unknown,
}

/// Tell an iperf3 cookie from an iperf 2 header by the first bytes. An iperf 2 header's
/// flags are binary (their second byte is below 0x20 or the bounceback bit's 0x80),
/// while a cookie is printable all the way; flags no real iperf 2 client sends
/// ([`plausible::tcp_opening_plausible`]) are no iperf 2 test.
pub fn classify_tcp(b: &[u8]) -> TcpOpening {
    if b.len() < 4 {
        return TcpOpening::NeedMore(4);
    }
    let printable = |c: u8| (0x20..0x7f).contains(&c);
    if b[..4].iter().all(|&c| printable(c)) {
        let n = b.len().min(super::COOKIE_LEN);
        if !b[..n.min(super::COOKIE_LEN - 1)]
            .iter()
            .all(|&c| printable(c))
        {
            return TcpOpening::Unknown;
        }
        if b.len() < super::COOKIE_LEN {
            return TcpOpening::NeedMore(super::COOKIE_LEN);
        }
        return if b[super::COOKIE_LEN - 1] == 0 {
            TcpOpening::Iperf3
        } else {
            TcpOpening::Unknown
        };
    }
    let first = [b[0], b[1], b[2], b[3]];
    if plausible::tcp_opening_plausible(u32::from_be_bytes(first)).is_err() {
        return TcpOpening::Unknown;
    }
    match tcp_header_len(first) {
        Ok(header_len) => TcpOpening::Iperf2 { header_len },
        Err(_) => TcpOpening::Unknown,
    }
}

/// What a datagram from an unknown source on netmeter's UDP port is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpOpening {
    /// iperf3's 4-byte connect datagram ("9876", or the legacy 123456789).
    Iperf3Connect,
    /// A datagram carrying an iperf 2 test header.
    Iperf2,
    /// Neither: drop it.
    Unknown,
}

/// Tell iperf3's connect datagram from an iperf 2 test datagram.
pub fn classify_udp(d: &[u8]) -> UdpOpening {
    if d.len() == 4 && (d == super::UDP_CONNECT_MSG || d == 123_456_789u32.to_le_bytes()) {
        return UdpOpening::Iperf3Connect;
    }
    match TestHdr::parse_udp(d) {
        Ok(_) => UdpOpening::Iperf2,
        Err(_) => UdpOpening::Unknown,
    }
}

#[cfg(test)]
#[path = "iperf2_tests.rs"]
mod tests;
