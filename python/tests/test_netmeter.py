"""The netmeter package end to end over loopback, against a netmeter server the test
starts (conftest.py). Each test is bounded by its own -t and by deadlines that only
bound a failure; none judges its own stopwatch."""

import json
import os
import pathlib
import signal
import threading
import time

import pytest

import netmeter

from conftest import REPO

IPERF3_322_TCP = REPO / "src" / "report" / "testdata" / "iperf3_322_tcp.json"
IPERF3_322_UDP = REPO / "src" / "report" / "testdata" / "iperf3_322_udp_bidir.json"


def client(server, *more):
    return ("-c", "127.0.0.1", "-p", str(server.port), *more)


def test_run_returns_the_document_json_writes(server, tmp_path):
    """The returned data is the -J document of the same run, as the renderer wrote it."""
    log = tmp_path / "run.json"
    doc = netmeter.run(*client(server, "-t", "1", "-i", "0.5", "-J", "--logfile", str(log)))
    with open(log) as f:
        written = json.load(f)
    assert doc == written
    assert doc["start"]["test_start"]["protocol"] == "TCP"
    assert len(doc["intervals"]) >= 2
    end = doc["end"]
    assert end["sum_sent"]["bytes"] > 0
    # The server's count of the same bytes (its results, exchanged at the end).
    assert end["sum_received"]["bytes"] > 0
    assert end["sum_received"]["bytes"] <= end["sum_sent"]["bytes"]


def test_keywords_are_long_options(server):
    """`udp=True` is --udp, `bitrate="2M"` --bitrate 2M, `P=2` -P 2, False leaves out."""
    doc = netmeter.run(
        client="127.0.0.1", port=server.port, udp=True, bitrate="2M", time=1, P=2, reverse=False
    )
    ts = doc["start"]["test_start"]
    assert ts["protocol"] == "UDP"
    assert ts["num_streams"] == 2
    assert ts["target_bitrate"] == 2_000_000
    assert len(doc["start"]["connected"]) == 2
    assert ts["reverse"] == 0
    assert doc["end"]["sum"]["packets"] > 0


def test_stream_yields_start_intervals_and_end(server):
    s = netmeter.stream(*client(server, "-t", "1", "-i", "0.25"))
    events = list(s)
    names = [e["event"] for e in events]
    assert names[0] == "start"
    assert names[-1] == "end"
    intervals = [e["data"] for e in events if e["event"] == "interval"]
    assert len(intervals) >= 2
    # The events are the document's own parts.
    assert s.report is not None
    assert s.report["intervals"] == intervals
    assert s.report["end"] == events[-1]["data"]
    # Over is over.
    with pytest.raises(StopIteration):
        next(s)


def test_ctrl_c_stops_a_running_test(server, tmp_path):
    """SIGINT to this process, sent once the test's first interval is in its log, stops
    the test as netmeter's own Ctrl-C does and raises KeyboardInterrupt; the next test
    runs."""
    log = tmp_path / "stream.jsonl"
    stop_watching = threading.Event()

    def interrupt_after_first_interval():
        deadline = time.monotonic() + 60
        while not stop_watching.is_set() and time.monotonic() < deadline:
            if log.exists() and '"event":"interval"' in log.read_text():
                os.kill(os.getpid(), signal.SIGINT)
                return
            stop_watching.wait(0.05)

    watcher = threading.Thread(target=interrupt_after_first_interval, daemon=True)
    watcher.start()
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            # -t 60 bounds the test if the interrupt went unheard.
            netmeter.run(
                *client(server, "-t", "60", "-i", "0.2", "--json-stream", "--logfile", str(log))
            )
    finally:
        stop_watching.set()
        watcher.join(timeout=10)
    report = caught.value.report
    assert "interrupt" in report["error"]
    assert len(report["intervals"]) >= 1
    # The stop request is forgotten: the server takes the next test and it runs whole.
    server.wait_listening(2)
    doc = netmeter.run(*client(server, "-t", "0.5"))
    assert "error" not in doc
    assert doc["end"]["sum_sent"]["bytes"] > 0


def test_load_reads_iperf3_322_results():
    with open(IPERF3_322_TCP) as f:
        raw = json.load(f)
    doc = netmeter.load(IPERF3_322_TCP)
    assert doc["start"]["version"] == "iperf 3.22"
    assert len(doc["intervals"]) == len(raw["intervals"])
    assert doc["end"]["sum_sent"]["bytes"] == raw["end"]["sum_sent"]["bytes"]
    assert doc["end"]["sum_received"]["bytes"] == raw["end"]["sum_received"]["bytes"]
    udp = netmeter.load(str(IPERF3_322_UDP))
    assert udp["start"]["test_start"]["protocol"] == "UDP"


def test_load_reads_json_stream_lines(server, tmp_path):
    log = tmp_path / "s.jsonl"
    doc = netmeter.run(*client(server, "-t", "1", "-i", "0.5", "--json-stream", "--logfile", str(log)))
    loaded = netmeter.load(log)
    assert len(loaded["intervals"]) == len(doc["intervals"])
    assert loaded["end"]["sum_sent"]["bytes"] == doc["end"]["sum_sent"]["bytes"]


