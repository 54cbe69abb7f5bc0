//! The iperf3 wire format, as bytes and typed messages, with no I/O.
//!
//! Everything netmeter says to a peer, and everything it accepts from one, passes through
//! these types. Byte layouts live here and nowhere else; the rest of the program sees
//! typed values or a typed [`WireError`]. Source for every constant: the esnet/iperf
//! sources (`src/iperf.h`, `src/iperf_api.h`, `src/iperf_udp.c`), as summarised in
//! `shared/reference/iperf3.md` and `docs/protocol.md`.

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

/// Smallest UDP datagram iperf3 allows (`MIN_UDP_BLOCKSIZE`).
pub const UDP_MIN_LEN: usize = 16;
/// Largest UDP payload on IPv4.
pub const UDP_MAX_LEN: usize = 65507;
/// Largest TCP block (`MAX_BLOCKSIZE`, 1 MiB).
pub const TCP_MAX_BLOCK: usize = 1 << 20;
/// iperf3's default TCP block (`DEFAULT_TCP_BLKSIZE`, 128 KiB).
pub const TCP_DEFAULT_BLOCK: usize = 128 * 1024;
/// netmeter's default block for unpaced bulk TCP (no -b, -k, --trip-times or traffic
/// profile): 1 MiB writes. Chosen by measurement (docs/benchmarks.md): on loopback
/// they move 1.5-2x the bytes of 128 KiB writes for less CPU per byte, for both tools.
pub const TCP_BULK_BLOCK: usize = 1 << 20;
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

