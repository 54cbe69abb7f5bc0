//! The `netmeter` binary: parse flags, run, print one line on error, set the exit code.

#![forbid(unsafe_code)]

use netmeter::cli::{self, Command};
use netmeter::engine::output::{self, Mode, Sink};
use netmeter::engine::progress::{self, Progress};
use netmeter::engine::{Stopped, TestError, client, server};
use netmeter::report::csv::CsvRenderer;
use netmeter::report::escape::{Lines, escape_controls};
use netmeter::report::{html, input, plot};
use std::io::IsTerminal;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Where the output goes: stdout or `--logfile`, with `--timestamps` lines stamped.
/// Every write is flushed (`engine::output`), which is also what `--forceflush` asks.
fn open_sink(logfile: Option<&Path>, stamps: Option<&str>) -> anyhow::Result<Sink> {
    let w: Box<dyn Write + Send> = match logfile {
        Some(p) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| anyhow::anyhow!("cannot open log file {}: {e}", p.display()))?;
            Box::new(f)
        }
        None => Box::new(std::io::stdout()),
    };
    Ok(match stamps {
        Some(f) => output::sink(Box::new(output::Stamped::local_time(
            w,
            f.to_string(),
            netmeter::clock::system(),
        ))),
        None => output::sink(w),
    })
}

/// Run what the command line asked for; the exit code unless it failed.
fn run(cmd: Command) -> anyhow::Result<ExitCode> {
    let done = match cmd {
        Command::Version => {
            print!(
                "{}",
                netmeter::version::text(
                    &netmeter::sock::system_info(),
                    &netmeter::sock::kernel_features()
                )
            );
            Ok(())
        }
        Command::Server {
            cfg,
            rpm,
            daemon,
            pidfile,
            logfile,
            stamps,
        } => run_server(
            cfg,
            rpm,
            daemon,
            pidfile.as_deref(),
            logfile.as_deref(),
            stamps.as_deref(),
        ),
        Command::Client {
            cfg,
            logfile,
            csv,
            plot,
            stamps,
        } => run_client(
            &cfg,
            logfile.as_deref(),
            stamps.as_deref(),
            csv,
            plot.as_deref(),
        ),
        Command::Iperf2(c) => Ok(cli::iperf2::run(c)?),
        Command::Via(v) => run_via(v),
        // `compare`'s verdict and `sweep` choose their own exit codes.
        Command::Experiment(sub) => return Ok(run_experiment(sub)),
        Command::MulticastReceive { cfg, logfile } => {
            catch_stop_signals()?;
            let sink = open_sink(logfile.as_deref(), None)?;
            netmeter::engine::multicast::run_receivers(&cfg, sink, Default::default())?;
            Ok(())
        }
        Command::MulticastSend {
            cfg,
            receivers,
            logfile,
        } => run_multicast_send(&cfg, receivers.as_ref(), logfile.as_deref()),
        Command::Plot { inputs, output } => {
            // A sweep's -J document draws the sweep's chart.
            match netmeter::experiment::sweep_plot::sweep_charts_of(&inputs)
                .map_err(anyhow::Error::msg)?
            {
                Some(charts) => Ok(plot::write_charts(&charts, &output)?),
                None => Ok(plot::write_file(&load(&inputs)?, &output)?),
            }
        }
        Command::Report { inputs, output } => {
            // A sweep's -J document: the sweep's page.
            match netmeter::experiment::sweep_plot::sweep_page_of(&inputs)
                .map_err(anyhow::Error::msg)?
            {
                Some(page) => Ok(write_whole(&output, page.as_bytes())?),
                None => Ok(html::write_file(&load(&inputs)?, &output)?),
            }
        }
        Command::Mesh(m) => run_mesh(m),
        Command::Scenario(s) => run_scenario(s),
        Command::RpmServer(c) => run_rpm_server(c),
        Command::Rpm(r) => run_rpm(r),
        Command::Generate(asset) => {
            let mut v = Vec::new();
            cli::generate::render(asset, &mut v)?;
            write_stdout(&v)
        }
        Command::Csv {
            input,
            columns,
            output,
        } => csv_file(&input, &columns, output.as_deref()),
        Command::Doctor {
            target,
            json,
            line_rate,
        } => {
            let d = netmeter::host::doctor::collect(target.as_deref(), line_rate)
                .map_err(anyhow::Error::msg)?;
            let text = if json {
                let mut j = serde_json::to_string_pretty(&d)?;
                j.push('\n');
                j
            } else {
                netmeter::host::doctor::text(&d)
            };
            write_stdout(text.as_bytes())
        }
        Command::Repeat {
            cfg,
            plan,
            logfile,
            stamps,
        } => {
            catch_stop_signals()?;
            let sink = open_sink(logfile.as_deref(), stamps.as_deref())?;
            Ok(netmeter::experiment::repeat::run(&cfg, &plan, &sink)?)
        }
        Command::FindMaxRate {
            cfg,
            loss_target,
            start_bps,
            logfile,
            stamps,
        } => {
            catch_stop_signals()?;
            let sink = open_sink(logfile.as_deref(), stamps.as_deref())?;
            // Trials print nothing while they run: a status line shows each one.
            let progress =
                progress::wanted(cfg.mode == Mode::Text, 0.0, logfile.is_some(), stdout_tty());
            Ok(netmeter::engine::max_rate::run(
                &cfg,
                loss_target,
                start_bps,
                sink,
                progress,
            )?)
        }
        Command::Loopback {
            tcp,
            udp,
            logfile,
            stamps,
        } => run_loopback(tcp, udp, logfile.as_deref(), stamps.as_deref()),
    };
    done.map(|()| ExitCode::SUCCESS)
}

