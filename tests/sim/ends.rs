//! `-t`, `-n` and `-k` ends, and the receiver's end when the sender stops.

use super::*;

fn bulk(end: EndCondition) -> UdpTest {
    UdpTest {
        rate_bps: 5_000_000,
        end,
        link: LinkConfig {
            delay: ms(20),
            ..LinkConfig::default()
        },
        ..UdpTest::default()
    }
}

#[test]
fn t_end_sends_nothing_at_or_after_the_end_and_reports_its_seconds() {
    let o = run(&bulk(EndCondition::Time(4.0)));
    assert_eq!(o.send_end, Duration::from_secs(4));
    assert!(o.record.iter().all(|r| r.sent < Duration::from_secs(4)));
    let c = v(&o.client);
    assert_eq!(c["end"]["sum_sent"]["seconds"].as_f64(), Some(4.0));
    assert_eq!(
        u(&c["end"]["sum_sent"]["bytes"]),
        o.record.len() as u64 * 1460
    );
}

#[test]
fn n_end_sends_the_whole_datagrams_the_byte_count_holds() {
    let o = run(&bulk(EndCondition::Bytes(1_460_000)));
    assert_eq!(o.record.len(), 1000);
    let o = run(&bulk(EndCondition::Bytes(1_000_000)));
    // 684 whole datagrams; the 56 bytes left over are not a datagram.
    assert_eq!(o.record.len(), 684);
    assert_eq!(u(&v(&o.client)["end"]["sum_sent"]["bytes"]), 684 * 1460);
}

#[test]
fn k_end_sends_exactly_k_datagrams() {
    let o = run(&bulk(EndCondition::Blocks(500)));
    assert_eq!(o.record.len(), 500);
    let e = udp_end(&o);
    assert_eq!(u(&e["packets"]), 500);
    assert_eq!(o.seqs, (1..=500).collect::<Vec<u64>>());
}

#[test]
fn unpaced_k_end_goes_at_the_senders_line_rate() {
    let mut t = bulk(EndCondition::Blocks(1000));
    t.rate_bps = 0;
    t.nic_bps = 100_000_000;
    let o = run(&t);
    // 1000 × 1460 bytes at 100 Mbit/s: 116.8 ms, in batches of 32.
    assert_eq!(o.send_end, Duration::from_micros(116_800));
}

#[test]
fn receiver_counts_everything_the_link_delivered_before_it_stopped_and_nothing_twice() {
    // A queue behind a 4 Mbit/s link for a 5 Mbit/s sender: data is still arriving
    // long after the sender stops; the drain covers it.
    let mut t = bulk(EndCondition::Time(3.0));
    t.link.rate_bps = 4_000_000;
    t.link.queue_limit_bytes = 10_000_000;
    t.drain = Duration::from_secs(2);
    let o = run(&t);
    let delivered: Vec<u64> = o
        .record
        .iter()
        .filter(|r| matches!(r.fate, Fate::Delivered(_)))
        .map(|r| r.id)
        .collect();
    let counted: Vec<u64> = o.arrived.iter().map(|a| a.id).collect();
    assert_eq!(counted, delivered);
    let e = udp_end(&o);
    assert_eq!(u(&e["lost_packets"]), 0);
    let r = receiver_end(&o);
    assert_eq!(u(&r["receiver_packets"]), delivered.len() as u64);
    // The receiver's seconds run to its last arrival, past the sender's end.
    let last = o.arrived.last().map(|a| a.at).unwrap_or_default();
    assert!(last > o.send_end);
    assert_eq!(o.recv_end, last);
    let secs = r["receiver_seconds"].as_f64().unwrap_or_default();
    assert_eq!(secs, last.as_secs_f64());
}

#[test]
fn a_short_drain_counts_only_what_arrived_within_it() {
    let mut t = bulk(EndCondition::Time(3.0));
    t.link.rate_bps = 4_000_000;
    t.drain = ms(300);
    let o = run(&t);
    let cut = o.send_end + t.drain;
    let want = o
        .record
        .iter()
        .filter_map(|r| match &r.fate {
            Fate::Delivered(c) => Some(c[0].at),
            _ => None,
        })
        .filter(|&at| at < cut)
        .count();
    assert_eq!(o.arrived.len(), want);
    // The rest, still queued when the receiver stopped, is not counted lost (iperf3's
    // definition: only gaps below the highest number received are), and the sender's
    // count stays what it sent.
    let e = udp_end(&o);
    assert_eq!(u(&e["packets"]), o.record.len() as u64);
    assert_eq!(u(&e["lost_packets"]), 0);
    assert_eq!(u(&receiver_end(&o)["receiver_packets"]), want as u64);
}
