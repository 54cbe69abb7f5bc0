//! iperf 2's bytes as an iperf 2 *client* sends and reads them: the test header that
//! opens a TCP connection and rides in every UDP datagram, the UDP datagram's sequence
//! number and send time, and the server report datagram that answers a UDP test's FIN.
//!
//! iperf 2 has no control connection: the test's settings travel with the data
//! ("test information passed in every packet per being stateless", `Settings.cpp`
//! `Settings_GenerateClientHdr`). All fields are big-endian. Layouts from iperf 2.1.8 and
//! 2.2.1 `include/payloads.h`; the header netmeter sends is 2.1.8's (a 36-byte
//! `client_hdrext`), which 2.2.1 servers read too: the header's length travels in its
//! flags. The one exception is UDP `--isochronous`: the frame fields sit where each
//! version's server reads them ([`IsochLayout`]). Bytes checked against what the real
//! 2.1.8 and 2.2.1 clients send (tests below and `iperf2_tests.rs`).

/// `client_hdrext.upperflags`: an isochronous test (the header grows by the frame
/// fields' enclave); the other upper flags are in `wire::iperf2`.
pub const UPPER_ISOCH: u16 = 0x0001;
/// `client_hdr_v1.flags`: a `client_hdrext` follows the base header.
pub const HEADER_EXTEND: u32 = 0x4000_0000;
/// `client_hdr_v1.flags`: UDP sequence numbers are 64 bits (`id` low, `id2` high).
pub const HEADER_SEQNO64B: u32 = 0x0800_0000;
/// `client_hdr_v1.flags`: the header's length is in `HEADER_LEN_MASK`.
pub const HEADER_LEN_BIT: u32 = 0x0001_0000;
/// `client_hdr_v1.flags`: the header's length, shifted left by one.
pub const HEADER_LEN_MASK: u32 = 0x0000_01FE;
/// `server_hdr_v1.flags`: the report carries `server_hdr_extension` (transit times).
pub const SERVER_HEADER_EXTEND: u32 = 0x4000_0000;
/// `client_hdr_ack.typelen.type`: CLIENTHDRACK (`enum MsgType`), a header
/// acknowledgement a server may send before its report; the client drops it.
pub const CLIENTHDRACK: u32 = 2;

/// `struct UDP_datagram`: `id`, `tv_sec`, `tv_usec`, `id2`.
pub const UDP_DATAGRAM_LEN: usize = 16;
/// `struct client_hdr_v1`: flags, numThreads, mPort, mBufLen, mWinBand, mAmount.
pub const CLIENT_HDR_V1_LEN: usize = 24;
/// `struct client_hdrext` as iperf 2.1.8 lays it out.
pub const CLIENT_HDREXT_LEN: usize = 36;
/// The TCP test header netmeter sends: base and extension.
pub const TCP_HDR_LEN: usize = CLIENT_HDR_V1_LEN + CLIENT_HDREXT_LEN;
/// The UDP test header netmeter sends, from the datagram's first byte.
pub const UDP_HDR_LEN: usize = UDP_DATAGRAM_LEN + CLIENT_HDR_V1_LEN + CLIENT_HDREXT_LEN;
/// `struct server_hdr`: base (40), extension (60), 64-bit counts (12).
pub const SERVER_HDR_LEN: usize = 40 + 60 + 12;
/// The server report datagram: a `UDP_datagram` then the `server_hdr`.
pub const SERVER_REPORT_LEN: usize = UDP_DATAGRAM_LEN + SERVER_HDR_LEN;
/// The smallest server report an old server sends: the datagram and `server_hdr_v1`.
pub const SERVER_REPORT_MIN_LEN: usize = UDP_DATAGRAM_LEN + 40;
/// `struct client_hdrext_starttime_fq` (2.1.8): reserved, start sec/usec, fq rate.
pub const START_FQ_LEN: usize = 20;
/// `struct isoch_payload`: in a UDP header between the extension and the start time.
pub const ISOCH_PAYLOAD_LEN: usize = 32;

/// Where a UDP datagram carries the isochronous frame fields (`struct isoch_payload`).
/// iperf 2.2 grew `client_hdrext` by a word (`barrier_usecs`, 2.1.8's reserved first
/// word of `client_hdrext_starttime_fq` moved there), which moved the enclave 4 bytes
/// on while the start time stayed at byte 112. Each server reads the enclave at its own
/// `struct client_udp_testhdr` offset whatever the client is (`Server::
/// udp_isoch_processing`), so a 2.2.1 server counts no frames of a 2.1.8 client and
/// the other way round; no layout serves both (the frame ids would have to be the
/// sizes). A UDP server answers nothing before the data, so a client cannot learn the
/// server's version: it is chosen (`--iperf2-version`, 2.2 unless told).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsochLayout {
    /// iperf 2.0.x and 2.1.x: the enclave at byte 76, right after the 36-byte extension.
    Iperf21,
    /// iperf 2.2.x: the enclave at byte 80, after the 40-byte extension.
    #[default]
    Iperf22,
}