/// `netmeter -c GROUP -u`: send to the group, asking `--receivers` for their figures
/// when given.
fn run_multicast_send(
    cfg: &netmeter::engine::multicast::SenderConfig,
    receivers: Option<&netmeter::engine::multicast::receivers::run::ReceiversPlan>,
    logfile: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    catch_stop_signals()?;
    let sink = open_sink(logfile, None)?;
    match receivers {
        Some(plan) => netmeter::engine::multicast::receivers::run::run_to_end(cfg, plan, sink)?,
        None => {
            netmeter::engine::multicast::run_sender(cfg, sink, Default::default())?;
        }
    }
    Ok(())
}

/// `netmeter -s`: become a daemon if asked, write the pid file, serve until stopped.
fn run_server(
    cfg: server::ServerConfig,
    rpm: Option<cli::rpm_server_cmd::RpmServerCommand>,
    daemon: bool,
    pidfile: Option<&Path>,
    logfile: Option<&Path>,
    stamps: Option<&str>,
) -> anyhow::Result<()> {
    // Before any thread: one malloc arena, so memory returns after each test.
    netmeter::sock::use_one_malloc_arena();
    if daemon {
        netmeter::sock::daemonize().map_err(|e| anyhow::anyhow!("cannot become a daemon: {e}"))?;
    }
    // From here on a stop signal ends the server through `serve`, so the pid
    // file is always removed at the end (iperf3 removes it too). SIGHUP does
    // not stop a server: it reopens the audit log (docs/server.md).
    catch_stop_signals()?;
    netmeter::sock::catch_hangup()?;
    if let Some(p) = pidfile {
        std::fs::write(p, format!("{}\n", std::process::id()))
            .map_err(|e| anyhow::anyhow!("cannot write pid file {}: {e}", p.display()))?;
    }
    let r = open_sink(logfile, stamps).and_then(|sink| {
        let srv = server::Server::bind(cfg, sink, Arc::new(AtomicBool::new(false)))?;
        // `--rpm`: the responsiveness server on a thread of its own, bound before the
        // iperf3 server serves (a port in use ends both at start); a stop signal ends
        // both, and the iperf3 server's end (-1) ends it too.
        let rpm = rpm.map(bind_rpm_server).transpose()?.map(|rpm| {
            let stop = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&stop);
            (stop, std::thread::spawn(move || rpm.run_until(flag)))
        });
        let served = srv.stop_on_signals().serve();
        if let Some((stop, thread)) = rpm {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            match thread.join() {
                Ok(r) => r?,
                Err(_) => anyhow::bail!("the responsiveness server's thread failed"),
            }
        }
        Ok(served?)
    });
    if let Some(p) = pidfile {
        let _ = std::fs::remove_file(p);
    }
    r
}

