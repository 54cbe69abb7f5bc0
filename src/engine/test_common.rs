//! What the client and the server do alike: socket options on data streams (applied
//! by the client's `connect_tcp`/`connect_udp` and the server's `session::data_sock_opts`),
//! the `start` facts, and the inputs of the end summary.

use crate::report::build::{EndInputs, LocalFinal};
use crate::report::{Start, TestStart};
use crate::sock;
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use crate::wire::Results;
use socket2::{Domain, Socket, TcpKeepalive, Type};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::time::Duration;

/// This side's own iperf3 options: not sent to the peer, they shape this end's sockets
/// and output. The same on both sides; each field says which side reads it.
#[derive(Debug, Clone, Default)]
pub struct SideOpts {
    /// `--json-stream-full-output`: with `--json-stream`, also the `-J` document at the end.
    pub json_stream_full: bool,
    /// `--bind-dev DEV` (or `-B ADDR%DEV`, `-c HOST%DEV`): SO_BINDTODEVICE on every
    /// socket of this side (the server's listeners, the client's control and data).
    pub bind_dev: Option<String>,
    /// `-d[=LEVEL]`: the control conversation on stderr (every level alike).
    pub debug: Option<u8>,
    /// `-F FILE` (TCP): what this side sends comes from the file, what it receives goes
    /// to it.
    pub file: Option<std::path::PathBuf>,
    /// `--server-max-file-size` (server): `-F` writes at most this many bytes of what
    /// arrives (`None`: no limit; the client writes what its own test receives).
    pub file_max_bytes: Option<u64>,
    /// `--rcv-timeout MS`: a receiving side gives up when no data arrives for this long.
    pub rcv_timeout: Option<Duration>,
    /// `--snd-timeout MS`: TCP_USER_TIMEOUT on this side's control and TCP data sockets.
    pub snd_timeout_ms: Option<u32>,
    /// `--cntl-ka[=IDLE/INTV/CNT]`: TCP keepalive on this side's control connection.
    pub cntl_ka: Option<Keepalive>,
}

/// The address a client data socket connects to: the server's, carrying the `-L` flow
/// label (leased on the socket first) when one was asked for.
pub fn data_peer(s: &Socket, spec: &TestSpec, server: SocketAddr) -> io::Result<SocketAddr> {
    let Some(label) = spec.flowlabel else {
        return Ok(server);
    };
    let SocketAddr::V6(v6) = server else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "-L sets an IPv6 flow label, but the server's address is IPv4 (use -6 or an IPv6 address)",
        ));
    };
    let flowinfo = sock::set_flowlabel(s.as_fd(), label, *v6.ip()).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("unable to set IPv6 flow label {label:#x}: {e}"),
        )
    })?;
    // `SocketAddrV6` keeps flowinfo as given; the kernel reads it in network order.
    Ok(SocketAddr::V6(std::net::SocketAddrV6::new(
        *v6.ip(),
        v6.port(),
        flowinfo,
        v6.scope_id(),
    )))
}

/// A stream socket over MPTCP (`-m`), or why this kernel cannot give one.
pub fn mptcp_socket(ipv6: bool) -> io::Result<Socket> {
    let domain = if ipv6 { Domain::IPV6 } else { Domain::IPV4 };
    Socket::new(domain, Type::STREAM, Some(socket2::Protocol::MPTCP)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("MPTCP is not available here (-m; is net.mptcp.enabled 1?): {e}"),
        )
    })
}

/// `--cntl-ka` values; `None` keeps the system's (net.ipv4.tcp_keepalive_*).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keepalive {
    pub idle_s: Option<u32>,
    pub interval_s: Option<u32>,
    pub count: Option<u32>,
}

/// Apply this side's own options to a socket before it binds or connects: the device
/// (`--bind-dev`) on every socket, and for the control connection (`ctrl`) the TCP
/// keepalive (`--cntl-ka`) and TCP_USER_TIMEOUT (`--snd-timeout`).
pub fn apply_side_opts(s: &Socket, side: &SideOpts, ctrl: bool) -> io::Result<()> {
    if let Some(dev) = &side.bind_dev {
        s.bind_device(Some(dev.as_bytes()))
            .map_err(|e| io::Error::new(e.kind(), format!("cannot bind to device {dev}: {e}")))?;
    }
    if !ctrl {
        return Ok(());
    }
    if let Some(ms) = side.snd_timeout_ms {
        s.set_tcp_user_timeout(Some(Duration::from_millis(ms.into())))?;
    }
    if let Some(ka) = side.cntl_ka {
        let mut k = TcpKeepalive::new();
        // As iperf3: with an idle time given, it must exceed the whole retry period,
        // whose unset parts are the system's.
        let interval = match ka.interval_s {
            Some(i) => i,
            None => s.tcp_keepalive_interval()?.as_secs() as u32,
        };
        let count = match ka.count {
            Some(c) => c,
            None => s.tcp_keepalive_retries()?,
        };
        if let Some(idle) = ka.idle_s {
            if idle <= interval * count {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "--cntl-ka: the idle time ({idle} s) must be longer than the retry period ({interval} s × {count})"
                    ),
                ));
            }
            k = k.with_time(Duration::from_secs(idle.into()));
        }
        if let Some(i) = ka.interval_s {
            k = k.with_interval(Duration::from_secs(i.into()));
        }
        if let Some(c) = ka.count {
            k = k.with_retries(c);
        }
        s.set_keepalive(true)?;
        s.set_tcp_keepalive(&k)?;
    }
    Ok(())
}