macro_rules! err_codes {
    ($($(#[$doc:meta])* $name:ident = $value:literal,)*) => {
        /// iperf3 error codes by name (`enum iperf_error_code` in esnet/iperf
        /// `src/iperf_api.h`): what a server sends after `SERVER_ERROR`, and what
        /// netmeter's server answers with. A code this list does not name (a newer
        /// iperf3's) travels as [`ErrCode::Other`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ErrCode {
            $($(#[$doc])* $name,)*
            /// A code netmeter does not know by name.
            Other(i32),
        }

        impl ErrCode {
            /// The code for a number from the wire.
            pub fn from_i32(code: i32) -> ErrCode {
                match code {
                    $($value => ErrCode::$name,)*
                    other => ErrCode::Other(other),
                }
            }

            /// The number on the wire.
            pub fn to_i32(self) -> i32 {
                match self {
                    $(ErrCode::$name => $value,)*
                    ErrCode::Other(code) => code,
                }
            }
        }
    };
}

err_codes! {
    /// `IENONE`: no error.
    None = 0,
    /// `IESERVCLIENT`: cannot be both server and client.
    ServClient = 1,
    /// `IENOROLE`: must either be a client or a server.
    NoRole = 2,
    /// `IESERVERONLY`: this option is server only.
    ServerOnly = 3,
    /// `IECLIENTONLY`: this option is client only.
    ClientOnly = 4,
    /// `IEDURATION`: test duration too long (`MAX_TIME`).
    Duration = 5,
    /// `IENUMSTREAMS`: too many parallel streams (`MAX_STREAMS`).
    NumStreams = 6,
    /// `IEBLOCKSIZE`: block size too large (`MAX_BLOCKSIZE`).
    BlockSize = 7,
    /// `IEBUFSIZE`: socket buffer size too large (`MAX_TCP_BUFFER`).
    BufSize = 8,
    /// `IEINTERVAL`: invalid report interval.
    Interval = 9,
    /// `IEMSS`: MSS too large (`MAX_MSS`).
    Mss = 10,
    /// `IENOSENDFILE`: this OS does not support sendfile.
    NoSendfile = 11,
    /// `IEOMIT`: bogus value for --omit.
    Omit = 12,
    /// `IEUNIMP`: not implemented.
    Unimp = 13,
    /// `IEFILE`: the -F file could not be opened.
    File = 14,
    /// `IEBURST`: invalid burst count (`MAX_BURST`).
    Burst = 15,
    /// `IEENDCONDITIONS`: only one end condition (-t, -n, -k) may be given.
    EndConditions = 16,
    /// `IELOGFILE`: cannot open the log file.
    LogFile = 17,
    /// `IENOSCTP`: no SCTP support.
    NoSctp = 18,
    /// `IEBIND`: unused (local port without a local bind).
    Bind = 19,
    /// `IEUDPBLOCKSIZE`: invalid UDP block size.
    UdpBlockSize = 20,
    /// `IEBADTOS`: bad TOS value.
    BadTos = 21,
    /// `IESETCLIENTAUTH`: bad client authentication configuration.
    SetClientAuth = 22,
    /// `IESETSERVERAUTH`: bad server authentication configuration.
    SetServerAuth = 23,
    /// `IEBADFORMAT`: bad -f argument.
    BadFormat = 24,
    /// `IEREVERSEBIDIR`: cannot be both reverse and bidirectional.
    ReverseBidir = 25,
    /// `IEBADPORT`: bad port number.
    BadPort = 26,
    /// `IETOTALRATE`: total bitrate above the server's limit.
    TotalRate = 27,
    /// `IETOTALINTERVAL`: invalid interval for the average rate.
    TotalInterval = 28,
    /// `IESKEWTHRESHOLD`: invalid skew threshold.
    SkewThreshold = 29,
    /// `IEIDLETIMEOUT`: invalid idle timeout.
    IdleTimeout = 30,
    /// `IERCVTIMEOUT`: illegal receive timeout.
    RcvTimeout = 31,
    /// `IERVRSONLYRCVTIMEOUT`: the receive timeout is for reverse mode only.
    RvrsOnlyRcvTimeout = 32,
    /// `IESNDTIMEOUT`: illegal send timeout.
    SndTimeout = 33,
    /// `IEUDPFILETRANSFER`: cannot transfer a file over UDP.
    UdpFileTransfer = 34,
    /// `IESERVERAUTHUSERS`: cannot read the authorized users file.
    ServerAuthUsers = 35,
    /// `IECNTLKA`: keepalive period shorter than the retry period.
    CntlKa = 36,
    /// `IEMAXSERVERTESTDURATIONEXCEEDED`: duration above the server's maximum.
    MaxServerTestDurationExceeded = 37,
    /// `IEUNITVAL`: invalid unit value or suffix.
    UnitVal = 38,
    /// `IERVRSONLYSKIPRXCOPY`: --skip-rx-copy not supported.
    RvrsOnlySkipRxCopy = 39,
    /// `IEBADDSCP`: bad DSCP value.
    BadDscp = 40,
    /// `IENEWTEST`: unable to create a new test.
    NewTest = 100,
    /// `IEINITTEST`: test initialization failed.
    InitTest = 101,
    /// `IELISTEN`: unable to listen for connections.
    Listen = 102,
    /// `IECONNECT`: unable to connect to the server.
    Connect = 103,
    /// `IEACCEPT`: unable to accept a connection.
    Accept = 104,
    /// `IESENDCOOKIE`: unable to send the cookie.
    SendCookie = 105,
    /// `IERECVCOOKIE`: unable to receive the cookie.
    RecvCookie = 106,
    /// `IECTRLWRITE`: unable to write to the control socket.
    CtrlWrite = 107,
    /// `IECTRLREAD`: unable to read from the control socket.
    CtrlRead = 108,
    /// `IECTRLCLOSE`: the control socket closed unexpectedly.
    CtrlClose = 109,
    /// `IEMESSAGE`: received an unknown message.
    Message = 110,
    /// `IESENDMESSAGE`: unable to send a control message.
    SendMessage = 111,
    /// `IERECVMESSAGE`: unable to receive a control message.
    RecvMessage = 112,
    /// `IESENDPARAMS`: unable to send the parameters.
    SendParams = 113,
    /// `IERECVPARAMS`: unable to receive the parameters.
    RecvParams = 114,
    /// `IEPACKAGERESULTS`: unable to package the results.
    PackageResults = 115,
    /// `IESENDRESULTS`: unable to send the results.
    SendResults = 116,
    /// `IERECVRESULTS`: unable to receive the results.
    RecvResults = 117,
    /// `IESELECT`: select failed.
    Select = 118,
    /// `IECLIENTTERM`: the client has terminated.
    ClientTerm = 119,
    /// `IESERVERTERM`: the server has terminated.
    ServerTerm = 120,
    /// `IEACCESSDENIED`: the server is busy running a test.
    AccessDenied = 121,
    /// `IESETNODELAY`: unable to set TCP_NODELAY.
    SetNoDelay = 122,
    /// `IESETMSS`: unable to set the MSS.
    SetMss = 123,
    /// `IESETBUF`: unable to set the socket buffer size.
    SetBuf = 124,
    /// `IESETTOS`: unable to set the IP TOS.
    SetTos = 125,
    /// `IESETCOS`: unable to set the IPv6 traffic class.
    SetCos = 126,
    /// `IESETFLOW`: unable to set the IPv6 flow label.
    SetFlow = 127,
    /// `IEREUSEADDR`: unable to set SO_REUSEADDR.
    ReuseAddr = 128,
    /// `IENONBLOCKING`: unable to make a socket non-blocking.
    NonBlocking = 129,
    /// `IESETWINDOWSIZE`: unable to set the window size.
    SetWindowSize = 130,
    /// `IEPROTOCOL`: protocol does not exist.
    Protocol = 131,
    /// `IEAFFINITY`: unable to set the CPU affinity.
    Affinity = 132,
    /// `IEDAEMON`: unable to become a daemon.
    Daemon = 133,
    /// `IESETCONGESTION`: unable to set TCP_CONGESTION.
    SetCongestion = 134,
    /// `IEPIDFILE`: unable to write the PID file.
    PidFile = 135,
    /// `IEV6ONLY`: unable to set IPV6_V6ONLY.
    V6Only = 136,
    /// `IESETSCTPDISABLEFRAG`: unable to set SCTP fragmentation.
    SetSctpDisableFrag = 137,
    /// `IESETSCTPNSTREAM`: unable to set the SCTP stream count.
    SetSctpNstream = 138,
    /// `IESETSCTPBINDX`: bad sctp_bindx() parameters.
    SetSctpBindx = 139,
    /// `IESETPACING`: unable to set the pacing rate.
    SetPacing = 140,
    /// `IESETBUF2`: socket buffer size not as written.
    SetBuf2 = 141,
    /// `IEAUTHTEST`: test authorization failed.
    AuthTest = 142,
    /// `IEBINDDEV`: unable to bind to the device.
    BindDev = 143,
    /// `IENOMSG`: no message within the receive timeout.
    NoMsg = 144,
    /// `IESETDONTFRAGMENT`: unable to set Don't Fragment.
    SetDontFragment = 145,
    /// `IEBINDDEVNOSUPPORT`: bind to device not supported.
    BindDevNoSupport = 146,
    /// `IEHOSTDEV`: `ip%dev` is only for IPv6 link-local addresses.
    HostDev = 147,
    /// `IESETUSERTIMEOUT`: unable to set TCP_USER_TIMEOUT.
    SetUserTimeout = 148,
    /// `IEPTHREADCREATE`: unable to create a thread.
    PthreadCreate = 150,
    /// `IEPTHREADCANCEL`: unable to cancel a thread.
    PthreadCancel = 151,
    /// `IEPTHREADJOIN`: unable to join a thread.
    PthreadJoin = 152,
    /// `IEPTHREADATTRINIT`: unable to initialize thread attributes.
    PthreadAttrInit = 153,
    /// `IEPTHREADATTRDESTROY`: unable to destroy thread attributes.
    PthreadAttrDestroy = 154,
    /// `IESETCNTLKA`: unable to set SO_KEEPALIVE.
    SetCntlKa = 155,
    /// `IESETCNTLKAKEEPIDLE`: unable to set TCP_KEEPIDLE.
    SetCntlKaKeepIdle = 156,
    /// `IESETCNTLKAINTERVAL`: unable to set TCP_KEEPINTVL.
    SetCntlKaInterval = 157,
    /// `IESETCNTLKACOUNT`: unable to set TCP_KEEPCNT.
    SetCntlKaCount = 158,
    /// `IEPTHREADSIGMASK`: unable to set a thread's signal mask.
    PthreadSigmask = 159,
    /// `IESERVERTESTDURATIONEXPIRED`: the server's test duration expired.
    ServerTestDurationExpired = 160,
    /// `IECREATESTREAM`: unable to create a stream.
    CreateStream = 200,
    /// `IEINITSTREAM`: unable to initialize a stream.
    InitStream = 201,
    /// `IESTREAMLISTEN`: unable to start the stream listener.
    StreamListen = 202,
    /// `IESTREAMCONNECT`: unable to connect a stream.
    StreamConnect = 203,
    /// `IESTREAMACCEPT`: unable to accept a stream connection.
    StreamAccept = 204,
    /// `IESTREAMWRITE`: unable to write to a stream.
    StreamWrite = 205,
    /// `IESTREAMREAD`: unable to read from a stream.
    StreamRead = 206,
    /// `IESTREAMCLOSE`: a stream closed unexpectedly.
    StreamClose = 207,
    /// `IESTREAMID`: a stream has an invalid ID.
    StreamId = 208,
    /// `IENEWTIMER`: unable to create a timer.
    NewTimer = 300,
    /// `IEUPDATETIMER`: unable to update a timer.
    UpdateTimer = 301,
}

impl ErrCode {
    /// A readable sentence for a code received from a server, with its number.
    pub fn describe(self) -> String {
        let code = self.to_i32();
        let s = match code {
            1 => "cannot be both server and client",
            2 => "must either be a client or a server",
            3 => "an option was server-only",
            4 => "an option was client-only",
            5 => "the test duration is too long (maximum 86400 seconds)",
            6 => "too many parallel streams (maximum 128)",
            7 => "the block size is too large (maximum 1 MiB)",
            8 => "the socket buffer size is too large (maximum 512 MiB)",
            9 => "invalid report interval",
            10 => "the MSS is too large",
            11 => "the server does not support sendfile (-Z)",
            12 => "bogus value for --omit",
            13 => "a requested feature is not implemented by the server",
            14 => "the server could not open its -F file",
            15 => "invalid burst count (maximum 1000)",
            16 => "only one end condition (-t, -n, -k) may be given",
            20 => "invalid UDP block size",
            21 => "bad TOS value",
            25 => "cannot be both reverse and bidirectional",
            27 => "the requested total bitrate exceeds the server's limit",
            37 => "the requested test duration exceeds the server's maximum",
            100..=118 => "the server could not set up or run the control exchange",
            119 => "the client has terminated",
            120 => "the server has terminated",
            121 => "the server is busy running a test; try again later",
            122..=141 => "the server could not apply a requested socket option",
            142 => "test authorization failed",
            144 => "idle timeout for receiving data (the server's --rcv-timeout)",
            160 => "the server's test duration expired",
            200..=208 => "the server could not create or run a data stream",
            300..=301 => "the server had a timer failure",
            400..=403 => "the server had a thread failure",
            _ => "unknown error",
        };
        format!("{s} (iperf3 error {code})")
    }
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
    /// `-m`: data streams over MPTCP (iperf3 3.17+ sends `"mptcp": true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mptcp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
    /// netmeter's extension request. iperf3 servers ignore unknown keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netmeter: Option<ExtRequest>,
}

/// What a netmeter client asks for on top of iperf3 (key `netmeter` in the parameters).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExtRequest {
    /// Extension protocol version the client speaks.
    pub version: u32,
    /// Named features the client would like, e.g. `"udp_seq64"`.
    #[serde(default)]
    pub features: Vec<Feature>,
    /// Request/response test parameters (feature `bounceback`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounceback: Option<Bounceback>,
    /// One-way delay measurement (feature `trip_times`): nanosecond UDP timestamps
    /// and clock-offset probes on the control connection before the streams open.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trip_times: bool,
    /// Latency under working load (feature `working_load`): bulk TCP streams plus one
    /// request/response probe stream (the last one opened), which uses `bounceback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_load: Option<WorkingLoad>,
    /// TCP connection-rate test (feature `connect_only`): the data streams stay idle
    /// and the client opens short connections carrying the cookie, which the server
    /// answers with one byte and closes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub connect_only: bool,
    /// Isochronous frames (feature `isochronous`, UDP): every datagram carries an
    /// [`IsochHeader`] after the UDP header, so the server can count whole frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isochronous: Option<Isochronous>,
    /// `--no-gso` (feature `no_offload`): the server's UDP senders must not use
    /// segmentation offload (UDP_SEGMENT).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_gso: bool,
    /// `--no-gro` (feature `no_offload`): the server's UDP receivers must not use
    /// receive offload (UDP_GRO).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_gro: bool,
}

/// A request/response (bounceback) test: the client sends `request_len` bytes, the
/// server holds for `hold_us` and answers with `reply_len` bytes; `burst` requests are
/// outstanding at once. On UDP each request and reply starts with an 8-byte sequence
/// number, so both lengths are at least 8 there.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Bounceback {
    pub request_len: u32,
    pub reply_len: u32,
    #[serde(default)]
    pub hold_us: u32,
    #[serde(default = "one")]
    pub burst: u32,
    /// `--busy-poll`: both ends poll for the next message this long (µs) before they
    /// sleep in a blocking read. 0 = plain blocking reads.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub busy_poll_us: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn one() -> u32 {
    1
}

/// `--working-load`: `streams` bulk TCP streams per loaded direction, started after
/// `idle_ms` of probing an idle path.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkingLoad {
    pub up: bool,
    pub down: bool,
    pub streams: u32,
    pub idle_ms: u32,
}

