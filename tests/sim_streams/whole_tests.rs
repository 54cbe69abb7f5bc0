//! Whole tests on the simulator ([`crate::whole`]): both control machines and every
//! stream's machines on one virtual clock, judged exactly against the run's own events
//! (when the client ended the test, when each receiver read its last byte) and pinned,
//! text and JSON of both sides with the control transcript, in `snapshots/whole_*.txt`
//! (issue 21, item 4: the receiver ending with the sender, `--txstart-time`, interval
//! counts and boundaries, `-t`/`-n`/`-k` ends, reverse and bidir, `--repeat`/`compare`
//! on seeded runs).

use crate::snapshot;
use crate::whole::{WholeRun, WholeTest, play, run};
use netmeter::control::STREAMS_TIMEOUT;
use netmeter::experiment::compare;
use netmeter::experiment::repeat::{self, Plan, RepeatInfo};
use netmeter::report::{EndSum, Report};
use netmeter::sim::{LinkConfig, Loss};
use netmeter::spec::{Direction, EndCondition};
use std::time::Duration;

fn sum(s: &Option<EndSum>) -> &EndSum {
    s.as_ref().expect("an end sum")
}

/// Every row's `sum` runs from where the last one ended, `every` seconds long but the
/// last, which may be shorter; the rows cover `0..end`.
fn check_rows(r: &Report, every: f64, end: f64) {
    let mut at = 0.0;
    for row in &r.intervals {
        assert_eq!(row.sum.start, at, "{:?}", row.sum);
        assert!(
            row.sum.end - row.sum.start <= every + 1e-12,
            "{:?}",
            row.sum
        );
        at = row.sum.end;
    }
    assert!((at - end).abs() < 1e-9, "rows end at {at}, not {end}");
}

/// The test clock's seconds of a virtual instant, on the side whose clock began at `t0`.
fn secs(ns: u64, t0: u64) -> f64 {
    ns.saturating_sub(t0) as f64 / 1e9
}

#[test]
fn upload_intervals_and_both_ends_are_exact() {
    let t = WholeTest {
        parallel: 2,
        ..WholeTest::default()
    };
    let r = run(&t);
    // -t 2 -i 1: two rows on each side, on whole seconds of each side's own clock.
    assert_eq!(r.client.intervals.len(), 2);
    check_rows(&r.client, 1.0, 2.0);
    assert_eq!(r.server.intervals.len(), 2);
    assert_eq!(r.server.intervals[1].sum.end, 2.0);
    // Two streams in each row.
    assert!(r.client.intervals.iter().all(|i| i.streams.len() == 2));
    // Every byte sent arrived, and the receiver counted each.
    let (sent, got) = (sum(&r.client.end.sum_sent), sum(&r.client.end.sum_received));
    assert_eq!(sent.bytes, got.bytes);
    assert_eq!(sent.seconds, 2.0);
    let rows: u64 = r.server.intervals.iter().map(|i| i.sum.bytes).sum();
    assert!(rows <= got.bytes, "rows {rows} of {}", got.bytes);
    // The server's receiver ends with the sender: at the last byte it read (its own
    // clock), which came after TEST_END reached it.
    let last = *r.last_reads_ns.iter().max().expect("streams");
    assert_eq!(
        sum(&r.server.end.sum_received).end,
        secs(last, r.server_t0_ns)
    );
    snapshot::check("whole_upload_p2_t2.txt", &r.rendered());
}

#[test]
fn reverse_the_receiving_client_ends_with_the_servers_sender() {
    let t = WholeTest {
        direction: Direction::Reverse,
        ..WholeTest::default()
    };
    let r = run(&t);
    assert_eq!(r.client.intervals.len(), 2);
    check_rows(&r.client, 1.0, 2.0);
    // The client's test ended at -t on its clock; its receiver counted on to the
    // server's last byte, which left after TEST_END reached the server and no later
    // than a send buffer behind it: not the drain's wait for silence.
    let end = sum(&r.client.end.sum_received);
    let last = r.last_reads_ns[0];
    assert!(last > r.test_end_ns);
    assert_eq!(end.end, secs(last, r.client_t0_ns));
    let ctrl = t.ctrl_delay.as_nanos() as u64;
    let path = 6_000_000 + t.buffer * 105 + t.block_len as u64 * 105;
    assert!(
        last <= r.test_end_ns + ctrl + path,
        "{last} vs {}",
        r.test_end_ns
    );
    assert_eq!(
        sum(&r.client.end.sum_sent).bytes,
        end.bytes,
        "the sender's figures came with the server's results"
    );
    snapshot::check("whole_reverse_t2.txt", &r.rendered());
}