impl IsochLayout {
    /// The enclave's first byte in a datagram.
    pub fn at(self) -> usize {
        match self {
            IsochLayout::Iperf21 => UDP_HDR_LEN,
            IsochLayout::Iperf22 => UDP_HDR_LEN + 4,
        }
    }

    /// The least an isochronous datagram holds for this layout's server to read its
    /// frame fields (a shorter one it counts as no frame's).
    pub fn min_len(self) -> usize {
        self.at() + ISOCH_PAYLOAD_LEN
    }

    /// The version a header laid out so names: a 2.2 server and netmeter's read the
    /// layout from it.
    fn version_words(self) -> (u32, u32) {
        match self {
            IsochLayout::Iperf21 => (VERSION_U, VERSION_L),
            IsochLayout::Iperf22 => (VERSION22_U, VERSION22_L),
        }
    }
}
/// A UDP test header with a start time, from the datagram's first byte (iperf 2's
/// `MINTRIPTIMEPLAYOAD`): the smallest datagram of a `--trip-times` UDP test.
pub const UDP_START_HDR_LEN: usize = UDP_HDR_LEN + ISOCH_PAYLOAD_LEN + START_FQ_LEN;
/// `client_hdr_ack` without its timestamps (a header acknowledgement).
pub const HDR_ACK_LEN: usize = 28;

/// The version netmeter's header names: iperf 2.1.8 final
/// (`IPERF_VERSION_MAJORHEX`/`MINORHEX`: major << 16 | minor, patch << 16 | kind,
/// kind 3 = final), the older of the two servers this was checked against.
pub const VERSION_U: u32 = 0x0002_0001;
pub const VERSION_L: u32 = 0x0008_0003;
/// The version a UDP `--isochronous` header in 2.2's layout names: iperf 2.2.1 final.
pub const VERSION22_U: u32 = 0x0002_0002;
pub const VERSION22_L: u32 = 0x0001_0003;

/// `mAmount`: how a test ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// `-t`: hundredths of a second (sent negated).
    TimeCentis(u32),
    /// `-n`: bytes (31 bits on the wire, as iperf 2 masks them).
    Bytes(u64),
}

/// The test as an iperf 2 client announces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHdr {
    pub udp: bool,
    /// `numThreads`: the client's parallel streams (`-P`).
    pub threads: u32,
    /// `mPort`: the server's port.
    pub port: u16,
    /// `mBufLen`: `-l` when given (0: not given).
    pub buf_len: u32,
    pub amount: Amount,
    /// `lRate`/`uRate`: the sender's `-b`, bits per second (0: none).
    pub rate_bps: u64,
    pub tos: u8,
    /// More `client_hdr_v1.flags` (`wire::iperf2::HEADER_VERSION2` with `-R` and
    /// `--full-duplex`, as iperf 2's client sets it).
    pub flags: u32,
    /// `client_hdrext.upperflags` (`wire::iperf2::UPPER_REVERSE`, `UPPER_FULLDUPLEX`, …).
    pub upper: u16,
    /// `start_tv_sec`/`usec`: the client's wall clock at its start (`--trip-times`) or
    /// the start it waits for (`--txstart-time`).
    pub start: Option<(u32, u32)>,
}

