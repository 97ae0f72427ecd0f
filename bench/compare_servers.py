"""Runs `kvledger bench` against kvledger-server and kvledger-noop-server side by side, alternating
runs so both see the same machine noise, and prints medians and ratios as a Markdown table.

Usage: compare_servers.py BUILD_DIR [--duration S] [--repetitions R] [--connections C] [--batch-size N]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

LISTENING = re.compile(r"listening: grpc=(\S+) metrics=")


def start(binary, log_path):
    log = open(log_path, "w+")
    proc = subprocess.Popen([binary, "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0"],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log_path) as f:
            m = LISTENING.search(f.read())
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            sys.exit(f"{binary} exited: see {log_path}")
        time.sleep(0.05)
    sys.exit(f"{binary} did not start")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build_dir")
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args()
    cli = os.path.join(args.build_dir, "client", "kvledger")
    tmp = tempfile.mkdtemp(prefix="kvledger-bench-")
    servers = {}
    try:
        for name in ("kvledger-server", "kvledger-noop-server"):
            servers[name] = start(os.path.join(args.build_dir, "server", name), os.path.join(tmp, name + ".log"))
        rows = []
        for mode in ("unary", "batch", "stream"):
            runs = {name: [] for name in servers}
            for _ in range(args.repetitions):
                for name, (_, address) in servers.items():
                    out = subprocess.run([cli, "bench", "--target", address, "--mode", mode, "--duration",
                                          str(args.duration), "--connections", str(args.connections),
                                          "--batch-size", str(args.batch_size), "--json"],
                                         capture_output=True, text=True, check=True)
                    runs[name].append(json.loads(out.stdout))
            med = {name: {k: statistics.median(r[k] for r in rs) for k in ("records_per_second", "p50_ms", "p99_ms")}
                   for name, rs in runs.items()}
            real, noop = med["kvledger-server"], med["kvledger-noop-server"]
            rows.append(f"| {mode} | {real['records_per_second']:,.0f} | {noop['records_per_second']:,.0f} | "
                        f"{real['records_per_second'] / noop['records_per_second']:.2f} | "
                        f"{real['p50_ms']:.3f} / {noop['p50_ms']:.3f} | {real['p99_ms']:.3f} / {noop['p99_ms']:.3f} |")
        print(f"{args.connections} connections, batch size {args.batch_size} (batch and stream), "
              f"{args.duration:g} s per run, median of {args.repetitions} alternating runs\n")
        print("| mode | kvledger-server records/s | noop records/s | ratio | p50 ms (server / noop) | p99 ms (server / noop) |")
        print("|---|---|---|---|---|---|")
        print("\n".join(rows))
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
