//! `netmeter rpm`'s driver: its own tokio runtime (nothing else in netmeter is
//! async), the configuration fetched and checked, the idle latency, then each phase
//! (download, upload, or both at once) run as `rpm::algo::Saturation` decides: the
//! load-generating connections it asks for, probe pairs when it allows them, interval
//! ticks at its deadlines. The machine is given `now` from the run's `Clock`; this file
//! only does what it says and gathers the figures for `rpm::output`.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::algo::{
    FOREIGN_PROBE_BYTES, IntervalRow, Outcome, Params, Probe, ProbeTimes, SELF_PROBE_BYTES,
    Saturation,
};
use super::config::{ConfigError, HttpsUrl, MAX_CONFIG_BYTES, NqConfig};
use super::h3_net::{CLOSE_WAIT, H3_NO_ERROR, Link, open_link};
use super::net::{self, Dialer, MAX_SMALL_BYTES, NetError, QuicEndpoints, SendLimit, Target};
use crate::clock::Clock;

/// Foreign probes sent one after another on the idle path, before any load.
pub const IDLE_PROBES: usize = 5;
/// How often the driver looks for a stop signal.
const STOP_POLL: Duration = Duration::from_millis(100);
/// Probes under way at most: on a slow or stalling server each can take up to the 10 s
/// step limit, and probes go out up to 100 pairs a second before the goodput is known;
/// past this many, a due pair is skipped rather than another connection opened.
const MAX_PROBES_IN_FLIGHT: u64 = 64;
/// Messages from the tasks the driver can have waiting.
const CHANNEL: usize = 4096;

/// A direction of load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    Download,
    Upload,
}

impl Dir {
    pub fn name(self) -> &'static str {
        match self {
            Dir::Download => "download",
            Dir::Upload => "upload",
        }
    }
}

/// `--direction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Down,
    Up,
    Both,
}

/// Where the test's URLs come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A `/.well-known/nq` configuration.
    Config(HttpsUrl),
    /// `--large`, `--small`, `--upload` given directly.
    Urls {
        large: HttpsUrl,
        small: HttpsUrl,
        upload: HttpsUrl,
    },
}

/// A resolved `netmeter rpm` run.
#[derive(Debug, Clone)]
pub struct RpmOptions {
    pub source: Source,
    /// Accept any certificate (said on stderr by the caller).
    pub insecure: bool,
    pub cacert: Option<PathBuf>,
    pub direction: Direction,
    /// With `Both`: download then upload, not both at once.
    pub sequential: bool,
    /// The draft's parameters, `max_duration` per phase.
    pub params: Params,
    /// `-C`: the load and probe connections' congestion control.
    pub congestion: Option<String>,
    /// `--http3` (experimental): every connection HTTP/3 over QUIC (`rpm::h3_net`).
    pub http3: bool,
    /// `--notsent-lowat`: what every TCP connection may hold unsent (default `auto`).
    pub send_limit: SendLimit,
}

/// Why a run failed: one sentence.
#[derive(Debug, thiserror::Error)]
pub enum RpmError {
    #[error(transparent)]
    Net(#[from] NetError),
    #[error("the configuration at {url} is not usable: {err}")]
    Config { url: String, err: ConfigError },
    #[error(
        "a load-generating {dir} connection failed, so the test stops (the draft's rule): {err}"
    )]
    Load { dir: &'static str, err: NetError },
    #[error("cannot start the HTTP/2 client's runtime: {0}")]
    Runtime(std::io::Error),
}

/// One direction's figures in a phase.
#[derive(Debug, Clone)]
pub struct DirResult {
    pub dir: Dir,
    pub outcome: Outcome,
    pub rows: Vec<IntervalRow>,
    /// Bytes the load-generating connections moved over the phase.
    pub bytes: u64,
    /// Load-generating connections opened.
    pub connections_opened: usize,
    /// `TCP_NOTSENT_LOWAT` as the kernel reported it on every load connection
    /// (getsockopt after setting it; with `auto`, the largest at the phase's end);
    /// `None` when not set (HTTP/3, `--notsent-lowat 0`) or when any connection's
    /// kernel did not take it.
    pub notsent_lowat_bytes: Option<u32>,
    /// `--notsent-lowat` as `SendLimit::name` says it; `None` over HTTP/3.
    pub send_limit: Option<&'static str>,
}

/// One phase: one direction, or both at once.
#[derive(Debug, Clone)]
pub struct PhaseResult {
    pub dirs: Vec<DirResult>,
    /// When the phase began and ended.
    pub start: Instant,
    pub end: Instant,
    /// A stop signal ended it.
    pub stopped: bool,
}