fn put(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

fn get(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

impl ClientHdr {
    /// The header's bytes: a TCP test's first write ([`TCP_HDR_LEN`]) or a UDP
    /// datagram's start ([`UDP_HDR_LEN`], its sequence and time fields zero: see
    /// [`write_datagram_id`]).
    ///
    /// With a start time (`--trip-times`, `--txstart-time`) the header grows as iperf
    /// 2.1.8's client grows it (`Settings_GenerateClientHdr`): TCP by
    /// `client_hdrext_starttime_fq` ([`START_FQ_LEN`], counted in the length), UDP by
    /// the `isoch_payload` enclave ([`ISOCH_PAYLOAD_LEN`], counted) and the start time
    /// after it (not counted: the server reads it from the datagram), so a UDP header
    /// with a start time needs [`UDP_START_HDR_LEN`] bytes.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_as(IsochLayout::Iperf21)
    }

    /// [`ClientHdr::encode`], with a UDP `--isochronous` header laid out for `layout`'s
    /// server: in 2.2's, the extension's extra word (zero) counted in the length and
    /// the version 2.2.1's, as iperf 2.2.1's client sends it. Other headers are the
    /// same in both.
    pub fn encode_as(&self, layout: IsochLayout) -> Vec<u8> {
        let isoch = self.upper & UPPER_ISOCH != 0;
        let layout = match isoch && self.udp {
            true => layout,
            false => IsochLayout::Iperf21,
        };
        let (lead, len, size) = match (self.udp, self.start.is_some()) {
            // `--isochronous` without a start time: the enclave, counted, ends the header.
            (true, false) if isoch => (UDP_DATAGRAM_LEN, layout.min_len(), layout.min_len()),
            (true, false) => (UDP_DATAGRAM_LEN, UDP_HDR_LEN, UDP_HDR_LEN),
            (true, true) => (UDP_DATAGRAM_LEN, layout.min_len(), UDP_START_HDR_LEN),
            (false, false) => (0, TCP_HDR_LEN, TCP_HDR_LEN),
            (false, true) => (0, TCP_HDR_LEN + START_FQ_LEN, TCP_HDR_LEN + START_FQ_LEN),
        };
        let mut b = vec![0u8; size];
        let mut flags = HEADER_EXTEND | HEADER_LEN_BIT | (((len as u32) << 1) & HEADER_LEN_MASK);
        if self.udp {
            flags |= HEADER_SEQNO64B;
        }
        flags |= self.flags;
        let amount = match self.amount {
            Amount::TimeCentis(c) => (c.min(i32::MAX as u32) as i32).wrapping_neg() as u32,
            Amount::Bytes(n) => (n as u32) & 0x7FFF_FFFF,
        };
        let base = [
            flags,
            self.threads,
            u32::from(self.port),
            self.buf_len,
            0,
            amount,
        ];
        for (i, v) in base.iter().enumerate() {
            put(&mut b, lead + 4 * i, *v);
        }
        let ext = lead + CLIENT_HDR_V1_LEN;
        // type and length stay 0; the upper flags (lower: 0), the version, reserved, tos.
        put(&mut b, ext + 8, u32::from(self.upper) << 16);
        let (version_u, version_l) = layout.version_words();
        put(&mut b, ext + 12, version_u);
        put(&mut b, ext + 16, version_l);
        put(&mut b, ext + 20, u32::from(self.tos));
        // lRate, and uRate's odd encoding: the high 32 bits shifted left by 8.
        put(&mut b, ext + 24, self.rate_bps as u32);
        put(&mut b, ext + 28, ((self.rate_bps >> 32) as u32) << 8);
        if let Some((sec, usec)) = self.start {
            // `start_fq`: a reserved word, then the start time.
            let at = match self.udp {
                true => ext + CLIENT_HDREXT_LEN + ISOCH_PAYLOAD_LEN + 4,
                false => ext + CLIENT_HDREXT_LEN + 4,
            };
            put(&mut b, at, sec);
            put(&mut b, at + 4, usec);
        }
        b
    }
}

/// Put a datagram's sequence number and send time into its first 16 bytes: `id` the
/// low 32 bits, `id2` the high 32 bits of the signed 64-bit sequence (negative: the
/// FIN). `buf` must hold [`UDP_DATAGRAM_LEN`] bytes.
pub fn write_datagram_id(buf: &mut [u8], seq: i64, sec: u32, usec: u32) {
    put(buf, 0, seq as u32);
    put(buf, 4, sec);
    put(buf, 8, usec);
    put(buf, 12, ((seq as u64) >> 32) as u32);
}

/// What an iperf 2 server reported at the end of a UDP test (`write_UDP_AckFIN`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerReport {
    pub bytes: u64,
    /// When the server's test ended, seconds after its start.
    pub stop_s: f64,
    /// `cntError`: datagrams lost (gaps in the sequence).
    pub lost: u64,
    pub out_of_order: u64,
    /// `cntDatagrams`: the datagrams the server counted (lost ones included).
    pub datagrams: u64,
    pub jitter_s: f64,
    /// Transit (one-way delay, sender clock to server clock), when the server sent its
    /// extension.
    pub transit: Option<Transit>,
}

/// The server's transit times (`server_hdr_extension`), seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transit {
    pub min_s: f64,
    pub max_s: f64,
    pub mean_s: f64,
    /// The variance's sum of squares (`m2`), seconds squared.
    pub m2_s2: f64,
    pub count: u32,
}

/// An iperf 2 answer netmeter's client cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Iperf2Error {
    #[error(
        "an iperf 2 server report of {0} bytes is too short (at least {SERVER_REPORT_MIN_LEN})"
    )]
    ShortReport(usize),
    #[error(
        "a datagram of {0} bytes from the iperf 2 server is a header acknowledgement, not its report"
    )]
    HeaderAck(usize),
}