/// `netmeter --loopback`: a TCP and a UDP test against a server in this process.
fn run_loopback(
    tcp: client::ClientConfig,
    udp: client::ClientConfig,
    logfile: Option<&Path>,
    stamps: Option<&str>,
) -> anyhow::Result<()> {
    catch_stop_signals()?;
    let sink = open_sink(logfile, stamps)?;
    // The in-process server writes nowhere: its figures come back in the report.
    let quiet = output::sink(Box::new(std::io::sink()));
    let (port, _server) = server::spawn(
        server::ServerConfig {
            port: 0,
            bind: Some([127, 0, 0, 1].into()),
            family: client::Family::V4,
            one_off: false,
            policy: Default::default(),
            audit_log: None,
            metrics: None,
            idle_timeout: None,
            mode: Mode::Text,
            verbose: false,
            format: Default::default(),
            interval_s: tcp.interval_s,
            histograms: None,
            auth: None,
            psk: None,
            third_party: None,
            side: Default::default(),
            clock: netmeter::clock::system(),
            iperf2_layout: None,
        },
        quiet,
    )?;
    for mut cfg in [tcp, udp] {
        cfg.port = port;
        cfg.in_process_server = true;
        if cfg.mode == Mode::Text {
            let proto = format!("{:?}", cfg.spec.protocol).to_uppercase();
            if let Ok(mut w) = sink.lock() {
                let _ = writeln!(w, "\n=== netmeter --loopback: {proto} test ===");
            }
        }
        let (_, result) = run_rendered(&cfg, sink.clone(), logfile.is_some());
        result?;
    }
    Ok(())
}

/// A client test: iperf3's text or JSON, CSV (`--csv`), or text with a status line
/// (`-i 0` on a terminal).
fn run_client(
    cfg: &client::ClientConfig,
    logfile: Option<&Path>,
    stamps: Option<&str>,
    csv: Option<netmeter::report::csv::Columns>,
    plot_to: Option<&Path>,
) -> anyhow::Result<()> {
    catch_stop_signals()?;
    let sink = open_sink(logfile, stamps)?;
    if let Some(columns) = csv {
        let write = move |s: &str| {
            if let Ok(mut w) = sink.lock() {
                let _ = w.write_all(s.as_bytes());
                let _ = w.flush();
            }
        };
        let warn = |w: &str| eprintln!("netmeter: warning: {w}");
        let title = cfg.spec.title.clone();
        let mut csv = CsvRenderer::new(columns, title, Box::new(write), Box::new(warn));
        let (report, result) = netmeter::run_keeping_report(cfg, &mut csv);
        return plot_client(cfg, report, result, plot_to);
    }
    let (report, result) = run_rendered(cfg, sink, logfile.is_some());
    plot_client(cfg, report, result, plot_to)
}

/// One client test in iperf3's text or JSON, with a status line instead of interval
/// rows for text with `-i 0` on a terminal.
fn run_rendered(
    cfg: &client::ClientConfig,
    sink: output::Sink,
    logfile: bool,
) -> (netmeter::Report, Result<(), netmeter::TestError>) {
    let mut renderer = client::renderer(cfg, sink);
    let text = cfg.mode == Mode::Text;
    if progress::wanted(text, cfg.interval_s, logfile, stdout_tty()) {
        // Intervals feed the status line; the renderer never sees them.
        let mut ticking = cfg.clone();
        ticking.interval_s = progress::TICK_S;
        netmeter::run_keeping_report(&ticking, &mut Progress::new(renderer, None))
    } else {
        netmeter::run_keeping_report(cfg, &mut renderer)
    }
}

/// `--plot FILE`: the test's charts, also when it was stopped (Ctrl-C, a lost peer)
/// after some intervals: they show what ran. The test's own error comes back after.
fn plot_client(
    cfg: &client::ClientConfig,
    report: netmeter::Report,
    result: Result<(), netmeter::TestError>,
    path: Option<&Path>,
) -> anyhow::Result<()> {
    let Some(path) = path.filter(|_| result.is_ok() || !report.intervals.is_empty()) else {
        return Ok(result?);
    };
    let plotted = plot_one(cfg, report, path);
    result?;
    plotted
}

