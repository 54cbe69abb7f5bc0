//! What a real iperf 2.1.x or 2.2.x client can put in a test header, so that a server
//! refuses anything else *before* the header takes a test slot. iperf 2 has no magic
//! number: without these checks one random connection in a few hundred reads as a test
//! header and holds a slot until its idle or duration limit.
//!
//! Facts from iperf 2.1.8 and 2.2.1 `src/Settings.cpp` `Settings_GenerateClientHdr` and
//! `Settings_GenerateClientHdrV1`, and `src/Client.cpp` `WriteTcpTxBBHdr`, checked
//! against the captures in `testdata/iperf2_captures.txt`:
//! * every test header (TCP, and UDP unless it is the small trip-times one) sets
//!   `HEADER_EXTEND` and `HEADER_LEN_BIT`, and its extension names the release
//!   (`version_u` 0x0002000N, `version_l` patch << 16 | kind with kind 0..=4);
//! * the extension's `type`, `length` and `reserved` are zero (memset, never written),
//!   `tos` is one byte (`mTOS & 0xFF`), `uRate`'s low byte is zero (the high word is
//!   shifted left by 8), `lowerflags` uses only its top three bits and `upperflags`
//!   never `HEADER_UNUSED2`;
//! * the extension is all there (a UDP datagram cut shorter by a small `-l` is not
//!   served: without its version it cannot be told from noise);
//! * `numThreads` is at least one, `mPort` is never zero, a start time's microseconds
//!   are below a million;
//! * the small UDP trip-times header is the 16-bit flags word `HEADER16_SMALL_TRIPTIMES`
//!   and two zero bytes;
//! * a bounceback request's flags are `HEADER_BOUNCEBACK` alone, its `bbflags` only the
//!   five defined bits, its `tos` one byte when `HEADER_BBTOS` says it is set, its
//!   client send time's microseconds below a million, and the server's two time stamps
//!   either unset (all ones, iperf 2's client) or zero (netmeter's).
//!
//! Limits (threads, rates, durations) are not judged here: a real client may ask for
//! more than a server allows, and is told so by the server's policy.

use super::{
    BB_CLOCKSYNCED, BB_QUICKACK, BB_REPLYSIZE, BB_STOP, BB_TOS, BbHdr, CLIENT_HDR_V1_LEN,
    CLIENT_HDREXT_LEN, HEADER_BOUNCEBACK, HEADER_EXTEND, HEADER_HASTRANSFERID, HEADER_KEYCHECK,
    HEADER_LEN_BIT, HEADER_SEQNO64B, HEADER_UDPTESTS, HEADER_V2PEERDETECT, HEADER_VERSION1,
    HEADER_VERSION2, HdrError, LOWER_BARRIER_TIME, LOWER_CCA, LOWER_UDPL4S, RUN_NOW, TestHdr,
    UDP_DATAGRAM_LEN,
};

/// `HEADER_KEYLEN_MASK`: with `HEADER_KEYCHECK` the length field is 15 bits wide.
const KEYLEN_MASK: u32 = 0x0000_FFFE;
/// `HEADER_LEN_MASK`: without a key, 8 bits.
const LEN_MASK: u32 = 0x0000_01FE;
/// `HEADER_UDPAVOID1`: a UDP flag bit of older clients.
const UDPAVOID1: u32 = 0x0100_0000;
/// Flag bits a TCP test header may carry (the length field aside).
const TCP_FLAGS: u32 = HEADER_VERSION1
    | HEADER_EXTEND
    | HEADER_KEYCHECK
    | HEADER_VERSION2
    | HEADER_V2PEERDETECT
    | HEADER_LEN_BIT
    | RUN_NOW;
/// Flag bits a UDP test header may carry (the length field aside).
const UDP_FLAGS: u32 = TCP_FLAGS | HEADER_UDPTESTS | HEADER_SEQNO64B | UDPAVOID1;
/// `HEADER_UNUSED2` in `upperflags`.
const UPPER_UNUSED2: u16 = 0x0020;
/// The `lowerflags` bits any release defines.
const LOWER_FLAGS: u16 = LOWER_CCA | LOWER_BARRIER_TIME | LOWER_UDPL4S;
/// The small trip-times header's first word: `HEADER16_SMALL_TRIPTIMES` and padding.
pub const SMALL_TRIPTIMES_WORD: u32 = 0x0002_0000;
/// The highest minor release and patch a 2.x header may name (2.2.1 today; room to grow).
const MAX_MINOR: u32 = 9;
const MAX_PATCH: u32 = 99;
/// `version_l`'s kind: 0 dev, 1 rc, 2 rc2, 3 final, 4 private.
const MAX_KIND: u32 = 4;

fn implausible(what: &'static str) -> HdrError {
    HdrError::Implausible(what)
}