/// Largest bounceback request or reply.
pub const MAX_BOUNCEBACK_LEN: u32 = 1 << 20;
/// Longest server hold time (one second).
pub const MAX_BOUNCEBACK_HOLD_US: u32 = 1_000_000;
/// Most outstanding requests per stream.
pub const MAX_BOUNCEBACK_BURST: u32 = 1024;
/// Longest `--busy-poll` spin per read (10 ms).
pub const MAX_BUSY_POLL_US: u32 = 10_000;

/// `--isochronous FPS:MEAN,STDEV`: frames at `fps`, sized so the per-frame bit rate has
/// mean `mean_bps` and standard deviation `stdev_bps` (see `crate::profile`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Isochronous {
    pub fps: u32,
    pub mean_bps: u64,
    #[serde(default)]
    pub stdev_bps: u64,
}

/// A netmeter server's answer to [`ExtRequest`], sent after [`State::NetmeterExt`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExtAnswer {
    pub version: u32,
    /// The subset of requested features the server will use in this test.
    #[serde(default)]
    pub accepted: Vec<Feature>,
    /// netmeter version string of the server.
    #[serde(default)]
    pub server: String,
}

/// A named extension feature, as it travels in [`ExtRequest::features`] and
/// [`ExtAnswer::accepted`]: a JSON string (`"udp_seq64"`, `"trip_times"`, ...).
///
/// A name this netmeter does not know (a newer peer's feature) parses as
/// [`Feature::Unknown`] and keeps its spelling, so a request or answer that carries one
/// is still read; nothing negotiates it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Feature {
    /// 64-bit UDP sequence numbers (iperf3's `udp_counters_64bit`) for every UDP test.
    UdpSeq64,
    /// The client repeats its UDP connect datagram; the server answers every copy.
    UdpConnectRetry,
    /// Request/response test ([`ExtRequest::bounceback`]).
    Bounceback,
    /// One-way delay measurement ([`ExtRequest::trip_times`]).
    TripTimes,
    /// TCP connection-rate test ([`ExtRequest::connect_only`]).
    ConnectOnly,
    /// Isochronous frames with frame headers ([`ExtRequest::isochronous`]).
    Isochronous,
    /// Latency under working load ([`ExtRequest::working_load`]).
    WorkingLoad,
    /// `--no-gso` / `--no-gro` for the server's UDP streams.
    NoOffload,
    /// A feature this netmeter does not know, by its name on the wire.
    Unknown(String),
}