#[test]
fn bidir_counts_each_direction_on_its_own() {
    let t = WholeTest {
        direction: Direction::Bidir,
        end: EndCondition::Time(1.0),
        ..WholeTest::default()
    };
    let r = run(&t);
    let v = serde_json::to_value(&r.client).expect("serializes");
    let end = &v["end"];
    for (sent, got) in [
        ("sum_sent", "sum_received"),
        ("sum_sent_bidir_reverse", "sum_received_bidir_reverse"),
    ] {
        assert_eq!(end[sent]["bytes"], end[got]["bytes"], "{sent}: {end}");
        assert!(end[sent]["bytes"].as_u64().expect("bytes") > 0, "{sent}");
    }
    assert_eq!(r.client.intervals.len(), 1);
    snapshot::check("whole_bidir_t1.txt", &r.rendered());
}

#[test]
fn bytes_end_is_exact_across_parallel_streams() {
    let t = WholeTest {
        parallel: 3,
        end: EndCondition::Bytes(3_000_000),
        interval: Some(Duration::from_millis(100)),
        ..WholeTest::default()
    };
    let r = run(&t);
    for rep in [&r.client, &r.server] {
        assert_eq!(sum(&rep.end.sum_sent).bytes, 3_000_000);
        assert_eq!(sum(&rep.end.sum_received).bytes, 3_000_000);
    }
    // The client's rows end where its test did: when the last sender spent the budget.
    let end = sum(&r.client.end.sum_sent).end;
    check_rows(&r.client, 0.1, end);
    snapshot::check("whole_bytes_p3.txt", &r.rendered());
}

#[test]
fn blocks_end_is_exact() {
    let t = WholeTest {
        end: EndCondition::Blocks(20),
        block_len: 100_000,
        interval: Some(Duration::from_millis(50)),
        ..WholeTest::default()
    };
    let r = run(&t);
    assert_eq!(sum(&r.client.end.sum_sent).bytes, 2_000_000);
    assert_eq!(sum(&r.server.end.sum_received).bytes, 2_000_000);
    let v = serde_json::to_value(&r.client).expect("serializes");
    assert_eq!(v["start"]["test_start"]["blocks"], 20);
    snapshot::check("whole_blocks_k20.txt", &r.rendered());
}

#[test]
fn reverse_bytes_end_the_client_stops_at_what_it_received() {
    let t = WholeTest {
        direction: Direction::Reverse,
        end: EndCondition::Bytes(1_000_000),
        ..WholeTest::default()
    };
    let r = run(&t);
    // The server's sender spends the budget; the client ends when it has it all.
    assert_eq!(sum(&r.server.end.sum_sent).bytes, 1_000_000);
    assert_eq!(sum(&r.client.end.sum_received).bytes, 1_000_000);
    assert_eq!(r.test_end_ns, r.last_reads_ns[0]);
}

#[test]
fn txstart_starts_the_data_at_the_instant_on_the_clients_own_clock() {
    // The client's wall clock runs 300 ms ahead: the start, 2 s after the wall clock's
    // time zero, comes 1.7 s into the run, long after TEST_RUNNING.
    let t = WholeTest {
        txstart_after: Some(Duration::from_secs(2)),
        client_offset_ns: 300_000_000,
        end: EndCondition::Time(1.0),
        ..WholeTest::default()
    };
    let r = run(&t);
    assert!(
        r.client_t0_ns.abs_diff(1_700_000_000) <= 1_000,
        "{}",
        r.client_t0_ns
    );
    let ts = r.client.start.netmeter.txstart.expect("recorded");
    assert_eq!(ts.requested, crate::world::WALL0_S as f64 + 2.0);
    assert!((0.0..0.01).contains(&ts.late_ms), "{ts:?}");
    // Set up (streams open) well before the instant, and waited for it.
    assert!(ts.ready.unwrap() < ts.requested - 0.5, "{ts:?}");
    // The test's clock starts there: one whole row, the -t end a second later.
    assert_eq!(r.client.intervals.len(), 1);
    check_rows(&r.client, 1.0, 1.0);
    assert!(r.test_end_ns.abs_diff(2_700_000_000) <= 1_000);
    snapshot::check("whole_txstart.txt", &r.rendered());
}

