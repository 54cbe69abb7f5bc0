//! The results message a peer sends at `EXCHANGE_RESULTS` (a server's, read by the
//! client; a client's, read by the server), and everything the receiving side makes of
//! it: `wire::Results` → `report::build::end` beside this side's own figures → the text
//! end summary and the `-J` document. The first input byte picks the test's shape
//! (protocol, direction, streams, `--trip-times`, which side reads); the rest is the
//! JSON body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netmeter::control::ClientMachine;
use netmeter::latency::OwdRecord;
use netmeter::report::build::{self, EndInputs, LocalFinal, TcpTotals};
use netmeter::report::text::{self, TextCtx};
use netmeter::report::{Report, json};
use netmeter::spec::{Direction, Protocol, TestSpec};
use netmeter::stats::UdpCounts;
use netmeter::units::Format;
use netmeter::wire::{self, ExtAnswer, Feature, Params, Results};

/// The test a client would have asked for, as its parameters.
fn spec_for(shape: u8) -> TestSpec {
    let udp = shape & 1 == 1;
    let mut p = Params {
        time: 10.0,
        parallel: f64::from((shape >> 3) & 3) + 1.0,
        len: Some(if udp { 1460.0 } else { 131072.0 }),
        ..Params::default()
    };
    if udp {
        p.udp = Some(true);
        p.bandwidth = Some(1e6);
    } else {
        p.tcp = Some(true);
    }
    match (shape >> 1) & 3 {
        1 => p.reverse = Some(true),
        2 => p.bidirectional = Some(true),
        _ => {}
    }
    let trip_times = shape & 32 == 32;
    if trip_times || shape & 64 == 64 {
        p.netmeter = Some(wire::ExtRequest {
            version: wire::EXT_VERSION,
            features: vec![Feature::UdpSeq64, Feature::TripTimes],
            trip_times,
            ..wire::ExtRequest::default()
        });
    }
    let spec = TestSpec::from_params(&p).expect("a plain test is accepted");
    let mut m = ClientMachine::new(p.netmeter.as_ref());
    let answer = ExtAnswer {
        version: wire::EXT_VERSION,
        accepted: p.netmeter.map(|r| r.features).unwrap_or_default(),
        server: "fuzz".into(),
    };
    spec.negotiated(m.on_ext_answer(&answer))
}

/// This side's own final figures, one per stream, ids as iperf3 numbers them.
fn locals(spec: &TestSpec, client: bool) -> Vec<LocalFinal> {
    (0..spec.total_streams())
        .map(|i| {
            let client_sends = spec.client_sends(i);
            let sender = client_sends == client;
            let receiver_owd = !sender && spec.trip_times;
            LocalFinal {
                id: if i == 0 { 1 } else { i64::from(i) + 2 },
                socket: 5 + i64::from(i),
                sender,
                forward: client_sends,
                bytes: 1_000_000 * u64::from(i + 1),
                seconds: 10.0,
                packets: if spec.protocol == Protocol::Udp {
                    800
                } else {
                    0
                },
                tcp: (spec.protocol == Protocol::Tcp && sender).then(|| TcpTotals {
                    retransmits: 3,
                    max_snd_cwnd: 65536,
                    rtt_sum: 1000,
                    rtt_samples: 10,
                    ..TcpTotals::default()
                }),
                udp: (spec.protocol == Protocol::Udp && !sender).then(|| UdpCounts {
                    highest_seq: 800,
                    received: 790,
                    lost: 10,
                    ..UdpCounts::default()
                }),
                owd: receiver_owd.then(OwdRecord::default),
                ..LocalFinal::default()
            }
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&shape, body)) = data.split_first() else {
        return;
    };
    let Ok(peer) = wire::decode_json::<Results>(body) else {
        return;
    };
    let spec = spec_for(shape);
    let client = shape & 128 == 0;
    let locals = locals(&spec, client);
    let end = build::end(&EndInputs {
        spec: &spec,
        locals: &locals,
        peer: &peer,
        local_cpu: (1.0, 0.5, 0.5),
        local_congestion: Some("cubic".into()),
        in_process_server: false,
        client,
        rcvbuf: 131072,
        sndbuf: 16384,
        clock: None,
        connect_only_answered: None,
        host: None,
        threads: Vec::new(),
        disk_file: None,
        peak: None,
    });
    let ctx = TextCtx {
        format: Format::Auto,
        protocol: spec.protocol,
        bidir: spec.direction == Direction::Bidir,
        client,
        verbose: true,
        title: None,
        bounceback: false,
        connect_only: false,
        histogram_bin_ms: Some(1.0),
    };
    let _ = text::end_summary(&ctx, &end);
    let report = Report {
        end,
        server_output_text: peer.server_output_text.clone(),
        server_output_json: peer.server_output_json.clone(),
        ..Report::default()
    };
    let doc = json::document(&report);
    // What netmeter writes, it reads back (`netmeter plot`/`report` on a saved -J file).
    Report::from_document(&doc).expect("own -J document reads back");
});