/// `intN` and its microsecond part (`…1`, `…2` pairs), as seconds.
fn seconds(whole: u32, micros: u32) -> f64 {
    f64::from(whole as i32) + f64::from(micros as i32) / 1e6
}

impl ServerReport {
    /// Read the server report datagram. A datagram of [`HDR_ACK_LEN`] or 52 bytes
    /// typed CLIENTHDRACK is a stale header acknowledgement (iperf 2's client drops
    /// those too).
    pub fn parse(d: &[u8]) -> Result<ServerReport, Iperf2Error> {
        if (d.len() == HDR_ACK_LEN || d.len() == HDR_ACK_LEN + 24) && get(d, 0) == CLIENTHDRACK {
            return Err(Iperf2Error::HeaderAck(d.len()));
        }
        if d.len() < SERVER_REPORT_MIN_LEN {
            return Err(Iperf2Error::ShortReport(d.len()));
        }
        let h = &d[UDP_DATAGRAM_LEN..];
        let f = |i: usize| get(h, 4 * i);
        let flags = f(0);
        let wide = |low: u32, high_at: usize| {
            let high = if flags & HEADER_SEQNO64B != 0 && h.len() >= SERVER_HDR_LEN {
                u64::from(f(high_at))
            } else {
                0
            };
            high << 32 | u64::from(low)
        };
        // The mean iperf 2's client prints is the sum over the count (2.2.1's
        // `udp_output_read_enhanced`), not the server's running mean field, which
        // rounds differently; with no count, that field.
        let mean_s = |count: u32| match count {
            0 => seconds(f(16), f(17)),
            n => seconds(f(14), f(15)) / f64::from(n),
        };
        let transit = (flags & SERVER_HEADER_EXTEND != 0 && h.len() >= 100).then(|| Transit {
            min_s: seconds(f(10), f(11)),
            max_s: seconds(f(12), f(13)),
            mean_s: mean_s(f(22)),
            m2_s2: seconds(f(18), f(19)) * 1e-12,
            count: f(22),
        });
        Ok(ServerReport {
            bytes: u64::from(f(1)) << 32 | u64::from(f(2)),
            stop_s: seconds(f(3), f(4)),
            lost: wide(f(5), 25),
            out_of_order: wide(f(6), 26),
            datagrams: wide(f(7), 27),
            jitter_s: seconds(f(8), f(9)),
            transit,
        })
    }
}

/// The least an isochronous datagram holds in either [`IsochLayout`]: up to the end of
/// 2.2's `isoch_payload`.
pub const ISOCH_MIN_LEN: usize = UDP_HDR_LEN + 4 + ISOCH_PAYLOAD_LEN;

/// The frame fields of each datagram of an `--isochronous` UDP client (`struct
/// isoch_payload`, written by iperf 2's `Client::RunUDPIsochronous`): the frame period,
/// the first frame's send time, the previous frame's id and this one's (iperf 2's frame
/// counter: 1, 2, …, a skipped slot skipped), the frame's bytes and the bytes of it
/// left with this datagram's. The server counts a frame when its last datagram
/// (`remaining` equal to its length) follows the previous frame (ids one apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsochPayload {
    pub period_us: u32,
    pub start: (u32, u32),
    pub prev_frame_id: u32,
    pub frame_id: u32,
    pub burst_size: u32,
    pub remaining: u32,
}

impl IsochPayload {
    /// Write into `buf` where `layout`'s server reads it; `buf` must hold
    /// `layout.min_len()` bytes.
    pub fn write(&self, buf: &mut [u8], layout: IsochLayout) {
        let f = [
            self.period_us,
            self.start.0,
            self.start.1,
            self.prev_frame_id,
            self.frame_id,
            self.burst_size,
            self.remaining,
            0,
        ];
        for (i, v) in f.iter().enumerate() {
            put(buf, layout.at() + 4 * i, *v);
        }
    }

    /// The frame fields of datagram `d` laid out as `layout`; `None` when `d` is too
    /// short to hold them (iperf 2's server counts such a datagram as no frame's).
    pub fn read(d: &[u8], layout: IsochLayout) -> Option<IsochPayload> {
        if d.len() < layout.min_len() {
            return None;
        }
        let f = |i: usize| get(d, layout.at() + 4 * i);
        Some(IsochPayload {
            period_us: f(0),
            start: (f(1), f(2)),
            prev_frame_id: f(3),
            frame_id: f(4),
            burst_size: f(5),
            remaining: f(6),
        })
    }

