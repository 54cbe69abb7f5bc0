//! The bytes a server sends on the control connection, read as netmeter's client reads
//! them (`engine::client`): state bytes, the extension answer after `NETMETER_EXT`, the
//! server's results after `EXCHANGE_RESULTS`, the 8-byte error trailer after
//! `SERVER_ERROR`, the pre-shared-key challenge after `NETMETER_AUTH`, the third-party
//! answer after `NETMETER_THIRD_PARTY`. The first input byte picks the extension request the client made.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netmeter::auth::psk::{self, Psk};
use netmeter::clock::{Clock, ManualClock};
use netmeter::control::{ClientMachine, ClientStep};
use netmeter::wire::mcast_join::JoinAnswer;
use netmeter::wire::{
    self, ExtAnswer, ExtRequest, Feature, PskChallenge, PskConfirm, Results, State,
    ThirdPartyAnswer,
};

fn take_json<T: for<'de> serde::Deserialize<'de>>(
    data: &mut &[u8],
    max: u32,
) -> Option<Result<T, wire::WireError>> {
    let (hdr, rest) = data.split_first_chunk::<4>()?;
    let len = match wire::decode_json_len(*hdr, max) {
        Ok(len) => len,
        Err(e) => return Some(Err(e)),
    };
    let (body, rest) = rest.split_at_checked(len)?;
    *data = rest;
    Some(wire::decode_json(body))
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, mut rest)) = data.split_first() else {
        return;
    };
    let request = (pick & 1 == 1).then(|| ExtRequest {
        version: wire::EXT_VERSION,
        features: Feature::ALL
            .iter()
            .filter(|_| pick & 2 == 2)
            .cloned()
            .collect(),
        trip_times: pick & 4 == 4,
        ..ExtRequest::default()
    });
    let mut machine = ClientMachine::new(request.as_ref());
    // Virtual time: the deadlines are armed, never passed.
    let now = ManualClock::at_unix(0).now();
    machine.step_done(now);
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        let Ok(state) = State::from_byte(b) else {
            return;
        };
        let step = match machine.on_state(state, now) {
            Ok(step) => step,
            Err(e) => {
                let _ = e.to_string();
                return;
            }
        };
        match step {
            ClientStep::ReadExtAnswer => {
                let Some(Ok(answer)) = take_json::<ExtAnswer>(&mut rest, wire::MAX_EXT_LEN) else {
                    return;
                };
                let n = machine.on_ext_answer(&answer).clone();
                let _ = n.client_warnings("host");
                let _ = n.feature_names();
            }
            ClientStep::StartData => machine.test_ended(),
            ClientStep::ExchangeResults => {
                let Some(Ok(results)) = take_json::<Results>(&mut rest, wire::MAX_RESULTS_LEN)
                else {
                    return;
                };
                let _: Results = results;
            }
            ClientStep::ReadServerError => {
                let Some((trailer, _)) = rest.split_first_chunk::<8>() else {
                    return;
                };
                let (code, _errno) = wire::decode_error_trailer(*trailer);
                let _ = code.describe();
                return;
            }
            ClientStep::Authenticate => {
                // The pre-shared-key challenge, checked as engine::psk::client_answer does.
                let Some(Ok(ch)) = take_json::<PskChallenge>(&mut rest, wire::MAX_EXT_LEN) else {
                    return;
                };
                let Some(sn) = psk::from_hex(&ch.server_nonce) else {
                    return;
                };
                let _ = (ch.version, ch.server_proof);
                // Our proof goes out, then the server's comes back after a second 0x41.
                let key = Psk::new(b"q3Vt9XkPz1L0mWc7Rb2Ya8NdHe5Jf4Gs").expect("a valid key");
                let _ = key.client_proof(&[b'a'; 37], &[7; 32], &sn, &[0; 32]);
                let Some(Ok(c)) = take_json::<PskConfirm>(&mut rest, 1024) else {
                    return;
                };
                let _ = key.verify_server(&[b'a'; 37], &[7; 32], &sn, &[0; 32], &c.server_proof);
            }
            ClientStep::ReadThirdParty => {
                let _ = take_json::<ThirdPartyAnswer>(&mut rest, wire::MAX_RESULTS_LEN);
                return;
            }
            ClientStep::ReadMcastAnswer => {
                // A multicast receiver's answer: joined or refused, later its figures.
                let Some(Ok(a)) = take_json::<JoinAnswer>(&mut rest, wire::MAX_RESULTS_LEN) else {
                    return;
                };
                let _ = (a.joined, a.error, a.figures);
            }
            ClientStep::Display => return,
            ClientStep::SendParams | ClientStep::CreateStreams | ClientStep::StartClock => {}
        }
    }
});