/// What a run measured, for `rpm::output` to render.
#[derive(Debug, Clone)]
pub struct RpmRun {
    pub small: HttpsUrl,
    pub large: HttpsUrl,
    pub upload: HttpsUrl,
    pub config_url: Option<String>,
    pub origin: Instant,
    /// The foreign probes on the idle path.
    pub idle: Vec<Probe>,
    pub phases: Vec<PhaseResult>,
    /// Every probe completed under load, with its phase's index.
    pub probes: Vec<(usize, Probe)>,
    /// Probes that failed (a refused connection, a timeout): counted, not measured.
    pub probe_errors: u64,
    /// Probes started, the idle ones included (some still under way at a phase's end
    /// are neither completed nor failed).
    pub probes_launched: u64,
    pub params: Params,
    /// The HTTP version every connection used: `h2`, or `h3` with `--http3`.
    pub protocol: &'static str,
}

/// Runs the test on a runtime of its own; `on_row` sees each interval's figures as they
/// come (for the text output's progress lines).
pub fn run(
    opts: &RpmOptions,
    clock: Arc<dyn Clock>,
    on_row: &mut dyn FnMut(Dir, &IntervalRow),
) -> Result<RpmRun, RpmError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("nm-rpm")
        .enable_all()
        .build()
        .map_err(RpmError::Runtime)?;
    let quic = QuicEndpoints::default();
    let out = rt.block_on(run_async(opts, clock, &quic, on_row));
    // Whatever ended the run (its end, an error, Ctrl-C), QUIC connections still open
    // are closed while the runtime still drives their endpoints, so the server sees
    // CONNECTION_CLOSE rather than waiting out its idle timeout.
    rt.block_on(quic.close_all(H3_NO_ERROR, CLOSE_WAIT));
    // Open transfers end with the runtime: their tasks are dropped, not awaited.
    rt.shutdown_timeout(Duration::from_secs(1));
    out
}

async fn run_async(
    opts: &RpmOptions,
    clock: Arc<dyn Clock>,
    quic_endpoints: &QuicEndpoints,
    on_row: &mut dyn FnMut(Dir, &IntervalRow),
) -> Result<RpmRun, RpmError> {
    let tls = net::tls_config(opts.insecure, opts.cacert.as_deref())?;
    let quic = match opts.http3 {
        true => Some(Arc::new(super::h3_net::client_config(&tls)?)),
        false => None,
    };
    let (small, large, upload, endpoint, config_url) = match &opts.source {
        Source::Urls {
            large,
            small,
            upload,
        } => (small.clone(), large.clone(), upload.clone(), None, None),
        Source::Config(url) => {
            let cfg = fetch_config(url, &tls, &quic, quic_endpoints, &clock).await?;
            (
                cfg.small,
                cfg.large,
                cfg.upload,
                cfg.test_endpoint,
                Some(url.url.clone()),
            )
        }
    };
    // Each URL resolved once (they share the host, not necessarily the port).
    let mut dialers = Vec::new();
    for url in [&small, &large, &upload] {
        dialers.push(Dialer {
            target: Target::resolve(url, endpoint.as_deref()).await?,
            tls: tls.clone(),
            congestion: opts.congestion.clone(),
            send_limit: opts.send_limit,
            clock: clock.clone(),
            quic: quic.clone(),
            quic_endpoints: quic_endpoints.clone(),
        });
    }
    let dialer = dialers[0].clone();
    let load_dialers = [dialers[1].clone(), dialers[2].clone()];
    let origin = clock.now();
    let mut idle = Vec::new();
    let mut run_launched = 0;
    for _ in 0..IDLE_PROBES {
        idle.push(foreign_probe(&dialer, &small).await?);
        run_launched += 1;
        if crate::sock::stop_signal().is_some() {
            break;
        }
    }
    let phases: Vec<Vec<Dir>> = match (opts.direction, opts.sequential) {
        (Direction::Down, _) => vec![vec![Dir::Download]],
        (Direction::Up, _) => vec![vec![Dir::Upload]],
        (Direction::Both, false) => vec![vec![Dir::Download, Dir::Upload]],
        (Direction::Both, true) => vec![vec![Dir::Download], vec![Dir::Upload]],
    };
    let mut run = RpmRun {
        small,
        large,
        upload,
        config_url,
        origin,
        idle,
        phases: Vec::new(),
        probes: Vec::new(),
        probe_errors: 0,
        probes_launched: run_launched,
        params: opts.params,
        protocol: if opts.http3 { "h3" } else { "h2" },
    };
    for (i, dirs) in phases.iter().enumerate() {
        if crate::sock::stop_signal().is_some() {
            break;
        }
        let mut phase = Phase::new(i, dirs, &dialer, &load_dialers, &run, opts.params);
        let result = phase.run(on_row, &mut run).await;
        phase.end();
        run.phases.push(result?);
    }
    Ok(run)
}