fn plot_one(
    cfg: &client::ClientConfig,
    report: netmeter::Report,
    path: &Path,
) -> anyhow::Result<()> {
    let name = cfg.spec.title.clone().unwrap_or_else(|| cfg.host.clone());
    let input = input::Input {
        name,
        path: path.to_path_buf(),
        report,
    };
    Ok(plot::write_file(&[input], path)?)
}

/// `netmeter csv`: the whole input is read and checked before anything is written. A
/// sweep's or a repetition's `-J` document has its own rows (`experiment::csv`).
fn csv_file(
    input: &Path,
    columns: &cli::csv_cmd::CsvColumns,
    output: Option<&Path>,
) -> anyhow::Result<()> {
    use netmeter::experiment::csv as exp_csv;
    let doc = std::fs::read_to_string(input)
        .ok()
        .map(|t| exp_csv::read_document(&t))
        .transpose()
        .map_err(|e| anyhow::anyhow!("cannot use {}: {e}", input.display()))?
        .flatten();
    let text = match doc {
        Some(points) => {
            let cols = columns.experiment().map_err(anyhow::Error::msg)?;
            exp_csv::rows(&points, &cols)
        }
        None => {
            let report = netmeter::report::input::read_result(input)?;
            let cols = columns.test().map_err(anyhow::Error::msg)?;
            netmeter::report::csv::rows(&report, &cols)
        }
    };
    match output {
        Some(p) => write_whole(p, text.as_bytes()),
        None => write_stdout(text.as_bytes()),
    }
}

fn stdout_tty() -> bool {
    std::io::stdout().is_terminal()
}

/// Write a command's whole output to stdout; a reader that went away (`| head`) is not
/// an error.
fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            anyhow::bail!("cannot write to standard output: {e}")
        }
        _ => Ok(()),
    }
}

/// Write `bytes` to `path` whole or not at all: into a temporary file beside it, renamed
/// over `path` once complete (a failed write removes the temporary file).
fn write_whole(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let Some(name) = name else {
        anyhow::bail!("cannot write {}: it names no file", path.display());
    };
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let r = std::fs::write(&tmp, bytes).and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        anyhow::bail!("cannot write {}: {e}", path.display());
    }
    Ok(())
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match cli::parse(&argv) {
        Ok(cmd) => finish(run(cmd)),
        Err(e) => args_error(e),
    }
}

/// Progress of `netmeter mesh` on stderr, one line per pair.
struct MeshProgress;

impl netmeter::mesh::Progress for MeshProgress {
    fn done(&mut self, finished: usize, planned: usize, c: &netmeter::mesh::Cell) {
        let what = match (&c.report, &c.error) {
            (_, Some(e)) => format!("error: {e}"),
            (Some(r), None) => match netmeter::mesh::cell_figures(r).0 {
                Some(bps) => format!("{:.2} Mbit/s", bps / 1e6),
                None => "done".into(),
            },
            (None, None) => "done".into(),
        };
        eprintln!(
            "[{finished}/{planned}] {} -> {}: {what}",
            c.source, c.target
        );
    }
}

/// `netmeter mesh`: run every pair, then write the table or JSON, the file and plot.
fn run_mesh(m: cli::mesh_cmd::MeshCommand) -> anyhow::Result<()> {
    use netmeter::mesh;
    catch_stop_signals()?;
    let (cells, interrupted) = mesh::run(&m.plan, &mut MeshProgress);
    if interrupted {
        eprintln!(
            "netmeter: mesh stopped by a signal after {} of {} pairs; writing what ran",
            cells.len(),
            m.plan.pairs.len()
        );
    }
    let doc = mesh::document(&mesh::MeshDocument {
        hosts: &m.plan.hosts,
        test_options: &m.plan.args,
        planned: m.plan.pairs.len(),
        interrupted,
        cells: &cells,
    });
    if let Some(p) = &m.output {
        write_whole(p, doc.as_bytes())?;
    }
    if let Some(p) = &m.plot {
        let png = p.extension().is_some_and(|e| e.eq_ignore_ascii_case("png"));
        let bytes =
            netmeter::report::plot::render_heatmap(&mesh::heatmap(&m.plan.hosts, &cells), png)
                .map_err(|e| anyhow::anyhow!("cannot draw {}: {e}", p.display()))?;
        write_whole(p, &bytes)?;
    }
    let out = if m.json {
        doc + "\n"
    } else {
        mesh::matrix_text(&m.plan.hosts, &cells)
    };
    write_stdout(out.as_bytes())?;
    // Error cells are results; a mesh in which not one pair ran is a failure (a wrong
    // key, no host reachable): say so in the exit status too.
    if !interrupted && !cells.is_empty() && cells.iter().all(|c| c.report.is_none()) {
        anyhow::bail!("no pair of the mesh ran a test (each cell says why)");
    }
    Ok(())
}