#[test]
fn paced_rows_hold_the_rate_on_half_second_boundaries() {
    // -b 8M -l 10000: a block every 10 ms, 50 a row.
    let t = WholeTest {
        rate_bps: 8_000_000,
        block_len: 10_000,
        interval: Some(Duration::from_millis(500)),
        ..WholeTest::default()
    };
    let r = run(&t);
    assert_eq!(r.client.intervals.len(), 4);
    check_rows(&r.client, 0.5, 2.0);
    for row in &r.client.intervals {
        assert!(row.sum.bytes.abs_diff(500_000) <= 10_000, "{:?}", row.sum);
    }
    snapshot::check("whole_paced_8m.txt", &r.rendered());
}

fn seeded(seed: u64) -> WholeRun {
    run(&WholeTest {
        seed,
        end: EndCondition::Time(1.0),
        ..WholeTest::default()
    })
}

#[test]
fn every_seed_in_a_range_gives_byte_identical_reports() {
    let mut distinct = std::collections::HashSet::new();
    for seed in 0..12 {
        let a = seeded(seed).rendered();
        assert_eq!(a, seeded(seed).rendered(), "seed {seed}");
        distinct.insert(a);
    }
    assert!(distinct.len() > 6, "the seeds draw different links");
}

/// The `--repeat` table and a `compare` of whole simulated runs.
#[test]
fn repeat_and_compare_of_seeded_whole_runs() {
    let runs = |r: std::ops::Range<u64>| r.map(|s| seeded(s).client).collect::<Vec<_>>();
    let base = runs(1..6);
    let plan = Plan::from_flags(base.len() as u32, 0.0, None).expect("a valid plan");
    let st = repeat::statistics(&base, plan.level);
    let info = RepeatInfo {
        plan,
        runs: base.len(),
        ended: "all runs".into(),
    };
    let table = repeat::table(&info, &st);
    let c = compare::compare(&base, &runs(11..16)).expect("same kind of test");
    let text = format!("{table}\n{}", compare::text(&c, "base", "new"));
    assert_eq!(
        text,
        {
            let again = runs(1..6);
            let st = repeat::statistics(&again, plan.level);
            let c = compare::compare(&again, &runs(11..16)).expect("same kind");
            format!(
                "{}\n{}",
                repeat::table(&info, &st),
                compare::text(&c, "base", "new")
            )
        },
        "the same seeds, the same tables"
    );
    snapshot::check("whole_repeat_compare.txt", &text);
}

/// A client that opens one of its two data connections: the server's machine gives up
/// exactly [`STREAMS_TIMEOUT`] after it asked for them, and says what it waited for.
#[test]
fn a_missing_stream_times_the_server_out_at_its_deadline() {
    let t = WholeTest {
        parallel: 2,
        opens: Some(1),
        ..WholeTest::default()
    };
    let (at, e) = play(&t).expect_err("the server gives up");
    // CREATE_STREAMS went out when the parameters arrived: 3 control delays in.
    let asked = 3 * t.ctrl_delay.as_nanos() as u64;
    assert_eq!(at, asked + STREAMS_TIMEOUT.as_nanos() as u64);
    assert_eq!(e, "server: timed out after 20.0 s waiting for stream setup");
}

/// `-O 1 -t 2`: the omitted second is rowed and flagged, the end sums count the
/// measured two seconds only.
#[test]
fn omit_rows_are_flagged_and_left_out_of_the_end() {
    let t = WholeTest {
        omit: Duration::from_secs(1),
        ..WholeTest::default()
    };
    let r = run(&t);
    let flags: Vec<bool> = r.client.intervals.iter().map(|i| i.sum.omitted).collect();
    assert_eq!(flags, [true, false, false]);
    let measured: u64 = r.client.intervals[1..].iter().map(|i| i.sum.bytes).sum();
    let sent = sum(&r.client.end.sum_sent);
    assert_eq!(sent.bytes, measured);
    assert_eq!(sent.seconds, 2.0);
    snapshot::check("whole_omit_1_t2.txt", &r.rendered());
}

/// `-i 0`: no rows, the end summary alone.
#[test]
fn no_interval_rows_with_interval_zero() {
    let t = WholeTest {
        interval: None,
        end: EndCondition::Time(1.0),
        ..WholeTest::default()
    };
    let r = run(&t);
    assert!(r.client.intervals.is_empty() && r.server.intervals.is_empty());
    assert_eq!(sum(&r.client.end.sum_sent).seconds, 1.0);
}