/// Apply the spec's options to a data socket before it connects (or right after accept),
/// with this side's own (`side`).
pub fn apply_sock_opts(
    s: &Socket,
    spec: &TestSpec,
    side: &SideOpts,
    is_ipv6: bool,
) -> io::Result<()> {
    apply_side_opts(s, side, false)?;
    if spec.dont_fragment && spec.protocol == Protocol::Udp && !is_ipv6 {
        sock::set_dont_fragment(s.as_fd())?;
    }
    if let Some(w) = spec.socket_buffer() {
        let w = w as usize;
        s.set_send_buffer_size(w)?;
        s.set_recv_buffer_size(w)?;
    }
    if let Some(tos) = spec.tos {
        if is_ipv6 {
            s.set_tclass_v6(tos as u32)?;
            // A dual-stack socket (a server listening on `::`) talks to IPv4 peers
            // through mapped addresses, and those packets take IP_TOS, not the traffic
            // class: without it `-S`/`--dscp`/`--ecn` never reached an IPv4 client of
            // such a server (`-R`). A socket that cannot carry IPv4 refuses; no matter.
            let _ = s.set_tos_v4(tos as u32);
        } else {
            s.set_tos_v4(tos as u32)?;
        }
    }
    if let Some(rate) = spec.fq_rate_bps {
        sock::set_max_pacing_rate(s.as_fd(), rate)?;
    }
    if spec.protocol == Protocol::Tcp {
        if spec.nodelay {
            s.set_tcp_nodelay(true)?;
        }
        if let Some(mss) = spec.mss {
            s.set_tcp_mss(mss)?;
        }
        if let Some(ms) = side.snd_timeout_ms {
            s.set_tcp_user_timeout(Some(Duration::from_millis(ms.into())))?;
        }
        if let Some(cc) = &spec.congestion
            && let Err(e) = sock::set_congestion(s.as_fd(), cc)
        {
            return Err(io::Error::new(
                e.kind(),
                format!("congestion control '{cc}' is not available here: {e}"),
            ));
        }
    }
    Ok(())
}

/// A UDP data socket without `-w`: room for a burst of datagrams at high rates (capped
/// by `net.core.rmem_max` and `net.core.wmem_max`). Refusals are ignored: the kernel's
/// default still works.
pub fn udp_default_buffers(s: &Socket, spec: &TestSpec) {
    if spec.socket_buffer().is_none() {
        let _ = s.set_recv_buffer_size(4 << 20);
        let _ = s.set_send_buffer_size(4 << 20);
    }
}

/// The start line saying netmeter raised this side's UDP receive buffers above
/// `net.core.rmem_default` (`host::advice::udp_buffer_note`): UDP without `-w`.
pub fn udp_buffer_line(spec: &TestSpec, start: &Start) -> Option<String> {
    if spec.protocol != Protocol::Udp || spec.socket_buffer().is_some() {
        return None;
    }
    let note = crate::host::advice::udp_buffer_note(
        start.rcvbuf_actual,
        crate::host::probe::rmem_default(),
    )?;
    Some(format!("{note}\n"))
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

/// What [`build::end`] needs, from this side's figures and the `start` facts it
/// recorded (the buffers the kernel granted, the clock estimate).
///
/// [`build::end`]: crate::report::build::end
#[allow(clippy::too_many_arguments)]
pub fn end_inputs<'a>(
    start: &Start,
    spec: &'a TestSpec,
    locals: &'a [LocalFinal],
    peer: &'a Results,
    local_cpu: (f64, f64, f64),
    local_congestion: Option<String>,
    client: bool,
    in_process_server: bool,
) -> EndInputs<'a> {
    EndInputs {
        spec,
        locals,
        peer,
        local_cpu,
        local_congestion,
        in_process_server,
        client,
        rcvbuf: start.rcvbuf_actual,
        sndbuf: start.sndbuf_actual,
        clock: start.netmeter.clock.map(|c| (c, super::clock::CLOCK_NAME)),
        connect_only_answered: None,
        host: None,
        peak: None,
        threads: Vec::new(),
        disk_file: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `-w 0` leaves the kernel's buffer sizes as they are (iperf3's meaning), where it
    /// once asked for a zero-byte buffer and ran at the kernel's minimum.
    #[test]
    fn window_zero_keeps_the_default_buffers() {
        let fresh = || Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let default = fresh();
        let spec = TestSpec {
            window: Some(0),
            ..Default::default()
        };
        let s = fresh();
        apply_sock_opts(&s, &spec, &SideOpts::default(), false).unwrap();
        assert_eq!(
            s.send_buffer_size().unwrap(),
            default.send_buffer_size().unwrap()
        );
        assert_eq!(
            s.recv_buffer_size().unwrap(),
            default.recv_buffer_size().unwrap()
        );
        // A size given is still set (the kernel doubles it).
        let spec = TestSpec {
            window: Some(64 << 10),
            ..Default::default()
        };
        apply_sock_opts(&s, &spec, &SideOpts::default(), false).unwrap();
        assert_eq!(s.send_buffer_size().unwrap(), 128 << 10);
    }
}

#[cfg(test)]
mod tos_tests {
    use super::*;

    #[test]
    fn a_dual_stack_data_socket_carries_the_tos_on_ipv4_packets_too() {
        // The server's data sockets come from a `[::]` listener; a client on 127.0.0.1
        // is an IPv4-mapped peer, whose packets take IP_TOS.
        let spec = TestSpec {
            tos: Some(0x20),
            ..TestSpec::default()
        };
        for ty in [Type::STREAM, Type::DGRAM] {
            let s = Socket::new(Domain::IPV6, ty, None).unwrap();
            apply_sock_opts(&s, &spec, &SideOpts::default(), true).unwrap();
            assert_eq!(s.tclass_v6().unwrap(), 0x20, "{ty:?}");
            assert_eq!(s.tos_v4().unwrap(), 0x20, "{ty:?}");
        }
    }
}
