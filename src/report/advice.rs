//! Host sanity: noticing when the hosts, not the network, shaped the result.
//!
//! Pure rules over facts the engine collected (socket buffer sizes the kernel granted,
//! receive-buffer drops, CPU use). Each warning names the problem and the fix.

use crate::host::facts::ThreadCpu;
use crate::report::{RateShortfall, ShortfallCause};
use crate::units::{Format, format_bytes, format_rate};

/// Facts about one side of a test.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostFacts {
    /// "local" or "remote", for the message.
    pub side: &'static str,
    pub udp: bool,
    /// Target rate per stream (bits/s), 0 = unlimited.
    pub rate_bps: u64,
    pub streams: u32,
    /// `-w` as requested, if given.
    pub requested_buf: Option<u64>,
    /// What the kernel granted for the receive and send buffers of the first stream.
    pub rcvbuf: u64,
    pub sndbuf: u64,
    /// This side receives data.
    pub receives: bool,
    /// Receive-buffer drops counted by the kernel, if known.
    pub host_drops: Option<u64>,
    /// Process CPU percent of one core (iperf3's `cpu_util_total`).
    pub cpu_total: f64,
    /// `-Z` with MSG_ZEROCOPY: sends the kernel released, and how many it copied.
    pub zerocopy: Option<(u64, u64)>,
}

/// How much traffic (seconds at the offered rate) a UDP receive buffer should hold to
/// ride out an ordinary scheduling delay of the receiving thread.
pub const UDP_BUFFER_SECONDS: f64 = 0.010;

/// A side whose process used this much of a core per stream thread was CPU-bound.
pub const CPU_BOUND_PERCENT: f64 = 90.0;

/// The warnings for one side.
pub fn warnings(f: &HostFacts) -> Vec<String> {
    let mut w = Vec::new();
    if let Some(req) = f.requested_buf {
        // Linux doubles the requested value for bookkeeping and reports the double.
        let granted = f.rcvbuf.min(f.sndbuf) / 2;
        if granted < req {
            w.push(format!(
                "{} socket buffer: -w asked for {} but the kernel granted {}; raise net.core.rmem_max and net.core.wmem_max",
                f.side,
                format_bytes(req as f64, Format::Auto).trim(),
                format_bytes(granted as f64, Format::Auto).trim()
            ));
        }
    }
    if f.udp && f.receives && f.rate_bps > 0 {
        let need = (f.rate_bps as f64 / 8.0 * UDP_BUFFER_SECONDS) as u64;
        if f.rcvbuf > 0 && f.rcvbuf < need {
            w.push(format!(
                "{} UDP receive buffer of {} holds less than {} ms at {:.0} Mbit/s; use -w {} (and raise net.core.rmem_max) to avoid losing datagrams on this host",
                f.side,
                format_bytes(f.rcvbuf as f64, Format::Auto).trim(),
                UDP_BUFFER_SECONDS * 1000.0,
                f.rate_bps as f64 / 1e6,
                suggest_window(need)
            ));
        }
    }
    if let Some(d) = f.host_drops.filter(|&d| d > 0) {
        // Twice the buffer it had (-w N gives 2N; a remote buffer is unknown here, so
        // twice netmeter's own default request).
        let window = suggest_window(if f.rcvbuf > 0 { f.rcvbuf } else { 8 << 20 });
        let bytes = crate::units::parse_bytes(&window).unwrap_or(8 << 20);
        w.push(format!(
            "{} host's kernel dropped {d} incoming packets because the UDP receive buffer was full (with GRO one packet carries many datagrams): that loss happened in this host, not the network; use a larger -w (-w {window}, which net.core.rmem_max caps: sudo sysctl -w net.core.rmem_max={bytes}) or fewer/slower streams; tools that keep the default buffer (iperf3 without -w) get net.core.rmem_default",
            f.side
        ));
    }
    if let Some((sends, copied)) = f.zerocopy.filter(|&(_, c)| c > 0) {
        w.push(format!(
            "{} -Z: the kernel copied {copied} of {sends} MSG_ZEROCOPY sends after all (it does for loopback and for devices that cannot send from user pages), so those bytes were not sent zero-copy",
            f.side
        ));
    }
    if f.streams > 0 && f.cpu_total / f.streams as f64 >= CPU_BOUND_PERCENT {
        w.push(format!(
            "{} side was CPU-bound ({:.0}% of a core for {} stream(s)): the result may show the host's limit, not the network's",
            f.side, f.cpu_total, f.streams
        ));
    }
    w
}