/// `--bidir -n`: each direction spends a budget of its own.
#[test]
fn bidir_bytes_end_spends_each_directions_budget() {
    let t = WholeTest {
        direction: Direction::Bidir,
        parallel: 2,
        end: EndCondition::Bytes(2_000_000),
        interval: Some(Duration::from_millis(100)),
        ..WholeTest::default()
    };
    let r = run(&t);
    let v = serde_json::to_value(&r.server).expect("serializes");
    let end = &v["end"];
    // The test ends when the first direction is done (iperf3: either total reaches
    // -n); the client's own direction sent its budget whole.
    assert_eq!(end["sum_received"]["bytes"], 2_000_000, "{end}");
    assert_eq!(
        r.client.end.sum_sent.as_ref().map(|s| s.bytes),
        Some(2_000_000)
    );
}

/// `-R -P 4 -k 10`: the server's four senders share ten blocks.
#[test]
fn reverse_parallel_blocks_share_one_budget() {
    let t = WholeTest {
        direction: Direction::Reverse,
        parallel: 4,
        end: EndCondition::Blocks(10),
        block_len: 50_000,
        ..WholeTest::default()
    };
    let r = run(&t);
    assert_eq!(sum(&r.server.end.sum_sent).bytes, 500_000);
    assert_eq!(sum(&r.client.end.sum_received).bytes, 500_000);
    let per: Vec<u64> = r
        .server
        .end
        .streams
        .iter()
        .map(|s| s.sender.as_ref().map_or(0, |x| x.bytes))
        .collect();
    assert_eq!(per.iter().sum::<u64>(), 500_000, "{per:?}");
    assert!(per.iter().all(|b| b % 50_000 == 0), "whole blocks: {per:?}");
}

/// `-u -b 10M -l 1400` over a 100 Mbit/s simulated link, 5 ms one way.
fn udp(loss: Loss) -> WholeTest {
    WholeTest {
        udp: Some(LinkConfig {
            rate_bps: 100_000_000,
            delay: Duration::from_millis(5),
            loss,
            ..LinkConfig::default()
        }),
        block_len: 1400,
        rate_bps: 10_000_000,
        ..WholeTest::default()
    }
}

/// A UDP test end to end: the loss the client reports (from the server's results)
/// is what the simulator dropped, below the highest number that arrived.
#[test]
fn udp_upload_loss_comes_back_in_the_servers_results() {
    let r = run(&udp(Loss::Bernoulli { p: 0.01 }));
    let v = serde_json::to_value(&r.client).expect("serializes");
    let e = &v["end"]["streams"][0]["udp"];
    let sent = e["packets"].as_u64().expect("packets");
    let lost = e["lost_packets"].as_u64().expect("lost");
    let got = v["end"]["sum_received"]["bytes"].as_u64().expect("bytes") / 1400;
    // -b 10M for 2 s of 1400-byte datagrams: 1786 (the pacer's last is due before 2 s).
    assert!(sent.abs_diff(1786) <= 1, "{sent}");
    assert!(lost > 0 && lost < sent / 20, "{lost} of {sent}");
    assert_eq!(sent - lost, got, "what was not lost arrived: {e}");
    assert_eq!(r.client.intervals.len(), 2);
    check_rows(&r.client, 1.0, 2.0);
    snapshot::check("whole_udp_loss.txt", &r.rendered());
}

/// `-u -R` and `-u --bidir`: the receiving side's counts, and each direction's.
#[test]
fn udp_reverse_and_bidir_deliver_every_datagram_of_a_clean_link() {
    for direction in [Direction::Reverse, Direction::Bidir] {
        let t = WholeTest {
            direction,
            end: EndCondition::Time(1.0),
            ..udp(Loss::None)
        };
        let r = run(&t);
        let v = serde_json::to_value(&r.client).expect("serializes");
        let s = &v["end"]["streams"];
        for st in s.as_array().expect("streams") {
            assert_eq!(st["udp"]["lost_packets"], 0, "{direction:?}: {st}");
            assert!(
                st["udp"]["packets"].as_u64().expect("packets") > 800,
                "{st}"
            );
        }
        let name = format!("whole_udp_{direction:?}.txt").to_lowercase();
        snapshot::check(&name, &r.rendered());
    }
}

/// `-u -n`: the budget ends the test; every byte of it arrives on a clean link.
#[test]
fn udp_bytes_end_is_exact() {
    let t = WholeTest {
        end: EndCondition::Bytes(140_000),
        ..udp(Loss::None)
    };
    let r = run(&t);
    assert_eq!(sum(&r.client.end.sum_sent).bytes, 140_000);
    assert_eq!(sum(&r.server.end.sum_received).bytes, 140_000);
}
