//! The iperf3 wire format, as bytes and typed messages, with no I/O.
//!
//! Everything netmeter says to a peer, and everything it accepts from one, passes through
//! these types. Byte layouts live here and nowhere else; the rest of the program sees
//! typed values or a typed [`WireError`]. Source for every constant: the esnet/iperf
//! sources (`src/iperf.h`, `src/iperf_api.h`, `src/iperf_udp.c`), as summarised in
//! `shared/reference/iperf3.md` and `docs/protocol.md`.
//!
//! Here: the control messages (state bytes, cookie, length-prefixed JSON, parameters,
//! results, the error trailer). `wire/errcode.rs` names iperf3's error codes,
//! `wire/data.rs` holds the data-stream headers (UDP, `--trip-times` TCP frames,
//! isochronous frames), `wire/ext.rs` netmeter's extension request and answer; all
//! are re-exported here, so users name them `wire::X`.

mod data;
mod ecn_feedback;
mod errcode;
mod ext;
pub mod iperf2;
pub mod iperf2_client;
pub mod mcast_join;

pub use data::{IsochHeader, TCP_FRAME_HDR, TcpFrameParser, UdpHeader, write_tcp_frame_header};
pub use ecn_feedback::{ECN_FEEDBACK_LEN, EcnFeedback};
pub use errcode::ErrCode;
pub use ext::{
    Bounceback, ExtAnswer, ExtNote, ExtRequest, Feature, FrameSummary, Isochronous,
    MAX_BOUNCEBACK_BURST, MAX_BOUNCEBACK_HOLD_US, MAX_BOUNCEBACK_LEN, MAX_BUSY_POLL_US,
    MAX_NOTE_LEN, MAX_THIRD_PARTY_ARGS, PskChallenge, PskConfirm, PskHello, PskResponse,
    ThirdPartyAnswer, ThirdPartyRequest, WorkingLoad,
};
pub use iperf2::{TcpOpening, UdpOpening, classify_tcp, classify_udp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Length of the cookie that opens the control and every TCP data connection:
/// 36 printable characters and a NUL (`COOKIE_SIZE` in iperf3's `src/iperf.h`).
pub const COOKIE_LEN: usize = 37;

/// iperf3's cap on the parameter JSON (`MAX_PARAMS_JSON_STRING`).
pub const MAX_PARAMS_LEN: u32 = 8192;

/// netmeter's own cap on a results message. iperf3 3.18+ has none; 16 MiB is far above
/// any real results document (128 streams plus a server's text output) and keeps a
/// hostile length field from allocating without bound.
pub const MAX_RESULTS_LEN: u32 = 16 * 1024 * 1024;

/// Cap for the netmeter extension answer.
pub const MAX_EXT_LEN: u32 = 64 * 1024;

/// The UDP "connect" datagram a client sends per stream: ASCII "9876" on the wire.
pub const UDP_CONNECT_MSG: [u8; 4] = *b"9876";
/// The server's reply: ASCII "6789" on the wire (iperf3 >= 3.12).
pub const UDP_CONNECT_REPLY: [u8; 4] = *b"6789";
/// The legacy reply 987654321 as written by little-endian hosts before 3.12.
pub const UDP_CONNECT_REPLY_LEGACY: [u8; 4] = 987_654_321u32.to_le_bytes();

/// netmeter's connect datagram when the server accepted [`Feature::UdpCookie`]: iperf3's
/// "9876" followed by the test's 37-byte cookie, so the server hands the stream to its
/// test by cookie, as it does TCP streams, rather than by source address (two tests
/// from one host that open their streams at once would otherwise swap them). iperf3
/// servers read a connect datagram into a 4-byte buffer, so the tail would be dropped
/// unread; netmeter sends it only to a server that asked for it.
pub const UDP_CONNECT_COOKIE_LEN: usize = UDP_CONNECT_MSG.len() + COOKIE_LEN;

/// The connect datagram carrying `cookie` ([`UDP_CONNECT_COOKIE_LEN`] bytes).
pub fn udp_connect_with_cookie(cookie: &Cookie) -> [u8; UDP_CONNECT_COOKIE_LEN] {
    let mut d = [0u8; UDP_CONNECT_COOKIE_LEN];
    d[..UDP_CONNECT_MSG.len()].copy_from_slice(&UDP_CONNECT_MSG);
    d[UDP_CONNECT_MSG.len()..].copy_from_slice(&cookie.0);
    d
}

/// The cookie a connect datagram carries, if it is one of netmeter's
/// ([`udp_connect_with_cookie`]); `None` for iperf3's 4 bytes and for data.
pub fn udp_connect_cookie(d: &[u8]) -> Option<[u8; COOKIE_LEN]> {
    if d.len() != UDP_CONNECT_COOKIE_LEN || d[..UDP_CONNECT_MSG.len()] != UDP_CONNECT_MSG {
        return None;
    }
    d[UDP_CONNECT_MSG.len()..].try_into().ok()
}

/// Whether `d` is a client's UDP connect datagram (iperf3's 4 bytes, or netmeter's
/// with the cookie): a repeated one is answered, never counted as data.
pub fn is_udp_connect(d: &[u8]) -> bool {
    d.len() == UDP_CONNECT_MSG.len() || udp_connect_cookie(d).is_some()
}

/// Smallest UDP datagram iperf3 allows (`MIN_UDP_BLOCKSIZE`).
pub const UDP_MIN_LEN: usize = 16;
/// Largest UDP payload on IPv4.
pub const UDP_MAX_LEN: usize = 65507;
/// Largest TCP block (`MAX_BLOCKSIZE`, 1 MiB).
pub const TCP_MAX_BLOCK: usize = 1 << 20;
/// iperf3's default TCP block (`DEFAULT_TCP_BLKSIZE`, 128 KiB).
pub const TCP_DEFAULT_BLOCK: usize = 128 * 1024;
/// netmeter's default block for unpaced bulk TCP (no -b, -k, --trip-times or traffic
/// profile) while each sending stream can have a CPU: 1 MiB writes. Chosen by
/// measurement (docs/benchmarks.md): on loopback one stream moves 1.5-2x the bytes of
/// 128 KiB writes for less CPU per byte, for both tools. See [`bulk_tcp_block`].
pub const TCP_BULK_BLOCK: usize = 1 << 20;

/// The default block for unpaced bulk TCP with `streams` streams per direction on a host
/// with `cpus` CPUs: [`TCP_BULK_BLOCK`] while there are no more streams than CPUs, else
/// iperf3's 128 KiB. With more sending threads than CPUs, a thread blocked in a 1 MiB
/// write holds its turn while the CPUs idle: on 2 CPUs `-P 8` moved 27-29 Gbit/s with
/// 1 MiB writes and 32-38 with 128 KiB (iperf3 3.22: 32-37), `-P 32` 29-32 against
/// 32-37; at `-P 2` the two were level, and at `-P 1` 1 MiB won by 40 %.
pub fn bulk_tcp_block(streams: u32, cpus: usize) -> usize {
    if streams as usize <= cpus.max(1) {
        TCP_BULK_BLOCK
    } else {
        TCP_DEFAULT_BLOCK
    }
}
/// iperf3's default UDP datagram size when the path MSS is unknown.
pub const UDP_DEFAULT_LEN: usize = 1460;
/// Most parallel streams (`MAX_STREAMS`).
pub const MAX_STREAMS: u32 = 128;
/// Largest socket buffer iperf3 accepts (`MAX_TCP_BUFFER`, 512 MiB).
pub const MAX_WINDOW: u64 = 512 * 1024 * 1024;
/// Longest test duration (`MAX_TIME`, one day).
pub const MAX_TIME: u64 = 86_400;
/// Longest omit period (`MAX_OMIT_TIME`).
pub const MAX_OMIT: u64 = 600;
/// Most datagrams per burst (`MAX_BURST`).
pub const MAX_BURST: u32 = 1000;
/// Largest MSS (`MAX_MSS` in 3.21).
pub const MAX_MSS: u32 = 32767;
/// iperf3's default `pacing_timer` in microseconds (`DEFAULT_PACING_TIMER`, src/iperf_api.h).
pub const DEFAULT_PACING_TIMER_US: u32 = 1000;
/// The largest IPv6 flow label (20 bits; iperf3's `-L` range is 1..=0xfffff).
pub const MAX_FLOWLABEL: u32 = 0xfffff;

/// Protocol version of netmeter's extension negotiation.
pub const EXT_VERSION: u32 = 1;

/// Typed reasons a peer's bytes were refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("unknown control state byte {0:#04x}")]
    UnknownState(u8),
    #[error("JSON message length {len} is outside 1..={max}")]
    BadLength { len: u32, max: u32 },
    #[error("malformed JSON message: {0}")]
    BadJson(String),
    #[error("invalid parameter: {0}")]
    BadParam(String),
    #[error("UDP datagram of {0} bytes is too short for the iperf3 header")]
    ShortDatagram(usize),
}