/// A stream thread that was on a CPU, or ready to run and waiting for one, this much of
/// its time never waited for the network: the host's CPU set the pace.
pub const THREAD_BUSY_PERCENT: f64 = 90.0;

/// A thread spent this much of its time waiting for a CPU: say so, it was not all its own
/// work.
const THREAD_WAIT_NOTE_PERCENT: f64 = 10.0;

/// The CPU-bound rule on one side's stream threads (per role: senders, receivers):
/// a thread busy ([`THREAD_BUSY_PERCENT`], CPU plus run-queue wait) means the test
/// measured that host's CPU, not the network. `cpus`: CPUs that process may use, for
/// the advice on `-P`; `remote`: the threads are the peer's.
pub fn thread_warnings(threads: &[ThreadCpu], cpus: Option<u32>, remote: bool) -> Vec<String> {
    let mut w = Vec::new();
    let (whose, host) = if remote {
        ("remote ", "the remote host")
    } else {
        ("", "this host")
    };
    for (sender, role) in [(true, "sender"), (false, "receiver")] {
        let all: Vec<&ThreadCpu> = threads.iter().filter(|t| t.sender == sender).collect();
        let busy: Vec<&ThreadCpu> = all
            .iter()
            .copied()
            .filter(|t| t.cpu_percent + t.wait_percent.unwrap_or(0.0) >= THREAD_BUSY_PERCENT)
            .collect();
        let Some(top) = busy
            .iter()
            .max_by(|a, b| a.cpu_percent.total_cmp(&b.cpu_percent))
        else {
            continue;
        };
        let low = busy
            .iter()
            .map(|t| t.cpu_percent)
            .fold(f64::INFINITY, f64::min);
        let who = if all.len() == 1 {
            format!(
                "the {whose}{role}'s stream thread used {:.0}% of a CPU",
                top.cpu_percent
            )
        } else if low.round() == top.cpu_percent.round() {
            format!(
                "{} of {} {whose}{role} stream threads used {:.0}% of a CPU each",
                busy.len(),
                all.len(),
                top.cpu_percent
            )
        } else {
            format!(
                "{} of {} {whose}{role} stream threads used {:.0}-{:.0}% of a CPU each",
                busy.len(),
                all.len(),
                low,
                top.cpu_percent
            )
        };
        let wait = busy
            .iter()
            .filter_map(|t| t.wait_percent)
            .fold(0.0, f64::max);
        let waited = if wait >= THREAD_WAIT_NOTE_PERCENT {
            format!(" and waited for one {wait:.0}% of the time (other work had it)")
        } else {
            String::new()
        };
        let n = all.len() as u32;
        let fix = match cpus {
            Some(c) if c <= n => format!(
                "this host has {c} CPU(s) for {n} {role} stream thread(s), so more streams will not help"
            ),
            Some(c) => format!("try -P {}", (2 * n).min(c)),
            None => format!("try -P {}", 2 * n),
        };
        let fix = if waited.is_empty() {
            fix
        } else {
            format!("{fix}, or a less busy host")
        };
        w.push(format!(
            "{who}{waited}: the test was CPU-bound on {host}, not network-bound; {fix}"
        ));
    }
    w
}

/// A paced sender that ends more than this far below its `-b` (and more than one
/// datagram short) is reported.
pub const SHORTFALL_PERCENT: f64 = 1.0;

/// A short sender's thread that waited for a CPU this much of its time, or fell this far
/// behind its schedule, was stalled by other work on its host.
const STALL_WAIT_PERCENT: f64 = 2.0;
/// A short sender's thread never idle that used at least this much of a CPU itself was
/// held back by its own CPU; one that mostly waited for a CPU while needing little
/// (seen: 0.4 % used, 90 % waiting, with 20 streams on 2 busy CPUs) was stalled.
const SENDER_CPU_PERCENT: f64 = 25.0;
const STALL_LAG_MS: f64 = 20.0;

/// One paced sending stream at the end of a test, for [`rate_shortfall`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SenderEnd {
    pub id: i64,
    pub bytes: u64,
    pub seconds: f64,
    /// Sends that blocked on a full socket buffer, if the sender counted them.
    pub blocked_sends: Option<u64>,
}

