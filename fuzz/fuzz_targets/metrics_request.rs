//! The bytes a `--metrics` client sends: `metrics::parse_request` over every prefix the
//! responder could have read (the head arriving a byte at a time), with the peer open
//! and closed, then `metrics::reply`. A verdict, once given, must not change as more
//! bytes arrive; nothing past `MAX_REQUEST_BYTES` is looked at; every answer is one
//! HTTP/1.1 head whose Content-Length matches what follows (none for HEAD).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netmeter::engine::server::metrics::{
    self, MAX_REQUEST_BYTES, Method, Parsed, Snapshot, parse_request, reply,
};

fuzz_target!(|data: &[u8]| {
    let s = Snapshot::default();
    let mut first: Option<Parsed> = None;
    // Prefixes as the responder reads them (1 KiB reads at most; every length up to
    // 64 bytes, to cover trickled heads).
    let mut lens: Vec<usize> = (1..=data.len().min(64)).collect();
    lens.extend((64..=data.len()).step_by(97));
    lens.push(data.len());
    for &n in &lens {
        let open = parse_request(&data[..n], false);
        if let Some(f) = first {
            assert_eq!(open, f, "a verdict changed at {n} bytes");
        } else if open != Parsed::Incomplete {
            first = Some(open);
        }
        if n >= MAX_REQUEST_BYTES {
            assert_ne!(open, Parsed::Incomplete, "read past the cap");
        }
        let Parsed::Done(r) = parse_request(&data[..n], true) else {
            panic!("a closed request is always judged");
        };
        check_reply(r, &s);
    }
    // Whatever lies past the cap changes nothing.
    if data.len() > MAX_REQUEST_BYTES {
        assert_eq!(
            parse_request(data, true),
            parse_request(&data[..MAX_REQUEST_BYTES], true)
        );
    }
    let _ = metrics::render(&s);
});

fn check_reply(r: Result<metrics::Request, metrics::RequestError>, s: &Snapshot) {
    let out = reply(r, s);
    let text = std::str::from_utf8(&out).expect("the answer is text");
    let (head, body) = text.split_once("\r\n\r\n").expect("one head");
    assert!(head.starts_with("HTTP/1.1 "), "{head}");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("Content-Length")
        .parse()
        .expect("a number");
    let head_only = matches!(r, Ok(q) if q.method == Method::Head);
    if head_only {
        assert!(body.is_empty());
    } else {
        assert_eq!(body.len(), len);
    }
}