impl Feature {
    /// Every feature netmeter can negotiate today, in the order a client asks for them.
    pub const ALL: [Feature; 8] = [
        Feature::UdpSeq64,
        Feature::UdpConnectRetry,
        Feature::Bounceback,
        Feature::TripTimes,
        Feature::ConnectOnly,
        Feature::Isochronous,
        Feature::WorkingLoad,
        Feature::NoOffload,
    ];

    /// The name on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            Feature::UdpSeq64 => "udp_seq64",
            Feature::UdpConnectRetry => "udp_connect_retry",
            Feature::Bounceback => "bounceback",
            Feature::TripTimes => "trip_times",
            Feature::ConnectOnly => "connect_only",
            Feature::Isochronous => "isochronous",
            Feature::WorkingLoad => "working_load",
            Feature::NoOffload => "no_offload",
            Feature::Unknown(name) => name,
        }
    }

    /// The feature a wire name stands for; never fails.
    pub fn from_name(name: &str) -> Feature {
        Feature::ALL
            .iter()
            .find(|f| f.as_str() == name)
            .cloned()
            .unwrap_or_else(|| Feature::Unknown(name.to_string()))
    }

    /// Whether this netmeter knows the feature (it is not [`Feature::Unknown`]).
    pub fn is_known(&self) -> bool {
        !matches!(self, Feature::Unknown(_))
    }
}