/// Control-connection state bytes (`src/iperf_api.h`). Sent as one signed byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    TestStart,
    TestRunning,
    TestEnd,
    ParamExchange,
    CreateStreams,
    ServerTerminate,
    ClientTerminate,
    ExchangeResults,
    DisplayResults,
    IperfDone,
    AccessDenied,
    ServerError,
    /// netmeter extension answer (0x40): sent by a netmeter server only to a client whose
    /// parameters carried the `netmeter` key, followed by a length-prefixed JSON
    /// [`ExtAnswer`]. A plain iperf3 client never asks, so it never receives this byte.
    NetmeterExt,
    /// netmeter pre-shared-key exchange (0x41): sent by a server with `--psk-file` only
    /// to a client whose extension request carried a `psk` nonce, followed by a
    /// length-prefixed JSON [`PskChallenge`] (the server's nonce); the client answers
    /// with a [`PskResponse`], and the server, once that proof checked, sends 0x41
    /// again with a [`PskConfirm`] (its own proof).
    NetmeterAuth,
    /// netmeter third-party result (0x42): the server ran the requested test as a client
    /// and sends a length-prefixed JSON [`ThirdPartyAnswer`]. Only a client that sent a
    /// `third_party` request ever receives it.
    NetmeterThirdParty,
    /// netmeter multicast receiver (0x43): the server asked to join a group
    /// (`mcast_join` in the extension request) sends a length-prefixed JSON
    /// [`mcast_join::JoinAnswer`] after it: once when it joined or why not, once more
    /// with its figures at the test's end. Only a client that sent `mcast_join` ever
    /// receives it.
    NetmeterMcast,
}

