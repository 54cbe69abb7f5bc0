//! Multicast, as iperf 2 runs it: no control connection between sender and receivers.
//!
//! * A **receiver** (`netmeter -s -u -B GROUP[%DEV][,GROUP...] [-H SOURCE]`) joins each
//!   group (any-source, or source-specific with `-H`) on a socket bound to the group and
//!   port, and accounts every sender it hears as a stream of its own
//!   ([`account`](mod@account)): interval rows while it sends, a summary when its FIN or
//!   the idle time ends it. It runs until a stop signal, its `-t`, or with `-1` until the
//!   first sender ended; when it stops having heard nobody it says so.
//! * A **sender** (`netmeter -c GROUP -u`) sends iperf 2's UDP datagrams (sequence
//!   number and send time, then iperf 2's client header, `wire::iperf2`) at its `-b`
//!   for its `-t`/`-n`, with its `--ttl`, multicast loopback off unless `--mcast-loop`,
//!   out of the interface of `-B ADDR` or `%DEV`, then the FIN as iperf 2 ends: the next
//!   sequence number negated (sent three times against loss; receivers count it once).
//!
//! The receiver's threads (one per group) share the output; each waits at most
//! [`TICK`] for a datagram before it looks at the time.

pub mod account;
pub mod receivers;
pub mod render;
pub mod target;

use crate::clock::Clock;
use crate::pacing::Pacer;
use crate::sock::multicast::{self as msock, Outgoing};
use crate::units::Format;
use crate::wire::iperf2::{Amount, ClientHdr, UDP_DATAGRAM_LEN, write_datagram_id};
use account::{Event, Receiver};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::Write;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, UNIX_EPOCH};
use target::Group;

/// The longest a receiver's or sender's wait lasts before it checks for a stop.
pub const TICK: Duration = Duration::from_millis(100);
/// A sender silent this long has ended (iperf 2's receiver has no such end; a lost
/// FIN would leave its stream open for ever).
pub const DEFAULT_IDLE_S: f64 = 10.0;
/// iperf 2's UDP datagram length when `-l` is not given.
pub const DEFAULT_LEN: usize = 1470;
/// FIN copies a sender sends.
pub const FIN_COPIES: usize = 3;

/// A multicast receiver's resolved configuration.
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    pub groups: Vec<Group>,
    /// `-H`: the one source to hear (source-specific join).
    pub source: Option<IpAddr>,
    pub port: u16,
    pub interval_s: f64,
    pub idle_s: f64,
    /// `-1`: stop once a sender ended and none is left.
    pub one_off: bool,
    /// `-t`: stop after this long.
    pub duration: Option<Duration>,
    pub json: bool,
    pub format: Format,
    pub clock: Arc<dyn Clock>,
}

/// A multicast sender's resolved configuration.
#[derive(Debug, Clone)]
pub struct SenderConfig {
    pub group: Group,
    pub port: u16,
    /// `-B ADDR`: the source address (and, for IPv4, the outgoing interface).
    pub bind: Option<IpAddr>,
    pub ttl: u32,
    pub looped: bool,
    pub rate_bps: u64,
    pub len: usize,
    pub time: Duration,
    pub bytes: Option<u64>,
    pub tos: u8,
    pub json: bool,
    pub clock: Arc<dyn Clock>,
}

