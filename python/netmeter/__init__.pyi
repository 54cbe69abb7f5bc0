"""Typed stubs of the netmeter package (the module itself is netmeter._netmeter, in Rust)."""

import os
from typing import Any, Dict, Iterator, Optional, Union

__version__: str

#: A result document (netmeter's ``-J`` output) or an event, as ``json.loads`` gives it.
Document = Dict[str, Any]

class NetmeterError(Exception):
    """A test, a result file or a comparison failed; ``str(err)`` is netmeter's sentence.

    A test that failed after it started keeps its partial ``-J`` document in ``report``.
    """

    report: Document

class UsageError(NetmeterError):
    """Wrong arguments: an unknown option, a value that does not parse, no ``-c HOST``."""

class Stream(Iterator[Document]):
    """The running test's events, as ``--json-stream`` writes them.

    Each item is ``{"event": "start" | "interval" | "error" | "end", "data": ...}``;
    the iteration ends after ``end``, once the test is over.
    """

    def __iter__(self) -> "Stream": ...
    def __next__(self) -> Document: ...
    @property
    def report(self) -> Optional[Document]:
        """The whole ``-J`` document, once the iteration is over (``None`` before)."""

def run(*args: object, **kwargs: object) -> Document:
    """Run one client test and return its ``-J`` document.

    ``args`` are netmeter's (iperf3's) command-line words; each keyword is a long option
    (``udp=True`` → ``--udp``, ``bitrate="10M"`` → ``--bitrate 10M``, ``_`` → ``-``,
    a one-letter keyword is the short option; ``False``/``None`` leave it out, a list
    repeats it). ``logfile=PATH`` also writes the test's own output there (with
    ``json=True``, the same ``-J`` document). The GIL is released while the test runs;
    Ctrl-C stops it as netmeter's SIGINT does and raises ``KeyboardInterrupt``.

    Raises ``UsageError`` for wrong arguments, ``NetmeterError`` when the test fails.
    """

def stream(*args: object, **kwargs: object) -> Stream:
    """Start one client test (arguments as ``run``) and iterate over its events."""

def load(path: Union[str, "os.PathLike[str]"]) -> Document:
    """Read a saved result (netmeter's or iperf3's, ``-J`` or ``--json-stream``) as the
    ``-J`` document netmeter would have written. Raises ``NetmeterError`` naming the
    file and what is wrong with it."""

def compare(
    base: Union[str, "os.PathLike[str]", Document],
    new: Union[str, "os.PathLike[str]", Document],
) -> Document:
    """Compare two results (paths, or documents as ``run`` returns them) as
    ``netmeter compare BASE NEW -J`` does: ``{"test", "alpha", "base_runs", "new_runs",
    "figures": [...], "notes": [...]}``."""

def run_scenario(
    path: Union[str, "os.PathLike[str]"],
    *,
    lead: Optional[float] = ...,
    baseline: Optional[Union[str, "os.PathLike[str]"]] = ...,
    fail_if_worse: Optional[float] = ...,
    clock_tolerance: Optional[float] = ...,
    ignore_clock: bool = ...,
    output: Optional[Union[str, "os.PathLike[str]"]] = ...,
) -> Document:
    """Run a scenario file as ``netmeter scenario FILE -J`` does and return its
    document: ``{"start_epoch", "hosts": [...], "flows": [{"name", "from", "to",
    "address", "start_offset_s", "txstart", "report" | "error"}...], "total",
    "latency_ks", "baseline"?, "interrupted"?}``. Keywords are the command's options
    (``lead=2`` → ``--lead 2``, ``ignore_clock=True`` → ``--ignore-clock``,
    ``clock_tolerance`` in ms, ``output=PATH`` also writes the document there).

    Each host's clock is checked first: a host that starts flows off by more than
    ``clock_tolerance`` raises ``NetmeterError`` (its ``report`` holds the hosts'
    offsets) unless ``ignore_clock=True``. The GIL is released while the flows run;
    Ctrl-C stops every local flow and raises ``KeyboardInterrupt``, whose ``report`` is
    the document of what was measured. Raises ``UsageError`` for a bad file or option,
    ``NetmeterError`` when no flow ran or a flow got worse than ``baseline`` by more
    than ``fail_if_worse`` percent.
    """