impl State {
    /// The byte on the wire.
    pub fn to_byte(self) -> u8 {
        match self {
            State::TestStart => 0x01,
            State::TestRunning => 0x02,
            State::TestEnd => 0x04,
            State::ParamExchange => 0x09,
            State::CreateStreams => 0x0a,
            State::ServerTerminate => 0x0b,
            State::ClientTerminate => 0x0c,
            State::ExchangeResults => 0x0d,
            State::DisplayResults => 0x0e,
            State::IperfDone => 0x10,
            State::NetmeterExt => 0x40,
            State::NetmeterAuth => 0x41,
            State::NetmeterThirdParty => 0x42,
            State::NetmeterMcast => 0x43,
            State::AccessDenied => 0xff, // -1
            State::ServerError => 0xfe,  // -2
        }
    }

    /// Parse a state byte; unknown values are an error (iperf3's `IEMESSAGE`).
    pub fn from_byte(b: u8) -> Result<State, WireError> {
        Ok(match b {
            0x01 => State::TestStart,
            0x02 => State::TestRunning,
            0x04 => State::TestEnd,
            0x09 => State::ParamExchange,
            0x0a => State::CreateStreams,
            0x0b => State::ServerTerminate,
            0x0c => State::ClientTerminate,
            0x0d => State::ExchangeResults,
            0x0e => State::DisplayResults,
            0x10 => State::IperfDone,
            0x40 => State::NetmeterExt,
            0x41 => State::NetmeterAuth,
            0x42 => State::NetmeterThirdParty,
            0x43 => State::NetmeterMcast,
            0xff => State::AccessDenied,
            0xfe => State::ServerError,
            other => return Err(WireError::UnknownState(other)),
        })
    }
}

