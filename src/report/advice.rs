//! Host sanity: noticing when the hosts, not the network, shaped the result.
//!
//! Pure rules over facts the engine collected (socket buffer sizes the kernel granted,
//! receive-buffer drops, CPU use). Each warning names the problem and the fix.

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
