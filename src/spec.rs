//! The resolved description of one test, shared by both ends.
//!
//! A `TestSpec` is what the flags (client) or the parameter JSON (server) mean once
//! every default is applied and every range checked. Nothing half-valid gets past
//! [`TestSpec::from_params`]: a bad value from the wire becomes an iperf3 error code that
//! the server sends back, never a panic or an absurd allocation.
//!
//! `TestSpec` and its two wire mappings (`to_params`, `from_params`) stay in one file,
//! with their unit tests, so a new field is added, sent and checked in one place.

use crate::control::Negotiated;
use crate::wire::{self, Bounceback, ErrCode, ExtRequest, Feature, Params, WorkingLoad};

/// Transport of the data streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Tcp,
    Udp,
}

/// Which way data flows, from the client's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client sends (iperf3 default).
    Upload,
    /// Server sends (`-R`).
    Reverse,
    /// Both send at once (`--bidir`).
    Bidir,
}

/// When the client ends the test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EndCondition {
    /// After this many seconds (`-t`); 0 = until interrupted.
    Time(f64),
    /// After this many bytes in a direction (`-n`).
    Bytes(u64),
    /// After this many blocks / datagrams in a direction (`-k`).
    Blocks(u64),
}

/// One test, fully resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct TestSpec {
    pub protocol: Protocol,
    pub direction: Direction,
    pub end: EndCondition,
    /// Streams per direction.
    pub parallel: u32,
    /// TCP write size or UDP datagram size, bytes.
    pub block_len: usize,
    /// Target rate per stream in bits/s; 0 = unlimited.
    pub rate_bps: u64,
    /// Datagrams (or blocks) per pacing tick.
    pub burst: Option<u32>,
    /// Warm-up seconds excluded from the results (`-O`).
    pub omit_s: f64,
    /// Socket buffer size requested with `-w`.
    pub window: Option<u64>,
    /// TCP_MAXSEG (`-M`).
    pub mss: Option<u32>,
    /// TCP_NODELAY on data sockets (`-N`).
    pub nodelay: bool,
    /// IP TOS byte (`-S` / `--dscp`), with `--ecn`'s codepoint in its two low bits.
    pub tos: Option<u8>,
    /// `--ecn ect0|ect1`: the codepoint this side's UDP datagrams carry (already in
    /// `tos`, which is what reaches the socket and the peer); kept for the TCP note and
    /// the reports (docs/ecn.md).
    pub ecn: Option<crate::stats::EcnMark>,
    /// Congestion control (`-C`).
    pub congestion: Option<String>,
    /// SO_MAX_PACING_RATE in bits/s (`--fq-rate`).
    pub fq_rate_bps: Option<u64>,
    pub udp_seq64: bool,
    pub repeating_payload: bool,
    pub zerocopy: bool,
    pub skip_rx_copy: bool,
    pub get_server_output: bool,
    pub title: Option<String>,
    pub extra_data: Option<String>,
    /// Request/response test instead of bulk transfer (netmeter extension).
    pub bounceback: Option<Bounceback>,
    /// CPU the server should pin this test's threads to (`-A n,m`).
    pub server_affinity: Option<u32>,
    /// Measure one-way delays (`--trip-times`, netmeter extension).
    pub trip_times: bool,
    /// Latency under working load (`--working-load`, netmeter extension).
    pub working_load: Option<WorkingLoad>,
    /// TCP connection-rate test instead of bulk transfer (`--connect-only`, netmeter
    /// extension; see `engine::connect`).
    pub connect_only: bool,
    /// Client sending profile (`--burst-size`/`--burst-period`, `--isochronous`; see
    /// `crate::profile`). On the server only a negotiated isochronous UDP profile.
    pub profile: Option<crate::profile::Profile>,
    /// `--no-gso`: the sending side's UDP streams send one datagram per message (no
    /// UDP_SEGMENT). Applies to whichever side sends; a netmeter server gets it in the
    /// extension request.
    pub no_gso: bool,
    /// `--no-gro`: the receiving side's UDP streams read one datagram per message (no
    /// UDP_GRO). Applies to whichever side receives, like `no_gso`.
    pub no_gro: bool,
    /// `--ecn-responsive`: UDP receivers return their ECN counts once per round and
    /// senders pace at the responsive law's rate under `-b` (docs/ecn.md); needs a
    /// netmeter peer (feature `ecn_feedback`).
    pub ecn_responsive: bool,
    /// `--dont-fragment`: IPv4 UDP data sockets on both sides set DF (iperf3's
    /// `dont_fragment` parameter).
    pub dont_fragment: bool,
    /// `-m`: TCP data streams over MPTCP (iperf3's `mptcp` parameter).
    pub mptcp: bool,
    /// `-L`: the IPv6 flow label of the client's data streams (iperf3's `flowlabel`).
    pub flowlabel: Option<u32>,
    /// `--pacing-timer`: iperf3's pacing tick in microseconds (`pacing_timer`, default
    /// 1000). Sent for iperf3 servers that pace by it; netmeter paces without a tick.
    pub pacing_timer_us: u32,
}