/// The 37-byte test cookie.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cookie(pub [u8; COOKIE_LEN]);

impl std::fmt::Debug for Cookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cookie({})", self.as_text())
    }
}

impl Cookie {
    const ALPHABET: &'static [u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

    /// Build a cookie from 36 random bytes, mapped onto iperf3's base32 alphabet.
    pub fn from_random(random: &[u8; COOKIE_LEN - 1]) -> Cookie {
        let mut c = [0u8; COOKIE_LEN];
        for (dst, r) in c.iter_mut().zip(random.iter()) {
            *dst = Self::ALPHABET[(*r % 32) as usize];
        }
        Cookie(c)
    }

    /// The printable part (up to the first NUL), lossily decoded.
    pub fn as_text(&self) -> String {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(COOKIE_LEN);
        String::from_utf8_lossy(&self.0[..end]).into_owned()
    }
}

/// Decode the 4-byte big-endian length that precedes a JSON message, refusing zero
/// and anything above `max` before a single byte is allocated.
pub fn decode_json_len(hdr: [u8; 4], max: u32) -> Result<usize, WireError> {
    let len = u32::from_be_bytes(hdr);
    if len == 0 || len > max {
        return Err(WireError::BadLength { len, max });
    }
    Ok(len as usize)
}

/// A serde_json formatter that writes numbers as iperf3's cJSON does: a whole number
/// without a fraction (`"time":10`, `"len":131072`, `"start":0`), anything else as a
/// float. iperf3 builds every message and its `-J` document with cJSON, so its integer
/// fields (counts, sizes, flags) read as JSON integers; serde alone writes `10.0`, which
/// iperf3 reads but an independent iperf3-compatible server may not (`len` used as a
/// buffer size), nor a script that checks types. Layout comes from the wrapped
/// formatter (compact or pretty).
pub struct CJsonFormatter<F>(pub F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for CJsonFormatter<F> {
    fn write_f64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: f64) -> std::io::Result<()> {
        const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
        const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
        // serde_json writes non-finite values as null before it gets here.
        if v.fract() == 0.0 && (0.0..TWO_POW_64).contains(&v) {
            write!(w, "{}", v as u64)
        } else if v.fract() == 0.0 && (-TWO_POW_63..0.0).contains(&v) {
            write!(w, "{}", v as i64)
        } else {
            self.0.write_f64(w, v)
        }
    }
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// `v` as JSON with iperf3's number rule ([`CJsonFormatter`]), compact or pretty
/// (two-space indent).
pub fn to_cjson_vec<T: Serialize + ?Sized>(v: &T, pretty: bool) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::new();
    if pretty {
        let f = CJsonFormatter(serde_json::ser::PrettyFormatter::with_indent(b"  "));
        v.serialize(&mut serde_json::Serializer::with_formatter(&mut out, f))?;
    } else {
        let f = CJsonFormatter(serde_json::ser::CompactFormatter);
        v.serialize(&mut serde_json::Serializer::with_formatter(&mut out, f))?;
    }
    Ok(out)
}

