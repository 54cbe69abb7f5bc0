//! What the client and the server do alike: socket options on data streams, the
//! `start` facts, and the inputs of the end summary.

use crate::report::build::{EndInputs, LocalFinal};
use crate::report::{Start, TestStart};
use crate::sock;
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use crate::wire::Results;
use socket2::Socket;
use std::io::{self, Write};
use std::os::fd::AsFd;

/// This side's own iperf3 options: not sent to the peer, they shape this end's sockets
/// and output. The same on both sides; each field says which side reads it.
#[derive(Debug, Clone, Default)]
pub struct SideOpts {
    /// `--json-stream-full-output`: with `--json-stream`, also the `-J` document at the end.
    pub json_stream_full: bool,
    /// Server: `--server-max-duration SECS` (refuse longer or open-ended tests).
    pub max_duration_s: Option<u64>,
    /// Server: `--server-bitrate-limit RATE[/SECONDS]`: bits/s and the averaging window.
    pub bitrate_limit: Option<(u64, f64)>,
}

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
        sock::set_max_pacing_rate(s.as_fd(), rate)?;
    }
    if spec.protocol == Protocol::Tcp {
        if spec.nodelay {
            s.set_nodelay(true)?;
        }
        if let Some(mss) = spec.mss {
            s.set_mss(mss)?;
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
    }
}
