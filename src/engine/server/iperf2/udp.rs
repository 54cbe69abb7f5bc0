//! iperf 2 UDP tests (filled in by the next step).