fn wall_s(clock: &dyn Clock) -> f64 {
    clock
        .wall()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

fn secs(clock: &dyn Clock, since: std::time::Instant) -> f64 {
    clock.now().saturating_duration_since(since).as_secs_f64()
}

pub(crate) fn say(out: &crate::engine::output::Sink, lines: &[String]) {
    if let Ok(mut w) = out.lock() {
        for l in lines {
            let _ = writeln!(w, "{l}");
        }
        let _ = w.flush();
    }
}

fn ifindex_of(g: &Group) -> anyhow::Result<u32> {
    match &g.dev {
        None => Ok(0),
        Some(d) => msock::if_index(d)
            .map_err(|e| anyhow::anyhow!("-B {}%{d}: no such interface ({e})", g.addr)),
    }
}

/// A socket bound to `group`'s port (on the group address, so it hears no other
/// group's datagrams) and joined to it.
pub(crate) fn join_socket(
    g: &Group,
    source: Option<IpAddr>,
    port: u16,
) -> anyhow::Result<UdpSocket> {
    let ifindex = ifindex_of(g)?;
    let dom = if g.addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let s = Socket::new(dom, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    // Several receivers (and iperf 2's) may share a host and a port.
    s.set_reuse_port(true)?;
    let mut at = SocketAddr::new(g.addr, port);
    if let SocketAddr::V6(v6) = &mut at {
        v6.set_scope_id(ifindex);
    }
    s.bind(&SockAddr::from(at))
        .map_err(|e| anyhow::anyhow!("cannot bind to multicast {at}: {e}"))?;
    msock::join(&s, g.addr, source, ifindex).map_err(|e| {
        let what = source.map_or(String::new(), |s| format!(" from source {s}"));
        anyhow::anyhow!(
            "cannot join multicast group {}{what} (-B{}): {e}",
            g.addr,
            if g.dev.is_none() {
                "; name the interface with GROUP%DEV when there is no route to the group"
            } else {
                ""
            }
        )
    })?;
    let _ = s.set_recv_buffer_size(4 << 20);
    let sock: UdpSocket = s.into();
    sock.set_read_timeout(Some(TICK))?;
    Ok(sock)
}

/// Run the receivers until a stop (see the module's text). Whether any sender was heard.
pub fn run_receivers(
    cfg: &ReceiverConfig,
    out: crate::engine::output::Sink,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<bool> {
    let socks: Vec<UdpSocket> = cfg
        .groups
        .iter()
        .map(|g| join_socket(g, cfg.source, cfg.port))
        .collect::<anyhow::Result<_>>()?;
    if !cfg.json {
        let mut l = Vec::new();
        for g in &cfg.groups {
            let src = cfg
                .source
                .map_or(String::new(), |s| format!(" from source {s}"));
            let dev = g
                .dev
                .as_deref()
                .map_or(String::new(), |d| format!(" on {d}"));
            l.push(format!(
                "Multicast receiver listening on {} port {}{dev}{src}",
                g.addr, cfg.port
            ));
        }
        l.push(render::HEADER.to_string());
        say(&out, &l);
    }
    let heard = std::thread::scope(|sc| {
        let handles: Vec<_> = socks
            .into_iter()
            .zip(&cfg.groups)
            .map(|(s, g)| {
                let (out, stop) = (out.clone(), stop.clone());
                sc.spawn(move || receive(cfg, g.addr, &s, &out, &stop))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(false))
            .fold(false, |a, b| a | b)
    });
    Ok(heard)
}

/// One group's receive loop. Whether any sender was heard.
fn receive(
    cfg: &ReceiverConfig,
    group: IpAddr,
    sock: &UdpSocket,
    out: &crate::engine::output::Sink,
    stop: &AtomicBool,
) -> bool {
    let clock = &*cfg.clock;
    let t0 = clock.now();
    let mut r = Receiver::new(cfg.interval_s, cfg.idle_s);
    let mut buf = vec![0u8; 65536];
    let mut any_ended = false;
    loop {
        let now = secs(clock, t0);
        let stopping = stop.load(Ordering::Relaxed)
            || crate::sock::stop_signal().is_some()
            || cfg.duration.is_some_and(|d| now >= d.as_secs_f64())
            || (cfg.one_off && any_ended && r.active() == 0);
        if stopping {
            let ev = r.stop(now);
            show(cfg, group, out, &ev);
            if r.heard == 0 {
                say_nobody(cfg, group, out);
            }
            // Another group's thread may stop on -1 too.
            if cfg.one_off {
                stop.store(true, Ordering::Relaxed);
            }
            return r.heard > 0;
        }
        // The socket's read timeout is TICK (set once): a silent link's row comes at
        // most that late, its figures the same (they are marked at the row's end).
        let ev = match sock.recv_from(&mut buf) {
            Ok((n, from)) => r.on_datagram(from, &buf[..n], secs(clock, t0), wall_s(clock)),
            Err(e) => {
                if !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) {
                    // Not a timeout: do not spin on it.
                    std::thread::sleep(TICK);
                }
                r.on_tick(secs(clock, t0))
            }
        };
        any_ended |= ev.iter().any(|e| matches!(e, Event::Ended(_)));
        show(cfg, group, out, &ev);
    }
}

fn show(cfg: &ReceiverConfig, group: IpAddr, out: &crate::engine::output::Sink, ev: &[Event]) {
    if ev.is_empty() {
        return;
    }
    let lines: Vec<String> = if cfg.json {
        ev.iter()
            .filter_map(|e| match e {
                Event::Ended(s) => Some(render::summary_json(group, cfg.port, s)),
                _ => None,
            })
            .collect()
    } else {
        ev.iter()
            .flat_map(|e| render::event_text(group, e, cfg.format))
            .collect()
    };
    say(out, &lines);
}

fn say_nobody(cfg: &ReceiverConfig, group: IpAddr, out: &crate::engine::output::Sink) {
    let text = render::nobody_text(group, cfg.source, cfg.port);
    let line = if cfg.json {
        serde_json::to_string(&render::NobodyJson {
            multicast: "receiver",
            group,
            port: cfg.port,
            ssm_source: cfg.source,
            error: text,
        })
        .unwrap_or_default()
    } else {
        text
    };
    say(out, &[line]);
}

/// What a sender sent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sent {
    pub datagrams: u64,
    pub bytes: u64,
    /// Sends the kernel refused (a full buffer, no route): lost as on a link.
    pub errors: u64,
    /// From the first datagram's schedule to the FIN.
    pub seconds: f64,
}

pub(crate) fn sender_socket(cfg: &SenderConfig) -> anyhow::Result<UdpSocket> {
    let g = &cfg.group;
    let v6 = g.addr.is_ipv6();
    let s = Socket::new(
        if v6 { Domain::IPV6 } else { Domain::IPV4 },
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    let ifindex = ifindex_of(g)?;
    let out = match (ifindex, cfg.bind) {
        (i, _) if i > 0 => Outgoing::Index(i),
        (_, Some(IpAddr::V4(a))) => Outgoing::Address(a),
        _ => Outgoing::Route,
    };
    msock::set_sender(&s, v6, cfg.ttl, cfg.looped, out)
        .map_err(|e| anyhow::anyhow!("cannot set up multicast sending to {}: {e}", g.addr))?;
    if cfg.tos != 0 {
        if v6 {
            let _ = s.set_tclass_v6(u32::from(cfg.tos));
        } else {
            let _ = s.set_tos_v4(u32::from(cfg.tos));
        }
    }
    if let Some(b) = cfg.bind {
        if b.is_ipv6() != v6 {
            anyhow::bail!(
                "-B {b} and group {} are of different address families",
                g.addr
            );
        }
        s.bind(&SockAddr::from(SocketAddr::new(b, 0)))
            .map_err(|e| anyhow::anyhow!("cannot bind to -B {b}: {e}"))?;
    }
    let mut to = SocketAddr::new(g.addr, cfg.port);
    if let SocketAddr::V6(v) = &mut to {
        v.set_scope_id(ifindex);
    }
    s.connect(&SockAddr::from(to))
        .map_err(|e| anyhow::anyhow!("cannot send to multicast {to}: {e}"))?;
    Ok(s.into())
}

/// Send to the group until `-t`/`-n`, a stop signal or `stop`, then the FIN.
pub fn run_sender(
    cfg: &SenderConfig,
    out: crate::engine::output::Sink,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Sent> {
    let sock = sender_socket(cfg)?;
    let sent = send_on(cfg, &sock, &out, &stop)?;
    say(&out, &[sent_line(cfg, &sent)]);
    Ok(sent)
}

/// Send on `sock` (from [`sender_socket`]) until `-t`/`-n`, a stop signal or `stop`,
/// then the FIN; the seconds it took are in [`Sent::seconds`].
pub(crate) fn send_on(
    cfg: &SenderConfig,
    sock: &UdpSocket,
    out: &crate::engine::output::Sink,
    stop: &AtomicBool,
) -> anyhow::Result<Sent> {
    let clock = &*cfg.clock;
    let local = sock.local_addr()?;
    if !cfg.json {
        say(
            out,
            &[format!(
                "Multicast sender {} port {} to {} port {}, TTL {}, {} datagrams of {} bytes",
                local.ip(),
                local.port(),
                cfg.group.addr,
                cfg.port,
                cfg.ttl,
                crate::units::format_rate(cfg.rate_bps as f64, Format::Auto),
                cfg.len
            )],
        );
    }
    let mut d = datagram(cfg);
    let t0 = clock.now();
    let mut pacer = Pacer::new(cfg.rate_bps, cfg.len, None, 0.0).ending_at(cfg.time.as_secs_f64());
    let mut sent = Sent::default();
    let mut seq: i64 = 1;
    loop {
        let now = secs(clock, t0);
        let done = now >= cfg.time.as_secs_f64()
            || cfg.bytes.is_some_and(|n| sent.bytes >= n)
            || stop.load(Ordering::Relaxed)
            || crate::sock::stop_signal().is_some();
        if done {
            break;
        }
        let wait = pacer.poll(now, cfg.len);
        if !wait.is_zero() {
            std::thread::sleep(wait.min(TICK));
            continue;
        }
        stamp(&mut d, seq, clock);
        match sock.send(&d) {
            Ok(n) => {
                sent.bytes += n as u64;
                sent.datagrams += 1;
            }
            Err(_) => sent.errors += 1,
        }
        seq += 1;
    }
    // The FIN: iperf 2's `FinishTrafficActions` writes the next sequence number
    // negated once; three copies here, a receiver counts the first it gets.
    stamp(&mut d, -seq, clock);
    for _ in 0..FIN_COPIES {
        if sock.send(&d).is_ok() {
            sent.bytes += d.len() as u64;
        }
    }
    sent.datagrams += 1;
    sent.seconds = secs(clock, t0).max(1e-9);
    Ok(sent)
}

/// What a sender prints of what it sent (`-J`: one object).
pub(crate) fn sent_line(cfg: &SenderConfig, sent: &Sent) -> String {
    let elapsed = sent.seconds;
    if cfg.json {
        serde_json::json!({
            "multicast": "sender",
            "group": cfg.group.addr,
            "port": cfg.port,
            "datagrams": sent.datagrams,
            "bytes": sent.bytes,
            "send_errors": sent.errors,
            "seconds": elapsed,
        })
        .to_string()
    } else {
        format!(
            "Sent {} datagrams ({} bytes, the last the FIN sent {FIN_COPIES} times) in {:.2} s, {}; {} send errors",
            sent.datagrams,
            sent.bytes,
            elapsed,
            crate::units::format_rate(sent.bytes as f64 * 8.0 / elapsed, Format::Auto),
            sent.errors
        )
    }
}

/// A datagram with iperf 2's client header after the sequence and time fields (so an
/// iperf 2 receiver reads 64-bit sequence numbers and the test's settings), the rest
/// iperf 2's digit pattern.
fn datagram(cfg: &SenderConfig) -> Vec<u8> {
    let hdr = ClientHdr {
        udp: true,
        threads: 1,
        port: cfg.port,
        buf_len: cfg.len as u32,
        amount: match cfg.bytes {
            Some(n) => Amount::Bytes(n),
            None => Amount::TimeCentis((cfg.time.as_millis() / 10).min(u32::MAX as u128) as u32),
        },
        rate_bps: cfg.rate_bps,
        tos: cfg.tos,
        flags: 0,
        upper: 0,
        start: None,
    }
    .encode();
    let len = cfg.len.max(hdr.len());
    let mut d: Vec<u8> = (0..len).map(|i| b'0' + (i % 10) as u8).collect();
    d[..hdr.len()].copy_from_slice(&hdr);
    debug_assert!(d.len() >= UDP_DATAGRAM_LEN);
    d
}

fn stamp(d: &mut [u8], seq: i64, clock: &dyn Clock) {
    let t = clock.wall().duration_since(UNIX_EPOCH).unwrap_or_default();
    write_datagram_id(d, seq, t.as_secs() as u32, t.subsec_micros());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::iperf2::{DatagramId, TestHdr};

    fn cfg() -> SenderConfig {
        SenderConfig {
            group: target::parse_group("239.1.1.1").unwrap(),
            port: 5001,
            bind: None,
            ttl: 8,
            looped: false,
            rate_bps: 10_000_000,
            len: 1470,
            time: Duration::from_secs(10),
            bytes: None,
            tos: 0,
            json: false,
            clock: crate::clock::system(),
        }
    }

    #[test]
    fn the_datagram_reads_as_iperf2_with_64_bit_sequence_numbers() {
        let mut d = datagram(&cfg());
        assert_eq!(d.len(), 1470);
        stamp(
            &mut d,
            -5_000_000_000,
            &crate::clock::ManualClock::at_unix(1000),
        );
        assert!(DatagramId::flags_seq64(&d));
        let id = DatagramId::parse(&d, true).unwrap();
        assert_eq!((id.seq, id.sec), (-5_000_000_000, 1000));
        let h = TestHdr::parse_udp(&d).unwrap();
        assert!(h.udp);
        assert_eq!(h.port, 5001);
    }

    #[test]
    fn a_short_length_still_holds_the_header() {
        let mut c = cfg();
        c.len = 20;
        assert!(datagram(&c).len() >= crate::wire::iperf2::UDP_HDR_LEN);
    }
}
