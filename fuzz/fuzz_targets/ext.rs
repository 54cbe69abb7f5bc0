//! netmeter's extension messages on the control connection: the request (inside the
//! parameters) and the server's negotiation of it, the answer the client reads after
//! `NETMETER_EXT`, and the `--trip-times` clock exchange (24-byte probe answers, the
//! 16-byte estimate the server reads and negates). The first byte picks which.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netmeter::clock::{Clock, ManualClock};
use netmeter::clocksync::{self, ClockEstimate, Probe};
use netmeter::control::{ClientMachine, negotiate};
use netmeter::wire::{self, ExtAnswer, ExtRequest, Feature, State};

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            let Ok(req) = wire::decode_json::<ExtRequest>(body) else {
                return;
            };
            let answer = negotiate(&req);
            assert!(answer.accepted.iter().all(|f| f.is_known()));
            let framed = wire::encode_json(&answer);
            let back: ExtAnswer = wire::decode_json(&framed[4..]).expect("own answer reads back");
            let mut m = ClientMachine::new(Some(&req));
            let now = ManualClock::at_unix(0).now();
            let _ = m.on_state(State::ParamExchange, now);
            let _ = m.on_state(State::NetmeterExt, now);
            let n = m.on_ext_answer(&back);
            let _ = n.client_warnings("host");
            for f in &req.features {
                assert_eq!(&Feature::from_name(f.as_str()), f);
            }
        }
        1 => {
            let Ok(answer) = wire::decode_json::<ExtAnswer>(body) else {
                return;
            };
            let req = ExtRequest {
                version: wire::EXT_VERSION,
                features: Feature::ALL.to_vec(),
                ..ExtRequest::default()
            };
            let mut m = ClientMachine::new(Some(&req));
            let n = m.on_ext_answer(&answer).clone();
            let _ = n.client_warnings("host");
            let _ = n.feature_names();
            let _ = n.peer_name();
        }
        _ => {
            // Client: probe answers, 24 bytes each, sent at t1 = 1000 * i, read 500 ns later.
            let mut probes = Vec::new();
            let mut rest = body;
            let mut i = 0i64;
            while let Some((answer, tail)) = rest.split_first_chunk::<24>() {
                let t1 = i * 1000;
                let echoed = i64::from_be_bytes(answer[..8].try_into().expect("8 bytes"));
                let answer = if echoed % 2 == 0 {
                    // Most real answers echo t1.
                    let mut a = *answer;
                    a[..8].copy_from_slice(&t1.to_be_bytes());
                    a
                } else {
                    *answer
                };
                probes.extend(Probe::from_answer(t1, &answer, t1 + 500));
                rest = tail;
                i += 1;
            }
            if let Some(est) = clocksync::estimate(&probes) {
                let _ = est.to_wire();
            }
            // Server: the client's estimate, which the server negates for its streams.
            if let Some((m, _)) = body.split_first_chunk::<16>() {
                let est = ClockEstimate::from_wire(m, 8);
                let _correction = -est.offset_ns;
                assert!(est.uncertainty_ns >= 0 && est.rtt_ns >= 0);
            }
        }
    }
});
