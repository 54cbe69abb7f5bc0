//! netmeter as a Python module (`netmeter._netmeter`, which `netmeter/__init__.py`
//! re-exports): each function parses, runs or reads through the main crate's public API
//! and hands back the JSON netmeter itself writes, as Python objects. The JSON goes
//! through the standard library's `json.loads`, so a returned document equals what
//! `json.load` gives for the file `-J` writes, number for number.
//!
//! A test runs on a thread of its own while the calling thread waits with the GIL
//! released, waking every [`SIGNAL_POLL`] to let Python run its signal handlers. Python,
//! not netmeter, owns SIGINT here: a Ctrl-C becomes Python's `KeyboardInterrupt`, which
//! asks the running test to stop the way netmeter's own SIGINT does
//! (`netmeter::sock::request_stop`: the client tells the server and ends cleanly), waits
//! for it, and is raised once the test has ended.

#![forbid(unsafe_code)]

use netmeter::cli::{self, ArgsError, Command};
use netmeter::engine::client::{self as nm_client, ClientConfig};
use netmeter::engine::output::{self, Renderer, Sink};
use netmeter::report::json as nm_json;
use netmeter::{Event, Observer, Report};
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::time::Duration;

pyo3::create_exception!(
    netmeter,
    NetmeterError,
    PyException,
    "A test, a result file or a comparison failed; the message is netmeter's one sentence. \
     A failed test's partial -J document, when there is one, is its `report` attribute."
);
pyo3::create_exception!(
    netmeter,
    UsageError,
    NetmeterError,
    "The arguments are wrong (an unknown option, a value that does not parse): netmeter's \
     one sentence naming the option, as the command line prints it."
);

/// How often a waiting call lets Python look at its signals (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(100);

/// How long an interrupted test may take to end cleanly (tell the server, drain, swap
/// results) before the call gives up waiting for it. The engine's own waits are bounded
/// far below this; it only keeps a wedged thread from holding the caller forever.
const STOP_GRACE: Duration = Duration::from_secs(60);

/// Events a reader has not taken yet, at most: beyond it the test thread drops interval
/// events rather than block the test (an hour of `-i 0.1` fits).
const EVENT_BACKLOG: usize = 1 << 16;

/// What the test thread tells the waiting call.
enum Msg {
    /// One `--json-stream` line (`{"event": ..., "data": ...}`); `last` for the end event.
    Event { line: String, last: bool },
    /// The test is over: its `-J` document, and its error sentence if it failed.
    Done {
        document: String,
        error: Option<String>,
    },
}

/// The running test's observer: the `--logfile` renderer if one was asked for, and the
/// events for [`stream`].
struct Tee {
    render: Option<Renderer>,
    events: Option<SyncSender<Msg>>,
}

impl Observer for Tee {
    fn on(&mut self, event: Event<'_>) {
        if let Some(r) = &mut self.render {
            r.on(event);
        }
        let Some(tx) = &self.events else { return };
        let (line, last) = match event {
            Event::Started(s) => (nm_json::event("start", s), false),
            Event::Interval(iv) => (nm_json::event("interval", iv), false),
            Event::Error(e) => (nm_json::event("error", &e), false),
            Event::End(end) => (nm_json::event("end", end), true),
            _ => return,
        };
        // A reader that fell EVENT_BACKLOG behind, or left, loses events; the test goes on.
        let _ = tx.try_send(Msg::Event { line, last });
    }
}

/// A running test: the channel from its thread.
struct Running {
    rx: Mutex<Receiver<Msg>>,
}

impl Running {
    /// The thread's next message, waiting with the GIL released; a Ctrl-C stops the test,
    /// waits for it to end and comes back as the `KeyboardInterrupt`.
    fn next(&self, py: Python<'_>) -> PyResult<Msg> {
        loop {
            let got = py.allow_threads(|| self.recv(SIGNAL_POLL));
            match got {
                Ok(m) => return Ok(m),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(interrupt) = py.check_signals() {
                        // The stopped test's document (its `error` says "interrupt - ...")
                        // rides on the exception as `report`.
                        if let Some(document) = self.stop(py)
                            && let Ok(doc) = loads(py, &document)
                        {
                            let _ = interrupt.value(py).setattr("report", doc);
                        }
                        return Err(interrupt);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(NetmeterError::new_err(
                        "the test's thread ended without a result",
                    ));
                }
            }
        }
    }