/// GETs the configuration on a connection of its own and reads it as hostile input:
/// capped, every URL `https` and on the configuration's own host.
async fn fetch_config(
    url: &HttpsUrl,
    tls: &Arc<rustls::ClientConfig>,
    quic: &Option<Arc<quinn::ClientConfig>>,
    quic_endpoints: &QuicEndpoints,
    clock: &Arc<dyn Clock>,
) -> Result<NqConfig, RpmError> {
    let dialer = Dialer {
        target: Target::resolve(url, None).await?,
        tls: tls.clone(),
        congestion: None,
        send_limit: SendLimit::Kernel,
        clock: clock.clone(),
        quic: quic.clone(),
        quic_endpoints: quic_endpoints.clone(),
    };
    let mut conn = open_link(&dialer).await?;
    let bad = |err| RpmError::Config {
        url: url.url.clone(),
        err,
    };
    let body = match conn.send.get_small(url, MAX_CONFIG_BYTES).await {
        Err(NetError::TooLarge { .. }) => {
            return Err(bad(ConfigError::TooLong {
                len: MAX_CONFIG_BYTES + 1,
                max: MAX_CONFIG_BYTES,
            }));
        }
        other => other?,
    };
    let cfg = NqConfig::parse(&body).map_err(bad)?;
    cfg.require_host(&url.host).map_err(bad)?;
    Ok(cfg)
}

/// A foreign probe: a fresh connection's TCP and TLS set-up, then a GET of the small
/// object on it.
async fn foreign_probe(dialer: &Dialer, small: &HttpsUrl) -> Result<Probe, NetError> {
    let start = dialer.clock.now();
    let mut conn = open_link(dialer).await?;
    let t = dialer.clock.now();
    conn.send.get_small(small, MAX_SMALL_BYTES).await?;
    let http = dialer.clock.now().saturating_duration_since(t);
    Ok(Probe {
        start,
        times: ProbeTimes::Foreign {
            tcp: conn.tcp,
            tls: conn.tls,
            http,
        },
    })
}

/// A self probe: a GET of the small object on a load-generating connection.
async fn self_probe(
    mut send: Link,
    small: HttpsUrl,
    clock: Arc<dyn Clock>,
) -> Result<Probe, NetError> {
    let start = clock.now();
    send.get_small(&small, MAX_SMALL_BYTES).await?;
    Ok(Probe {
        start,
        times: ProbeTimes::Own {
            http: clock.now().saturating_duration_since(start),
        },
    })
}

/// What the tasks tell the driver.
enum Msg {
    Probe(Probe),
    ProbeFailed,
    /// A load-generating connection of load `usize` is open: its handle for self probes,
    /// its socket and its `TCP_NOTSENT_LOWAT` as the kernel reported it.
    Opened(usize, Link, Option<OwnedFd>, Option<u32>),
    LoadFailed(usize, NetError),
}

/// One direction's load in a phase.
struct Load {
    dir: Dir,
    machine: Saturation,
    counter: Arc<AtomicU64>,
    senders: Vec<Link>,
    rows: Vec<IntervalRow>,
    opened: usize,
    /// The load connections' sockets (duplicates), for TCP_INFO.
    sockets: Vec<OwnedFd>,
    /// Each load connection's `TCP_NOTSENT_LOWAT` as the kernel reported it.
    notsent_lowat: Vec<Option<u32>>,
    /// `--notsent-lowat`; `None` over HTTP/3.
    send_limit: Option<SendLimit>,
    /// HTTP/3: no TCP_INFO, so an upload counts what QUIC took of the body.
    quic: bool,
}

impl Load {
    /// The load connections' `TCP_NOTSENT_LOWAT`: the kernel's value when every
    /// connection reported one (they are set alike, so the largest is each's).
    fn notsent_lowat(&self) -> Option<u32> {
        if self.send_limit == Some(SendLimit::Auto) {
            // Set as each connection goes: what it is now.
            let now: Option<Vec<u32>> = self
                .sockets
                .iter()
                .map(|s| socket2::SockRef::from(s).tcp_notsent_lowat().ok())
                .collect();
            return now?.into_iter().max();
        }
        let all: Option<Vec<u32>> = self.notsent_lowat.iter().copied().collect();
        all?.into_iter().max()
    }

