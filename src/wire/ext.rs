//! netmeter's extension of the control protocol: the request a netmeter client adds
//! to its parameters (key `netmeter`), the answer a netmeter server sends before
//! `CREATE_STREAMS`, the named features, and the extension modes' parameters and
//! limits (docs/protocol.md, "Extension negotiation").

use crate::latency::{Hist, LatencyStats};
use serde::{Deserialize, Serialize};

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
    ///
    /// [`IsochHeader`]: super::IsochHeader
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
    /// `--ecn-responsive` (feature `ecn_feedback`, UDP): each receiver returns its ECN
    /// counts to the sender once per feedback round on the data socket
    /// ([`super::EcnFeedback`]), and the sender paces at `crate::responsive`'s rate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ecn_feedback: bool,
    /// `--psk-file`: the client's nonce for the pre-shared-key exchange (a server with a
    /// key answers with [`PskChallenge`] after state 0x41).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psk: Option<PskHello>,
    /// A third-party test: run this client test yourself and send back its report
    /// (state 0x42, [`ThirdPartyAnswer`]) instead of testing with me.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub third_party: Option<ThirdPartyRequest>,
    /// Multicast `--receivers`: join this group for the sender's test, answer when
    /// joined (state 0x43, [`JoinAnswer`]) and send the figures at its end (0x43
    /// again), instead of testing with me. docs/protocol.md, "Multicast receivers".
    ///
    /// [`JoinAnswer`]: super::mcast_join::JoinAnswer
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcast_join: Option<super::mcast_join::JoinRequest>,
}

/// The client's half of the pre-shared-key exchange's opening (`crate::auth::psk`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PskHello {
    /// 32 random bytes, hex.
    pub client_nonce: String,
    /// The exchange's version (`auth::psk::VERSION`); absent from version 1 peers.
    #[serde(default)]
    pub version: u32,
}

/// The server's challenge, after state 0x41: its fresh nonce, nothing that depends on
/// the key. A version 1 server (no `version`) sent its proof here.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PskChallenge {
    #[serde(default)]
    pub version: u32,
    pub server_nonce: String,
    /// Version 1 only; read to recognise an older server, never trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_proof: Option<String>,
}

/// The server's proof, after a second state 0x41, sent only once the client's
/// [`PskResponse`] has checked.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PskConfirm {
    pub server_proof: String,
}

/// The client's answer to a [`PskChallenge`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PskResponse {
    pub client_proof: String,
}

/// Most client options a third-party request may carry.
pub const MAX_THIRD_PARTY_ARGS: usize = 64;

/// A third-party request: the server runs `netmeter -c target -p port args...` itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ThirdPartyRequest {
    pub target: String,
    pub port: u16,
    /// Client options as typed (`-t`, `5`, `-R`...), checked by the server against the
    /// options it lets a controller choose.
    #[serde(default)]
    pub args: Vec<String>,
}

impl ThirdPartyRequest {
    /// The fields the client's pre-shared-key proof vouches for, in order.
    pub fn bound_fields(&self) -> Vec<String> {
        let mut f = vec![self.target.clone(), self.port.to_string()];
        f.extend(self.args.iter().cloned());
        f
    }
}

/// The server's answer to a third-party request (after state 0x42): the test's whole
/// report (`-J` document), or why there is none.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ThirdPartyAnswer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The test's server (or this server's test slot) was busy: worth trying again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub busy: bool,
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
///
/// [`State::NetmeterExt`]: super::State::NetmeterExt
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

/// What a netmeter server sends right after `SERVER_ERROR`'s 8-byte trailer to a client
/// that sent an [`ExtRequest`]: the server's own sentence (which limit, and its value),
/// where the iperf3 code alone names only the kind of error (iperf3's code 6 reads
/// "maximum 128" whatever `--max-streams` is). Length-prefixed JSON like every other
/// message, at most [`MAX_NOTE_LEN`] bytes. An iperf3 client never asked, so never sees
/// it; a client reading it from a server that sends none meets the closed connection
/// and keeps the code.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExtNote {
    /// The server's sentence, e.g. "the client asked for 4 data streams and this
    /// server allows at most 2 (--max-streams)".
    pub message: String,
}

/// The largest [`ExtNote`] a client reads.
pub const MAX_NOTE_LEN: u32 = 4096;