    fn recv(&self, timeout: Duration) -> Result<Msg, RecvTimeoutError> {
        match self.rx.lock() {
            Ok(rx) => rx.recv_timeout(timeout),
            Err(_) => Err(RecvTimeoutError::Disconnected),
        }
    }

    /// Stop the test as netmeter's SIGINT does and wait (GIL released, at most
    /// [`STOP_GRACE`]) until its thread is done; then forget the request so that the next
    /// test runs. The stopped test's `-J` document, if it ended in time.
    fn stop(&self, py: Python<'_>) -> Option<String> {
        netmeter::sock::request_stop(libc::SIGINT);
        let document = py.allow_threads(|| {
            let deadline = netmeter::clock::mono_now() + STOP_GRACE;
            loop {
                let left = deadline.saturating_duration_since(netmeter::clock::mono_now());
                match self.recv(left.min(SIGNAL_POLL)) {
                    Ok(Msg::Done { document, .. }) => break Some(document),
                    Err(RecvTimeoutError::Disconnected) => break None,
                    Ok(Msg::Event { .. }) => {}
                    Err(RecvTimeoutError::Timeout) if left.is_zero() => break None,
                    Err(RecvTimeoutError::Timeout) => {}
                }
            }
        });
        netmeter::sock::clear_stop();
        document
    }
}

/// `run`'s and `stream`'s arguments as the command line netmeter parses: the positional
/// ones as they are, each keyword as its long option (`udp=True` → `--udp`,
/// `bitrate="10M"` → `--bitrate 10M`, `_` → `-`; a one-letter keyword is the short
/// option), `False` and `None` left out, a list or tuple given once per item.
fn argv_of(args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<String>> {
    let mut argv = vec!["netmeter".to_string()];
    for a in args.iter() {
        argv.push(a.str()?.to_string());
    }
    let Some(kwargs) = kwargs else {
        return Ok(argv);
    };
    for (k, v) in kwargs.iter() {
        let key = k.str()?.to_string().replace('_', "-");
        let opt = if key.chars().count() == 1 {
            format!("-{key}")
        } else {
            format!("--{key}")
        };
        if v.is_none() {
            continue;
        }
        if let Ok(b) = v.downcast::<pyo3::types::PyBool>() {
            if b.is_true() {
                argv.push(opt);
            }
            continue;
        }
        if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
            for item in v.try_iter()? {
                argv.push(opt.clone());
                argv.push(item?.str()?.to_string());
            }
            continue;
        }
        argv.push(opt);
        argv.push(v.str()?.to_string());
    }
    Ok(argv)
}

/// The client test the arguments ask for, and its `--logfile` if any; a usage mistake
/// as [`UsageError`] with netmeter's sentence.
fn client_of(argv: Vec<String>) -> PyResult<(ClientConfig, Option<PathBuf>)> {
    let args = cli::parse_args(argv).map_err(|e| match e {
        ArgsError::Usage(u) => UsageError::new_err(u.0),
        // Help, or an error clap words itself: its text, trimmed.
        ArgsError::Clap(c) => UsageError::new_err(c.to_string().trim().to_string()),
    })?;
    let cmd = args.resolve().map_err(|e| UsageError::new_err(e.0))?;
    match cmd {
        Command::Client { plot: Some(_), .. } => Err(UsageError::new_err(
            "--plot is the command line's: netmeter.run returns the result; draw a saved one with `netmeter plot`",
        )),
        Command::Client { csv: Some(_), .. } => Err(UsageError::new_err(
            "--csv is the command line's: netmeter.run returns the result as data",
        )),
        Command::Client { cfg, logfile, .. } => Ok((cfg, logfile)),
        _ => Err(UsageError::new_err(
            "netmeter.run and netmeter.stream run one client test: give the server as -c HOST \
             (client=HOST); -s, --loopback, --repeat and --find-max-rate are the command line's",
        )),
    }
}