/// The shortfall rule on one side's paced UDP senders (issue 19): the streams that sent
/// more than [`SHORTFALL_PERCENT`] (and more than one `datagram`) below `rate_bps` over
/// their own time, and why, from the side's figures: blocked sends (the socket), a
/// thread busy all the time (the sender's CPU), a thread that waited for a CPU or fell
/// far behind its schedule (a stall). `threads` and `lag_ms` are the side's (empty and
/// `None` for an iperf3 peer).
pub fn rate_shortfall(
    side: &str,
    rate_bps: u64,
    datagram: usize,
    senders: &[SenderEnd],
    threads: &[ThreadCpu],
    lag_ms: Option<f64>,
) -> Option<RateShortfall> {
    if rate_bps == 0 || senders.is_empty() {
        return None;
    }
    let want = |s: &SenderEnd| rate_bps as f64 / 8.0 * s.seconds;
    let short: Vec<(&SenderEnd, f64)> = senders
        .iter()
        .filter(|s| s.seconds > 0.0)
        .filter_map(|s| {
            let missing = want(s) - s.bytes as f64;
            let pct = 100.0 * missing / want(s);
            (pct > SHORTFALL_PERCENT && missing > datagram as f64).then_some((s, pct))
        })
        .collect();
    if short.is_empty() {
        return None;
    }
    let thread = |id: i64| threads.iter().find(|t| t.sender && t.id == id);
    let fold_max = |it: &mut dyn Iterator<Item = f64>| it.reduce(f64::max);
    let cpu = fold_max(
        &mut short
            .iter()
            .filter_map(|(s, _)| thread(s.id))
            .map(|t| t.cpu_percent),
    );
    let wait = fold_max(
        &mut short
            .iter()
            .filter_map(|(s, _)| thread(s.id).and_then(|t| t.wait_percent)),
    );
    let busy = fold_max(
        &mut short
            .iter()
            .filter_map(|(s, _)| thread(s.id))
            .map(|t| t.cpu_percent + t.wait_percent.unwrap_or(0.0)),
    );
    let blocked = short
        .iter()
        .filter_map(|(s, _)| s.blocked_sends)
        .reduce(|a, b| a + b);
    let cause = if blocked.is_some_and(|b| b > 0) {
        ShortfallCause::Socket
    } else if busy.is_some_and(|b| b >= THREAD_BUSY_PERCENT)
        && cpu.is_some_and(|c| c >= SENDER_CPU_PERCENT)
    {
        // Never idle, on a CPU or waiting for one, and a real user of it: the CPU set
        // the pace.
        ShortfallCause::SenderCpu
    } else if wait.is_some_and(|w| w >= STALL_WAIT_PERCENT)
        || lag_ms.is_some_and(|l| l >= STALL_LAG_MS)
    {
        ShortfallCause::Stall
    } else {
        ShortfallCause::Unknown
    };
    let pcts = short.iter().map(|(_, p)| *p);
    Some(RateShortfall {
        side: side.to_string(),
        target_bits_per_second: rate_bps,
        streams: short.iter().map(|(s, _)| s.id).collect(),
        of_streams: senders.len() as u32,
        min_short_percent: pcts.clone().fold(f64::INFINITY, f64::min),
        max_short_percent: pcts.fold(0.0, f64::max),
        sent_bits_per_second: senders
            .iter()
            .map(|s| crate::stats::bits_per_second(s.bytes, s.seconds))
            .sum(),
        target_sum_bits_per_second: senders.iter().filter(|s| s.seconds > 0.0).count() as f64
            * rate_bps as f64,
        cause,
        max_lag_ms: lag_ms,
        max_thread_cpu_percent: cpu,
        max_thread_wait_percent: wait,
        blocked_sends: blocked,
    })
}

