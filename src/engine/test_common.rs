//! What the client and the server do alike: socket options on data streams, the
//! `start` facts, and assembling and printing the end summary.

use super::output::Output;
use crate::report::advice::{self, HostFacts};
use crate::report::build::{self, LocalFinal};
use crate::report::text;
use crate::report::{CpuUtil, End, EndExt, EndStream, TestStart};
use crate::sock;
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use crate::wire::Results;
use socket2::Socket;
use std::io::{self, Write};
use std::os::fd::AsRawFd;

/// Apply the spec's options to a data socket before it connects (or right after accept).
pub fn apply_sock_opts(s: &Socket, spec: &TestSpec, is_ipv6: bool) -> io::Result<()> {
    if let Some(w) = spec.window {
        let w = w as usize;
        s.set_send_buffer_size(w)?;
        s.set_recv_buffer_size(w)?;
    }
    if let Some(tos) = spec.tos {
        if is_ipv6 {
            s.set_tclass_v6(tos as u32)?;
        } else {
            s.set_tos(tos as u32)?;
        }
    }
    if let Some(rate) = spec.fq_rate_bps {
        sock::set_max_pacing_rate(s.as_raw_fd(), rate)?;
    }
    if spec.protocol == Protocol::Tcp {
        if spec.nodelay {
            s.set_nodelay(true)?;
        }
        if let Some(mss) = spec.mss {
            s.set_mss(mss)?;
        }
        if let Some(cc) = &spec.congestion
            && let Err(e) = sock::set_congestion(s.as_raw_fd(), cc)
        {
            return Err(io::Error::new(
                e.kind(),
                format!("congestion control '{cc}' is not available here: {e}"),
            ));
        }
    }
    Ok(())
}

/// A memory file holding the payload, for `sendfile` (`-Z`).
pub fn zerocopy_file(payload: &[u8]) -> io::Result<std::fs::File> {
    let mut f = tempfile_in_memory()?;
    f.write_all(payload)?;
    Ok(f)
}

fn tempfile_in_memory() -> io::Result<std::fs::File> {
    // An unlinked file in /dev/shm (tmpfs) behaves like iperf3's mmap'ed temp file.
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let mut rnd = [0u8; 8];
    let _ = sock::random_bytes(&mut rnd);
    let path = dir.join(format!("netmeter-{}", u64::from_ne_bytes(rnd)));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    let _ = std::fs::remove_file(&path);
    Ok(f)
}

/// `start.test_start` for a spec.
pub fn test_start(spec: &TestSpec, interval_s: f64) -> TestStart {
    let (duration, bytes, blocks) = match spec.end {
        EndCondition::Time(t) => (t, 0, 0),
        EndCondition::Bytes(n) => (0.0, n, 0),
        EndCondition::Blocks(k) => (0.0, 0, k),
    };
    TestStart {
        protocol: match spec.protocol {
            Protocol::Tcp => "TCP".into(),
            Protocol::Udp => "UDP".into(),
        },
        num_streams: spec.parallel,
        blksize: spec.block_len as u64,
        omit: spec.omit_s,
        duration,
        bytes,
        blocks,
        reverse: (spec.direction == Direction::Reverse) as u8,
        tos: spec.tos.unwrap_or(0),
        target_bitrate: spec.rate_bps,
        bidir: (spec.direction == Direction::Bidir) as u8,
        fqrate: spec.fq_rate_bps.unwrap_or(0),
        interval: interval_s,
        // Filled in once the streams exist (`client::udp_offloads`).
        gso: 0,
        gro: 0,
    }
}

/// Host facts and warnings for both sides.
fn host_checks(
    out: &Output,
    spec: &TestSpec,
    locals: &[LocalFinal],
    peer: &Results,
    local_cpu: (f64, f64, f64),
    in_process_server: bool,
) -> EndExt {
    let sum = |it: &mut dyn Iterator<Item = Option<u64>>| {
        it.fold(None, |a: Option<u64>, d| match (a, d) {
            (a, None) => a,
            (None, Some(d)) => Some(d),
            (Some(a), Some(d)) => Some(a + d),
        })
    };
    let local_drops = sum(&mut locals.iter().map(|l| l.host_drops));
    let remote_drops = sum(&mut peer.streams.iter().map(|s| s.netmeter_host_drops));
    let udp = spec.protocol == Protocol::Udp;
    let local = HostFacts {
        side: "local",
        udp,
        rate_bps: spec.rate_bps,
        streams: locals.len() as u32,
        requested_buf: spec.window,
        rcvbuf: out.report.start.rcvbuf_actual,
        sndbuf: out.report.start.sndbuf_actual,
        receives: locals.iter().any(|l| !l.sender),
        host_drops: local_drops,
        cpu_total: local_cpu.0,
        zerocopy: locals
            .iter()
            .filter_map(|l| l.zerocopy)
            .reduce(|a, b| (a.0 + b.0, a.1 + b.1)),
    };
    let remote = HostFacts {
        side: "remote",
        udp,
        rate_bps: spec.rate_bps,
        streams: peer.streams.len() as u32,
        host_drops: remote_drops,
        cpu_total: peer.cpu_util_total,
        ..HostFacts::default()
    };
    let warnings = if in_process_server {
        // One process, both ends: its CPU is judged once, for both.
        advice::shared_process_warnings(&local)
    } else {
        let mut w = advice::warnings(&local);
        w.extend(advice::warnings(&remote));
        w
    };
    EndExt {
        local_host_drops: local_drops,
        remote_host_drops: remote_drops,
        warnings,
        bounceback: None,
        trip_times: None,
        working_load: None,
        connect_only: None,
        connect_only_answered: None,
        ..EndExt::default()
    }
}