/// Frame a JSON value: 4-byte big-endian length, then the text.
pub fn encode_json<T: Serialize>(v: &T) -> Vec<u8> {
    // Serializing our own plain data types to a Vec cannot fail (no maps with
    // non-string keys, no failing Serialize impls).
    let body = to_cjson_vec(v, false).unwrap_or_default();
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Decode a JSON message body into `T`.
pub fn decode_json<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, WireError> {
    serde_json::from_slice(body).map_err(|e| WireError::BadJson(e.to_string()))
}

/// The 8 bytes after `SERVER_ERROR`: iperf3 error code and the server's errno.
pub fn decode_error_trailer(b: [u8; 8]) -> (ErrCode, i32) {
    let code = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let errno = i32::from_be_bytes([b[4], b[5], b[6], b[7]]);
    (ErrCode::from_i32(code), errno)
}

/// Encode the `SERVER_ERROR` state byte and its trailer.
pub fn encode_server_error(code: ErrCode, errno: i32) -> [u8; 9] {
    let mut out = [0u8; 9];
    out[0] = State::ServerError.to_byte();
    out[1..5].copy_from_slice(&code.to_i32().to_be_bytes());
    out[5..9].copy_from_slice(&errno.to_be_bytes());
    out
}

/// The parameter JSON a client sends after `PARAM_EXCHANGE` (`send_parameters()`).
///
/// Keys that iperf3 treats as "present means true" are `Option<bool>` and are only
/// serialized when set, because iperf3 switches them on for *any* boolean value.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Params {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sctp: Option<bool>,
    #[serde(default)]
    pub omit: f64,
    /// `-A n,m`: the CPU the server should run this test on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_affinity: Option<f64>,
    #[serde(default)]
    pub time: f64,
    #[serde(default)]
    pub num: f64,
    #[serde(default)]
    pub blockcount: f64,
    #[serde(rename = "MSS", skip_serializing_if = "Option::is_none")]
    pub mss: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodelay: Option<bool>,
    #[serde(default)]
    pub parallel: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverse: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bidirectional: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub len: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fqrate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing_timer: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<f64>,
    #[serde(rename = "TOS", skip_serializing_if = "Option::is_none")]
    pub tos: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flowlabel: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub get_server_output: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_counters_64bit: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeating_payload: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_rx_copy: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dont_fragment: Option<f64>,
    /// The RSA credential (`--username`, src/auth): base64 of the encrypted
    /// `user/pwd/ts` text, as iperf3's `send_parameters()` adds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authtoken: Option<String>,
    /// `-m`: data streams over MPTCP (iperf3 3.17+ sends `"mptcp": true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mptcp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
    /// netmeter's extension request. iperf3 servers ignore unknown keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netmeter: Option<ExtRequest>,
}

/// Read any JSON number as an i64 the way iperf3's C code means it: iperf3 writes some
/// signed values (e.g. `retransmits: -1`) through an unsigned format, so 2^64-1 is -1.
fn lenient_i64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let n = serde_json::Number::deserialize(d)?;
    if let Some(i) = n.as_i64() {
        Ok(i)
    } else if let Some(u) = n.as_u64() {
        Ok(u as i64) // two's-complement reinterpretation, as the C side intended
    } else {
        let f = n.as_f64().unwrap_or(0.0);
        if f.is_finite() {
            Ok(f as i64)
        } else {
            Err(serde::de::Error::custom("number out of range"))
        }
    }
}

fn lenient_opt_i64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    lenient_i64(d).map(Some)
}

/// Byte counts: never negative; a float is truncated.
fn lenient_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    lenient_i64(d).map(|v| v.max(0) as u64)
}