impl std::fmt::Display for Feature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Feature {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Feature {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Feature, D::Error> {
        let name = String::deserialize(d)?;
        Ok(Feature::from_name(&name))
    }
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
    /// netmeter extension: one-way delays seen by the receiver (`--trip-times`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter_owd: Option<crate::latency::OwdSummary>,
    /// netmeter extension: whole frames seen by the receiver (`--isochronous`, UDP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter_frames: Option<crate::profile::FrameSummary>,
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

/// Header at the start of every UDP data datagram. All fields big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// Sender timestamp, seconds part.
    pub sec: u32,
    /// Sender timestamp, microseconds part.
    pub usec: u32,
    /// Sequence number, first datagram = 1.
    pub seq: u64,
}

impl UdpHeader {
    /// Header length: 12 bytes with 32-bit sequence numbers, 16 with 64-bit.
    pub fn len(seq64: bool) -> usize {
        if seq64 { 16 } else { 12 }
    }

    /// Write the header into the front of `buf` (which must hold [`Self::len`] bytes).
    pub fn write(&self, buf: &mut [u8], seq64: bool) {
        buf[0..4].copy_from_slice(&self.sec.to_be_bytes());
        buf[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if seq64 {
            buf[8..16].copy_from_slice(&self.seq.to_be_bytes());
        } else {
            buf[8..12].copy_from_slice(&(self.seq as u32).to_be_bytes());
        }
    }

    /// Parse the header of a received datagram.
    pub fn read(buf: &[u8], seq64: bool) -> Result<UdpHeader, WireError> {
        if buf.len() < Self::len(seq64) {
            return Err(WireError::ShortDatagram(buf.len()));
        }
        let be32 = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let seq = if seq64 {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[8..16]);
            u64::from_be_bytes(b)
        } else {
            be32(8) as u64
        };
        Ok(UdpHeader {
            sec: be32(0),
            usec: be32(4),
            seq,
        })
    }
}

/// Header at the start of every TCP write when both netmeter peers run `--trip-times`:
/// magic `NMTT`, the write's length (header included, big-endian u32), and the sender's
/// wall-clock time in ns since the Unix epoch (big-endian i64).
pub const TCP_FRAME_HDR: usize = 16;
const TCP_FRAME_MAGIC: [u8; 4] = *b"NMTT";

/// Write a trip-times frame header into the first 16 bytes of `buf`.
pub fn write_tcp_frame_header(buf: &mut [u8], len: u32, send_ns: i64) {
    buf[..4].copy_from_slice(&TCP_FRAME_MAGIC);
    buf[4..8].copy_from_slice(&len.to_be_bytes());
    buf[8..16].copy_from_slice(&send_ns.to_be_bytes());
}

/// Follows the trip-times frames in a TCP byte stream, however the reads split them.
#[derive(Debug, Default, Clone)]
pub struct TcpFrameParser {
    hdr: [u8; TCP_FRAME_HDR],
    have: usize,
    left: usize,
    send_ns: i64,
    /// Set when the stream stopped looking like frames; parsing then stops.
    pub broken: bool,
}

impl TcpFrameParser {
    /// Consume `data`; `done(send_ns)` is called for each frame whose last byte is in it.
    pub fn feed(&mut self, mut data: &[u8], mut done: impl FnMut(i64)) {
        while !data.is_empty() && !self.broken {
            if self.left == 0 {
                let take = (TCP_FRAME_HDR - self.have).min(data.len());
                self.hdr[self.have..self.have + take].copy_from_slice(&data[..take]);
                self.have += take;
                data = &data[take..];
                if self.have < TCP_FRAME_HDR {
                    return;
                }
                self.have = 0;
                let len = u32::from_be_bytes([self.hdr[4], self.hdr[5], self.hdr[6], self.hdr[7]]);
                if self.hdr[..4] != TCP_FRAME_MAGIC || (len as usize) < TCP_FRAME_HDR {
                    self.broken = true;
                    return;
                }
                let mut t = [0u8; 8];
                t.copy_from_slice(&self.hdr[8..16]);
                self.send_ns = i64::from_be_bytes(t);
                self.left = len as usize - TCP_FRAME_HDR;
                if self.left == 0 {
                    done(self.send_ns);
                }
            } else {
                let take = self.left.min(data.len());
                self.left -= take;
                data = &data[take..];
                if self.left == 0 {
                    done(self.send_ns);
                }
            }
        }
    }
}

/// Frame header that follows the UDP header of every isochronous datagram between
/// netmeter peers (feature `isochronous`). All fields big-endian: frame id (u64, the
/// first frame is 1), the frame's send time (i64 ns since the epoch, taken just before
/// its first datagram), the frame's datagram count (u32) and this datagram's index in
/// it (u32, from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsochHeader {
    pub frame_id: u64,
    pub start_ns: i64,
    pub dgrams: u32,
    pub index: u32,
}