impl Default for TestSpec {
    fn default() -> Self {
        TestSpec {
            protocol: Protocol::Tcp,
            direction: Direction::Upload,
            end: EndCondition::Time(10.0),
            parallel: 1,
            block_len: wire::TCP_DEFAULT_BLOCK,
            rate_bps: 0,
            burst: None,
            omit_s: 0.0,
            window: None,
            mss: None,
            nodelay: false,
            tos: None,
            ecn: None,
            congestion: None,
            fq_rate_bps: None,
            udp_seq64: false,
            repeating_payload: false,
            zerocopy: false,
            skip_rx_copy: false,
            get_server_output: false,
            title: None,
            extra_data: None,
            bounceback: None,
            server_affinity: None,
            trip_times: false,
            working_load: None,
            connect_only: false,
            profile: None,
            no_gso: false,
            no_gro: false,
            ecn_responsive: false,
            dont_fragment: false,
            mptcp: false,
            flowlabel: None,
            pacing_timer_us: wire::DEFAULT_PACING_TIMER_US,
        }
    }
}

/// Check bounceback parameters (from flags or from the wire).
pub fn check_bounceback(b: &Bounceback, protocol: Protocol) -> Result<(), SpecError> {
    let min = if protocol == Protocol::Udp { 8 } else { 1 };
    let len_ok = |l: u32| (min..=wire::MAX_BOUNCEBACK_LEN).contains(&l);
    if !len_ok(b.request_len) || !len_ok(b.reply_len) {
        return Err(refuse(
            ErrCode::Unimp,
            format!(
                "bounceback request and reply sizes must be {min} to {} bytes",
                wire::MAX_BOUNCEBACK_LEN
            ),
        ));
    }
    if b.hold_us > wire::MAX_BOUNCEBACK_HOLD_US {
        return Err(refuse(ErrCode::Unimp, "bounceback hold is longer than 1 s"));
    }
    if !(1..=wire::MAX_BOUNCEBACK_BURST).contains(&b.burst) {
        return Err(refuse(
            ErrCode::Unimp,
            format!(
                "bounceback burst must be 1 to {}",
                wire::MAX_BOUNCEBACK_BURST
            ),
        ));
    }
    if b.busy_poll_us > wire::MAX_BUSY_POLL_US {
        return Err(refuse(
            ErrCode::Unimp,
            format!("busy-poll time must be 0 to {} µs", wire::MAX_BUSY_POLL_US),
        ));
    }
    Ok(())
}

/// A parameter the server refuses, with the iperf3 error code it answers with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SpecError {
    pub code: ErrCode,
    pub message: String,
}

fn refuse(code: ErrCode, message: impl Into<String>) -> SpecError {
    SpecError {
        code,
        message: message.into(),
    }
}

/// A JSON number that must be a whole number within `0..=max`.
fn whole(v: f64, max: f64, code: ErrCode, what: &str) -> Result<u64, SpecError> {
    if !v.is_finite() || v < 0.0 || v > max || v.fract() != 0.0 {
        return Err(refuse(code, format!("{what} {v} is out of range")));
    }
    Ok(v as u64)
}

impl TestSpec {
    /// The socket buffer size to set (`-w`): `None` leaves the system's default, as
    /// `-w 0` does in iperf3 (its `socket_bufsize` 0 means "not set").
    pub fn socket_buffer(&self) -> Option<u64> {
        self.window.filter(|&w| w > 0)
    }

    /// Number of data streams the client opens in total.
    pub fn total_streams(&self) -> u32 {
        if let Some(w) = &self.working_load {
            return w.streams * (w.up as u32 + w.down as u32) + 1;
        }
        match self.direction {
            Direction::Bidir => self.parallel * 2,
            _ => self.parallel,
        }
    }

    /// With `--working-load`, the request/response probe is the last stream opened.
    pub fn is_probe(&self, index: u32) -> bool {
        self.working_load.is_some() && index + 1 == self.total_streams()
    }

    /// Which of the client's streams (in creation order, 0-based) the client sends on.
    pub fn client_sends(&self, index: u32) -> bool {
        if let Some(w) = &self.working_load {
            // Upload bulk streams first, then download ones, then the probe (client-driven).
            let ups = if w.up { w.streams } else { 0 };
            let downs = if w.down { w.streams } else { 0 };
            return index < ups || index >= ups + downs;
        }
        match self.direction {
            Direction::Upload => true,
            Direction::Reverse => false,
            Direction::Bidir => index < self.parallel,
        }
    }

