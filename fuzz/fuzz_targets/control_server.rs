//! The bytes a client sends on the control connection, read as netmeter's server reads
//! them (`engine::server::session`): the 37-byte cookie, the length-prefixed parameter
//! JSON (with a `--psk-file` proof after it, or a third-party request's options), then
//! state bytes, with the client's results after `TEST_END`. Each message
//! goes through the same library calls the server makes, in the same order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netmeter::auth::psk::{self, Psk};
use netmeter::cli::third_party;
use netmeter::clock::{Clock, ManualClock};
use netmeter::control::{ServerEvent, ServerMachine};
use netmeter::spec::TestSpec;
use netmeter::wire::{self, COOKIE_LEN, ExtAnswer, Params, PskResponse, Results, State};
use std::net::{IpAddr, Ipv4Addr};

/// One length-prefixed JSON message off the front of `data`, as `Ctrl::read_json`
/// reads it: `None` when the stream ends first (the server would time out).
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
    let Some((cookie, mut rest)) = data.split_first_chunk::<COOKIE_LEN>() else {
        return;
    };
    let _ = wire::Cookie(*cookie).as_text();
    let Some(Ok(params)) = take_json::<Params>(&mut rest, wire::MAX_PARAMS_LEN) else {
        return;
    };
    // --psk-file: the client's nonce in the parameters, then its proof (as
    // engine::server::door and engine::psk::server_verdict read them),
    // bound to a third-party request if there is one.
    let ext = params.netmeter.as_ref();
    let fields = ext
        .and_then(|r| r.third_party.as_ref())
        .map(|t| t.bound_fields());
    let refs: Option<Vec<&str>> = fields
        .as_ref()
        .map(|f| f.iter().map(String::as_str).collect());
    let bound = psk::bind_request(refs.as_deref());
    if let Some(hello) = ext.and_then(|r| r.psk.as_ref()) {
        let Some(cn) = psk::from_hex(&hello.client_nonce) else {
            return;
        };
        let Some(Ok(r)) = take_json::<PskResponse>(&mut rest, wire::MAX_EXT_LEN) else {
            return;
        };
        let key = Psk::new(b"q3Vt9XkPz1L0mWc7Rb2Ya8NdHe5Jf4Gs").expect("a valid key");
        let _ = key.verify_client(cookie, &cn, &[9; 32], &bound, &r.client_proof);
    }
    // A third-party request (after the key is proved): the options to run, parsed and
    // resolved as engine::server::third_party::serve does (the target is not resolved
    // here: no name lookups while fuzzing).
    if let Some(req) = ext.and_then(|r| r.third_party.as_ref()) {
        let _ = third_party::config_for(req, IpAddr::V4(Ipv4Addr::LOCALHOST));
        return;
    }
    let asked = match TestSpec::from_params(&params) {
        Ok(s) => s,
        Err(e) => {
            // The refusal the server sends back.
            let _ = wire::encode_server_error(e.code, 0);
            let _ = e.code.describe();
            return;
        }
    };
    let _ = asked.server_limits_refusal(Some(10), Some(100_000_000));
    let mut machine = ServerMachine::new();
    if let Some(answer) = machine.on_params(&params) {
        // The answer the server sends must read back as itself.
        let framed = wire::encode_json(&answer);
        let back: ExtAnswer = wire::decode_json(&framed[4..]).expect("own answer reads back");
        assert_eq!(back, answer);
    }
    let _spec = asked.negotiated(machine.negotiated());
    machine.streams_open();
    while let Some((&b, tail)) = rest.split_first() {
        rest = tail;
        let Ok(state) = State::from_byte(b) else {
            return;
        };
        match machine.on_state(state) {
            Ok(ServerEvent::TestEnd) => {
                let Some(Ok(results)) = take_json::<Results>(&mut rest, wire::MAX_RESULTS_LEN)
                else {
                    return;
                };
                let _: Results = results;
                let _ = machine.results_sent(ManualClock::at_unix(0).now());
            }
            Ok(ServerEvent::Done) | Err(_) => return,
        }
    }
});
