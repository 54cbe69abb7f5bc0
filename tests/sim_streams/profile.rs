//! The burst and isochronous sender machine over the TCP byte pipe: units on the grid,
//! their transfer times, slips when a burst outlasts its period, and what arrived.

use crate::pipe::Pipe;
use crate::world::Host;
use netmeter::engine::machine::profile_send::{Carrier, ProfileSender, ProfileStep};
use netmeter::profile::{Profile, UnitFigures};
use std::time::Duration;

/// What a profiled TCP run did.
#[derive(Debug)]
struct Run {
    figures: UnitFigures,
    /// Per unit: its grid slot.
    slots: Vec<u64>,
    received: u64,
}

/// A profiled sender writing `block_len` blocks into `pipe` for `end` (its `-t`), the
/// pipe drained by a reader; runs until the sender is over and the pipe empty.
fn run(p: Profile, block_len: usize, mut pipe: Pipe, end: Duration) -> Run {
    let a = Host::new(0);
    let carrier = Carrier::Tcp { block_len };
    let mut m = ProfileSender::new(&p, 1, carrier, a.at(0), Some(end));
    let block = vec![7u8; block_len];
    let (mut now, mut wake) = (0u64, 0u64);
    let mut figures = UnitFigures::default();
    let mut slots = Vec::new();
    let mut received = 0u64;
    // The unit under way: its size and the bytes still to write.
    let (mut size, mut left) = (0u64, 0u64);
    let mut over = false;
    loop {
        while !over && wake <= now {
            if left == 0 {
                match m.poll(a.at(now)) {
                    ProfileStep::Wait(t) => wake = a.ns(t),
                    ProfileStep::Over => over = true,
                    ProfileStep::Send(u) => {
                        figures.slips += u.skipped;
                        slots.push(u.slot);
                        (size, left) = (u.size, u.size);
                    }
                }
                continue;
            }
            let n = pipe.write(now, &block[..(left as usize).min(block_len)]);
            if n == 0 {
                break;
            }
            left -= n as u64;
            if left == 0 {
                figures.record(m.unit_done(a.at(now)), size);
            }
        }
        while let Some(d) = pipe.read(now, usize::MAX) {
            if d.is_empty() {
                break;
            }
            received += d.len() as u64;
        }
        let next = [pipe.next_event(now), (!over && wake > now).then_some(wake)]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) => now = t,
            None if over => {
                return Run {
                    figures,
                    slots,
                    received,
                };
            }
            None => panic!("stuck at {now}"),
        }
    }
}

#[test]
fn four_bursts_in_two_seconds_each_timed_by_the_send_buffer() {
    // -t 2 --burst-period 0.5 --burst-size 100000 -l 10000 over 80 Mbit/s with a
    // 20 000-byte send buffer: a burst is written once 80 000 bytes have left, 8 ms.
    let p = Profile::Burst {
        bytes: 100_000,
        period_s: 0.5,
    };
    let r = run(
        p,
        10_000,
        Pipe::new(100, 1_000_000, 20_000),
        Duration::from_secs(2),
    );
    assert_eq!(r.slots, vec![0, 1, 2, 3]);
    assert_eq!(
        (r.figures.sent(), r.figures.bytes, r.figures.slips),
        (4, 400_000, 0)
    );
    let st = r.figures.transfer.stats().expect("bursts");
    assert!(
        (st.min_ms - 8.0).abs() < 0.01 && (st.max_ms - 8.0).abs() < 0.01,
        "{st:?}"
    );
    assert_eq!(r.received, 400_000);
}

#[test]
fn bursts_that_outlast_their_period_slip_whole_slots() {
    // 1 MB bursts every 250 ms over 8 Mbit/s: each takes ~1 s. Burst 0 is written by
    // 0.98 s (slots 1 and 2 passed: slot 3 goes), the next by 1.98 s (slots 4-6
    // passed: slot 7), then slot 8 is at the end of the test.
    let p = Profile::Burst {
        bytes: 1_000_000,
        period_s: 0.25,
    };
    let r = run(
        p,
        100_000,
        Pipe::new(1000, 1_000_000, 20_000),
        Duration::from_secs(2),
    );
    assert_eq!(r.slots, vec![0, 3, 7]);
    assert_eq!((r.figures.sent(), r.figures.slips), (3, 5));
    let st = r.figures.transfer.stats().expect("bursts");
    assert!(
        (st.min_ms - 980.0).abs() < 1.0 && (st.max_ms - 1000.0).abs() < 1.0,
        "{st:?}"
    );
    assert_eq!(r.received, 3_000_000);
}