    /// The datagram of `len` bytes carrying this is its frame's last, following the
    /// previous frame: iperf 2's server times the frame then (`transit_ready`).
    pub fn ends_frame(&self, len: usize) -> bool {
        self.remaining as usize == len && self.frame_id.wrapping_sub(self.prev_frame_id) == 1
    }

    /// How long after its frame was due this datagram arrived at `arrival_s` (the
    /// receiver's wall clock, seconds since the epoch): the frame is due at the
    /// client's start plus `frame_id - 1` periods (iperf 2's frame transit).
    pub fn frame_latency_s(&self, arrival_s: f64) -> f64 {
        let start = f64::from(self.start.0) + f64::from(self.start.1) / 1e6;
        let due = f64::from(self.period_us) * f64::from(self.frame_id.saturating_sub(1)) / 1e6;
        arrival_s - start - due
    }
}

/// The datagram an iperf 2 sender writes first on a UDP test with a start time (its
/// `Client::SendFirstPayload`): `hdr`'s bytes with the start time, grown to `len`,
/// sequence `seq`, sent at `sent`. A server sending on `-R`/`--full-duplex` with
/// `--trip-times` writes it first: the client's reverse reader
/// (`Server::ClientReverseFirstRead`) consumes the first datagram for its start time
/// and counts none of it. `hdr` must be a UDP header with a start time.
pub fn udp_start_datagram(hdr: &ClientHdr, len: usize, seq: i64, sent: (u32, u32)) -> Vec<u8> {
    let mut d = hdr.encode();
    d.resize(d.len().max(len), 0);
    write_datagram_id(&mut d, seq, sent.0, sent.1);
    d
}

/// `struct TCP_burst_payload`: what opens every write of a `--trip-times` TCP client
/// (`Client.cpp` `WriteTcpTxHdr`), and the least such a write carries.
pub const TCP_BURST_LEN: usize = 92;

/// The head of each write of a `--trip-times` TCP client (`struct TCP_burst_payload`,
/// iperf 2's `Client::WriteTcpTxHdr`): the client's start time, this write's send time,
/// its burst id (1, 2, …), its size `burst_size` (the bytes up to the next head, the
/// head included) and `seq`, the bytes written so far with this write's. The server
/// times each write by it (its latency columns). `buf` must hold
/// [`TCP_BURST_LEN`] bytes; the fields iperf 2's client leaves as they
/// were (the period, the ack times, the reserved words) are zeroed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpBurstHdr {
    pub start: (u32, u32),
    pub sent: (u32, u32),
    pub burst_id: u32,
    pub burst_size: u32,
    pub seq: i64,
}

impl TcpBurstHdr {
    pub fn write(&self, buf: &mut [u8]) {
        buf[..TCP_BURST_LEN].fill(0);
        put(buf, 12, self.start.0);
        put(buf, 16, self.start.1);
        put(buf, 20, self.sent.0);
        put(buf, 24, self.sent.1);
        put(buf, 44, self.burst_id);
        put(buf, 48, self.burst_size);
        put(buf, 52, self.seq as u32);
        put(buf, 56, ((self.seq as u64) >> 32) as u32);
    }
}

/// Where `burst_period_us` sits in a [`TcpBurstHdr`] (`struct TCP_burst_payload`,
/// after `reserved0`; the same in 2.1.8 and 2.2.1).
pub const TCP_BURST_PERIOD_AT: usize = 40;

/// Put the profile's period into a burst head [`TcpBurstHdr::write`] wrote: iperf 2's
/// isochronous and periodic-burst clients set `burst_period_us` in every head
/// (`Client::InitTrafficLoop`), which an isochronous server reads. `buf` must hold
/// [`TCP_BURST_LEN`] bytes.
pub fn write_burst_period(buf: &mut [u8], period_us: u32) {
    put(buf, TCP_BURST_PERIOD_AT, period_us);
}

/// `struct client_hdrext_isoch_settings`: eight words after the start time of a TCP
/// header (offset 80 in 2.1.8, whose `client_hdrext` is 36 bytes and whose start-time
/// block opens with a reserved word, and in 2.2.1, whose `client_hdrext` grew by
/// `barrier_usecs` and whose start-time block lost that word).
pub const ISOCH_SETTINGS_LEN: usize = 32;