impl IsochHeader {
    pub const LEN: usize = 24;

    /// Write into the first [`Self::LEN`] bytes of `buf`.
    pub fn write(&self, buf: &mut [u8]) {
        buf[0..8].copy_from_slice(&self.frame_id.to_be_bytes());
        buf[8..16].copy_from_slice(&self.start_ns.to_be_bytes());
        buf[16..20].copy_from_slice(&self.dgrams.to_be_bytes());
        buf[20..24].copy_from_slice(&self.index.to_be_bytes());
    }

    /// Read from the front of `buf` (the datagram after its UDP header).
    pub fn read(buf: &[u8]) -> Option<IsochHeader> {
        let b = buf.get(..Self::LEN)?;
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(a)
        };
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some(IsochHeader {
            frame_id: u64_at(0),
            start_ns: u64_at(8) as i64,
            dgrams: u32_at(16),
            index: u32_at(20),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn isoch_header_round_trip() {
        let h = IsochHeader {
            frame_id: 7,
            start_ns: -5,
            dgrams: 30,
            index: 29,
        };
        let mut b = [0u8; 24];
        h.write(&mut b);
        assert_eq!(IsochHeader::read(&b), Some(h));
        assert_eq!(IsochHeader::read(&b[..23]), None);
    }

    /// Features travel as today's strings; a newer peer's unknown name is read, kept
    /// and written back as it came.
    #[test]
    fn features_are_strings_on_the_wire() {
        let names = [
            "udp_seq64",
            "udp_connect_retry",
            "bounceback",
            "trip_times",
            "connect_only",
            "isochronous",
            "working_load",
            "no_offload",
        ];
        let json = serde_json::to_string(&Feature::ALL).unwrap();
        assert_eq!(json, serde_json::to_string(&names).unwrap());
        let a: ExtAnswer = decode_json(
            br#"{"version":2,"accepted":["trip_times","teleport"],"server":"netmeter 9"}"#,
        )
        .unwrap();
        assert_eq!(
            a.accepted,
            vec![Feature::TripTimes, Feature::Unknown("teleport".into())]
        );
        assert!(!a.accepted[1].is_known());
        let back = String::from_utf8(encode_json(&a)[4..].to_vec()).unwrap();
        assert!(
            back.contains(r#""accepted":["trip_times","teleport"]"#),
            "{back}"
        );
    }

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

    #[test]
    fn error_codes_by_name_and_number() {
        for code in -5..1000 {
            assert_eq!(ErrCode::from_i32(code).to_i32(), code);
        }
        assert_eq!(ErrCode::from_i32(132), ErrCode::Affinity);
        assert_eq!(ErrCode::from_i32(9999), ErrCode::Other(9999));
        assert_eq!(
            ErrCode::AccessDenied.describe(),
            "the server is busy running a test; try again later (iperf3 error 121)"
        );
        assert_eq!(
            ErrCode::Other(9999).describe(),
            "unknown error (iperf3 error 9999)"
        );
    }

    #[test]
    fn udp_header_layout() {
        let h = UdpHeader {
            sec: 1,
            usec: 2,
            seq: 0x0102_0304,
        };
        let mut b = [0u8; 16];
        h.write(&mut b, false);
        assert_eq!(&b[..12], &[0, 0, 0, 1, 0, 0, 0, 2, 1, 2, 3, 4]);
        assert_eq!(UdpHeader::read(&b, false).unwrap(), h);
        assert_eq!(
            UdpHeader::read(&b[..11], false),
            Err(WireError::ShortDatagram(11))
        );
    }

    #[test]
    fn tcp_frames_survive_any_split() {
        let mut stream = Vec::new();
        for (i, len) in [16usize, 100, 40_000, 17].iter().enumerate() {
            let mut f = vec![0u8; *len];
            write_tcp_frame_header(&mut f, *len as u32, 1000 + i as i64);
            stream.extend_from_slice(&f);
        }
        for chunk in [1, 7, 16, 999, 100_000] {
            let mut p = TcpFrameParser::default();
            let mut seen = Vec::new();
            for c in stream.chunks(chunk) {
                p.feed(c, |t| seen.push(t));
            }
            assert_eq!(seen, vec![1000, 1001, 1002, 1003], "chunk {chunk}");
        }
        let mut p = TcpFrameParser::default();
        p.feed(&[0u8; 64], |_| panic!("not a frame"));
        assert!(p.broken);
    }

    proptest! {
        #[test]
        fn tcp_frame_parser_never_panics(bytes: Vec<u8>) {
            let mut p = TcpFrameParser::default();
            p.feed(&bytes, |_| {});
        }

        #[test]
        fn udp_header_round_trip(sec: u32, usec: u32, seq: u64, seq64: bool) {
            let h = UdpHeader { sec, usec, seq: if seq64 { seq } else { seq as u32 as u64 } };
            let mut b = [0u8; 16];
            h.write(&mut b, seq64);
            prop_assert_eq!(UdpHeader::read(&b, seq64).unwrap(), h);
        }

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