/// Whether a test header's flags word (its first four bytes) is one a 2.1/2.2 client
/// sends: known bits only, the extension and the length bit set. Enough to tell from
/// four bytes that an opening is no iperf 2 test.
pub fn flags_plausible(flags: u32, udp: bool) -> Result<(), HdrError> {
    let allowed = if udp { UDP_FLAGS } else { TCP_FLAGS };
    let len_mask = if flags & HEADER_KEYCHECK != 0 {
        KEYLEN_MASK
    } else {
        LEN_MASK
    };
    if flags & !(allowed | len_mask) != 0 {
        return Err(implausible("flag bits no iperf 2 client sets"));
    }
    if flags & HEADER_EXTEND == 0 || flags & HEADER_LEN_BIT == 0 {
        return Err(implausible(
            "no extended header with its length (every 2.1 and 2.2 client sends one)",
        ));
    }
    Ok(())
}

/// Whether the first four bytes of a TCP connection can open an iperf 2 test: a test
/// header's flags, or a bounceback request's (`HEADER_BOUNCEBACK` alone).
pub fn tcp_opening_plausible(flags: u32) -> Result<(), HdrError> {
    if flags & HEADER_BOUNCEBACK != 0 {
        return if flags == HEADER_BOUNCEBACK {
            Ok(())
        } else {
            Err(implausible("bounceback flags with other bits"))
        };
    }
    flags_plausible(flags, false)
}

/// Check a parsed test header against what 2.1/2.2 clients send. `b` starts at
/// `client_hdr_v1` and holds what the header's length covers (UDP: to the datagram's
/// end), the extension included.
pub fn test_hdr(b: &[u8], h: &TestHdr) -> Result<(), HdrError> {
    flags_plausible(h.flags, h.udp)?;
    let least = CLIENT_HDR_V1_LEN + CLIENT_HDREXT_LEN + if h.udp { UDP_DATAGRAM_LEN } else { 0 };
    if h.len < least {
        return Err(implausible("a header length below base and extension"));
    }
    let word = |at: usize| {
        (b.len() >= at + 4).then(|| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]))
    };
    let raw_threads = word(4).unwrap_or(1);
    let threads = if raw_threads & HEADER_HASTRANSFERID != 0 {
        raw_threads & 0x000F_FFFF
    } else {
        raw_threads
    };
    if threads == 0 {
        return Err(implausible("no threads"));
    }
    if word(8).is_some_and(|p| p == 0 || p > 0xFFFF) {
        return Err(implausible("a port of 0 or above 65535"));
    }
    let ext = CLIENT_HDR_V1_LEN;
    if b.len() < ext + CLIENT_HDREXT_LEN {
        // A UDP `-l` below the header (and without --trip-times' small header) cuts
        // the version off: such a test is not told from noise, so it is not served.
        return Err(implausible(
            "a header cut before its version (a UDP -l below 76 bytes is not served)",
        ));
    }
    if word(ext) != Some(0) || word(ext + 4) != Some(0) {
        return Err(implausible("the extension's type or length set"));
    }
    if h.upper & UPPER_UNUSED2 != 0 || h.lower & !LOWER_FLAGS != 0 {
        return Err(implausible("extension flag bits no iperf 2 client sets"));
    }
    let (vu, vl) = (word(ext + 12).unwrap_or(0), word(ext + 16).unwrap_or(0));
    if vu >> 16 != 2 || vu & 0xFFFF > MAX_MINOR || vl >> 16 > MAX_PATCH || vl & 0xFFFF > MAX_KIND {
        return Err(implausible("a version that is no iperf 2 release"));
    }
    if word(ext + 20).is_some_and(|w| w > 0xFF) {
        return Err(implausible("a reserved word or a TOS wider than a byte"));
    }
    if word(ext + 28).is_some_and(|w| w & 0xFF != 0) {
        return Err(implausible(
            "a rate's high word not shifted as iperf 2 shifts it",
        ));
    }
    if h.start.is_some_and(|(_, usec)| usec >= 1_000_000) {
        return Err(implausible(
            "a start time with a million microseconds or more",
        ));
    }
    Ok(())
}

/// Check a bounceback request that opens a connection (see the module's notes).
pub fn bounceback_opening(bb: &BbHdr) -> Result<(), HdrError> {
    if bb.flags != HEADER_BOUNCEBACK {
        return Err(implausible("bounceback flags with other bits"));
    }
    let known = BB_QUICKACK | BB_CLOCKSYNCED | BB_TOS | BB_STOP | BB_REPLYSIZE;
    if bb.bbflags & !known != 0 {
        return Err(implausible("bounceback flag bits no iperf 2 client sets"));
    }
    if bb.bbflags & BB_TOS != 0 && bb.tos > 0xFF {
        return Err(implausible("a bounceback TOS wider than a byte"));
    }
    if bb.client_tx.1 >= 1_000_000 {
        return Err(implausible(
            "a send time with a million microseconds or more",
        ));
    }
    let unset = |t: (u32, u32)| t == (u32::MAX, u32::MAX) || t == (0, 0);
    if !unset(bb.server_rx) || !unset(bb.server_tx) {
        return Err(implausible(
            "a request carrying the server's own time stamps",
        ));
    }
    Ok(())
}