/// `--logfile FILE`: where the test's own output goes (text, or `-J`'s document, or
/// `--json-stream`'s lines, as on the command line), appended as netmeter appends.
fn log_sink(path: &Path) -> PyResult<Sink> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| {
            NetmeterError::new_err(format!("cannot open log file {}: {e}", path.display()))
        })?;
    Ok(output::sink(Box::new(f)))
}

/// Start the test the arguments ask for on a thread of its own.
fn start(
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
    events: bool,
) -> PyResult<Running> {
    let (cfg, logfile) = client_of(argv_of(args, kwargs)?)?;
    let sink = logfile.as_deref().map(log_sink).transpose()?;
    let (tx, rx) = std::sync::mpsc::sync_channel(EVENT_BACKLOG);
    let done = tx.clone();
    std::thread::Builder::new()
        .name("nm-python".into())
        .spawn(move || {
            let mut tee = Tee {
                render: sink.map(|s| nm_client::renderer(&cfg, s)),
                events: events.then_some(tx),
            };
            let (report, result) = netmeter::run_keeping_report(&cfg, &mut tee);
            drop(tee);
            // `send` blocks while a slow reader's backlog is full; the last message must
            // arrive.
            let _ = done.send(Msg::Done {
                document: nm_json::document(&report),
                error: result.err().map(|e| e.to_string()),
            });
        })
        .map_err(|e| NetmeterError::new_err(format!("cannot start the test's thread: {e}")))?;
    Ok(Running { rx: Mutex::new(rx) })
}

/// Python's `json.loads(text)`.
fn loads(py: Python<'_>, text: &str) -> PyResult<PyObject> {
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
}

/// The error a finished test raises: its sentence, its partial document as `report`.
fn test_failed(py: Python<'_>, error: String, document: &str) -> PyErr {
    let err = NetmeterError::new_err(error);
    if let Ok(doc) = loads(py, document) {
        let _ = err.value(py).setattr("report", doc);
    }
    err
}

/// Run one client test and return its `-J` document.
#[pyfunction]
#[pyo3(signature = (*args, **kwargs))]
fn run(
    py: Python<'_>,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyObject> {
    let test = start(args, kwargs, false)?;
    loop {
        if let Msg::Done { document, error } = test.next(py)? {
            return match error {
                None => loads(py, &document),
                Some(e) => Err(test_failed(py, e, &document)),
            };
        }
    }
}

/// Start one client test and iterate over its events (`start`, `interval`…, `error`,
/// `end`), each as `--json-stream` writes it.
#[pyfunction]
#[pyo3(signature = (*args, **kwargs))]
fn stream(args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Stream> {
    Ok(Stream {
        test: start(args, kwargs, true)?,
        state: Mutex::new(StreamState::Running),
        report: Mutex::new(None),
    })
}

#[derive(Clone, Copy)]
enum StreamState {
    Running,
    /// The end event was given: the next step waits for the test's document.
    Ending,
    /// Nothing more to give.
    Over,
}

/// The iterator [`stream`] returns; `report` holds the whole `-J` document once the
/// iteration is over.
#[pyclass(module = "netmeter")]
struct Stream {
    test: Running,
    state: Mutex<StreamState>,
    report: Mutex<Option<PyObject>>,
}

#[pymethods]
impl Stream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next event as `{"event": NAME, "data": ...}`; the iteration ends after the
    /// `end` event, once the test is over. A failed test raises `NetmeterError` (after
    /// its `error` event, if it had started).
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        if matches!(self.state(), StreamState::Over) {
            return Ok(None);
        }
        loop {
            let msg = self
                .test
                .next(py)
                .inspect_err(|_| self.set_state(StreamState::Over))?;
            match msg {
                Msg::Event { line, last } => {
                    if matches!(self.state(), StreamState::Ending) {
                        continue;
                    }
                    if last {
                        self.set_state(StreamState::Ending);
                    }
                    return loads(py, &line).map(Some);
                }
                Msg::Done { document, error } => {
                    self.set_state(StreamState::Over);
                    if let Ok(mut r) = self.report.lock() {
                        *r = loads(py, &document).ok();
                    }
                    // A test that failed after its end event (the results exchange lost)
                    // raises all the same.
                    return match error {
                        None => Ok(None),
                        Some(e) => Err(test_failed(py, e, &document)),
                    };
                }
            }
        }
    }

    /// The whole `-J` document, once the iteration is over (`None` before).
    #[getter]
    fn report(&self, py: Python<'_>) -> Option<PyObject> {
        let r = self.report.lock().ok()?;
        r.as_ref().map(|o| o.clone_ref(py))
    }
}