impl ExtNote {
    /// The note as a client may print it: at most 300 characters, control characters
    /// (a terminal's escape sequences, line breaks) shown as `\u{..}` escapes.
    pub fn printable(&self) -> String {
        let mut out = String::new();
        for (i, c) in self.message.chars().enumerate() {
            if i == 300 {
                out.push('…');
                break;
            }
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                out.push_str(&c.escape_unicode().to_string());
            } else {
                out.push(c);
            }
        }
        out
    }
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
    /// With `--bidir`, the server's streams send isochronous frames too.
    IsochronousBidir,
    /// Latency under working load ([`ExtRequest::working_load`]).
    WorkingLoad,
    /// `--no-gso` / `--no-gro` for the server's UDP streams.
    NoOffload,
    /// The client's UDP connect datagrams carry the test's cookie
    /// ([`crate::wire::udp_connect_with_cookie`]); the server matches UDP streams by it.
    UdpCookie,
    /// ECN feedback datagrams for `--ecn-responsive` ([`ExtRequest::ecn_feedback`]).
    EcnFeedback,
    /// A feature this netmeter does not know, by its name on the wire.
    Unknown(String),
}

impl Feature {
    /// Every feature netmeter can negotiate today, in the order a client asks for them.
    pub const ALL: [Feature; 11] = [
        Feature::UdpSeq64,
        Feature::UdpConnectRetry,
        Feature::Bounceback,
        Feature::TripTimes,
        Feature::ConnectOnly,
        Feature::Isochronous,
        Feature::WorkingLoad,
        Feature::NoOffload,
        Feature::UdpCookie,
        Feature::IsochronousBidir,
        Feature::EcnFeedback,
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
            Feature::UdpCookie => "udp_cookie",
            Feature::IsochronousBidir => "isochronous_bidir",
            Feature::EcnFeedback => "ecn_feedback",
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

/// A receiving stream's frame summary, sent to the client in the results message
/// (`netmeter_frames`) and shown in `end.netmeter.isochronous.receiver`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct FrameSummary {
    pub frames_complete: u64,
    pub frames_lost: u64,
    /// Jitter of the frame transit times (first datagram sent → last datagram received).
    pub frame_jitter_ms: f64,
    /// `--trip-times`: frame latency (offset-corrected transit), all frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyStats>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_histogram_us: Vec<(f64, u64)>,
}

impl FrameSummary {
    /// Combine several streams (jitter: mean of the streams, as iperf3 sums UDP jitter;
    /// latency histograms merged at bucket resolution).
    pub fn merge(parts: &[FrameSummary]) -> Option<FrameSummary> {
        if parts.is_empty() {
            return None;
        }
        let mut h = Hist::default();
        for p in parts {
            for &(us, n) in &p.latency_histogram_us {
                h.record_n_ns((us * 1e3) as u64, n);
            }
        }
        Some(FrameSummary {
            frames_complete: parts.iter().map(|p| p.frames_complete).sum(),
            frames_lost: parts.iter().map(|p| p.frames_lost).sum(),
            frame_jitter_ms: parts.iter().map(|p| p.frame_jitter_ms).sum::<f64>()
                / parts.len() as f64,
            latency: h.stats(),
            latency_histogram_us: h.buckets_us(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_json, encode_json};

    /// A server's note reaches the client's terminal: escapes and line breaks are shown,
    /// never obeyed, and a long one is cut.
    #[test]
    fn a_note_prints_without_control_characters() {
        let n: ExtNote = decode_json(
            &encode_json(&ExtNote {
                message: "at most 2 (--max-streams)\u{1b}[2J\nforged line\u{2028}".into(),
            })[4..],
        )
        .unwrap();
        let p = n.printable();
        assert!(!p.chars().any(|c| c.is_control()), "{p}");
        assert!(
            p.starts_with("at most 2 (--max-streams)\\u{1b}[2J\\u{a}forged line"),
            "{p}"
        );
        let long = ExtNote {
            message: "x".repeat(1000),
        };
        assert_eq!(long.printable().chars().count(), 301);
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
            "udp_cookie",
            "isochronous_bidir",
            "ecn_feedback",
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
    fn frame_summaries_merge() {
        let a = FrameSummary {
            frames_complete: 10,
            frames_lost: 1,
            frame_jitter_ms: 1.0,
            ..FrameSummary::default()
        };
        let b = FrameSummary {
            frames_complete: 5,
            frames_lost: 0,
            frame_jitter_ms: 3.0,
            ..FrameSummary::default()
        };
        let m = FrameSummary::merge(&[a, b]).unwrap();
        assert_eq!((m.frames_complete, m.frames_lost), (15, 1));
        assert_eq!(m.frame_jitter_ms, 2.0);
        assert!(FrameSummary::merge(&[]).is_none());
    }
}
