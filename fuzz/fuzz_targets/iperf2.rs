//! iperf 2's bytes as netmeter's server and client read them (`wire::iperf2`,
//! `wire::iperf2_client`): the first-bytes classification, the TCP and UDP test
//! headers, datagram ids, the header acknowledgement, the bounceback header, the
//! server report datagram and the `--trip-times` TCP write framing. Whatever the
//! bytes, parsing returns a value or a typed error, never panics, and what parses
//! re-encodes to something that parses the same; what a server would serve is what a
//! real iperf 2.1/2.2 client can send (`wire::iperf2::plausible`: a 2.x version, a
//! port, a bounceback opening's flags alone).
//! Input: the bytes a peer sent, as they arrived.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netmeter::wire::iperf2::{
    self, BbHdr, BurstFramer, DatagramId, HdrAck, MAX_BB_LEN, MAX_HEADER_LEN, ServerReport,
    TcpOpening, TestHdr,
};

fuzz_target!(|data: &[u8]| {
    match iperf2::classify_tcp(data) {
        TcpOpening::Iperf2 { header_len } => {
            assert!(header_len <= MAX_HEADER_LEN.max(iperf2::BB_HDR_LEN));
            if iperf2::is_bounceback([data[0], data[1], data[2], data[3]]) {
                if let Ok(h) = BbHdr::parse(data) {
                    assert!(h.size <= MAX_BB_LEN && h.reply_size <= MAX_BB_LEN);
                    if iperf2::plausible::bounceback_opening(&h).is_ok() {
                        assert_eq!(h.flags, iperf2::HEADER_BOUNCEBACK);
                    }
                    let mut back = vec![0u8; iperf2::BB_HDR_LEN];
                    h.write(&mut back);
                    assert_eq!(BbHdr::parse(&back), Ok(h));
                }
            } else if let Ok(h) = TestHdr::parse_tcp(data) {
                assert_eq!(h.len, header_len);
                assert!(h.version.is_some_and(|v| v.major == 2) && h.port != 0);
                let _ = (h.reverse(), h.full_duplex(), h.wants_ack(), h.version);
            }
        }
        TcpOpening::NeedMore(n) => assert!(n > data.len()),
        TcpOpening::Iperf3 | TcpOpening::Unknown => {}
    }
    let _ = iperf2::classify_udp(data);
    if let Ok(h) = TestHdr::parse_udp(data) {
        let seq64 = DatagramId::flags_seq64(data);
        let id = DatagramId::parse(data, seq64).expect("a parsed header has its id");
        let _ = (h.trip_times(), h.no_udp_fin(), id.seq);
        // Only the small trip-times header goes without a 2.x version.
        let small = h.flags == iperf2::plausible::SMALL_TRIPTIMES_WORD;
        assert!(small || h.version.is_some_and(|v| v.major == 2));
    }
    if let Some(a) = HdrAck::parse(data) {
        assert_eq!(HdrAck::parse(&a.encode()), Some(a));
    }
    // A --trip-times TCP stream: the same writes whatever the read sizes.
    let (mut whole, mut bytewise) = (BurstFramer::default(), BurstFramer::default());
    let (mut a, mut b) = (Vec::new(), Vec::new());
    whole.feed(data, |s, us| a.push((s, us)));
    for c in data.chunks(7) {
        bytewise.feed(c, |s, us| b.push((s, us)));
    }
    assert_eq!(a, b);
    assert_eq!(whole.lost(), bytewise.lost());
    if let Ok(r) = ServerReport::parse(data) {
        let fin = DatagramId::parse(data, true).expect("a report holds its datagram id");
        let again = ServerReport::parse(&r.encode(&fin)).expect("our report parses");
        assert_eq!(again.bytes, r.bytes);
    }
});