/// iperf 2's periodic bursts (`--burst-size`, `--burst-period`) in a TCP test header:
/// `hdr` (a TCP header with a start time, [`ClientHdr::encode`] with
/// `wire::iperf2::UPPER_PERIODICBURST` among its upper flags) grown by the
/// `client_hdrext_isoch_settings` iperf 2's client fills for them
/// (`Settings_GenerateClientHdr`): the bursts per second as whole and millionths
/// (`FPSl`, `FPSu`), the burst's bytes in `Meanl`, the rest zero; the length in the
/// flags counts it. The server reads the rate from it (`Listener.cpp`, for
/// `HEADER_PERIODICBURST`); a header of another length is returned as it was.
pub fn with_burst_settings(mut hdr: Vec<u8>, per_second: f64, burst_bytes: u32) -> Vec<u8> {
    if hdr.len() != TCP_HDR_LEN + START_FQ_LEN {
        return hdr;
    }
    let at = hdr.len();
    hdr.resize(at + ISOCH_SETTINGS_LEN, 0);
    let fps = per_second.max(0.0);
    put(&mut hdr, at, fps.trunc() as u32);
    put(&mut hdr, at + 4, (fps.fract() * 1e6) as u32);
    put(&mut hdr, at + 8, burst_bytes);
    let len = hdr.len() as u32;
    let flags = (get(&hdr, 0) & !HEADER_LEN_MASK) | ((len << 1) & HEADER_LEN_MASK);
    put(&mut hdr, 0, flags);
    hdr
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// `iperf -c 127.0.0.1 -p 15102 -t 3 -l 1000` (2.1.8): its first write.
    #[test]
    fn tcp_header_is_what_iperf_2_1_8_sends() {
        let h = ClientHdr {
            udp: false,
            threads: 1,
            port: 15102,
            buf_len: 1000,
            amount: Amount::TimeCentis(300),
            rate_bps: 0,
            tos: 0,
            flags: 0,
            upper: 0,
            start: None,
        };
        let want = hex(concat!(
            "400100780000000100003afe000003e800000000fffffed4",
            "000000000000000000000000000200010008000300000000",
            "000000000000000000000000"
        ));
        assert_eq!(h.encode(), want);
        let n = ClientHdr {
            amount: Amount::Bytes(5000),
            rate_bps: 10_485_760,
            ..h.clone()
        };
        assert_eq!(&n.encode()[20..24], &5000u32.to_be_bytes());
        assert_eq!(&n.encode()[48..52], &hex("00a00000")[..]);
        // The same with -R and with --full-duplex (2.1.8's bytes: HEADER_VERSION2 and
        // UPPER_REVERSE or UPPER_FULLDUPLEX, as `wire::iperf2` names them).
        let r = ClientHdr {
            flags: 0x0400_0000,
            upper: 0x0400,
            ..h.clone()
        }
        .encode();
        assert_eq!(&r[..4], &hex("44010078")[..]);
        assert_eq!(&r[32..36], &hex("04000000")[..]);
        assert_eq!(&r[4..32], &want[4..32]);
        assert_eq!(&r[36..], &want[36..]);
        let f = ClientHdr {
            flags: 0x0400_0000,
            upper: 0x0800,
            ..h
        }
        .encode();
        assert_eq!(&f[32..36], &hex("08000000")[..]);
    }

    /// `iperf -c 127.0.0.1 -p 15103 -u -t 1 -l 1000 -b 1M` (2.1.8): its first datagram.
    #[test]
    fn udp_header_is_what_iperf_2_1_8_sends() {
        let h = ClientHdr {
            udp: true,
            threads: 1,
            port: 15103,
            buf_len: 1000,
            amount: Amount::TimeCentis(100),
            rate_bps: 1_048_576,
            tos: 0,
            flags: 0,
            upper: 0,
            start: None,
        };
        let mut b = h.encode();
        write_datagram_id(&mut b, 1, 0x6b08_8171, 0x0003_8580);
        let want = hex(concat!(
            "000000016b0881710003858000000000",
            "480100980000000100003aff000003e800000000ffffff9c",
            "000000000000000000000000000200010008000300000000",
            "001000000000000000000000"
        ));
        assert_eq!(b, want);
    }

    /// Where the start time goes, as a server reads it (`TestHdr::parse_*`, the same
    /// offsets in 2.1.8 and 2.2.1), and the lengths the flags announce.
    #[test]
    fn a_start_time_goes_where_iperf_2_servers_read_it() {
        let tcp = ClientHdr {
            udp: false,
            threads: 1,
            port: 5001,
            buf_len: 0,
            amount: Amount::TimeCentis(100),
            rate_bps: 0,
            tos: 0,
            flags: 0,
            upper: 0x1000,
            start: Some((1_700_000_000, 250_000)),
        };
        let t = tcp.encode();
        assert_eq!(t.len(), 80);
        assert_eq!((get(&t, 0) & HEADER_LEN_MASK) >> 1, 80);
        assert_eq!((get(&t, 64), get(&t, 68)), (1_700_000_000, 250_000));
        let u = ClientHdr { udp: true, ..tcp }.encode();
        assert_eq!(u.len(), UDP_START_HDR_LEN);
        assert_eq!(UDP_START_HDR_LEN, 128);
        assert_eq!((get(&u, 16) & HEADER_LEN_MASK) >> 1, 108);
        assert_eq!((get(&u, 112), get(&u, 116)), (1_700_000_000, 250_000));
    }

    /// The server's first `-R --trip-times` datagram: a UDP header an iperf 2 reader
    /// parses for the start time, grown to the test's length, sequence 0.
    #[test]
    fn a_reverse_start_datagram_carries_the_start_time_and_sequence_0() {
        let hdr = ClientHdr {
            udp: true,
            threads: 1,
            port: 5001,
            buf_len: 1000,
            amount: Amount::TimeCentis(300),
            rate_bps: 2_000_000,
            tos: 0,
            flags: crate::wire::iperf2::HEADER_VERSION2,
            upper: crate::wire::iperf2::UPPER_REVERSE | crate::wire::iperf2::UPPER_TRIPTIME,
            start: Some((1_700_000_000, 250_000)),
        };
        let d = udp_start_datagram(&hdr, 1000, 0, (1_700_000_001, 5));
        assert_eq!(d.len(), 1000);
        assert_eq!((get(&d, 0), get(&d, 4), get(&d, 8)), (0, 1_700_000_001, 5));
        let h = crate::wire::iperf2::TestHdr::parse_udp(&d).expect("a test header");
        assert!(h.trip_times() && h.reverse());
        assert_eq!(h.start, Some((1_700_000_000, 250_000)));
        // A short -l still carries the whole header.
        assert_eq!(
            udp_start_datagram(&hdr, 64, 0, (0, 0)).len(),
            UDP_START_HDR_LEN
        );
    }

    /// An isochronous header counts the enclave; the frame fields land where each
    /// version's server reads them (2.1: offset 76, 2.2: 80; `burstperiod`, start,
    /// `prevframeid`, `frameid`, `burstsize`, `remaining`), the header naming the
    /// version whose layout it carries.
    #[test]
    fn isochronous_header_and_frame_fields() {
        let hdr = ClientHdr {
            udp: true,
            threads: 1,
            port: 5001,
            buf_len: 0,
            amount: Amount::TimeCentis(200),
            rate_bps: 0,
            tos: 0,
            flags: crate::wire::iperf2::HEADER_UDPTESTS,
            upper: UPPER_ISOCH,
            start: None,
        };
        assert_eq!(ISOCH_MIN_LEN, 112);
        for (layout, at, version) in [
            (IsochLayout::Iperf21, 76, (VERSION_U, VERSION_L)),
            (IsochLayout::Iperf22, 80, (0x0002_0002, 0x0001_0003)),
        ] {
            let mut d = hdr.encode_as(layout);
            assert_eq!(d.len(), at + 32, "{layout:?}");
            assert_eq!((get(&d, 16) & HEADER_LEN_MASK) >> 1, at as u32 + 32);
            assert_eq!((get(&d, 52), get(&d, 56)), version, "{layout:?}");
            let h = crate::wire::iperf2::TestHdr::parse_udp(&d).expect("a test header");
            assert!(h.isochronous() && !h.trip_times());
            assert_eq!(h.isoch_layout(), layout);
            let p = IsochPayload {
                period_us: 16_667,
                start: (1_700_000_000, 5),
                prev_frame_id: 3,
                frame_id: 4,
                burst_size: 4000,
                remaining: 1530,
            };
            p.write(&mut d, layout);
            let word = |i: usize| get(&d, at + 4 * i);
            assert_eq!(
                (0..7).map(word).collect::<Vec<_>>(),
                [16_667, 1_700_000_000, 5, 3, 4, 4000, 1530]
            );
            assert_eq!(IsochPayload::read(&d, layout), Some(p));
            assert_eq!(IsochPayload::read(&d[..at + 31], layout), None);
        }
        // A start time (--trip-times) stays at byte 112 in both.
        let timed = ClientHdr {
            start: Some((1_700_000_000, 7)),
            ..hdr
        };
        for layout in [IsochLayout::Iperf21, IsochLayout::Iperf22] {
            let d = timed.encode_as(layout);
            assert_eq!(d.len(), UDP_START_HDR_LEN);
            assert_eq!((get(&d, 112), get(&d, 116)), (1_700_000_000, 7));
        }
        // Other headers do not change with the layout.
        let bulk = ClientHdr { upper: 0, ..hdr };
        assert_eq!(bulk.encode_as(IsochLayout::Iperf22), bulk.encode());
    }

    #[test]
    fn fin_sequence_is_negative_across_both_words() {
        let mut b = [0u8; UDP_DATAGRAM_LEN];
        write_datagram_id(&mut b, -5, 0, 0);
        assert_eq!(&b[0..4], &(-5i32).to_be_bytes());
        assert_eq!(&b[12..16], &[0xff; 4]);
        write_datagram_id(&mut b, (7i64 << 32) | 3, 0, 0);
        assert_eq!((get(&b, 0), get(&b, 12)), (3, 7));
    }

    fn report(flags: u32, fields: &[(usize, u32)]) -> Vec<u8> {
        let mut d = vec![0u8; SERVER_REPORT_LEN];
        put(&mut d, UDP_DATAGRAM_LEN, flags);
        for (i, v) in fields {
            put(&mut d, UDP_DATAGRAM_LEN + 4 * i, *v);
        }
        d
    }

    #[test]
    fn server_report_fields_and_64_bit_counts() {
        let d = report(
            0x8000_0000 | SERVER_HEADER_EXTEND | HEADER_SEQNO64B,
            &[
                (1, 1),
                (2, 5),
                (3, 10),
                (4, 500_000),
                (5, 7),
                (6, 2),
                (7, 1000),
                (8, 0),
                (9, 1500),
                (10, 0),
                (11, 120),
                (14, 0),
                (15, 297_900),
                (16, 0),
                (17, 301),
                (22, 993),
                (27, 1),
            ],
        );
        let r = ServerReport::parse(&d).unwrap();
        assert_eq!(r.bytes, (1 << 32) + 5);
        assert_eq!(r.stop_s, 10.5);
        assert_eq!((r.lost, r.out_of_order), (7, 2));
        assert_eq!(r.datagrams, (1 << 32) + 1000);
        assert!((r.jitter_s - 0.0015).abs() < 1e-12);
        let t = r.transit.unwrap();
        // The mean is the sum over the count (0.2979 s / 993), not the 301 µs field.
        assert!((t.min_s - 120e-6).abs() < 1e-12 && (t.mean_s - 300e-6).abs() < 1e-12);
        assert_eq!(t.count, 993);
    }

    /// A periodic-burst header: the settings after the start time (offset 80, where
    /// both 2.1.8 and 2.2.1 read `isoch_settings`), counted in the length; the burst
    /// head's period at offset 40.
    #[test]
    fn burst_settings_follow_the_start_time() {
        let tcp = ClientHdr {
            udp: false,
            threads: 1,
            port: 5001,
            buf_len: 0,
            amount: Amount::TimeCentis(100),
            rate_bps: 0,
            tos: 0,
            flags: 0,
            upper: crate::wire::iperf2::UPPER_PERIODICBURST,
            start: Some((1_700_000_000, 5)),
        };
        let b = with_burst_settings(tcp.encode(), 3.5, 40_960);
        assert_eq!(b.len(), 112);
        assert_eq!((get(&b, 0) & HEADER_LEN_MASK) >> 1, 112);
        assert_eq!(
            get(&b, 0) & !HEADER_LEN_MASK,
            get(&tcp.encode(), 0) & !HEADER_LEN_MASK
        );
        assert_eq!(
            (get(&b, 80), get(&b, 84), get(&b, 88)),
            (3, 500_000, 40_960)
        );
        assert!(b[92..].iter().all(|&x| x == 0));
        assert_eq!(&b[4..80], &tcp.encode()[4..80]);
        // Without a start time the header is not one iperf 2 sends for bursts: unchanged.
        let plain = ClientHdr { start: None, ..tcp }.encode();
        assert_eq!(with_burst_settings(plain.clone(), 1.0, 10), plain);
        let mut head = [0u8; TCP_BURST_LEN];
        TcpBurstHdr {
            start: (1, 2),
            sent: (3, 4),
            burst_id: 5,
            burst_size: 6,
            seq: 7,
        }
        .write(&mut head);
        write_burst_period(&mut head, 16_667);
        assert_eq!(
            (get(&head, 40), get(&head, 44), get(&head, 48)),
            (16_667, 5, 6)
        );
    }

    #[test]
    fn short_reports_and_header_acks_are_refused() {
        assert_eq!(
            ServerReport::parse(&[0u8; 20]),
            Err(Iperf2Error::ShortReport(20))
        );
        let mut ack = vec![0u8; HDR_ACK_LEN];
        put(&mut ack, 0, CLIENTHDRACK);
        assert_eq!(
            ServerReport::parse(&ack),
            Err(Iperf2Error::HeaderAck(HDR_ACK_LEN))
        );
        // An old server's report without the extension: no transit, 32-bit counts.
        let d = report(0x8000_0000, &[(7, 9)]);
        let r = ServerReport::parse(&d[..SERVER_REPORT_MIN_LEN]).unwrap();
        assert_eq!((r.datagrams, r.transit), (9, None));
    }
}