    /// The parameter JSON a client sends for this test.
    pub fn to_params(&self, ext: Option<ExtRequest>) -> Params {
        let (time, num, blockcount) = match self.end {
            EndCondition::Time(t) => (t, 0.0, 0.0),
            EndCondition::Bytes(n) => (0.0, n as f64, 0.0),
            EndCondition::Blocks(k) => (0.0, 0.0, k as f64),
        };
        let flag = |b: bool| if b { Some(1.0) } else { None };
        Params {
            tcp: (self.protocol == Protocol::Tcp).then_some(true),
            udp: (self.protocol == Protocol::Udp).then_some(true),
            sctp: None,
            omit: self.omit_s,
            server_affinity: self.server_affinity.map(f64::from),
            time,
            num,
            blockcount,
            mss: self.mss.map(f64::from),
            nodelay: self.nodelay.then_some(true),
            parallel: self.parallel as f64,
            reverse: (self.direction == Direction::Reverse).then_some(true),
            bidirectional: (self.direction == Direction::Bidir).then_some(true),
            window: self.window.map(|w| w as f64),
            len: Some(self.block_len as f64),
            bandwidth: (self.rate_bps > 0).then_some(self.rate_bps as f64),
            fqrate: self.fq_rate_bps.map(|r| r as f64),
            // iperf3 sends it only when set (0 = none).
            pacing_timer: (self.pacing_timer_us > 0).then_some(self.pacing_timer_us as f64),
            burst: self.burst.map(f64::from),
            tos: self.tos.map(f64::from),
            flowlabel: self.flowlabel.map(f64::from),
            title: self.title.clone(),
            extra_data: self.extra_data.clone(),
            congestion: self.congestion.clone(),
            congestion_used: None,
            get_server_output: flag(self.get_server_output),
            udp_counters_64bit: flag(self.udp_seq64),
            repeating_payload: flag(self.repeating_payload),
            zerocopy: flag(self.zerocopy),
            skip_rx_copy: flag(self.skip_rx_copy),
            dont_fragment: flag(self.dont_fragment),
            mptcp: self.mptcp.then_some(true),
            authtoken: None,
            client_version: Some(format!("netmeter {}", env!("CARGO_PKG_VERSION"))),
            netmeter: ext,
        }
    }

    /// A server's own limits on what a client may ask, checked when the parameters
    /// arrive, as iperf3 3.22 does: `--server-max-duration` refuses `-t` plus `-O`
    /// above the maximum, and any test without a duration (`-t 0`, `-n`, `-k`), with
    /// `IEMAXSERVERTESTDURATIONEXCEEDED`; `--server-bitrate-limit` refuses a requested
    /// total (`-b` or `--fq-rate` × streams, × 2 with `--bidir`) above the limit with
    /// `IETOTALRATE`.
    pub fn server_limits_refusal(
        &self,
        max_duration_s: Option<u64>,
        bitrate_limit_bps: Option<u64>,
    ) -> Option<SpecError> {
        if let Some(max) = max_duration_s.filter(|&m| m > 0) {
            // Compared exactly: iperf3's own client sends whole seconds, but a netmeter
            // client's `-t 2.99` is 2.99 s, which a 2 s limit must refuse.
            let t = match self.end {
                EndCondition::Time(t) if t.is_finite() => t.max(0.0),
                _ => 0.0,
            };
            let asked = t + self.omit_s.max(0.0);
            if t == 0.0 || !asked.is_finite() || asked > max as f64 {
                return Some(refuse(
                    ErrCode::MaxServerTestDurationExceeded,
                    format!(
                        "the client asked for {} and this server allows at most {max} s (--server-max-duration)",
                        match self.end {
                            EndCondition::Time(_) if t > 0.0 => format!("{asked} s"),
                            _ => "a test without a time limit".into(),
                        }
                    ),
                ));
            }
        }
        if let Some(limit) = bitrate_limit_bps.filter(|&l| l > 0) {
            let streams = self.parallel as u64
                * if self.direction == Direction::Bidir {
                    2
                } else {
                    1
                };
            for asked in [self.rate_bps, self.fq_rate_bps.unwrap_or(0)] {
                let total = asked.saturating_mul(streams);
                if total > limit {
                    return Some(refuse(
                        ErrCode::TotalRate,
                        format!(
                            "the client asked for {total} bit/s in total and this server allows at most {limit} bit/s (--server-bitrate-limit)"
                        ),
                    ));
                }
            }
        }
        None
    }

    /// `-t 0`: the test runs until it is interrupted (iperf3's meaning; `time: 0` on the
    /// wire). No deadline derived from the duration applies to it.
    pub fn until_interrupted(&self) -> bool {
        matches!(self.end, EndCondition::Time(t) if t <= 0.0)
    }

