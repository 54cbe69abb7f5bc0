//! Host sanity: noticing when the hosts, not the network, shaped the result.
//!
//! Pure rules over facts the engine collected (socket buffer sizes the kernel granted,
//! receive-buffer drops, CPU use). Each warning names the problem and the fix.

use crate::host::facts::ThreadCpu;
use crate::units::{Format, format_bytes};

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
        w.push(format!(
            "{} host's kernel dropped {d} incoming packets because the UDP receive buffer was full (with GRO one packet carries many datagrams): that loss happened in this host, not the network; use a larger -w or fewer/slower streams",
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

    #[test]
    fn quiet_when_all_is_well() {
        assert!(warnings(&base()).is_empty());
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