/// The shortfall's warning line: how far and why.
pub fn shortfall_warning(r: &RateShortfall) -> String {
    let rate = |b: f64| format_rate(b, Format::Auto).trim().to_string();
    let target = rate(r.target_bits_per_second as f64);
    let how_far = if (r.max_short_percent - r.min_short_percent) < 0.05 {
        format!("{:.1}%", r.max_short_percent)
    } else {
        format!("{:.1}-{:.1}%", r.min_short_percent, r.max_short_percent)
    };
    let head = if r.of_streams == 1 {
        format!(
            "{} UDP sender sent {}, {how_far} below -b {target}",
            r.side,
            rate(r.sent_bits_per_second)
        )
    } else {
        format!(
            "{} UDP senders: {} of {} streams sent {how_far} below -b {target} ({} of {} in all)",
            r.side,
            r.streams.len(),
            r.of_streams,
            rate(r.sent_bits_per_second),
            rate(r.target_sum_bits_per_second)
        )
    };
    let (its, they) = if r.of_streams == 1 {
        ("its thread", "it")
    } else {
        ("their threads", "they")
    };
    let host = if r.side == "remote" {
        "the remote host"
    } else {
        "this host"
    };
    let behind = r.max_lag_ms.map_or(String::new(), |l| {
        format!(", {they} fell up to {l:.0} ms behind the schedule")
    });
    let waited = r
        .max_thread_wait_percent
        .filter(|&w| w >= STALL_WAIT_PERCENT)
        .map_or(String::new(), |w| {
            format!(" and waited for one up to {w:.0}% of the time")
        });
    let why = match r.cause {
        ShortfallCause::Socket => format!(
            "the socket: {} send(s) found its buffer full for 50 ms{behind}; use a larger -w (and raise net.core.wmem_max) or a lower -b",
            r.blocked_sends.unwrap_or(0)
        ),
        ShortfallCause::SenderCpu => format!(
            "the sender's CPU: {its} used up to {:.0}% of a CPU{waited}{behind}; {host} cannot send faster per stream{}, use more -P or a lower -b",
            r.max_thread_cpu_percent.unwrap_or(0.0),
            if waited.is_empty() {
                ""
            } else {
                " with other work on its CPUs"
            }
        ),
        ShortfallCause::Stall => {
            let held = r
                .max_thread_wait_percent
                .filter(|&w| w >= STALL_WAIT_PERCENT)
                .map_or(String::new(), |w| {
                    format!(
                        " {its} waited for a CPU up to {w:.0}% of the time (other work on {host}),"
                    )
                });
            let behind = r.max_lag_ms.map_or(String::new(), |l| {
                format!(" {they} fell up to {l:.0} ms behind the schedule,")
            });
            format!("a stall:{held}{behind} too late in the test to make it all up")
        }
        ShortfallCause::Unknown if r.max_lag_ms.is_none() => {
            "the peer does not say why (it is not netmeter)".to_string()
        }
        ShortfallCause::Unknown => {
            format!("not recorded: {its} had CPU to spare and no send blocked{behind}")
        }
    };
    format!("{head}: {why}")
}

/// The warnings for a client whose server runs in the same process (`--loopback`):
/// the per-side ones, with the CPU rule stated for the process as a whole.
pub fn shared_process_warnings(f: &HostFacts) -> Vec<String> {
    let mut w = warnings(&HostFacts {
        cpu_total: 0.0,
        ..f.clone()
    });
    if f.cpu_total >= CPU_BOUND_PERCENT {
        w.push(format!(
            "client and server share this process (--loopback) and used {:.0}% of a core together: loopback figures show this host's CPU limit, not a network's",
            f.cpu_total
        ));
    }
    w
}

