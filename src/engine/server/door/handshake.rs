//! The bytes of a control connection's handshake as a pure state machine: the 37-byte
//! cookie, then length-prefixed JSON messages (the parameters, a key proof), each
//! length capped before anything is allocated. It says how many bytes it wants next
//! and never more, so that nothing past the handshake is consumed: a data stream's
//! payload after its cookie, or anything after the parameters, stays in the socket for
//! whoever takes it on. The event loop (`door`) reads and writes; this only counts.

use crate::wire::{self, COOKIE_LEN, WireError};

/// What the bytes so far amount to.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Not complete yet: read up to [`Handshake::wanted`] more.
    More,
    /// The cookie is complete.
    Cookie([u8; COOKIE_LEN]),
    /// A length-prefixed message's body is complete.
    Message(Vec<u8>),
    /// The message's length is out of range (nothing was allocated for it).
    Bad(WireError),
}

#[derive(Debug)]
enum Reading {
    Cookie,
    Length {
        max: u32,
    },
    Body,
    /// A fixed number of raw bytes (the rest of an iperf 2 test header).
    Raw,
    /// Between messages: the server owes the next word.
    Idle,
}

/// One connection's handshake bytes.
#[derive(Debug)]
pub struct Handshake {
    reading: Reading,
    buf: Vec<u8>,
    need: usize,
}

impl Default for Handshake {
    fn default() -> Self {
        Handshake::new()
    }
}

impl Handshake {
    /// A fresh connection: its cookie comes first.
    pub fn new() -> Handshake {
        Handshake {
            reading: Reading::Cookie,
            buf: Vec::with_capacity(COOKIE_LEN),
            need: COOKIE_LEN,
        }
    }

    /// The peer owes a length-prefixed message of at most `max` bytes.
    pub fn expect_message(&mut self, max: u32) {
        self.reading = Reading::Length { max };
        self.buf.clear();
        self.need = 4;
    }

    /// The peer owes `n` raw bytes (the rest of an iperf 2 header, its length already
    /// capped by `wire::iperf2`); they come back as one [`Step::Message`].
    pub fn expect_raw(&mut self, n: usize) {
        self.reading = Reading::Raw;
        self.buf = Vec::with_capacity(n);
        self.need = n;
    }

    /// How many bytes to read next (0 between messages).
    pub fn wanted(&self) -> usize {
        match self.reading {
            Reading::Idle => 0,
            _ => self.need - self.buf.len(),
        }
    }

    /// Take bytes read from the peer; at most [`Handshake::wanted`] of them are used.
    pub fn feed(&mut self, bytes: &[u8]) -> Step {
        let take = bytes.len().min(self.wanted());
        self.buf.extend_from_slice(&bytes[..take]);
        if self.buf.len() < self.need || matches!(self.reading, Reading::Idle) {
            return Step::More;
        }
        match self.reading {
            Reading::Cookie => {
                let mut c = [0u8; COOKIE_LEN];
                c.copy_from_slice(&self.buf);
                self.idle();
                Step::Cookie(c)
            }
            Reading::Length { max } => {
                let hdr = [self.buf[0], self.buf[1], self.buf[2], self.buf[3]];
                match wire::decode_json_len(hdr, max) {
                    Ok(len) => {
                        self.reading = Reading::Body;
                        self.buf = Vec::with_capacity(len);
                        self.need = len;
                        Step::More
                    }
                    Err(e) => {
                        self.idle();
                        Step::Bad(e)
                    }
                }
            }
            Reading::Body | Reading::Raw => {
                let body = std::mem::take(&mut self.buf);
                self.idle();
                Step::Message(body)
            }
            Reading::Idle => Step::More,
        }
    }

    fn idle(&mut self) {
        self.reading = Reading::Idle;
        self.buf = Vec::new();
        self.need = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOKIE: &[u8; COOKIE_LEN] = b"abcdefghijklmnopqrstuvwxyz0123456789\0";

    /// Byte by byte or all at once, the same steps; never a byte past the cookie.
    #[test]
    fn the_cookie_then_a_message_in_any_slicing() {
        let msg = wire::encode_json(&serde_json::json!({"tcp": true}));
        for chunk in [1, 2, 5, 64] {
            let mut h = Handshake::new();
            let mut steps = Vec::new();
            let mut input: Vec<u8> = COOKIE.to_vec();
            input.extend_from_slice(b"payload after the cookie");
            let mut at = 0;
            while h.wanted() > 0 {
                let n = chunk.min(h.wanted());
                match h.feed(&input[at..at + n]) {
                    Step::More => {}
                    s => steps.push(s),
                }
                at += n;
            }
            assert_eq!(at, COOKIE_LEN, "chunk {chunk}: read past the cookie");
            assert_eq!(steps, [Step::Cookie(*COOKIE)]);
            h.expect_message(wire::MAX_PARAMS_LEN);
            let mut at = 0;
            let mut got = None;
            while h.wanted() > 0 {
                let n = chunk.min(h.wanted());
                if let Step::Message(b) = h.feed(&msg[at..at + n]) {
                    got = Some(b);
                }
                at += n;
            }
            assert_eq!(at, msg.len());
            assert_eq!(got.as_deref(), Some(&msg[4..]), "chunk {chunk}");
        }
    }

    #[test]
    fn lengths_out_of_range_are_refused_before_allocating() {
        for hdr in [[0u8; 4], [0xff; 4], 8193u32.to_be_bytes()] {
            let mut h = Handshake::new();
            assert_eq!(h.feed(COOKIE), Step::Cookie(*COOKIE));
            h.expect_message(8192);
            assert!(matches!(
                h.feed(&hdr),
                Step::Bad(WireError::BadLength { .. })
            ));
            assert_eq!(h.wanted(), 0);
        }
    }

    #[test]
    fn raw_bytes_come_back_whole_and_no_more() {
        let mut h = Handshake::new();
        h.expect_raw(5);
        assert_eq!(h.feed(b"abc"), Step::More);
        assert_eq!(h.wanted(), 2);
        assert_eq!(h.feed(b"defgh"), Step::Message(b"abcde".to_vec()));
        assert_eq!(h.wanted(), 0);
    }

    #[test]
    fn extra_bytes_are_left_alone_and_idle_wants_nothing() {
        let mut h = Handshake::new();
        let mut long = COOKIE.to_vec();
        long.extend_from_slice(&[1, 2, 3]);
        assert_eq!(h.feed(&long), Step::Cookie(*COOKIE));
        assert_eq!(h.wanted(), 0);
        assert_eq!(h.feed(b"more"), Step::More);
    }
}