/// One stream in a results message (`send_results()`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StreamResult {
    #[serde(deserialize_with = "lenient_i64")]
    pub id: i64,
    #[serde(deserialize_with = "lenient_u64")]
    pub bytes: u64,
    #[serde(default, deserialize_with = "lenient_i64")]
    pub retransmits: i64,
    #[serde(default)]
    pub jitter: f64,
    #[serde(default, deserialize_with = "lenient_i64")]
    pub errors: i64,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_opt_i64"
    )]
    pub omitted_errors: Option<i64>,
    #[serde(default, deserialize_with = "lenient_i64")]
    pub packets: i64,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_opt_i64"
    )]
    pub omitted_packets: Option<i64>,
    #[serde(default)]
    pub start_time: f64,
    #[serde(default)]
    pub end_time: f64,
    /// netmeter extension: of `retransmits`, those the receiver reported as
    /// duplicates (D-SACK).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter_spurious_retransmits: Option<u64>,
    /// netmeter extension: out-of-order datagrams seen by a receiver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netmeter_out_of_order: Option<u64>,
    /// netmeter extension: duplicate datagrams seen by a receiver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netmeter_duplicates: Option<u64>,
    /// netmeter extension: datagrams the receiver's kernel dropped (full buffer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter_host_drops: Option<u64>,
    /// netmeter extension: the stream thread's CPU use, % of one CPU over its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter_cpu_percent: Option<f64>,
    /// netmeter extension: % of its life the stream thread waited for a CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter_cpu_wait_percent: Option<f64>,
    /// netmeter extension: one-way delays seen by the receiver (`--trip-times`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter_owd: Option<crate::latency::OwdSummary>,
    /// netmeter extension: whole frames seen by the receiver (`--isochronous`, UDP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter_frames: Option<FrameSummary>,
    /// netmeter extension: UDP datagrams and the kernel messages that carried them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter_udp_io: Option<crate::stats::UdpIo>,
    /// netmeter extension: the receiver's datagrams per ECN codepoint (docs/ecn.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter_ecn: Option<crate::stats::EcnCounts>,
    /// netmeter extension: a paced UDP sender's furthest lag behind its `-b` schedule,
    /// ms (see [`crate::pacing::Pacer::max_lag_s`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter_pacing_lag_ms: Option<f64>,
    /// netmeter extension: a paced UDP sender's sends that found the socket's buffer
    /// full for the whole send timeout (50 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter_send_blocked: Option<u64>,
    /// netmeter extension: the stream's socket calls on this side (iperf 2's Write/Err
    /// and Reads=Dist).
    #[serde(
        default,
        deserialize_with = "crate::stats::lenient_calls",
        skip_serializing_if = "Option::is_none"
    )]
    pub netmeter_calls: Option<crate::stats::SocketCalls>,
}

impl StreamResult {
    /// Datagrams of the measured part: `packets` counts the whole test, omit period
    /// included, in every iperf3 version; 3.20+ also sends that period's share. For an
    /// older peer, `own_omitted` (this side's count for the omit period) stands in.
    pub fn measured_packets(&self, own_omitted: u64) -> u64 {
        let omitted = self.omitted_packets.unwrap_or(own_omitted as i64);
        self.packets.saturating_sub(omitted).max(0) as u64
    }

    /// Lost datagrams of the measured part (`errors` less `omitted_errors`, 3.20+; an
    /// older peer's omit-period losses cannot be told apart and stay in).
    pub fn measured_errors(&self) -> u64 {
        self.errors
            .saturating_sub(self.omitted_errors.unwrap_or(0))
            .max(0) as u64
    }
}