    /// The bytes the load moved so far. A download counts what netmeter read; an
    /// upload what the server's TCP acknowledged (TCP_INFO's bytes_acked), not what
    /// HTTP/2 took from the body: HTTP/2 and the socket buffer megabytes ahead of the
    /// path, and a new connection's first buffers would read as a burst of goodput.
    fn bytes(&self) -> u64 {
        match self.dir {
            Dir::Download => self.counter.load(Ordering::Relaxed),
            Dir::Upload if self.quic => self.counter.load(Ordering::Relaxed),
            Dir::Upload => self
                .sockets
                .iter()
                .filter_map(|s| crate::sock::tcp_info(s.as_fd()))
                .map(|t| t.bytes_acked)
                .sum(),
        }
    }
}

/// One phase's state.
struct Phase {
    index: usize,
    loads: Vec<Load>,
    dialer: Dialer,
    /// The download's and the upload's.
    load_dialers: [Dialer; 2],
    small: HttpsUrl,
    target_url: [HttpsUrl; 2],
    tasks: Vec<JoinHandle<()>>,
    tx: mpsc::Sender<Msg>,
    rx: mpsc::Receiver<Msg>,
    start: Instant,
    pick: u64,
    launched: u64,
    /// Probes that completed or failed.
    done: u64,
}

impl Phase {
    fn new(
        index: usize,
        dirs: &[Dir],
        dialer: &Dialer,
        load_dialers: &[Dialer; 2],
        run: &RpmRun,
        params: Params,
    ) -> Phase {
        let now = dialer.clock.now();
        let (tx, rx) = mpsc::channel(CHANNEL);
        let loads = dirs
            .iter()
            .map(|&dir| Load {
                dir,
                machine: Saturation::new(params, now),
                counter: Arc::new(AtomicU64::new(0)),
                senders: Vec::new(),
                rows: Vec::new(),
                opened: 0,
                sockets: Vec::new(),
                notsent_lowat: Vec::new(),
                send_limit: dialer.quic.is_none().then_some(dialer.send_limit),
                quic: dialer.quic.is_some(),
            })
            .collect();
        Phase {
            index,
            loads,
            dialer: dialer.clone(),
            load_dialers: load_dialers.clone(),
            small: run.small.clone(),
            target_url: [run.large.clone(), run.upload.clone()],
            tasks: Vec::new(),
            tx,
            rx,
            start: now,
            // A seed for the self probes' choice of connection.
            pick: 0x9e37_79b9_7f4a_7c15 ^ dialer.clock.wall_ns() as u64,
            launched: 0,
            done: 0,
        }
    }

    /// Aborts every task the phase started (transfers, probes).
    fn end(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }

