//! The parameter JSON a client sends (what the server accepts and turns into the test
//! it runs): `Params` → `TestSpec::from_params` (iperf3's range checks) → the server's
//! limits → the negotiated test. A test the server accepts must survive the way back:
//! its own parameters (`to_params`) read back into the same test.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netmeter::control::ServerMachine;
use netmeter::spec::TestSpec;
use netmeter::wire::{self, Params};

fuzz_target!(|data: &[u8]| {
    let Ok(params) = wire::decode_json::<Params>(data) else {
        return;
    };
    let Ok(spec) = TestSpec::from_params(&params) else {
        return;
    };
    let _ = spec.server_limits_refusal(Some(30), Some(1_000_000_000));
    let _ = spec.server_limits_refusal(None, Some(1));
    let mut machine = ServerMachine::new();
    let _ = machine.on_params(&params);
    let negotiated = spec.negotiated(machine.negotiated());
    let _ = negotiated.total_streams();
    let _ = negotiated.until_interrupted();
    let _ = negotiated.unmet_need(machine.negotiated());

    // Round trip: the accepted test, sent as a client would send it, reads back the same.
    let ext = params.netmeter.as_ref().map(|_| spec.ext_request());
    let again = spec.to_params(ext);
    let framed = wire::encode_json(&again);
    let reread: Params = wire::decode_json(&framed[4..]).expect("own parameters read back");
    let spec2 = TestSpec::from_params(&reread).expect("own parameters accepted");
    assert_eq!(
        spec,
        spec2,
        "parameters {}",
        String::from_utf8_lossy(&framed[4..])
    );
});