    /// The extension request a netmeter client sends for this test. It asks only for
    /// what the test uses (and for the features every test uses), so the answer lists
    /// exactly what runs.
    pub fn ext_request(&self) -> ExtRequest {
        let isoch = self
            .profile
            .and_then(|p| p.isochronous())
            .filter(|_| self.protocol == Protocol::Udp);
        ExtRequest {
            working_load: self.working_load,
            bounceback: self.bounceback,
            trip_times: self.trip_times,
            connect_only: self.connect_only,
            no_gso: self.no_gso,
            no_gro: self.no_gro,
            ecn_feedback: self.ecn_responsive,
            isochronous: isoch,
            // Set by the engine (`--psk-file`, third-party requests), not by the test.
            psk: None,
            third_party: None,
            mcast_join: None,
            version: wire::EXT_VERSION,
            features: Feature::ALL
                .into_iter()
                .filter(|f| match f {
                    Feature::Bounceback => self.bounceback.is_some(),
                    Feature::TripTimes => self.trip_times,
                    Feature::WorkingLoad => self.working_load.is_some(),
                    Feature::ConnectOnly => self.connect_only,
                    Feature::Isochronous => isoch.is_some(),
                    Feature::NoOffload => {
                        self.protocol == Protocol::Udp && (self.no_gso || self.no_gro)
                    }
                    Feature::UdpCookie => self.protocol == Protocol::Udp,
                    Feature::IsochronousBidir => {
                        isoch.is_some() && self.direction == Direction::Bidir
                    }
                    Feature::EcnFeedback => self.ecn_responsive,
                    _ => true,
                })
                .collect(),
        }
    }

