//! The `netmeter` binary: parse flags, run, print one line on error, set the exit code.

#![forbid(unsafe_code)]

use netmeter::cli::{self, Command};
use netmeter::engine::output::{self, Mode, Sink};
use netmeter::engine::{Stopped, TestError, client, server};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

fn open_sink(logfile: Option<&Path>) -> anyhow::Result<Sink> {
    Ok(match logfile {
        Some(p) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| anyhow::anyhow!("cannot open log file {}: {e}", p.display()))?;
            output::sink(Box::new(f))
        }
        None => output::sink(Box::new(std::io::stdout())),
    })
}

fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Version => {
            println!(
                "netmeter {} (iperf3 wire protocol; extensions v{})\n{}",
                env!("CARGO_PKG_VERSION"),
                netmeter::wire::EXT_VERSION,
                netmeter::sock::system_info()
            );
            Ok(())
        }
        Command::Server {
            cfg,
            daemon,
            pidfile,
            logfile,
        } => {
            // Before any thread: one malloc arena, so memory returns after each test.
            netmeter::sock::use_one_malloc_arena();
            if daemon {
                netmeter::sock::daemonize()
                    .map_err(|e| anyhow::anyhow!("cannot become a daemon: {e}"))?;
            }
            // From here on a stop signal ends the server through `serve`, so the pid
            // file is always removed at the end (iperf3 removes it too).
            catch_stop_signals()?;
            if let Some(p) = &pidfile {
                std::fs::write(p, format!("{}\n", std::process::id()))
                    .map_err(|e| anyhow::anyhow!("cannot write pid file {}: {e}", p.display()))?;
            }
            let r = open_sink(logfile.as_deref()).and_then(|sink| {
                let srv = server::Server::bind(cfg, sink, Arc::new(AtomicBool::new(false)))?;
                Ok(srv.stop_on_signals().serve()?)
            });
            if let Some(p) = &pidfile {
                let _ = std::fs::remove_file(p);
            }
            r
        }
        Command::Client { cfg, logfile } => {
            catch_stop_signals()?;
            let sink = open_sink(logfile.as_deref())?;
            netmeter::run(&cfg, &mut client::renderer(&cfg, sink))?;
            Ok(())
        }
        Command::Repeat { cfg, plan, logfile } => {
            catch_stop_signals()?;
            let sink = open_sink(logfile.as_deref())?;
            Ok(netmeter::experiment::repeat::run(&cfg, &plan, &sink)?)
        }
        Command::FindMaxRate {
            cfg,
            loss_target,
            start_bps,
            logfile,
        } => {
            catch_stop_signals()?;
            let sink = open_sink(logfile.as_deref())?;
            Ok(netmeter::engine::max_rate::run(
                &cfg,
                loss_target,
                start_bps,
                sink,
            )?)
        }
        Command::Loopback { tcp, udp, logfile } => {
            catch_stop_signals()?;
            let sink = open_sink(logfile.as_deref())?;
            // The in-process server writes nowhere: its figures come back in the report.
            let quiet = output::sink(Box::new(std::io::sink()));
            let (port, _server) = server::spawn(
                server::ServerConfig {
                    port: 0,
                    bind: Some([127, 0, 0, 1].into()),
                    family: client::Family::V4,
                    one_off: false,
                    max_tests: 1,
                    idle_timeout: None,
                    mode: Mode::Text,
                    verbose: false,
                    format: Default::default(),
                    interval_s: tcp.interval_s,
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
                netmeter::run(&cfg, &mut client::renderer(&cfg, sink.clone()))?;
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(sub) = netmeter::experiment::cli::subcommand(&argv) {
        return run_experiment(sub);
    }
    let args = match cli::parse_args(argv) {
        Ok(a) => a,
        Err(cli::ArgsError::Usage(e)) => {
            eprintln!("netmeter: {e}");
            return ExitCode::from(1);
        }
        Err(cli::ArgsError::Clap(e)) => {
            // --help and usage errors: clap formats them; exit 0 only for help.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let cmd = match args.resolve() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("netmeter: {e}");
            return ExitCode::from(1);
        }
    };
    match run(cmd) {
        Ok(()) => ExitCode::SUCCESS,
        // Stopped by a signal after the partial report: iperf3 3.19+ says "interrupt -
        // the client has terminated by signal Interrupt(2)" and exits 0, as for a test
        // that ended normally (the user asked for the stop).
        Err(e) if stopped(&e).is_some_and(Stopped::by_signal) => {
            eprintln!("netmeter: {e:#}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("netmeter: error - {e:#}");
            ExitCode::from(1)
        }
    }
}

/// An experiment subcommand (`compare`): clap's help and errors, one line otherwise.
fn run_experiment(sub: Result<netmeter::experiment::cli::Subcommand, clap::Error>) -> ExitCode {
    use netmeter::experiment::cli::{self as exp, ExperimentError, Subcommand};
    let r = match sub {
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 1 } else { 0 });
        }
        Ok(Subcommand::Compare(a)) => exp::run_compare(&a, &mut std::io::stdout().lock()),
        Ok(Subcommand::Sweep(None)) => {
            print!("{}", exp::SWEEP_HELP);
            return ExitCode::SUCCESS;
        }
        Ok(Subcommand::Sweep(Some(a))) => {
            if let Err(e) = catch_stop_signals() {
                eprintln!("netmeter: {e:#}");
                return ExitCode::from(1);
            }
            return match netmeter::experiment::sweep::run(&a, &mut std::io::stdout().lock()) {
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

/// The [`Stopped`] an error is, if the run was stopped on purpose.
fn stopped(e: &anyhow::Error) -> Option<Stopped> {
    e.downcast_ref::<TestError>().and_then(TestError::stopped)
}

/// SIGINT, SIGTERM and SIGHUP end the test cleanly (see `sock::catch_stop_signals`).
fn catch_stop_signals() -> anyhow::Result<()> {
    netmeter::sock::catch_stop_signals()
        .map_err(|e| anyhow::anyhow!("cannot install the signal handlers: {e}"))
}