/// A `-w` value (rounded up to a power of two in KiB) that holds `bytes`.
fn suggest_window(bytes: u64) -> String {
    let kib = bytes.div_ceil(1024).next_power_of_two();
    if kib >= 1024 {
        format!("{}M", kib / 1024)
    } else {
        format!("{kib}K")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> HostFacts {
        HostFacts {
            side: "local",
            udp: true,
            rate_bps: 1_000_000_000,
            streams: 1,
            rcvbuf: 8 << 20,
            sndbuf: 8 << 20,
            receives: true,
            cpu_total: 20.0,
            ..HostFacts::default()
        }
    }

    fn sender(id: i64, bytes: u64) -> SenderEnd {
        SenderEnd {
            id,
            bytes,
            seconds: 2.0,
            blocked_sends: Some(0),
        }
    }

    fn sender_thread(id: i64, cpu: f64, wait: f64) -> ThreadCpu {
        ThreadCpu {
            id,
            socket: None,
            sender: true,
            seconds: 2.0,
            cpu_percent: cpu,
            wait_percent: Some(wait),
        }
    }

    #[test]
    fn a_sender_within_one_percent_or_one_datagram_is_not_short() {
        // -b 1M for 2 s is 250 000 bytes; 0.9 % short passes.
        let ok = [sender(1, 247_800), sender(3, 251_000)];
        assert_eq!(
            rate_shortfall("local", 1_000_000, 1460, &ok, &[], Some(5.0)),
            None
        );
        // At 10 kbit/s one 1460-byte datagram is 58 % of 2 s: one missing is no finding.
        let slow = [sender(1, 2500 - 1460)];
        assert_eq!(
            rate_shortfall("local", 10_000, 1460, &slow, &[], Some(5.0)),
            None
        );
        // Unpaced senders have no -b to fall short of.
        assert_eq!(rate_shortfall("local", 0, 1460, &ok, &[], None), None);
    }

    #[test]
    fn a_stalled_sender_says_how_far_and_why() {
        // Issue 19: -b 1M for 2 s sent 917 Kbit/s, silently.
        let s = [sender(1, 229_250)];
        let t = [sender_thread(1, 0.5, 14.0)];
        let r = rate_shortfall("local", 1_000_000, 1460, &s, &t, Some(111.7)).expect("short");
        assert_eq!(r.cause, ShortfallCause::Stall);
        assert_eq!(r.streams, vec![1]);
        assert!(
            (r.max_short_percent - 8.3).abs() < 1e-9,
            "{}",
            r.max_short_percent
        );
        assert_eq!(
            shortfall_warning(&r),
            "local UDP sender sent 917 Kbits/sec, 8.3% below -b 1.00 Mbits/sec: a stall: its \
             thread waited for a CPU up to 14% of the time (other work on this host), it fell \
             up to 112 ms behind the schedule, too late in the test to make it all up"
        );
    }

    #[test]
    fn many_short_streams_make_one_line_with_the_range() {
        let mut s: Vec<SenderEnd> = (0..20).map(|i| sender(i, 250_000)).collect();
        s[3].bytes = 240_000; // 4 % short
        s[7].bytes = 245_000; // 2 % short
        let t: Vec<ThreadCpu> = (0..20).map(|i| sender_thread(i, 1.0, 0.5)).collect();
        let r = rate_shortfall("remote", 1_000_000, 1460, &s, &t, Some(45.0)).expect("short");
        assert_eq!((r.streams.clone(), r.of_streams), (vec![3, 7], 20));
        assert_eq!(r.cause, ShortfallCause::Stall);
        let w = shortfall_warning(&r);
        assert!(
            w.starts_with(
                "remote UDP senders: 2 of 20 streams sent 2.0-4.0% below -b 1.00 Mbits/sec \
                 (19.9 Mbits/sec of 20.0 Mbits/sec in all): a stall: they fell up to 45 ms"
            ),
            "{w}"
        );
    }

    #[test]
    fn the_cause_is_the_socket_then_the_cpu_then_a_stall() {
        let s = [sender(1, 200_000)];
        let cpu = [sender_thread(1, 60.0, 35.0)];
        let r = rate_shortfall("local", 1_000_000, 1460, &s, &cpu, Some(300.0)).unwrap();
        assert_eq!(r.cause, ShortfallCause::SenderCpu);
        let w = shortfall_warning(&r);
        assert!(
            w.contains(
                "the sender's CPU: its thread used up to 60% of a CPU and waited for one up to 35%"
            ),
            "{w}"
        );
        let blocked = [SenderEnd {
            blocked_sends: Some(4),
            ..s[0]
        }];
        let r = rate_shortfall("local", 1_000_000, 1460, &blocked, &cpu, Some(300.0)).unwrap();
        assert_eq!(r.cause, ShortfallCause::Socket);
        assert!(shortfall_warning(&r).contains("the socket: 4 send(s) found its buffer full"));
        // Runnable all the time but needing little CPU: starved by other work, a stall.
        let starved = [sender_thread(1, 0.4, 90.1)];
        let r = rate_shortfall("local", 1_000_000, 1460, &s, &starved, Some(233.0)).unwrap();
        assert_eq!(r.cause, ShortfallCause::Stall);
        // Nothing in the figures: said so, not guessed.
        let idle = [sender_thread(1, 1.0, 0.0)];
        let r = rate_shortfall("local", 1_000_000, 1460, &s, &idle, Some(3.0)).unwrap();
        assert_eq!(r.cause, ShortfallCause::Unknown);
        assert!(shortfall_warning(&r).contains("not recorded"));
        // An iperf3 peer records nothing at all.
        let r = rate_shortfall("remote", 1_000_000, 1460, &s, &[], None).unwrap();
        assert!(shortfall_warning(&r).ends_with("the peer does not say why (it is not netmeter)"));
    }

    #[test]
    fn quiet_when_all_is_well() {
        assert!(warnings(&base()).is_empty());
    }

    #[test]
    fn receive_buffer_drops_name_the_sysctls_to_run() {
        let f = HostFacts {
            host_drops: Some(351),
            ..base()
        };
        let w = warnings(&f);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].ends_with(
                "use a larger -w (-w 8M, which net.core.rmem_max caps: sudo sysctl -w \
                 net.core.rmem_max=8388608) or fewer/slower streams; tools that keep the default \
                 buffer (iperf3 without -w) get net.core.rmem_default"
            ),
            "{}",
            w[0]
        );
    }

    #[test]
    fn small_udp_buffer_for_the_rate() {
        let f = HostFacts {
            rcvbuf: 212_992,
            ..base()
        };
        let w = warnings(&f);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("-w 2M"), "{}", w[0]);
    }

    #[test]
    fn host_drops_cpu_and_capped_window() {
        let f = HostFacts {
            host_drops: Some(17),
            cpu_total: 99.0,
            requested_buf: Some(16 << 20),
            ..base()
        };
        let w = warnings(&f);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].contains("granted 4.00 MBytes"));
        assert!(w[1].contains("dropped 17 incoming packets"));
        assert!(w[2].contains("CPU-bound"));
    }

    #[test]
    fn zerocopy_sends_the_kernel_copied() {
        let f = HostFacts {
            zerocopy: Some((100, 100)),
            ..base()
        };
        let w = warnings(&f);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("copied 100 of 100 MSG_ZEROCOPY sends"),
            "{}",
            w[0]
        );
        let none_copied = HostFacts {
            zerocopy: Some((100, 0)),
            ..base()
        };
        assert!(warnings(&none_copied).is_empty());
    }

    fn thread(id: i64, sender: bool, cpu: f64, wait: Option<f64>) -> ThreadCpu {
        ThreadCpu {
            id,
            socket: None,
            sender,
            seconds: 2.0,
            cpu_percent: cpu,
            wait_percent: wait,
        }
    }

    #[test]
    fn a_busy_stream_thread_is_cpu_bound() {
        let w = thread_warnings(&[thread(5, true, 99.2, Some(0.4))], Some(4), false);
        assert_eq!(
            w,
            [
                "the sender's stream thread used 99% of a CPU: the test was CPU-bound on this host, not network-bound; try -P 2"
            ]
        );
        // Below the rule: nothing. Just at it with the wait: CPU-bound, wait named.
        assert!(thread_warnings(&[thread(5, true, 85.0, Some(4.0))], Some(4), false).is_empty());
        let w = thread_warnings(&[thread(5, true, 62.0, Some(30.0))], Some(2), false);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with("the sender's stream thread used 62% of a CPU and waited for one 30% of the time (other work had it): the test was CPU-bound")
                && w[0].ends_with("try -P 2, or a less busy host"),
            "{}",
            w[0]
        );
        // Without schedstat, CPU alone decides.
        assert!(thread_warnings(&[thread(5, true, 89.9, None)], None, false).is_empty());
        assert_eq!(
            thread_warnings(&[thread(5, true, 95.0, None)], None, false).len(),
            1
        );
    }

    #[test]
    fn thread_rule_per_role_and_cpu_count() {
        let t = [
            thread(5, true, 97.0, None),
            thread(7, true, 99.0, None),
            thread(8, true, 40.0, None),
            thread(9, false, 30.0, None),
        ];
        let w = thread_warnings(&t, Some(2), false);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("2 of 3 sender stream threads used 97-99% of a CPU each"),
            "{}",
            w[0]
        );
        assert!(
            w[0].ends_with("this host has 2 CPU(s) for 3 sender stream thread(s), so more streams will not help"),
            "{}",
            w[0]
        );
        let rx = [thread(5, false, 100.0, None), thread(7, false, 100.0, None)];
        let w = thread_warnings(&rx, Some(16), false);
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("2 of 2 receiver stream threads used 100% of a CPU each"));
        assert!(w[0].ends_with("try -P 4"), "{}", w[0]);
        assert!(thread_warnings(&[], Some(4), false).is_empty());
        // The peer's threads: named as the remote host's; its CPU count is unknown.
        let w = thread_warnings(&[thread(5, false, 99.0, None)], None, true);
        assert_eq!(
            w,
            [
                "the remote receiver's stream thread used 99% of a CPU: the test was CPU-bound on the remote host, not network-bound; try -P 2"
            ]
        );
    }

    #[test]
    fn one_process_for_both_ends_is_judged_once() {
        // --loopback: 146% of a core is the client and server threads together.
        let f = HostFacts {
            cpu_total: 146.0,
            ..base()
        };
        let w = shared_process_warnings(&f);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("share this process") && w[0].contains("146%"),
            "{}",
            w[0]
        );
        assert!(!w[0].contains("local side"));
        let light = HostFacts {
            cpu_total: 40.0,
            ..base()
        };
        assert!(shared_process_warnings(&light).is_empty());
    }
}
