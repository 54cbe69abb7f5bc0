"""netmeter benchmark harness: netmeter against iperf3, iperf 2 and netperf on 127.0.0.1.

Usage (from anywhere; needs root only if scripts/setup-peers.sh has to run):

    python3 bench/run.py [--runs 5] [--seconds 1] [--cases tcp1,udp1448,...] [--smoke]

What one command does:
  1. `cargo build --release --locked`, then copies target/release/netmeter to
     target/bench-bin/ so that a concurrent rebuild cannot swap the binary mid-run;
  2. runs scripts/setup-peers.sh if /opt/netmeter-peers/peers.env (or
     $NETMETER_PEERS_ENV) is missing, and reads the peer paths from it;
  3. waits (up to --wait-load seconds, default 300) until the machine is quiet;
  4. runs every case for every tool, --runs times, alternating the tools within each
     repetition (the tool order is rotated by one per repetition). Each run starts a fresh
     server bound to 127.0.0.1 on a free port, then the client, both wrapped in
     `timeout -k 2 LIMIT /usr/bin/time -f %M`, and stops the server by its PID: wait4()
     gives the exact CPU time (user+system) of client and server, GNU time their peak RSS;
  5. writes bench/results.json (every run, raw) and docs/benchmarks.md (machine, date,
     exact commands, a table per case with median, min-max, CPU per Gbit and peak RSS,
     ratios netmeter / peer and the goals, marked met / not met).

Cases: tcp1 tcp2 tcpR tcpbest udp1448 udp64 udpecn rr crr tcpP mem growth plot (see
docs/benchmarks.md; tcpP: -P 2/8/32 and --bidir against the newest iperf3; growth: 1/8/32/128
streams and 1/4/16 concurrent tests on one server, bench/nmbench/growth.py; plot: `netmeter
plot`/`report` of a 10,000-interval result, bench/nmbench/plotcase.py).

Options:
  --runs N         repetitions per case and tool (default 5)
  --seconds S      length of each test in whole seconds (default 1; iperf3 and netperf
                   take whole seconds). The default run takes about 6.5 minutes on a 2-vCPU
                   VM (265 runs; most of it is test time), plus up to --retry-budget for
                   repeating noisy runs and --wait-load for a busy host to calm down;
                   --seconds 3 takes about 15 minutes.
  --cases a,b      run only these cases
  --smoke          CI mode: 1 run of 1 second of tcp1 (netmeter vs iperf3 3.12) and
                   udp1448 (netmeter vs iperf3 3.12), ~10 s; writes only
                   target/bench-smoke.json; exit status 1 if a tool failed to run
  --no-build       use the existing target/release/netmeter (no cargo build)
  --wait-load SEC  wait up to SEC seconds for the host to be idle before starting
                   (default 300, 0 with --smoke)
  --max-other-load F  repeat a run (at most twice) when other processes used more than
                   this share of the CPUs during it (default 0.15) ...
  --retry-budget SEC  ... within SEC seconds of repeats in all (default 60, 0 with --smoke)
  --baseline BIN   another netmeter binary: every netmeter row also runs with it
  --json PATH      raw results (default bench/results.json)
  --doc PATH       report (default docs/benchmarks.md)

Exit status: 0 when every run succeeded, 1 when a run failed (its error is in the JSON and
the report), 2 on a setup error (build failed, peers missing).

Python 3.11 standard library only. Linux only (/proc, wait4, taskset, timeout, GNU time).
"""