/// Build the end summary from local finals and the peer's results, store it in the
/// report and print it.
pub fn finish(
    out: &mut Output,
    spec: &TestSpec,
    locals: &[LocalFinal],
    peer: &Results,
    local_cpu: (f64, f64, f64),
    local_congestion: Option<String>,
    in_process_server: bool,
) {
    let protocol = spec.protocol;
    let bidir = spec.direction == Direction::Bidir;
    let streams: Vec<EndStream> = locals
        .iter()
        .map(|l| build::end_stream(protocol, l, peer.streams.iter().find(|p| p.id == l.id)))
        .collect();
    let fwd: Vec<&EndStream> = streams
        .iter()
        .zip(locals)
        .filter(|(_, l)| l.forward || !bidir)
        .map(|(s, _)| s)
        .collect();
    let rev: Vec<&EndStream> = streams
        .iter()
        .zip(locals)
        .filter(|(_, l)| !l.forward && bidir)
        .map(|(s, _)| s)
        .collect();
    let fwd_local_sender = locals
        .iter()
        .find(|l| l.forward || !bidir)
        .is_some_and(|l| l.sender);
    let (sum, sum_sent, sum_received) = build::end_sums(protocol, &fwd, fwd_local_sender);
    let (sum_rev, sum_sent_rev, sum_received_rev) =
        build::end_sums(protocol, &rev, !fwd_local_sender);
    let local_sends = locals.iter().any(|l| l.sender);
    let peer_congestion = peer.congestion_used.clone();
    let (snd_cc, rcv_cc) = if protocol != Protocol::Tcp {
        (None, None)
    } else if local_sends {
        (local_congestion, peer_congestion)
    } else {
        (peer_congestion, local_congestion)
    };
    let end = End {
        streams,
        sum,
        sum_sent,
        sum_received,
        sum_bidir_reverse: sum_rev,
        sum_sent_bidir_reverse: sum_sent_rev,
        sum_received_bidir_reverse: sum_received_rev,
        cpu_utilization_percent: CpuUtil {
            host_total: local_cpu.0,
            host_user: local_cpu.1,
            host_system: local_cpu.2,
            remote_total: peer.cpu_util_total,
            remote_user: peer.cpu_util_user,
            remote_system: peer.cpu_util_system,
        },
        sender_tcp_congestion: snd_cc,
        receiver_tcp_congestion: rcv_cc,
        netmeter: EndExt::default(),
    };
    let mut end = end;
    end.netmeter = host_checks(out, spec, locals, peer, local_cpu, in_process_server);
    // Under --working-load the probe's figures are reported as the working-load summary.
    end.netmeter.bounceback = spec
        .bounceback
        .as_ref()
        .filter(|_| spec.working_load.is_none())
        .and_then(|b| build::bounceback_end(b, locals));
    end.netmeter.connect_only = crate::report::connect::end_of(locals);
    crate::report::profile::fill_end(&mut end.netmeter, spec.profile.as_ref(), locals, peer);
    // Set by the server before calling us.
    end.netmeter.connect_only_answered = out.report.end.netmeter.connect_only_answered;
    if out.ctx.client {
        end.netmeter.working_load = spec
            .working_load
            .as_ref()
            .and_then(|w| build::working_load_end(w, locals, peer));
    }
    if let Some(c) = out.report.start.netmeter.clock {
        end.netmeter.trip_times = Some(build::trip_times_end(
            &c,
            super::clock::CLOCK_NAME,
            locals,
            peer,
            out.ctx.client,
        ));
    }
    let sender_retransmits = protocol == Protocol::Tcp
        && (locals.iter().any(|l| l.sender && l.tcp.is_some()) || peer.sender_has_retransmits == 1);
    let local_senders: Vec<bool> = locals.iter().map(|l| l.sender).collect();
    let t = text::end_summary(&out.ctx, &end, sender_retransmits, &local_senders);
    out.report.end = end;
    out.text(&t);
    out.end_done();
}