    /// The first option of this test that cannot run without a feature the peer did
    /// not agree to (the client then stops: "`--trip-times` needs a netmeter server").
    pub fn unmet_need(&self, n: &Negotiated) -> Option<&'static str> {
        let needs = [
            (
                self.working_load.is_some(),
                Feature::WorkingLoad,
                "--working-load",
            ),
            (self.trip_times, Feature::TripTimes, "--trip-times"),
            (
                self.bounceback.is_some(),
                Feature::Bounceback,
                "--bounceback",
            ),
            (self.connect_only, Feature::ConnectOnly, "--connect-only"),
            (
                self.ecn_responsive,
                Feature::EcnFeedback,
                "--ecn-responsive",
            ),
        ];
        needs
            .into_iter()
            .find(|(wanted, f, _)| *wanted && !n.has(f.clone()))
            .map(|(_, _, flag)| flag)
    }

    /// The test both ends run, given what they agreed on. Derived once after the
    /// negotiation and not changed afterwards: 64-bit UDP sequence numbers when
    /// negotiated; one-way delays only when agreed (a server drops them otherwise, a
    /// client stops first, see [`Self::unmet_need`]); isochronous datagrams carry frame
    /// headers only when the server counts frames.
    pub fn negotiated(&self, n: &Negotiated) -> TestSpec {
        let mut s = self.clone();
        if s.protocol == Protocol::Udp && n.has(Feature::UdpSeq64) {
            s.udp_seq64 = true;
        }
        s.trip_times = s.trip_times && n.has(Feature::TripTimes);
        s.ecn_responsive = s.ecn_responsive && n.has(Feature::EcnFeedback);
        let bidir = s.direction == Direction::Bidir;
        if let Some(crate::profile::Profile::Isochronous {
            framed, both_ways, ..
        }) = s.profile.as_mut()
        {
            *framed = n.has(Feature::Isochronous);
            *both_ways = *framed && bidir && n.has(Feature::IsochronousBidir);
        }
        s
    }

    /// Resolve a client's parameter JSON on the server, with iperf3's range checks.
    pub fn from_params(p: &Params) -> Result<TestSpec, SpecError> {
        let protocol = match (p.tcp.is_some(), p.udp.is_some(), p.sctp.is_some()) {
            (_, false, false) => Protocol::Tcp,
            (false, true, false) => Protocol::Udp,
            (_, _, true) => return Err(refuse(ErrCode::Unimp, "SCTP is not supported")),
            _ => return Err(refuse(ErrCode::Unimp, "both TCP and UDP were requested")),
        };
        let direction = match (p.reverse.is_some(), p.bidirectional.is_some()) {
            (false, false) => Direction::Upload,
            (true, false) => Direction::Reverse,
            (false, true) => Direction::Bidir,
            (true, true) => return Err(refuse(ErrCode::ReverseBidir, "reverse and bidir")),
        };
        let end = end_of(p)?;
        let parallel = whole(
            p.parallel.max(1.0),
            wire::MAX_STREAMS as f64,
            ErrCode::NumStreams,
            "parallel",
        )? as u32;
        let block_len = block_len_of(protocol, p.len)?;
        let omit = p.omit;
        if !omit.is_finite() || omit < 0.0 || omit > wire::MAX_OMIT as f64 {
            return Err(refuse(ErrCode::Omit, "bad omit"));
        }
        let window = p
            .window
            .map(|w| whole(w, wire::MAX_WINDOW as f64, ErrCode::BufSize, "window"))
            .transpose()?;
        let mss = p
            .mss
            .map(|m| whole(m, wire::MAX_MSS as f64, ErrCode::Mss, "MSS").map(|m| m as u32))
            .transpose()?;
        let rate_bps = p
            .bandwidth
            .map(|b| whole(b.floor(), u64::MAX as f64, ErrCode::Duration, "bandwidth"))
            .transpose()?
            .unwrap_or(0);
        let burst = p
            .burst
            .map(|b| whole(b, wire::MAX_BURST as f64, ErrCode::Burst, "burst").map(|b| b as u32))
            .transpose()?
            .filter(|&b| b > 0);
        let tos = p
            .tos
            .map(|t| whole(t, 255.0, ErrCode::BadTos, "TOS").map(|t| t as u8))
            .transpose()?;
        let fq_rate_bps = p
            .fqrate
            .map(|r| whole(r.floor(), u64::MAX as f64, ErrCode::Duration, "fqrate"))
            .transpose()?
            .filter(|&r| r > 0);
        let Extensions {
            bounceback,
            connect_only,
            profile,
            working_load,
        } = extensions_of(p, protocol, direction, end)?;
        let on = |v: Option<f64>| v.is_some_and(|x| x != 0.0);
        // Strings from the wire are shown to the server's operator: keep them short.
        let short = |s: &Option<String>| s.as_ref().map(|s| s.chars().take(1024).collect());
        Ok(TestSpec {
            protocol,
            direction,
            end,
            parallel,
            block_len,
            rate_bps,
            burst,
            omit_s: omit,
            window,
            mss,
            nodelay: p.nodelay.is_some(),
            tos,
            // The codepoint reaches the server inside `tos`.
            ecn: None,
            congestion: short(&p.congestion),
            fq_rate_bps,
            udp_seq64: on(p.udp_counters_64bit),
            repeating_payload: on(p.repeating_payload),
            zerocopy: on(p.zerocopy),
            skip_rx_copy: on(p.skip_rx_copy),
            get_server_output: on(p.get_server_output),
            title: short(&p.title),
            extra_data: short(&p.extra_data),
            bounceback,
            trip_times: p.netmeter.as_ref().is_some_and(|n| n.trip_times),
            working_load,
            connect_only,
            profile,
            // iperf3 accepts 0..1024; a CPU that does not exist fails when applied.
            server_affinity: p
                .server_affinity
                .map(|a| whole(a, 1024.0, ErrCode::Unimp, "server_affinity").map(|a| a as u32))
                .transpose()?,
            no_gso: p.netmeter.as_ref().is_some_and(|n| n.no_gso),
            no_gro: p.netmeter.as_ref().is_some_and(|n| n.no_gro),
            ecn_responsive: p.netmeter.as_ref().is_some_and(|n| n.ecn_feedback)
                && protocol == Protocol::Udp,
            dont_fragment: p.dont_fragment.is_some_and(|v| v != 0.0),
            mptcp: p.mptcp == Some(true),
            // iperf3 takes 1..=0xfffff; anything else is as if none was asked.
            flowlabel: p
                .flowlabel
                .filter(|&l| {
                    l.fract() == 0.0 && (1.0..=f64::from(wire::MAX_FLOWLABEL)).contains(&l)
                })
                .map(|l| l as u32),
            pacing_timer_us: p
                .pacing_timer
                .filter(|&t| t.fract() == 0.0 && (1.0..=f64::from(u32::MAX)).contains(&t))
                .map_or(wire::DEFAULT_PACING_TIMER_US, |t| t as u32),
        })
    }
}

/// `time`, `num` (`-n`) and `blockcount` (`-k`): what ends the test, as iperf3 reads them.
fn end_of(p: &Params) -> Result<EndCondition, SpecError> {
    // Range-checked even when bytes or blocks end the test, as iperf3 does.
    whole(
        p.time.floor(),
        wire::MAX_TIME as f64,
        ErrCode::Duration,
        "time",
    )?;
    let num = whole(p.num, u64::MAX as f64, ErrCode::Duration, "bytes")?;
    let blocks = whole(p.blockcount, u64::MAX as f64, ErrCode::Duration, "blocks")?;
    Ok(if num > 0 {
        EndCondition::Bytes(num)
    } else if blocks > 0 {
        EndCondition::Blocks(blocks)
    } else {
        if !p.time.is_finite() || p.time < 0.0 {
            return Err(refuse(ErrCode::Duration, "bad time"));
        }
        EndCondition::Time(p.time)
    })
}