def test_compare_paths_and_documents():
    same = netmeter.compare(IPERF3_322_TCP, IPERF3_322_TCP)
    assert same["base_runs"] == 1 and same["new_runs"] == 1
    assert same["figures"], "no figure compared"
    receiver = next(r for r in same["figures"] if r["key"] == "receiver_bits_per_second")
    assert receiver["change_pct"] == 0.0
    # One run a side and no histogram for throughput: no test is possible, and it says so.
    assert receiver["verdict"] == "single_run"
    as_doc = netmeter.compare(netmeter.load(IPERF3_322_TCP), IPERF3_322_TCP)
    assert as_doc == same
    with pytest.raises(netmeter.NetmeterError, match="same kind of test"):
        netmeter.compare(IPERF3_322_TCP, IPERF3_322_UDP)


def test_errors_are_netmeters_sentences(tmp_path):
    with pytest.raises(netmeter.UsageError, match="-c HOST"):
        netmeter.run("-s")
    with pytest.raises(netmeter.UsageError, match="--bitrate|-b"):
        netmeter.run("-c", "127.0.0.1", "-b", "fast")
    assert issubclass(netmeter.UsageError, netmeter.NetmeterError)
    missing = tmp_path / "missing.json"
    with pytest.raises(netmeter.NetmeterError, match="missing.json"):
        netmeter.load(missing)
    # Nothing listens on a port just freed: the connection is refused, in one sentence.
    from conftest import free_port

    with pytest.raises(netmeter.NetmeterError) as e:
        netmeter.run("-c", "127.0.0.1", "-p", str(free_port()), "-t", "1")
    assert "\n" not in str(e.value).strip()


def two_flow_scenario(tmp_path, a, b):
    """Two local TCP flows with --trip-times, one to each server, started together."""
    path = tmp_path / "two.toml"
    path.write_text(
        f'[hosts.a]\naddress = "127.0.0.1:{a.port}"\n'
        f'[hosts.b]\naddress = "127.0.0.1:{b.port}"\n'
        '[[flow]]\nname = "up"\nfrom = "local"\nto = "a"\nargs = "--trip-times -t 1 -b 5M"\n'
        '[[flow]]\nname = "down"\nfrom = "local"\nto = "b"\nargs = "--trip-times -t 1 -b 5M"\n'
    )
    return path


@pytest.fixture
def second_server():
    from conftest import Server, free_port

    srv = Server(free_port())
    try:
        srv.wait_listening()
        yield srv
    finally:
        srv.stop()


def test_run_scenario_returns_the_scenario_document(server, second_server, tmp_path):
    """Two flows over loopback: the returned data is the document the run wrote (-o),
    each flow's whole report, each host's clock offset."""
    path = two_flow_scenario(tmp_path, server, second_server)
    written = tmp_path / "run.json"
    doc = netmeter.run_scenario(path, lead=1, output=written)
    with open(written) as f:
        assert doc == json.load(f)
    assert [f["name"] for f in doc["flows"]] == ["up", "down"]
    for f in doc["flows"]:
        assert "error" not in f, f
        assert f["report"]["end"]["sum_received"]["bytes"] > 0
        assert f["report"]["start"]["netmeter"]["txstart"]["requested"] == doc["start_epoch"]
        hist = f["report"]["end"]["netmeter"]["trip_times"]["client_to_server"]["histogram_us"]
        assert sum(c for _, c in hist) > 0
    assert [h["name"] for h in doc["hosts"]] == ["a", "b"]
    for h in doc["hosts"]:
        assert abs(h["clock_offset_s"]) < 1.0, h
    assert doc["total"]["flows"] == 2 and doc["total"]["failed"] == 0
    assert len(doc["latency_ks"]) == 1


def test_run_scenario_errors_are_netmeters_sentences(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[hosts.a]\naddress = "127.0.0.1"\n[[flow]]\nname = "x"\nfrom = "local"\nto = "b"\n')
    with pytest.raises(netmeter.UsageError, match="line 6: to: 'b' is not a"):
        netmeter.run_scenario(bad)
    with pytest.raises(netmeter.UsageError, match="plot"):
        netmeter.run_scenario(bad, plot="x.png")


def test_the_scenario_cdf_example_draws_a_png(server, second_server, tmp_path):
    """The docs' example (python/examples/scenario_cdf.py) with the Agg backend."""
    pytest.importorskip("matplotlib")
    import subprocess
    import sys

    path = two_flow_scenario(tmp_path, server, second_server)
    png = tmp_path / "cdf.png"
    example = REPO / "python" / "examples" / "scenario_cdf.py"
    out = subprocess.run(
        [sys.executable, str(example), str(path), str(png)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "2 flows" in out.stdout, out.stdout
    assert png.read_bytes().startswith(b"\x89PNG")