/// A results message, exchanged once in each direction at the end of a test.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Results {
    pub cpu_util_total: f64,
    pub cpu_util_user: f64,
    pub cpu_util_system: f64,
    #[serde(deserialize_with = "lenient_i64")]
    pub sender_has_retransmits: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    pub streams: Vec<StreamResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_output_json: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// netmeter's connect datagram is iperf3's 4 bytes and the cookie; only that exact
    /// shape reads as one (iperf3's own, data, a truncated copy do not).
    #[test]
    fn a_connect_datagram_carries_the_cookie() {
        let c = Cookie::from_random(&[3; COOKIE_LEN - 1]);
        let d = udp_connect_with_cookie(&c);
        assert_eq!(&d[..4], b"9876");
        assert_eq!(udp_connect_cookie(&d), Some(c.0));
        assert!(is_udp_connect(&d) && is_udp_connect(b"9876"));
        assert_eq!(udp_connect_cookie(b"9876"), None);
        assert_eq!(udp_connect_cookie(&d[..d.len() - 1]), None);
        let mut data = d;
        data[0] = 0x69;
        assert_eq!(udp_connect_cookie(&data), None);
        assert!(!is_udp_connect(&data) && !is_udp_connect(&[0; 1400]));
    }

    #[test]
    fn bulk_block_is_1_mib_while_streams_fit_the_cpus() {
        assert_eq!(bulk_tcp_block(1, 2), TCP_BULK_BLOCK);
        assert_eq!(bulk_tcp_block(2, 2), TCP_BULK_BLOCK);
        assert_eq!(bulk_tcp_block(3, 2), TCP_DEFAULT_BLOCK);
        assert_eq!(bulk_tcp_block(8, 8), TCP_BULK_BLOCK);
        assert_eq!(bulk_tcp_block(1, 0), TCP_BULK_BLOCK);
        assert_eq!(bulk_tcp_block(2, 0), TCP_DEFAULT_BLOCK);
    }
    use proptest::prelude::*;

    #[test]
    fn state_bytes_round_trip() {
        for b in 0..=255u8 {
            if let Ok(s) = State::from_byte(b) {
                assert_eq!(s.to_byte(), b);
            }
        }
        assert_eq!(State::from_byte(0xff), Ok(State::AccessDenied));
        assert_eq!(State::from_byte(0xfe), Ok(State::ServerError));
        assert_eq!(State::from_byte(3), Err(WireError::UnknownState(3)));
    }

    #[test]
    fn cookie_uses_base32_alphabet_and_nul() {
        let c = Cookie::from_random(&[255u8; 36]);
        assert_eq!(c.0[36], 0);
        assert_eq!(c.as_text(), "7".repeat(36));
        let c = Cookie::from_random(&[0u8; 36]);
        assert_eq!(c.as_text(), "a".repeat(36));
    }

    #[test]
    fn json_length_limits() {
        assert!(decode_json_len([0, 0, 0, 0], 10).is_err());
        assert_eq!(decode_json_len([0, 0, 0, 10], 10), Ok(10));
        assert_eq!(
            decode_json_len([0xff, 0xff, 0xff, 0xff], MAX_PARAMS_LEN),
            Err(WireError::BadLength {
                len: u32::MAX,
                max: MAX_PARAMS_LEN
            })
        );
    }

    #[test]
    fn params_round_trip_and_true_only_keys() {
        let p = Params {
            tcp: Some(true),
            time: 10.0,
            parallel: 1.0,
            len: Some(131072.0),
            netmeter: Some(ExtRequest {
                version: 1,
                bounceback: None,
                trip_times: false,
                connect_only: false,
                features: vec![Feature::UdpSeq64],
                ..ExtRequest::default()
            }),
            ..Default::default()
        };
        let framed = encode_json(&p);
        let len = decode_json_len(framed[..4].try_into().unwrap(), MAX_PARAMS_LEN).unwrap();
        let back: Params = decode_json(&framed[4..4 + len]).unwrap();
        assert_eq!(back, p);
        let text = String::from_utf8(framed[4..].to_vec()).unwrap();
        assert!(
            !text.contains("reverse"),
            "unset flags must not be sent: {text}"
        );
    }

    /// Integer fields go out as JSON integers, as iperf3's cJSON writes them; floats
    /// from a peer are still read (iperf3 reads every number as a double).
    #[test]
    fn params_and_results_numbers_are_written_as_iperf3_writes_them() {
        let p = Params {
            udp: Some(true),
            time: 2.0,
            parallel: 1.0,
            len: Some(1_048_576.0),
            bandwidth: Some(150e6),
            pacing_timer: Some(1000.0),
            get_server_output: Some(1.0),
            ..Default::default()
        };
        let text = String::from_utf8(encode_json(&p)[4..].to_vec()).unwrap();
        for want in [
            r#""omit":0,"#,
            r#""time":2,"#,
            r#""num":0,"#,
            r#""blockcount":0,"#,
            r#""parallel":1,"#,
            r#""len":1048576,"#,
            r#""bandwidth":150000000,"#,
            r#""pacing_timer":1000,"#,
            r#""get_server_output":1}"#,
        ] {
            assert!(text.contains(want), "{want} not in {text}");
        }
        assert!(
            !text.contains(".0"),
            "a whole number written as a float: {text}"
        );
        // A fractional duration (netmeter's own -t 2.5) stays a float.
        let frac = Params {
            time: 2.5,
            ..Default::default()
        };
        let text = String::from_utf8(encode_json(&frac)[4..].to_vec()).unwrap();
        assert!(text.contains(r#""time":2.5"#), "{text}");
        // Floats from a peer are accepted.
        let back: Params =
            decode_json(br#"{"tcp":true,"time":2.0,"parallel":1.0,"len":1048576.0,"omit":0.0}"#)
                .unwrap();
        assert_eq!((back.time, back.len), (2.0, Some(1_048_576.0)));
        let r = Results {
            cpu_util_total: 3.0,
            sender_has_retransmits: 1,
            streams: vec![StreamResult {
                id: 1,
                bytes: 1000,
                end_time: 2.0,
                jitter: 0.000125,
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = String::from_utf8(encode_json(&r)[4..].to_vec()).unwrap();
        assert!(text.contains(r#""cpu_util_total":3,"#), "{text}");
        assert!(text.contains(r#""start_time":0,"end_time":2"#), "{text}");
        assert!(text.contains(r#""jitter":0.000125"#), "{text}");
        assert!(!text.contains(".0,"), "{text}");
    }

    #[test]
    fn params_from_real_iperf3_client() {
        // Captured from iperf3 3.12: `iperf3 -c 127.0.0.1 -u -b 10M -t 3`.
        let raw = br#"{"udp":true,"omit":0,"time":3,"num":0,"blockcount":0,"parallel":1,"len":1460,"bandwidth":10000000,"pacing_timer":1000,"client_version":"3.12"}"#;
        let p: Params = decode_json(raw).unwrap();
        assert_eq!(p.udp, Some(true));
        assert_eq!(p.bandwidth, Some(10_000_000.0));
        assert!(p.netmeter.is_none());
    }

    #[test]
    fn results_from_real_iperf3_server() {
        // iperf3 3.12 prints retransmits -1 through an unsigned format.
        let raw = br#"{"cpu_util_total":1.5,"cpu_util_user":0.5,"cpu_util_system":1,"sender_has_retransmits":18446744073709551615,"streams":[{"id":1,"bytes":3253469184,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":2.000133}]}"#;
        let r: Results = decode_json(raw).unwrap();
        assert_eq!(r.sender_has_retransmits, -1);
        assert_eq!(r.streams[0].retransmits, -1);
        assert_eq!(r.streams[0].bytes, 3_253_469_184);
    }

    #[test]
    fn malformed_json_is_an_error() {
        assert!(decode_json::<Params>(b"{\"tcp\":").is_err());
        assert!(decode_json::<Params>(b"{\"time\":\"ten\"}").is_err());
        assert!(decode_json::<Results>(b"[]").is_err());
    }

    #[test]
    fn error_trailer_round_trip() {
        let e = encode_server_error(ErrCode::AccessDenied, 0);
        assert_eq!(e[0], 0xfe);
        assert_eq!(&e[1..5], &121i32.to_be_bytes());
        assert_eq!(
            decode_error_trailer(e[1..].try_into().unwrap()),
            (ErrCode::AccessDenied, 0)
        );
    }

    proptest! {
        #[test]
        fn parsers_never_panic(bytes: Vec<u8>) {
            let _ = decode_json::<Params>(&bytes);
            let _ = decode_json::<Results>(&bytes);
            let _ = UdpHeader::read(&bytes, true);
            let _ = UdpHeader::read(&bytes, false);
            if bytes.len() >= 4 {
                let _ = decode_json_len([bytes[0], bytes[1], bytes[2], bytes[3]], MAX_PARAMS_LEN);
            }
        }
    }
}
