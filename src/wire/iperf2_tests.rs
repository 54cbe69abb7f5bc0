//! `wire::iperf2` against bytes the real iperf 2.1.8 and 2.2.1 clients sent on loopback
//! (`testdata/iperf2_captures.txt`: one capture a line, `name hex`, each the first bytes
//! of a connection or a datagram, the command that made it in the name's comment).

use super::*;

const CAPTURES: &str = include_str!("testdata/iperf2_captures.txt");

fn capture(name: &str) -> Vec<u8> {
    let line = CAPTURES
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no capture {name}"));
    let hex = line.split_whitespace().nth(1).unwrap();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

const V218: Version = Version {
    major: 2,
    minor: 1,
    patch: 8,
    kind: 3,
};
const V221: Version = Version {
    major: 2,
    minor: 2,
    patch: 1,
    kind: 1,
};

#[test]
fn tcp_header_from_2_1_8() {
    let b = capture("2.1.8-tcp");
    assert_eq!(classify_tcp(&b), TcpOpening::Iperf2 { header_len: 60 });
    let h = TestHdr::parse_tcp(&b).unwrap();
    assert_eq!(h.len, 60);
    assert_eq!((h.threads, h.buf_len), (1, 1000));
    assert_eq!(h.amount, Amount::TimeCentis(100));
    assert_eq!(h.version, Some(V218));
    assert_eq!(h.version.unwrap().to_string(), "2.1.8");
    assert!(!h.reverse() && !h.full_duplex() && !h.trip_times());
    assert!(
        h.wants_ack(),
        "2.1.8 sends HEADER_EXTEND without VERSION2: it waits"
    );
    assert_eq!((h.legacy, h.start), (None, None));
}

#[test]
fn tcp_trip_times_header_carries_the_start_time() {
    for (name, len) in [("2.1.8-tcp_tt", 80), ("2.2.1-tcp_tt", 80)] {
        let b = capture(name);
        let h = TestHdr::parse_tcp(&b).unwrap();
        assert_eq!(h.len, len, "{name}");
        assert!(h.trip_times(), "{name}");
        let (sec, usec) = h.start.expect(name);
        // The capture's own time (2026): within a day of the datagram clock's era.
        assert!(
            sec > 0x6000_0000 && usec < 1_000_000,
            "{name}: {sec}.{usec}"
        );
    }
}

#[test]
fn reverse_and_full_duplex_from_both_versions() {
    for v in ["2.1.8", "2.2.1"] {
        let r = TestHdr::parse_tcp(&capture(&format!("{v}-tcp_R"))).unwrap();
        assert!(r.reverse() && !r.full_duplex(), "{v} -R");
        let f = TestHdr::parse_tcp(&capture(&format!("{v}-tcp_fd"))).unwrap();
        assert!(f.full_duplex() && !f.reverse(), "{v} --full-duplex");
    }
    let r = TestHdr::parse_tcp(&capture("2.2.1-tcp_R")).unwrap();
    assert_eq!((r.len, r.version), (64, Some(V221)));
    assert_eq!(r.version.unwrap().to_string(), "2.2.1-rc");
}

#[test]
fn legacy_dual_test_names_the_port_to_connect_back_to() {
    for v in ["2.1.8", "2.2.1"] {
        let h = TestHdr::parse_tcp(&capture(&format!("{v}-tcp_d"))).unwrap();
        assert_eq!(h.legacy, Some(Legacy::Dual), "{v}");
        assert!(h.port > 0, "{v}");
    }
}

#[test]
fn parallel_streams_announce_their_count() {
    for v in ["2.1.8", "2.2.1"] {
        let h = TestHdr::parse_tcp(&capture(&format!("{v}-tcp_P2"))).unwrap();
        assert_eq!(h.threads, 2, "{v}");
    }
}

#[test]
fn udp_headers_from_both_versions() {
    for (name, v, seq) in [
        ("2.1.8-udp", V218, 15),
        ("2.2.1-udp", V221, -54),
        ("2.1.8-udp_tt", V218, 26),
        ("2.2.1-udp_tt", V221, -40),
    ] {
        let d = capture(name);
        assert_eq!(classify_udp(&d), UdpOpening::Iperf2, "{name}");
        let h = TestHdr::parse_udp(&d).unwrap();
        assert!(h.udp && h.flags & HEADER_EXTEND != 0, "{name}");
        assert_eq!(h.version, Some(v), "{name}");
        assert_eq!((h.threads, h.buf_len), (1, 1000), "{name}");
        assert_eq!(h.rate, 1_048_576, "{name}: -b 1M");
        assert_eq!(h.amount, Amount::TimeCentis(30), "{name}");
        assert!(DatagramId::flags_seq64(&d), "{name}");
        let id = DatagramId::parse(&d, true).unwrap();
        assert_eq!(id.seq, seq, "{name}");
        assert_eq!(h.trip_times(), name.ends_with("_tt"), "{name}");
        assert_eq!(h.start.is_some(), h.trip_times(), "{name}");
    }
}

#[test]
fn small_udp_trip_times_header() {
    for name in ["2.1.8-udp_small", "2.1.8-udp_small32"] {
        let d = capture(name);
        assert_eq!(classify_udp(&d), UdpOpening::Iperf2, "{name}");
        let h = TestHdr::parse_udp(&d).unwrap();
        assert!(h.trip_times() && h.udp, "{name}");
        assert_eq!((h.start, h.version, h.len), (None, None, 20), "{name}");
        assert!(!DatagramId::flags_seq64(&d), "{name}");
        assert_eq!(DatagramId::parse(&d, false).unwrap().seq, 1, "{name}");
    }
}

#[test]
fn bounceback_header_from_both_versions() {
    for v in ["2.1.8", "2.2.1"] {
        let b = capture(&format!("{v}-tcp_bb"));
        assert_eq!(
            classify_tcp(&b),
            TcpOpening::Iperf2 {
                header_len: BB_HDR_LEN
            },
            "{v}"
        );
        assert!(is_bounceback([b[0], b[1], b[2], b[3]]), "{v}");
        assert_eq!(TestHdr::parse_tcp(&b), Err(HdrError::Bounceback), "{v}");
        let h = BbHdr::parse(&b).unwrap();
        assert_eq!(h.size, 100, "{v}: iperf 2's default request is 100 bytes");
        assert_eq!((h.id, h.reply_size), (1, 100), "{v}");
        assert!(h.client_tx.0 > 0x6000_0000, "{v}: the client's wall clock");
        let mut back = vec![0u8; BB_HDR_LEN];
        h.write(&mut back);
        assert_eq!(BbHdr::parse(&back).unwrap(), h, "{v}");
    }
}

#[test]
fn bounceback_sizes_are_capped_before_allocating() {
    let mut b = vec![0u8; BB_HDR_LEN];
    put32(&mut b, 0, HEADER_BOUNCEBACK);
    put32(&mut b, 4, u32::MAX);
    assert_eq!(BbHdr::parse(&b), Err(HdrError::BounceSize(u32::MAX)));
    put32(&mut b, 4, 100);
    put32(&mut b, 12, u32::from(BB_REPLYSIZE) << 16);
    put32(&mut b, 60, 3);
    assert_eq!(BbHdr::parse(&b), Err(HdrError::BounceSize(3)));
}

#[test]
fn iperf3_openings_are_told_apart() {
    let cookie = b"abcdefghijklmnopqrstuvwxyz2345672345\0";
    assert_eq!(classify_tcp(cookie), TcpOpening::Iperf3);
    assert_eq!(classify_tcp(&cookie[..10]), TcpOpening::NeedMore(COOKIE));
    assert_eq!(classify_tcp(&cookie[..2]), TcpOpening::NeedMore(4));
    assert_eq!(classify_tcp(b"GET / HTTP/1.1\r\n"), TcpOpening::Unknown);
    assert_eq!(classify_tcp(&[0u8; 8]), TcpOpening::Unknown);
    assert_eq!(classify_udp(b"9876"), UdpOpening::Iperf3Connect);
    assert_eq!(
        classify_udp(&123_456_789u32.to_le_bytes()),
        UdpOpening::Iperf3Connect
    );
    assert_eq!(classify_udp(&[0u8; 100]), UdpOpening::Unknown);
    assert_eq!(classify_udp(&[0xffu8; 3]), UdpOpening::Unknown);
}

const COOKIE: usize = crate::wire::COOKIE_LEN;

#[test]
fn absurd_header_lengths_are_refused() {
    // Length field at its maximum (255) is within MAX_HEADER_LEN; no length bit and no
    // settings bits is not a header at all; a length below the base is refused.
    let f = HEADER_EXTEND | HEADER_LEN_BIT | HEADER_LEN_MASK;
    assert_eq!(tcp_header_len(f.to_be_bytes()), Ok(255));
    assert_eq!(
        tcp_header_len(0x0001_0000u32.to_be_bytes()),
        Err(HdrError::NoSettings(0x0001_0000))
    );
    let short = HEADER_EXTEND | HEADER_LEN_BIT | (4 << 1);
    assert_eq!(
        tcp_header_len(short.to_be_bytes()),
        Err(HdrError::TooShort(4))
    );
    assert_eq!(
        TestHdr::parse_tcp(&f.to_be_bytes()),
        Err(HdrError::Short { need: 255, got: 4 })
    );
    // Truncated UDP headers: every prefix of a real datagram parses or errs, never panics.
    let d = capture("2.2.1-udp_tt");
    for n in 0..d.len() {
        let _ = TestHdr::parse_udp(&d[..n]);
        let _ = DatagramId::parse(&d[..n], true);
        let _ = classify_udp(&d[..n]);
    }
    let t = capture("2.1.8-tcp_tt");
    for n in 0..t.len() {
        let _ = TestHdr::parse_tcp(&t[..n]);
        let _ = classify_tcp(&t[..n]);
        let _ = BbHdr::parse(&t[..n]);
        let _ = HdrAck::parse(&t[..n]);
    }
}

#[test]
fn header_ack_round_trips_and_is_what_iperf_2_expects() {
    let plain = HdrAck {
        version: V221,
        times: None,
    };
    let b = plain.encode();
    assert_eq!(b.len(), HDR_ACK_LEN);
    assert_eq!(&b[..8], &[0, 0, 0, 2, 0, 0, 0, 28]);
    assert_eq!(HdrAck::parse(&b), Some(plain));
    let timed = HdrAck {
        version: V218,
        times: Some(AckTimes {
            sent: (10, 1),
            sent_rx: (10, 2),
            ack: (10, 3),
        }),
    };
    let b = timed.encode();
    assert_eq!(b.len(), HDR_ACK_TS_LEN);
    assert_eq!(HdrAck::parse(&b), Some(timed));
    // The client side's reader recognises our acknowledgement and drops it.
    assert_eq!(
        ServerReport::parse(&b),
        Err(Iperf2Error::HeaderAck(HDR_ACK_TS_LEN))
    );
}

#[test]
fn server_report_encodes_what_the_client_side_reads() {
    let r = ServerReport {
        bytes: (3 << 32) + 17,
        stop_s: 10.25,
        lost: 7,
        out_of_order: 2,
        datagrams: (1 << 32) + 5,
        jitter_s: 0.0015,
        transit: Some(Transit {
            min_s: 0.000_120,
            max_s: 0.002,
            mean_s: 0.000_300,
            m2_s2: 0.000_001,
            count: 993,
        }),
    };
    let fin = DatagramId {
        seq: -1001,
        sec: 5,
        usec: 6,
    };
    let d = r.encode(&fin);
    assert_eq!(d.len(), SERVER_REPORT_LEN);
    assert_eq!(DatagramId::parse(&d, true), Some(fin));
    let back = ServerReport::parse(&d).unwrap();
    assert_eq!(back.bytes, r.bytes);
    assert_eq!((back.lost, back.out_of_order), (7, 2));
    assert_eq!(back.datagrams, r.datagrams);
    assert!((back.stop_s - 10.25).abs() < 1e-9);
    assert!((back.jitter_s - 0.0015).abs() < 1e-9);
    let t = back.transit.unwrap();
    assert!((t.min_s - 0.000_120).abs() < 1e-9 && (t.max_s - 0.002).abs() < 1e-9);
    assert_eq!(t.count, 993);
    // Garbage figures (NaN, negative) encode as zero rather than wrapping.
    let odd = ServerReport {
        stop_s: f64::NAN,
        jitter_s: -1.0,
        transit: None,
        ..r
    };
    let back = ServerReport::parse(&odd.encode(&fin)).unwrap();
    assert_eq!((back.stop_s, back.jitter_s, back.transit), (0.0, 0.0, None));
}

#[test]
fn version_words_round_trip() {
    assert_eq!(V218.words(), (VERSION_U, VERSION_L));
    assert_eq!(Version::from_words(0, 0), None);
    let (u, l) = V221.words();
    assert_eq!(Version::from_words(u, l), Some(V221));
}

#[test]
fn trip_times_writes_are_framed_in_any_slicing() {
    // The 2.1.8 --trip-times capture: the 80-byte header, then 1000-byte writes.
    let b = capture("2.1.8-tcp_tt_256");
    let first = &b[80..];
    assert_eq!(be32(first, 48), 1000, "-l 1000: each write is 1000 bytes");
    let mut stream = Vec::new();
    for i in 0..3u32 {
        let mut w = vec![0u8; 1000];
        w[..first.len().min(1000)].copy_from_slice(&first[..first.len().min(1000)]);
        put32(&mut w, 24, 100 + i);
        stream.extend_from_slice(&w);
    }
    for chunk in [1, 7, 52, 999, 4096] {
        let mut f = BurstFramer::default();
        let mut got = Vec::new();
        for c in stream.chunks(chunk) {
            f.feed(c, |s, us| got.push((s, us)));
        }
        assert!(!f.lost());
        assert_eq!(got.len(), 3, "chunk {chunk}");
        assert_eq!(got[2].1, 102);
        assert!(got[0].0 > 0x6000_0000);
    }
    let mut f = BurstFramer::default();
    let mut bad = vec![0u8; 100];
    put32(&mut bad, 48, 10);
    f.feed(&bad, |_, _| panic!("no write from a bad size"));
    assert!(f.lost());
    let mut huge = vec![0u8; 100];
    put32(&mut huge, 48, u32::MAX);
    let mut f = BurstFramer::default();
    f.feed(&huge, |_, _| {});
    assert!(f.lost(), "sizes are capped");
}

/// The names of every capture: all of them are what real clients sent.
fn capture_names() -> Vec<&'static str> {
    CAPTURES
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

#[test]
fn every_real_client_header_is_plausible() {
    for name in capture_names() {
        let b = capture(name);
        if name.contains("-udp") {
            assert_eq!(classify_udp(&b), UdpOpening::Iperf2, "{name}");
            continue;
        }
        assert!(
            matches!(classify_tcp(&b), TcpOpening::Iperf2 { .. }),
            "{name}"
        );
        if is_bounceback([b[0], b[1], b[2], b[3]]) {
            let bb = BbHdr::parse(&b).unwrap();
            assert_eq!(plausible::bounceback_opening(&bb), Ok(()), "{name}");
        } else {
            TestHdr::parse_tcp(&b).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
    // And what netmeter's own iperf 2 client sends: plain, -R, --full-duplex, -d, and
    // with a start time (--trip-times, --txstart-time).
    let shapes = [
        (0, 0, None),
        (HEADER_VERSION2, UPPER_REVERSE, None),
        (HEADER_VERSION2, UPPER_FULLDUPLEX, None),
        (HEADER_VERSION1 | RUN_NOW, 0, None),
        (0, UPPER_TRIPTIME, Some((1_764_000_000, 999_999))),
        (0, UPPER_EPOCH_START, Some((1_764_000_000, 0))),
    ];
    for (udp, (flags, upper, start)) in [false, true]
        .into_iter()
        .flat_map(|u| shapes.iter().map(move |s| (u, *s)))
    {
        let h = ClientHdr {
            udp,
            threads: 4,
            port: 5001,
            buf_len: 1470,
            amount: Amount::TimeCentis(1000),
            rate_bps: 40_000_000_000,
            tos: 0xb8,
            flags,
            upper,
            start,
        };
        let mut b = h.encode();
        if udp {
            write_datagram_id(&mut b, 1, 0x6b08_8500, 999_999);
            assert_eq!(classify_udp(&b), UdpOpening::Iperf2);
        } else {
            assert_eq!(TestHdr::parse_tcp(&b).map(|h| h.threads), Ok(4));
        }
    }
}

/// One field of a real header set to what no client sends: refused as implausible.
#[test]
fn a_field_no_client_sends_is_refused() {
    let real = capture("2.2.1-tcp_tt");
    let cases: [(&str, usize, u32); 10] = [
        ("an unknown flag bit", 0, 0x4041_00a0),
        ("no extension", 0, 0x8001_00a0),
        ("no threads", 4, 0),
        ("port 0", 8, 0),
        ("extension type", 24, 7),
        ("version 3.x", 36, 0x0003_0002),
        ("version kind", 40, 0x0001_0009),
        ("a wide TOS", 44, 0x0001_00b8),
        ("uRate low byte", 52, 0x0000_0001),
        ("start usec", 68, 1_000_000),
    ];
    for (what, at, v) in cases {
        let mut b = real.clone();
        put32(&mut b, at, v);
        let r = TestHdr::parse_tcp(&b);
        assert!(matches!(r, Err(HdrError::Implausible(_))), "{what}: {r:?}");
    }
    let mut bb = capture("2.2.1-tcp_bb");
    put32(&mut bb, 28, 0x6b08_873e);
    let parsed = BbHdr::parse(&bb).unwrap();
    assert!(
        plausible::bounceback_opening(&parsed).is_err(),
        "server time set"
    );
    bb[3] = 1;
    assert_eq!(
        classify_tcp(&bb),
        TcpOpening::Unknown,
        "bounceback flags + a bit"
    );
    let mut small = capture("2.1.8-udp_small");
    small[19] = 1;
    assert_eq!(
        classify_udp(&small),
        UdpOpening::Unknown,
        "small header padding"
    );
}

/// A small deterministic generator for the random-opening tests.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Random openings, and random bytes after every real client's first word: none reads
/// as a test a server would take a slot for. (Before these checks, about one random
/// datagram in eight and a real flags word with any bytes after it did.)
#[test]
fn random_openings_are_no_iperf2_test() {
    let mut g = XorShift(0x9e37_79b9_7f4a_7c15);
    let words: Vec<[u8; 4]> = capture_names()
        .into_iter()
        .filter(|n| !n.contains("-udp"))
        .map(|n| {
            let b = capture(n);
            [b[0], b[1], b[2], b[3]]
        })
        .collect();
    for i in 0..20_000 {
        let len = 4 + (g.next() % 300) as usize;
        let mut b = g.bytes(len);
        if i % 2 == 0 {
            b[..4].copy_from_slice(&words[i / 2 % words.len()]);
        }
        if let TcpOpening::Iperf2 { header_len } = classify_tcp(&b) {
            if b.len() < header_len {
                continue;
            }
            if is_bounceback([b[0], b[1], b[2], b[3]]) {
                let bb = BbHdr::parse(&b);
                assert!(
                    bb.is_err() || plausible::bounceback_opening(&bb.unwrap()).is_err(),
                    "#{i}: {b:02x?}"
                );
            } else {
                assert!(TestHdr::parse_tcp(&b).is_err(), "#{i}: {b:02x?}");
            }
        }
        let mut d = g.bytes(len.max(UDP_DATAGRAM_LEN + 4));
        if i % 2 == 0 {
            // A plausible sequence number and a real UDP client's flags.
            put32(&mut d, 0, 1);
            put32(&mut d, UDP_DATAGRAM_LEN, 0x4801_0098);
        }
        assert_eq!(classify_udp(&d), UdpOpening::Unknown, "#{i}: {d:02x?}");
    }
}

proptest::proptest! {
    /// Whatever follows a real 2.2.1 UDP client's flags, a header is accepted only
    /// when its version names a 2.x release.
    #[test]
    fn accepted_udp_headers_name_a_2x_release(
        rest in proptest::collection::vec(proptest::num::u8::ANY, 100..200)
    ) {
        let mut d = vec![0u8; UDP_DATAGRAM_LEN];
        d.extend_from_slice(&0x4801_0098u32.to_be_bytes());
        d.extend_from_slice(&rest);
        if let Ok(h) = TestHdr::parse_udp(&d) {
            proptest::prop_assert_eq!(h.version.map(|v| v.major), Some(2));
        }
    }
}

/// The fuzz target's hand-made seeds (`fuzz/make_seeds.py`) are what their names say:
/// the implausible ones are refused, the hostile ones parse (their limits are the
/// server policy's to refuse), and a datagram cut before its version is no test.
#[test]
fn the_fuzz_seeds_are_what_their_names_say() {
    macro_rules! seed {
        ($name:literal) => {
            include_bytes!(concat!("../../fuzz/corpus/iperf2/", $name)).as_slice()
        };
    }
    for b in [
        seed!("implausible-flag-bit"),
        seed!("implausible-version7"),
        seed!("implausible-port0"),
        seed!("implausible-wide-tos"),
        seed!("implausible-urate-low-byte"),
        seed!("implausible-start-usec"),
    ] {
        assert!(TestHdr::parse_tcp(b).is_err(), "{b:02x?}");
    }
    let absurd = TestHdr::parse_tcp(seed!("hostile-threads-len255")).unwrap();
    assert_eq!((absurd.threads, absurd.len), (0x7FFF_FFFF, 255));
    let fast = TestHdr::parse_tcp(seed!("hostile-rate-max")).unwrap();
    assert_eq!(fast.rate, 0x00FF_FFFF_FFFF_FFFF);
    assert_eq!(classify_udp(seed!("udp-plausible")), UdpOpening::Iperf2);
    assert_eq!(
        classify_udp(seed!("udp-cut-before-version")),
        UdpOpening::Unknown
    );
    assert_eq!(
        classify_udp(seed!("udp-small-tt-padding")),
        UdpOpening::Unknown
    );
    let bb = BbHdr::parse(seed!("implausible-bb-server-stamps")).unwrap();
    assert!(plausible::bounceback_opening(&bb).is_err());
    assert_eq!(
        BbHdr::parse(seed!("hostile-bb-size-4g")),
        Err(HdrError::BounceSize(u32::MAX))
    );
}

/// What the client writes at the head of each `--trip-times` TCP write is what a
/// server's framer (`wire::iperf2::BurstFramer`, iperf 2's reading) times: one send
/// time per completed write, the writes split where `burst_size` says.
#[test]
fn tcp_burst_heads_frame_the_writes_for_the_server() {
    use crate::wire::iperf2_client::TcpBurstHdr;
    let mut stream = Vec::new();
    for (i, size) in [200u32, 92, 1000].into_iter().enumerate() {
        let mut w = vec![0xA5u8; size as usize];
        TcpBurstHdr {
            start: (1_700_000_000, 1),
            sent: (1_700_000_001, 10 + i as u32),
            burst_id: i as u32 + 1,
            burst_size: size,
            seq: i64::from(size),
        }
        .write(&mut w);
        assert_eq!(u32::from_be_bytes(w[48..52].try_into().unwrap()), size);
        stream.extend_from_slice(&w);
    }
    assert!(stream.len() >= 3 * TCP_BURST_LEN);
    let mut f = BurstFramer::default();
    let mut times = Vec::new();
    // Fed in odd pieces, as reads return them.
    for piece in stream.chunks(37) {
        f.feed(piece, |s, u| times.push((s, u)));
    }
    assert!(!f.lost());
    assert_eq!(
        times,
        vec![
            (1_700_000_001, 10),
            (1_700_000_001, 11),
            (1_700_000_001, 12)
        ]
    );
}

/// UDP `--isochronous` from the real clients: each version's header names its version,
/// which places the frame fields (2.1.8: byte 76, 2.2.1: byte 80); read there they are
/// the frame iperf 2 sent (a 60 frames/s period, the first frame's id 0x1b after 0x1a
/// or 0x11 after 0x10, a 2083-byte frame), and the frame's last datagram ends it.
/// Read at the other version's offset they are not a frame's end: why a 2.2.1 server
/// counts no frames of a 2.1.8 client.
#[test]
fn isochronous_frame_fields_from_both_versions() {
    for (v, layout, other, ids) in [
        (
            "2.1.8",
            IsochLayout::Iperf21,
            IsochLayout::Iperf22,
            (0x1a, 0x1b),
        ),
        (
            "2.2.1",
            IsochLayout::Iperf22,
            IsochLayout::Iperf21,
            (0x10, 0x11),
        ),
    ] {
        let first = capture(&format!("{v}-udp_isoch"));
        let h = TestHdr::parse_udp(&first).expect(v);
        assert!(h.isochronous(), "{v}");
        assert_eq!(h.isoch_layout(), layout, "{v}");
        let p = IsochPayload::read(&first, layout).expect(v);
        assert_eq!(p.period_us, 16_666, "{v}");
        assert_eq!((p.prev_frame_id, p.frame_id), ids, "{v}");
        assert_eq!((p.burst_size, p.remaining), (0x823, 0x823), "{v}");
        assert!(!p.ends_frame(200), "{v}: the frame's first of 200 bytes");
        let last = capture(&format!("{v}-udp_isoch_last"));
        assert_eq!(last.len(), layout.min_len(), "{v}: the whole datagram");
        let p = IsochPayload::read(&last, layout).expect(v);
        // The frame's tail, shorter than the header, went out grown to it (iperf 2
        // then restates the frame's size as that one datagram).
        assert_eq!((p.prev_frame_id, p.frame_id), ids, "{v}");
        assert_eq!(p.remaining as usize, last.len(), "{v}");
        assert!(p.ends_frame(last.len()), "{v}");
        let misread = IsochPayload::read(&last, other);
        assert!(misread.is_none_or(|p| !p.ends_frame(last.len())), "{v}");
    }
}

/// netmeter's own isochronous headers read back as the layout they were written in.
#[test]
fn netmeter_isochronous_headers_name_their_layout() {
    for layout in [IsochLayout::Iperf21, IsochLayout::Iperf22] {
        let hdr = ClientHdr {
            udp: true,
            threads: 1,
            port: 5001,
            buf_len: 0,
            amount: Amount::TimeCentis(100),
            rate_bps: 0,
            tos: 0,
            flags: HEADER_UDPTESTS,
            upper: UPPER_ISOCH,
            start: None,
        };
        let h = TestHdr::parse_udp(&hdr.encode_as(layout)).expect("a header");
        assert_eq!(h.isoch_layout(), layout);
    }
}