impl Stream {
    fn state(&self) -> StreamState {
        match self.state.lock() {
            Ok(s) => *s,
            Err(_) => StreamState::Over,
        }
    }

    fn set_state(&self, to: StreamState) {
        if let Ok(mut s) = self.state.lock() {
            *s = to;
        }
    }
}

/// `run_scenario`'s keywords as `netmeter scenario`'s options (`lead=2` → `--lead 2`,
/// `ignore_clock=True` → `--ignore-clock`); the ones that only make sense on the
/// command line are refused.
fn scenario_argv(
    path: &Bound<'_, PyAny>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Vec<String>> {
    let path: PathBuf = path.extract()?;
    let mut argv = vec!["scenario".to_string(), path.display().to_string()];
    let Some(kwargs) = kwargs else {
        return Ok(argv);
    };
    for (k, v) in kwargs.iter() {
        let key = k.str()?.to_string();
        if ["json", "J", "plot", "check"].contains(&key.as_str()) {
            return Err(UsageError::new_err(format!(
                "{key} is the command line's: netmeter.run_scenario returns the scenario's document; draw its CDFs from the data (docs/python.md)"
            )));
        }
        let opt = format!("--{}", key.replace('_', "-"));
        if v.is_none() {
            continue;
        }
        if let Ok(b) = v.downcast::<pyo3::types::PyBool>() {
            if b.is_true() {
                argv.push(opt);
            }
            continue;
        }
        argv.push(opt);
        argv.push(v.str()?.to_string());
    }
    Ok(argv)
}

/// Run a scenario file as `netmeter scenario FILE -J` does and return its document:
/// each host's clock (`hosts`), each flow's whole report or its error (`flows`), the
/// `total`, the `latency_ks` table and, with `baseline=`, each flow against the
/// previous run's. Keywords are the command's options (`lead=2`, `baseline=PATH`,
/// `fail_if_worse=PCT`, `clock_tolerance=MS`, `ignore_clock=True`, `output=PATH`).
/// The GIL is released while the flows run; Ctrl-C stops them and raises
/// `KeyboardInterrupt` with the document of what was measured as its `report`.
#[pyfunction]
#[pyo3(signature = (path, **kwargs))]
fn run_scenario(
    py: Python<'_>,
    path: &Bound<'_, PyAny>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyObject> {
    let argv: Vec<std::ffi::OsString> = scenario_argv(path, kwargs)?
        .into_iter()
        .map(Into::into)
        .collect();
    let cmd = match cli::scenario_cmd::parse(&argv) {
        Ok(Command::Scenario(c)) => c,
        Ok(_) => return Err(UsageError::new_err("not a scenario")),
        Err(ArgsError::Usage(u)) => return Err(UsageError::new_err(u.0)),
        Err(ArgsError::Clap(c)) => {
            return Err(UsageError::new_err(c.to_string().trim().to_string()));
        }
    };
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("nm-python-scenario".into())
        .spawn(move || {
            let (document, error) = scenario_document(&cmd);
            let _ = tx.send(Msg::Done { document, error });
        })
        .map_err(|e| NetmeterError::new_err(format!("cannot start the scenario's thread: {e}")))?;
    let running = Running { rx: Mutex::new(rx) };
    loop {
        if let Msg::Done { document, error } = running.next(py)? {
            return match error {
                None => loads(py, &document),
                Some(e) => Err(test_failed(py, e, &document)),
            };
        }
    }
}

