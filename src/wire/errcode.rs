//! iperf3's error codes by name: the table of `enum iperf_error_code`, generated
//! with its numbers by one macro so the two cannot drift apart, and the one-line
//! description users see for each.

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

    /// A code only a test whose data streams exist can produce: a stream's connect,
    /// accept, read, write or close, its ID, the receive timeout, the duration limit.
    /// Sent before `CREATE_STREAMS` it is stale: iperf3 3.22 servers keep a stream
    /// thread's error in their global `i_errno` after the test and send it with the next
    /// refusal, where a refused credential sets no code of its own.
    pub fn arises_only_in_a_running_test(self) -> bool {
        matches!(
            self,
            ErrCode::StreamConnect
                | ErrCode::StreamAccept
                | ErrCode::StreamWrite
                | ErrCode::StreamRead
                | ErrCode::StreamClose
                | ErrCode::StreamId
                | ErrCode::NoMsg
                | ErrCode::ServerTestDurationExpired
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn only_data_stream_codes_are_stale_before_the_streams() {
        assert!(ErrCode::StreamRead.arises_only_in_a_running_test());
        assert!(ErrCode::from_i32(205).arises_only_in_a_running_test());
        assert!(ErrCode::NoMsg.arises_only_in_a_running_test());
        // The parameter exchange itself can fail with these: they are never stale.
        assert!(!ErrCode::AuthTest.arises_only_in_a_running_test());
        assert!(!ErrCode::StreamListen.arises_only_in_a_running_test());
        assert!(!ErrCode::AccessDenied.arises_only_in_a_running_test());
        assert!(!ErrCode::None.arises_only_in_a_running_test());
        assert!(!ErrCode::Other(9999).arises_only_in_a_running_test());
    }
}