/// `scenario --fail-if-worse`: a flow got worse than the baseline (exit status 2, as
/// `compare`'s).
#[derive(Debug, thiserror::Error)]
#[error("a flow got worse than the baseline")]
struct WorseThanBaseline;

/// `netmeter rpm-server`: the certificate made or read, the banner, then serving until a
/// stop signal.
fn run_rpm_server(c: cli::rpm_server_cmd::RpmServerCommand) -> anyhow::Result<()> {
    catch_stop_signals()?;
    Ok(bind_rpm_server(c)?.run()?)
}

/// The responsiveness server bound, its certificate made or read and its banner
/// printed (`rpm-server`, `-s --rpm`).
fn bind_rpm_server(
    c: cli::rpm_server_cmd::RpmServerCommand,
) -> anyhow::Result<netmeter::rpm::server::Server> {
    use netmeter::rpm::{server, tls};
    let cert = match &c.cert {
        cli::rpm_server_cmd::CertSource::Files { cert, key } => tls::load(cert, key)?,
        cli::rpm_server_cmd::CertSource::SelfSigned(names) => tls::self_signed(names)?,
    };
    let about = server::cert_lines(&cert);
    let srv = server::Server::bind(server::ServerConfig {
        listen: c.listen,
        limits: c.limits,
        public_name: c.public_name.clone(),
        tls: tls::server_config(cert)?,
        large_bytes: c.large_bytes,
        audit_log: c.audit_log,
        clock: netmeter::clock::system(),
        http3: c.http3,
        congestion: c.congestion.clone(),
        send_limit: c.send_limit,
        json_log: c.json_log,
    })?;
    let addr = srv.local_addr()?;
    let mut out = server::listening_lines(addr, c.public_name.as_deref());
    out.extend(about);
    // Inside `-s -J`, each banner line is a `server_log` event: stdout stays JSON.
    let banner: String = match c.json_log {
        true => out
            .iter()
            .map(|l| netmeter::report::json::server_log(l))
            .collect(),
        false => format!("{}\n", out.join("\n")),
    };
    write_stdout(banner.as_bytes())?;
    Ok(srv)
}

/// `netmeter rpm URL`: the responsiveness test; progress lines while it runs (text), then
/// the summary, or one JSON document.
fn run_rpm(r: cli::rpm_cmd::RpmCommand) -> anyhow::Result<()> {
    use netmeter::rpm::{client, output};
    catch_stop_signals()?;
    if r.opts.insecure {
        eprintln!("netmeter: --insecure: the server's certificate is not checked");
    }
    let json = r.json;
    let mut on_row = |dir, row: &netmeter::rpm::algo::IntervalRow| {
        if !json {
            println!("{}", output::row_line(dir, row));
        }
    };
    let run = client::run(&r.opts, netmeter::clock::system(), &mut on_row)?;
    let doc = output::report(&run);
    if let Some(p) = &r.plot {
        plot::write_charts(&[output::probe_chart(&doc)], p)?;
    }
    let out = if json {
        serde_json::to_string_pretty(&doc)? + "\n"
    } else {
        output::render_text(&doc)
    };
    write_stdout(out.as_bytes())
}