    /// Opens one load-generating connection for load `i` and starts its transfer.
    fn open_load(&mut self, i: usize) {
        let load = &mut self.loads[i];
        load.opened += 1;
        let (tx, counter) = (self.tx.clone(), load.counter.clone());
        let dir = load.dir;
        let k = usize::from(dir == Dir::Upload);
        let (dialer, url) = (self.load_dialers[k].clone(), self.target_url[k].clone());
        self.tasks.push(tokio::spawn(async move {
            let conn = match open_link(&dialer).await {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Msg::LoadFailed(i, e)).await;
                    return;
                }
            };
            // With `auto` an upload makes its chunks as the socket takes them, on a
            // duplicate of it (`sendq::Room`); foreign probes and downloads need none.
            let room = match (dir, &conn.pace, &conn.socket) {
                (Dir::Upload, Some(pace), Some(fd)) => {
                    use std::os::fd::AsFd;
                    super::sendq::Room::new(fd.as_fd(), Arc::clone(pace)).ok()
                }
                _ => None,
            };
            let _ = tx
                .send(Msg::Opened(
                    i,
                    conn.send.clone(),
                    conn.socket,
                    conn.notsent_lowat,
                ))
                .await;
            let done = match dir {
                Dir::Download => conn.send.download(url, counter).await,
                Dir::Upload => conn.send.upload(url, counter, conn.chunk, room).await,
            };
            if let Err(e) = done {
                let _ = tx.send(Msg::LoadFailed(i, e)).await;
            }
        }));
    }

    /// Starts a foreign probe and a self probe on a load-generating connection chosen
    /// at random (xorshift64), as the draft asks.
    fn launch_probes(&mut self) {
        let (dialer, tx, small) = (self.dialer.clone(), self.tx.clone(), self.small.clone());
        self.launched += 1;
        self.tasks.push(tokio::spawn(async move {
            let msg = match foreign_probe(&dialer, &small).await {
                Ok(p) => Msg::Probe(p),
                Err(_) => Msg::ProbeFailed,
            };
            let _ = tx.send(msg).await;
        }));
        let senders: Vec<&Link> = self.loads.iter().flat_map(|l| l.senders.iter()).collect();
        if senders.is_empty() {
            return;
        }
        self.pick ^= self.pick << 13;
        self.pick ^= self.pick >> 7;
        self.pick ^= self.pick << 17;
        let send = senders[(self.pick % senders.len() as u64) as usize].clone();
        let (tx, small, clock) = (
            self.tx.clone(),
            self.small.clone(),
            self.dialer.clock.clone(),
        );
        self.launched += 1;
        self.tasks.push(tokio::spawn(async move {
            let msg = match self_probe(send, small, clock).await {
                Ok(p) => Msg::Probe(p),
                Err(_) => Msg::ProbeFailed,
            };
            let _ = tx.send(msg).await;
        }));
    }

    async fn run(
        &mut self,
        on_row: &mut dyn FnMut(Dir, &IntervalRow),
        run: &mut RpmRun,
    ) -> Result<PhaseResult, RpmError> {
        for i in 0..self.loads.len() {
            self.open_load(i);
        }
        let clock = self.dialer.clock.clone();
        let mut stopped = false;
        let mut stop_tick = tokio::time::interval(STOP_POLL);
        loop {
            let live: Vec<usize> = (0..self.loads.len())
                .filter(|&i| self.loads[i].machine.outcome().is_none())
                .collect();
            if live.is_empty() {
                break;
            }
            let tick = live
                .iter()
                .map(|&i| self.loads[i].machine.poll_timeout())
                .min()
                .unwrap_or_else(|| clock.now());
            let probe_at = live
                .iter()
                .map(|&i| self.loads[i].machine.next_probe_at())
                .max()
                .unwrap_or(tick);
            tokio::select! {
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(tick)) => {
                    let now = clock.now();
                    self.tasks.retain(|t| !t.is_finished());
                    for &i in &live {
                        let load = &mut self.loads[i];
                        if now < load.machine.poll_timeout() {
                            continue;
                        }
                        let step = load.machine.on_interval(now, load.bytes());
                        on_row(load.dir, &step.row);
                        load.rows.push(step.row);
                        for _ in 0..step.add_connections {
                            self.open_load(i);
                        }
                    }
                }
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(probe_at)) => {
                    let now = clock.now();
                    if self.launched - self.done < MAX_PROBES_IN_FLIGHT {
                        self.launch_probes();
                    }
                    for &i in &live {
                        self.loads[i].machine.on_probe_sent(now, FOREIGN_PROBE_BYTES + SELF_PROBE_BYTES);
                    }
                }
                Some(msg) = self.rx.recv() => match msg {
                    Msg::Probe(p) => {
                        self.done += 1;
                        for &i in &live {
                            self.loads[i].machine.on_probe(p);
                        }
                        run.probes.push((self.index, p));
                    }
                    Msg::ProbeFailed => {
                        self.done += 1;
                        run.probe_errors += 1;
                    }
                    Msg::Opened(i, send, socket, lowat) => {
                        self.loads[i].senders.push(send);
                        self.loads[i].sockets.extend(socket);
                        self.loads[i].notsent_lowat.push(lowat);
                    }
                    Msg::LoadFailed(i, err) => {
                        return Err(RpmError::Load { dir: self.loads[i].dir.name(), err });
                    }
                },
                _ = stop_tick.tick() => {
                    if crate::sock::stop_signal().is_some() {
                        let now = clock.now();
                        for &i in &live {
                            self.loads[i].machine.stop(now);
                        }
                        stopped = true;
                    }
                }
            }
        }
        let end = clock.now();
        run.probes_launched += self.launched;
        let dirs = self
            .loads
            .iter()
            .filter_map(|l| {
                Some(DirResult {
                    dir: l.dir,
                    outcome: *l.machine.outcome()?,
                    rows: l.rows.clone(),
                    bytes: l.bytes(),
                    connections_opened: l.opened,
                    notsent_lowat_bytes: l.notsent_lowat(),
                    send_limit: l.send_limit.map(SendLimit::name),
                })
            })
            .collect();
        Ok(PhaseResult {
            dirs,
            start: self.start,
            end,
            stopped,
        })
    }
}
