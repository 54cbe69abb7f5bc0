//! The `--trip-times` TCP frame stream (magic, length, send time per write), as a
//! receiving stream reads it (`engine::stream`'s TCP receive loop): `TcpFrameParser`
//! over reads split anywhere, each completed frame's delay into the one-way delay
//! record. However the reads split the stream, the frames found must be the same.
//! Input: a byte choosing the read sizes, then the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netmeter::latency::OwdRecord;
use netmeter::wire::TcpFrameParser;

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    let mut whole = Vec::new();
    let mut one = TcpFrameParser::default();
    one.feed(stream, |sent| whole.push(sent));

    let mut pieces = Vec::new();
    let mut parser = TcpFrameParser::default();
    let mut owd = OwdRecord::default();
    let now = 1_790_000_000_000_000_000i64;
    let (mut rest, mut k) = (stream, split as usize);
    while !rest.is_empty() {
        // Read sizes from 1 byte up, varying with the input.
        let n = (k % 23 + 1).min(rest.len());
        k = k.wrapping_mul(31).wrapping_add(rest[0] as usize);
        parser.feed(&rest[..n], |sent| {
            pieces.push(sent);
            // As engine::stream's TCP receive loop records it.
            owd.record_write(now, sent, 0);
        });
        rest = &rest[n..];
    }
    assert_eq!(whole, pieces);
    assert_eq!(one.broken, parser.broken);
    let _ = owd.summary();
});