/// `netmeter scenario FILE`: every flow at once; per-flow text or one JSON document.
fn run_scenario(s: cli::scenario_cmd::ScenarioCommand) -> anyhow::Result<()> {
    use netmeter::scenario::{output, run};
    catch_stop_signals()?;
    let clocks = run::probe_clocks(&s.plan);
    let refused = s.plan.clock_refusal(&clocks);
    if s.check {
        return scenario_check(&s, &clocks, refused.as_deref());
    }
    if let Some(why) = refused {
        eprint!(
            "{}",
            netmeter::scenario::clocks::text(&clocks, s.plan.clock_limit_s())
        );
        anyhow::bail!(why);
    }
    let (epoch, flows) = run::run(&s.plan, &clocks);
    let judged = s
        .baseline
        .as_ref()
        .map(|b| netmeter::scenario::judge::against_baseline(b, &flows));
    // Ctrl-C: every flow stopped with what it measured (a flow from a host: its host
    // was told to stop and sent back what ran), and the document is written.
    let interrupted = netmeter::sock::stop_signal().is_some();
    if interrupted {
        eprintln!("netmeter: scenario stopped by a signal; writing what the flows measured");
    }
    let doc = output::document(epoch, &clocks, &flows, judged.as_deref(), interrupted);
    if let Some(p) = &s.output {
        write_whole(p, doc.as_bytes())?;
    }
    if let Some(p) = &s.plot {
        let charts = netmeter::scenario::judge::cdf_charts(&flows);
        if charts.is_empty() {
            eprintln!(
                "netmeter: --plot: no flow recorded a latency to draw (--trip-times, --bounceback or --isochronous)"
            );
        } else {
            plot::write_charts(&charts, p)?;
        }
    }
    let mut out = if s.json {
        doc + "\n"
    } else {
        output::text(&flows)
    };
    if let (false, Some(j)) = (s.json, &judged) {
        out.push_str(&netmeter::scenario::judge::baseline_text(j));
    }
    write_stdout(out.as_bytes())?;
    if let (Some(pct), Some(j)) = (s.fail_if_worse, &judged) {
        let worse = netmeter::scenario::judge::worse_beyond(j, pct);
        if !worse.is_empty() {
            eprintln!(
                "netmeter: flows worse than the baseline by more than {pct}%: {}",
                worse.join(", ")
            );
            return Err(anyhow::Error::new(WorseThanBaseline));
        }
    }
    // A flow with an error is a result; a scenario in which no flow ran is a failure
    // (unless the user stopped it: netmeter exits 0 on an interrupt, as iperf3 does).
    if !interrupted && flows.iter().all(|f| f.report.is_none()) {
        anyhow::bail!("no flow of the scenario ran a test (each flow says why)");
    }
    Ok(())
}

/// `netmeter scenario --check FILE`: the hosts' clocks and what would run; exit status 1
/// when a host was not reached or the run would be refused for a clock.
fn scenario_check(
    s: &cli::scenario_cmd::ScenarioCommand,
    clocks: &[netmeter::scenario::clocks::HostClock],
    refused: Option<&str>,
) -> anyhow::Result<()> {
    use netmeter::scenario::output;
    let scenario = &s.plan.scenario;
    let out = if s.json {
        let doc = output::CheckDocument {
            hosts: clocks,
            clock_limit_s: s.plan.clock_limit_s(),
            flows: output::planned(scenario),
            refused,
        };
        serde_json::to_string_pretty(&doc)? + "\n"
    } else {
        output::check_text(scenario, clocks, s.plan.clock_limit_s())
    };
    write_stdout(out.as_bytes())?;
    if let Some(why) = refused {
        anyhow::bail!(why.to_string());
    }
    if let Some(h) = clocks.iter().find(|h| h.clock_error.is_some()) {
        anyhow::bail!(
            "host {} at {} was not reached: {}",
            h.name,
            h.address,
            h.clock_error.as_deref().unwrap_or_default()
        );
    }
    Ok(())
}

