//! `-b` pacing: each interval's rate within a fraction of a percent of the target.

use super::*;

fn check_rate(rate_bps: u64, len: usize) {
    let t = UdpTest {
        rate_bps,
        len,
        end: EndCondition::Time(3.0),
        interval: Some(ms(500)),
        ..UdpTest::default()
    };
    let o = run(&t);
    assert_eq!(o.client.intervals.len(), 6);
    for i in &o.client.intervals {
        let s = &i.streams[0];
        let err = (s.bits_per_second - rate_bps as f64).abs() / rate_bps as f64;
        assert!(
            err < 0.003,
            "-b {rate_bps} -l {len}: [{}, {}] {} bit/s",
            s.start,
            s.end,
            s.bits_per_second
        );
    }
    // Over the whole test, within one datagram.
    let sent = o.record.len() as u64 * len as u64 * 8;
    let want = rate_bps * 3;
    assert!(sent.abs_diff(want) <= len as u64 * 8, "{sent} vs {want}");
}

#[test]
fn pacing_2m_64_bytes() {
    check_rate(2_000_000, 64);
}

#[test]
fn pacing_5m_200_bytes() {
    check_rate(5_000_000, 200);
}

#[test]
fn pacing_10m_1460_bytes() {
    check_rate(10_000_000, 1460);
}

#[test]
fn pacing_20m_1000_bytes() {
    check_rate(20_000_000, 1000);
}

#[test]
fn pacing_40m_8000_bytes() {
    check_rate(40_000_000, 8000);
}

#[test]
fn burst_pacing_sends_whole_bursts_back_to_back() {
    let t = UdpTest {
        rate_bps: 1_168_000,
        burst: Some(10),
        end: EndCondition::Time(2.0),
        ..UdpTest::default()
    };
    let o = run(&t);
    let mut groups: Vec<usize> = Vec::new();
    let mut last = None;
    for r in &o.record {
        if last == Some(r.sent) {
            *groups.last_mut().expect("a group") += 1;
        } else {
            groups.push(1);
            last = Some(r.sent);
        }
    }
    // 1.168 Mbit/s of 1460-byte datagrams is 100 a second: ten bursts of ten.
    assert!(groups.iter().all(|&g| g == 10), "{groups:?}");
    assert_eq!(groups.len(), 20);
}