/// `len`: the block (TCP) or datagram (UDP) size, iperf3's defaults when absent.
fn block_len_of(protocol: Protocol, len: Option<f64>) -> Result<usize, SpecError> {
    Ok(match (protocol, len) {
        (Protocol::Tcp, None) => wire::TCP_DEFAULT_BLOCK,
        (Protocol::Udp, None) => wire::UDP_DEFAULT_LEN,
        (Protocol::Tcp, Some(l)) => {
            whole(l, wire::TCP_MAX_BLOCK as f64, ErrCode::BlockSize, "len")?.max(1) as usize
        }
        (Protocol::Udp, Some(l)) => {
            let l = whole(l, wire::UDP_MAX_LEN as f64, ErrCode::UdpBlockSize, "len")?;
            if (l as usize) < wire::UDP_MIN_LEN {
                return Err(refuse(ErrCode::UdpBlockSize, "UDP length below 16"));
            }
            l as usize
        }
    })
}

/// The test modes a netmeter client asks for in `netmeter` of the parameters.
struct Extensions {
    bounceback: Option<Bounceback>,
    connect_only: bool,
    profile: Option<crate::profile::Profile>,
    working_load: Option<WorkingLoad>,
}

/// Read and check the extension modes against the rest of the test: each runs only
/// in the combinations netmeter serves (refused with `Unimp` otherwise).
fn extensions_of(
    p: &Params,
    protocol: Protocol,
    direction: Direction,
    end: EndCondition,
) -> Result<Extensions, SpecError> {
    let bounceback = p.netmeter.as_ref().and_then(|n| n.bounceback);
    if let Some(b) = &bounceback {
        check_bounceback(b, protocol)?;
        if direction != Direction::Upload {
            return Err(refuse(
                ErrCode::Unimp,
                "bounceback runs client to server only",
            ));
        }
    }
    let connect_only = p.netmeter.as_ref().is_some_and(|n| n.connect_only);
    if connect_only
        && (protocol != Protocol::Tcp
            || direction != Direction::Upload
            || !matches!(end, EndCondition::Time(_))
            || bounceback.is_some())
    {
        return Err(refuse(
            ErrCode::Unimp,
            "connect-only tests are TCP, client to server, timed, without bounceback",
        ));
    }
    // Isochronous frames the server counts: UDP, client to server, negotiated.
    let profile = match p.netmeter.as_ref() {
        Some(n) if n.features.contains(&Feature::Isochronous) => match n.isochronous {
            Some(iso) => {
                crate::profile::check_isochronous(&iso).map_err(|e| refuse(ErrCode::Unimp, e))?;
                if protocol != Protocol::Udp
                    || direction == Direction::Reverse
                    || bounceback.is_some()
                {
                    return Err(refuse(
                        ErrCode::Unimp,
                        "isochronous frames are UDP, sent by the client",
                    ));
                }
                // With --bidir our streams send frames too when the client asked
                // (an older netmeter client expects a bulk reverse half).
                Some(crate::profile::Profile::Isochronous {
                    params: iso,
                    framed: true,
                    both_ways: direction == Direction::Bidir
                        && n.features.contains(&Feature::IsochronousBidir),
                })
            }
            None => None,
        },
        _ => None,
    };
    let working_load = match p.netmeter.as_ref().and_then(|n| n.working_load) {
        Some(w) => {
            if protocol != Protocol::Tcp
                || bounceback.is_none()
                || !(w.up || w.down)
                || !(1..=wire::MAX_STREAMS / 2).contains(&w.streams)
                || w.idle_ms > 60_000
            {
                return Err(refuse(ErrCode::Unimp, "invalid working-load parameters"));
            }
            Some(w)
        }
        None => None,
    };
    Ok(Extensions {
        bounceback,
        connect_only,
        profile,
        working_load,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_round_trip_through_spec() {
        let spec = TestSpec {
            protocol: Protocol::Udp,
            direction: Direction::Bidir,
            end: EndCondition::Bytes(1 << 20),
            parallel: 4,
            block_len: 1448,
            rate_bps: 10_000_000,
            burst: Some(8),
            udp_seq64: true,
            title: Some("t".into()),
            dont_fragment: true,
            flowlabel: Some(0xfffff),
            pacing_timer_us: 5000,
            ..TestSpec::default()
        };
        let back = TestSpec::from_params(&spec.to_params(None)).unwrap();
        assert_eq!(back, spec);
        let mptcp = TestSpec {
            mptcp: true,
            ..TestSpec::default()
        };
        let p = mptcp.to_params(None);
        assert_eq!(p.mptcp, Some(true));
        assert_eq!(TestSpec::from_params(&p).unwrap(), mptcp);
    }

    #[test]
    fn refuses_out_of_range_values() {
        let base = TestSpec::default().to_params(None);
        let cases: Vec<(Params, ErrCode)> = vec![
            (
                Params {
                    parallel: 129.0,
                    ..base.clone()
                },
                ErrCode::NumStreams,
            ),
            (
                Params {
                    len: Some(2e6),
                    ..base.clone()
                },
                ErrCode::BlockSize,
            ),
            (
                Params {
                    time: 1e9,
                    ..base.clone()
                },
                ErrCode::Duration,
            ),
            (
                Params {
                    window: Some(-1.0),
                    ..base.clone()
                },
                ErrCode::BufSize,
            ),
            (
                Params {
                    reverse: Some(true),
                    bidirectional: Some(true),
                    ..base.clone()
                },
                ErrCode::ReverseBidir,
            ),
            (
                Params {
                    omit: f64::NAN,
                    ..base.clone()
                },
                ErrCode::Omit,
            ),
            (
                Params {
                    udp: Some(true),
                    tcp: None,
                    len: Some(8.0),
                    ..base.clone()
                },
                ErrCode::UdpBlockSize,
            ),
        ];
        for (p, code) in cases {
            assert_eq!(TestSpec::from_params(&p).unwrap_err().code, code, "{p:?}");
        }
    }

    #[test]
    fn no_gso_and_no_gro_travel_in_the_extension_request() {
        let mut p = TestSpec::default().to_params(Some(ExtRequest {
            version: wire::EXT_VERSION,
            features: vec![Feature::NoOffload],
            no_gso: true,
            ..ExtRequest::default()
        }));
        let json = serde_json::to_string(&p).unwrap();
        assert!(
            json.contains(r#""no_gso":true"#) && !json.contains("no_gro"),
            "{json}"
        );
        let back: Params = serde_json::from_str(&json).unwrap();
        let s = TestSpec::from_params(&back).unwrap();
        assert!(s.no_gso && !s.no_gro);
        // From an iperf3 client (no extension key) both offloads stay allowed.
        p.netmeter = None;
        let s = TestSpec::from_params(&p).unwrap();
        assert!(!s.no_gso && !s.no_gro);
    }

    /// The negotiated value a client gets from an answer accepting `accepted` of what
    /// `spec` asks for.
    fn agreed(spec: &TestSpec, accepted: Vec<Feature>) -> Negotiated {
        let req = spec.ext_request();
        let mut m = crate::control::ClientMachine::new(Some(&req));
        m.on_ext_answer(&wire::ExtAnswer {
            version: wire::EXT_VERSION,
            accepted,
            server: String::new(),
        })
        .clone()
    }

    #[test]
    fn the_request_asks_only_for_what_the_test_uses() {
        let tcp = TestSpec::default().ext_request();
        assert_eq!(
            tcp.features,
            vec![Feature::UdpSeq64, Feature::UdpConnectRetry]
        );
        let udp = TestSpec {
            protocol: Protocol::Udp,
            trip_times: true,
            no_gro: true,
            ..TestSpec::default()
        }
        .ext_request();
        assert_eq!(
            udp.features,
            vec![
                Feature::UdpSeq64,
                Feature::UdpConnectRetry,
                Feature::TripTimes,
                Feature::NoOffload,
                Feature::UdpCookie
            ]
        );
        assert!(udp.trip_times && udp.no_gro);
    }

    #[test]
    fn negotiation_derives_the_effective_test_without_touching_the_asked_one() {
        let asked = TestSpec {
            protocol: Protocol::Udp,
            trip_times: true,
            ..TestSpec::default()
        };
        let n = agreed(&asked, vec![Feature::UdpSeq64, Feature::TripTimes]);
        let eff = asked.negotiated(&n);
        assert!(eff.udp_seq64 && eff.trip_times);
        assert!(!asked.udp_seq64);
        assert_eq!(asked.unmet_need(&n), None);
        // An iperf3 server: no 64-bit counters, and --trip-times cannot run.
        let iperf3 = crate::control::ClientMachine::new(Some(&asked.ext_request()));
        let n = iperf3.negotiated();
        assert!(!asked.negotiated(n).udp_seq64);
        assert_eq!(asked.unmet_need(n), Some("--trip-times"));
        // TCP never switches to 64-bit UDP counters.
        let tcp = TestSpec::default();
        assert!(
            !tcp.negotiated(&agreed(&tcp, vec![Feature::UdpSeq64]))
                .udp_seq64
        );
    }

    #[test]
    fn unmet_needs_are_checked_in_a_fixed_order() {
        let bb = Bounceback {
            request_len: 1,
            reply_len: 1,
            hold_us: 0,
            burst: 1,
            busy_poll_us: 0,
        };
        let spec = TestSpec {
            bounceback: Some(bb),
            connect_only: true,
            ..TestSpec::default()
        };
        assert_eq!(
            spec.unmet_need(&agreed(&spec, vec![])),
            Some("--bounceback")
        );
        assert_eq!(
            spec.unmet_need(&agreed(&spec, vec![Feature::Bounceback])),
            Some("--connect-only")
        );
    }

    #[test]
    fn isochronous_frames_are_framed_only_when_negotiated() {
        let iso = wire::Isochronous {
            fps: 60,
            mean_bps: 20_000_000,
            stdev_bps: 0,
        };
        let asked = TestSpec {
            protocol: Protocol::Udp,
            profile: Some(crate::profile::Profile::Isochronous {
                params: iso,
                framed: false,
                both_ways: false,
            }),
            ..TestSpec::default()
        };
        assert_eq!(asked.ext_request().isochronous, Some(iso));
        assert!(
            !asked
                .ext_request()
                .features
                .contains(&Feature::IsochronousBidir)
        );
        let yes = asked.negotiated(&agreed(&asked, vec![Feature::Isochronous]));
        assert!(yes.profile.is_some_and(|p| p.framed() && !p.both_ways()));
        let no = asked.negotiated(&agreed(&asked, vec![]));
        assert!(!no.profile.is_some_and(|p| p.framed()));
        // --bidir: the server's half sends frames only when it agreed.
        let bidir = TestSpec {
            direction: Direction::Bidir,
            block_len: 1400,
            ..asked
        };
        let req = bidir.ext_request();
        assert!(req.features.contains(&Feature::IsochronousBidir));
        let both = [Feature::Isochronous, Feature::IsochronousBidir];
        let agreed_both = bidir.negotiated(&agreed(&bidir, both.to_vec()));
        assert!(agreed_both.profile.is_some_and(|p| p.both_ways()));
        let older = bidir.negotiated(&agreed(&bidir, vec![Feature::Isochronous]));
        assert!(older.profile.is_some_and(|p| p.framed() && !p.both_ways()));
        // The server learns it from the parameters.
        let on_server = TestSpec::from_params(&bidir.to_params(Some(req))).unwrap();
        assert!(on_server.profile.is_some_and(|p| p.both_ways()));
    }

    #[test]
    fn stream_roles_follow_iperf3_order() {
        let s = TestSpec {
            direction: Direction::Bidir,
            parallel: 2,
            ..TestSpec::default()
        };
        assert_eq!(s.total_streams(), 4);
        let roles: Vec<bool> = (0..4).map(|i| s.client_sends(i)).collect();
        assert_eq!(roles, vec![true, true, false, false]);
    }

    #[test]
    fn server_limits_refuse_as_iperf3_does() {
        let t = |secs: f64, omit: f64| TestSpec {
            end: EndCondition::Time(secs),
            omit_s: omit,
            ..TestSpec::default()
        };
        let code = |s: &TestSpec, d: Option<u64>, r: Option<u64>| {
            s.server_limits_refusal(d, r).map(|e| e.code)
        };
        let over = Some(ErrCode::MaxServerTestDurationExceeded);
        assert_eq!(code(&t(5.0, 0.0), Some(5), None), None);
        assert_eq!(code(&t(5.9, 0.0), Some(5), None), over, "exactly");
        assert_eq!(code(&t(4.5, 0.5), Some(5), None), None, "-O counts exactly");
        assert_eq!(code(&t(4.5, 0.6), Some(5), None), over);
        assert_eq!(code(&t(6.0, 0.0), Some(5), None), over);
        assert_eq!(code(&t(4.0, 2.0), Some(5), None), over, "-O counts");
        assert_eq!(code(&t(0.0, 0.0), Some(5), None), over, "-t 0 never ends");
        let bytes = TestSpec {
            end: EndCondition::Bytes(1000),
            ..TestSpec::default()
        };
        assert_eq!(code(&bytes, Some(5), None), over, "-n has no duration");
        assert_eq!(code(&t(100.0, 0.0), Some(0), None), None, "0 = no limit");
        let rate = |bps: u64, parallel: u32, direction: Direction| TestSpec {
            rate_bps: bps,
            parallel,
            direction,
            ..TestSpec::default()
        };
        let total = Some(ErrCode::TotalRate);
        assert_eq!(code(&rate(10, 2, Direction::Upload), None, Some(20)), None);
        assert_eq!(code(&rate(11, 2, Direction::Upload), None, Some(20)), total);
        assert_eq!(code(&rate(10, 2, Direction::Bidir), None, Some(20)), total);
        assert_eq!(
            code(&rate(0, 2, Direction::Upload), None, Some(20)),
            None,
            "unpaced TCP is judged while it runs"
        );
        let fq = TestSpec {
            fq_rate_bps: Some(30),
            ..TestSpec::default()
        };
        assert_eq!(code(&fq, None, Some(20)), total);
    }
}
