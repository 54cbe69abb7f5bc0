//! UDP data datagrams as a receiving stream accounts them (`engine::stream`'s UDP
//! receive loop): the iperf3 header (32- or 64-bit sequence number, µs or ns send
//! time) → `UdpRecv` (loss, reordering, duplicates, jitter) and the one-way delay
//! record, and for isochronous streams the frame header after it → `FrameRecord`.
//! Input: a flags byte, the receiver's clock (8 bytes), the clock correction (8 bytes),
//! then datagrams, each a length byte and that many bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netmeter::engine::record::FrameRecord;
use netmeter::latency::OwdRecord;
use netmeter::stats::UdpRecv;
use netmeter::wire::UdpHeader;

/// Latest receiver clock considered (ns since the epoch, the year 2096): real clocks.
const MAX_RX_NS: u64 = 4_000_000_000_000_000_000;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Some((rx, rest)) = rest.split_first_chunk::<8>() else {
        return;
    };
    let Some((corr, mut rest)) = rest.split_first_chunk::<8>() else {
        return;
    };
    let (seq64, ns_stamps, isoch) = (flags & 1 == 1, flags & 2 == 2, flags & 4 == 4);
    let mut rx_ns = (u64::from_be_bytes(*rx) % MAX_RX_NS) as i64;
    let correction_ns = i64::from_be_bytes(*corr);
    let hdr_len = UdpHeader::len(seq64);
    let mut acc = UdpRecv::default();
    // As in the engine, only --trip-times streams (ns timestamps) keep delay records.
    let mut owd = ns_stamps.then(OwdRecord::default);
    let mut frames = isoch.then(|| FrameRecord::new(flags & 8 == 8));
    while let Some((&len, tail)) = rest.split_first() {
        let Some((dgram, tail)) = tail.split_at_checked(len as usize) else {
            break;
        };
        rest = tail;
        rx_ns += 1 + i64::from(len) * 1_000;
        let Ok(h) = UdpHeader::read(dgram, seq64) else {
            continue;
        };
        let mut again = [0u8; 16];
        h.write(&mut again, seq64);
        assert_eq!(&again[..hdr_len], &dgram[..hdr_len]);
        let raw_ns = rx_ns.saturating_sub(h.send_ns(ns_stamps, rx_ns));
        acc.on_datagram(h.seq, raw_ns as f64 / 1e9);
        if let Some(o) = owd.as_mut() {
            o.record_at(rx_ns, raw_ns, correction_ns);
        }
        if let Some(f) = frames.as_mut() {
            f.on_datagram(&dgram[hdr_len..], rx_ns, correction_ns);
        }
    }
    let c = acc.counts();
    assert!(c.received <= c.highest_seq.saturating_add(c.out_of_order));
    if let Some(o) = owd {
        let _ = o.summary();
        let _ = o.trend.growth_ns();
    }
    if let Some(f) = frames {
        let _ = f.recv.counts();
        let _ = f.recv.final_counts();
        let _ = f.total_latency.stats();
    }
});