/// The scenario run as `netmeter scenario -J` runs it: its document, and the sentence
/// the command line would exit 1 (or 2) with.
fn scenario_document(cmd: &cli::scenario_cmd::ScenarioCommand) -> (String, Option<String>) {
    use netmeter::scenario::{judge, output, run};
    let clocks = run::probe_clocks(&cmd.plan);
    if let Some(why) = cmd.plan.clock_refusal(&clocks) {
        let doc = output::document(0.0, &clocks, &[], None, false);
        return (doc, Some(why));
    }
    let (epoch, flows) = run::run(&cmd.plan, &clocks);
    let judged = cmd
        .baseline
        .as_ref()
        .map(|b| judge::against_baseline(b, &flows));
    let interrupted = netmeter::sock::stop_signal().is_some();
    let doc = output::document(epoch, &clocks, &flows, judged.as_deref(), interrupted);
    if let Some(p) = &cmd.output
        && let Err(e) = std::fs::write(p, doc.as_bytes())
    {
        return (doc, Some(format!("cannot write {}: {e}", p.display())));
    }
    let worse = match (cmd.fail_if_worse, &judged) {
        (Some(pct), Some(j)) => {
            let w = judge::worse_beyond(j, pct);
            (!w.is_empty()).then(|| {
                format!(
                    "flows worse than the baseline by more than {pct}%: {}",
                    w.join(", ")
                )
            })
        }
        _ => None,
    };
    let error = worse.or_else(|| {
        (!interrupted && flows.iter().all(|f| f.report.is_none()))
            .then(|| "no flow of the scenario ran a test (each flow says why)".to_string())
    });
    (doc, error)
}

/// A saved result (`-J` document or `--json-stream` lines, netmeter's or iperf3's) as
/// netmeter's `-J` document.
#[pyfunction]
fn load(py: Python<'_>, path: PathBuf) -> PyResult<PyObject> {
    let report: Result<Report, String> =
        py.allow_threads(|| netmeter::report::input::read_result(&path).map_err(|e| e.to_string()));
    let report = report.map_err(NetmeterError::new_err)?;
    loads(py, &nm_json::document(&report))
}

/// One side of [`compare`]: a result file's path, or a document as `run` returns it.
fn runs_of(py: Python<'_>, side: &'static str, x: &Bound<'_, PyAny>) -> PyResult<Vec<Report>> {
    if x.is_instance_of::<PyDict>() {
        let text: String = py.import("json")?.call_method1("dumps", (x,))?.extract()?;
        let runs = cli::compare_cmd::runs_from(&mut std::io::Cursor::new(text.as_bytes()), false)
            .map_err(|e| {
            NetmeterError::new_err(format!("cannot use the {side} result: {e}"))
        })?;
        if runs
            .iter()
            .any(|r| netmeter::experiment::figures::figures(r).is_empty())
        {
            return Err(NetmeterError::new_err(format!(
                "the {side} result holds no key figure netmeter compare knows"
            )));
        }
        return Ok(runs);
    }
    let path: PathBuf = x.extract()?;
    let runs =
        py.allow_threads(|| cli::compare_cmd::load_runs(&path, false).map_err(|e| e.to_string()));
    runs.map_err(NetmeterError::new_err)
}

/// What `netmeter compare BASE NEW -J` computes: per key figure the two sides'
/// summaries, the change, the test and its verdict.
#[pyfunction]
fn compare(py: Python<'_>, base: &Bound<'_, PyAny>, new: &Bound<'_, PyAny>) -> PyResult<PyObject> {
    let base = runs_of(py, "base", base)?;
    let new = runs_of(py, "new", new)?;
    let c = netmeter::experiment::compare::compare(&base, &new)
        .map_err(|e| NetmeterError::new_err(e.to_string()))?;
    let text = serde_json::to_string(&c)
        .map_err(|e| NetmeterError::new_err(format!("cannot serialize the comparison: {e}")))?;
    loads(py, &text)
}

#[pymodule]
fn _netmeter(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("NetmeterError", py.get_type::<NetmeterError>())?;
    m.add("UsageError", py.get_type::<UsageError>())?;
    m.add_class::<Stream>()?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(stream, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(run_scenario, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
