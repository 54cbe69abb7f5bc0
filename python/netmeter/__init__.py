"""netmeter from Python: run iperf3-compatible tests and read their results as data.

Every function returns what netmeter itself writes as JSON, as plain Python objects
(dicts, lists, numbers, strings):

- ``run(*args, **kwargs)``: one client test; returns the ``-J`` document.
- ``stream(*args, **kwargs)``: one client test as an iterator of its events
  (``start``, ``interval``..., ``end``), each as ``--json-stream`` writes it.
- ``load(path)``: a saved result (netmeter's or iperf3's, ``-J`` or ``--json-stream``)
  as the ``-J`` document.
- ``compare(base, new)``: what ``netmeter compare`` computes, as data.
- ``run_scenario(path, **opts)``: a scenario file (``netmeter scenario FILE``); returns
  its ``-J`` document, each flow's whole report in its ``flows`` list.

Arguments are netmeter's (iperf3's) options: ``run("-c", "127.0.0.1", "-u", "-b",
"10M")``, or keywords named after the long options: ``run(client="127.0.0.1",
udp=True, bitrate="10M", time=2)``. Errors raise ``NetmeterError`` (``UsageError``
for wrong arguments) with netmeter's one-sentence message; Ctrl-C stops a running test
cleanly and raises ``KeyboardInterrupt``. See docs/python.md.
"""

from ._netmeter import (
    NetmeterError,
    Stream,
    UsageError,
    __version__,
    compare,
    load,
    run,
    run_scenario,
    stream,
)

__all__ = [
    "NetmeterError",
    "Stream",
    "UsageError",
    "__version__",
    "compare",
    "load",
    "run",
    "run_scenario",
    "stream",
]