/// `netmeter -c B --via A`: A runs the test and sends its report here.
fn run_via(v: cli::third_party::ViaCommand) -> anyhow::Result<()> {
    use netmeter::engine::third_party::{Controller, request};
    catch_stop_signals()?;
    let ctl = Controller {
        host: v.via.clone(),
        port: v.via_port,
        psk: v.psk,
        connect_timeout: std::time::Duration::from_secs(10),
        wait: std::time::Duration::from_secs_f64(v.wait_s),
        stop_on_signal: true,
        clock: netmeter::clock::system(),
    };
    let report = request(&ctl, &v.request)?;
    if let Some(e) = &report.error {
        anyhow::bail!("{} ran the test, which failed: {e}", v.via);
    }
    let text = if v.json {
        netmeter::report::json::document(&report)
    } else {
        format!(
            "Test from {} to {} port {}:\n{}",
            v.via,
            v.request.target,
            v.request.port,
            netmeter::report::text::whole(&report)
        )
    };
    write_stdout(text.as_bytes())
}

/// A command line that did not parse: one line, or clap's help or message.
fn args_error(e: cli::ArgsError) -> ExitCode {
    match e {
        cli::ArgsError::Usage(e) => {
            eprintln!("netmeter: {e}");
            ExitCode::from(1)
        }
        cli::ArgsError::Clap(e) => {
            // --help and usage errors: clap formats them; exit 0 only for help.
            let _ = e.print();
            if e.use_stderr() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}

/// An experiment subcommand (`compare`, `sweep`): clap's help and errors, one line
/// otherwise.
fn run_experiment(sub: cli::compare_cmd::Subcommand) -> ExitCode {
    use cli::compare_cmd::{self as exp, ExperimentError, Subcommand};
    let r = match sub {
        Subcommand::Compare(a) => exp::run_compare(&a, &mut std::io::stdout().lock()),
        Subcommand::Sweep(None) => {
            print!("{}", cli::sweep_cmd::SWEEP_HELP);
            return ExitCode::SUCCESS;
        }
        Subcommand::Sweep(Some(a)) => {
            if let Err(e) = catch_stop_signals() {
                eprintln!("netmeter: {e:#}");
                return ExitCode::from(1);
            }
            let parse = &cli::sweep_cmd::resolve_point;
            return match netmeter::experiment::sweep::run(&a, parse, &mut std::io::stdout().lock())
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("netmeter: {e}");
                    ExitCode::from(1)
                }
            };
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ ExperimentError::Worse { .. }) => {
            eprintln!("netmeter: {e}");
            ExitCode::from(exp::EXIT_WORSE)
        }
        Err(e) => {
            eprintln!("netmeter: {e}");
            ExitCode::from(1)
        }
    }
}

/// The exit status of a command's result, with its one error line.
fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        // Stopped by a signal after the partial report: iperf3 3.19+ says "interrupt -
        // the client has terminated by signal Interrupt(2)" and exits 0, as for a test
        // that ended normally (the user asked for the stop).
        Err(e) if stopped(&e).is_some_and(Stopped::by_signal) => {
            eprintln!("netmeter: {e:#}");
            ExitCode::SUCCESS
        }
        Err(e) if e.is::<WorseThanBaseline>() => {
            ExitCode::from(netmeter::cli::compare_cmd::EXIT_WORSE)
        }
        Err(e) => {
            // An error can quote the peer (a third-party server's refusal, a name in a
            // file): shown with its control characters escaped.
            let line = format!("{e:#}");
            eprintln!("netmeter: error - {}", escape_controls(&line, Lines::One));
            ExitCode::from(1)
        }
    }
}

/// Every input of `plot`/`report`, or the first that cannot be used.
fn load(paths: &[std::path::PathBuf]) -> anyhow::Result<Vec<input::Input>> {
    Ok(paths
        .iter()
        .map(|p| input::load_file(p))
        .collect::<Result<_, _>>()?)
}

/// The [`Stopped`] an error is, if the run was stopped on purpose.
fn stopped(e: &anyhow::Error) -> Option<Stopped> {
    e.downcast_ref::<TestError>().and_then(TestError::stopped)
}

/// SIGINT, SIGTERM and SIGHUP end the test cleanly (see `sock::catch_stop_signals`).
fn catch_stop_signals() -> anyhow::Result<()> {
    netmeter::sock::catch_stop_signals()
        .map_err(|e| anyhow::anyhow!("cannot install the signal handlers: {e}"))
}
