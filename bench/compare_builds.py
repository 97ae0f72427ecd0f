"""Runs `kvledger bench` against the kvledger-server of two builds side by side (a baseline revision
and this tree), alternating runs so both see the same machine noise, and prints medians and the
ratio per mode as a Markdown table; then the median /metrics round trip of each over HTTP with
64 models x 5 tiers populated. Built by scripts/bench.sh with KVLEDGER_BASELINE=<revision>.

Usage: compare_builds.py BASELINE_BUILD_DIR BUILD_DIR [--duration S] [--repetitions R] [--modes unary,batch,stream]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_servers import populate, start  # noqa: E402


def bench(cli, target, mode, duration):
    out = subprocess.run([cli, "bench", "--real", "--target", target, "--mode", mode, "--batch-size", "100",
                          "--connections", "2", "--duration", str(duration), "--json"],
                         capture_output=True, text=True, timeout=duration + 120, check=True).stdout
    return json.loads(out)


def scrape_ms(metrics, rounds=50):
    times = []
    for _ in range(rounds):
        start = time.monotonic()
        with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=30) as r:
            r.read()
        times.append((time.monotonic() - start) * 1000)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("baseline_dir")
    parser.add_argument("build_dir")
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--modes", default="unary,batch,stream")
    args = parser.parse_args()
    cli = os.path.join(args.build_dir, "client", "kvledger")
    tmp = tempfile.mkdtemp(prefix="kvledger-builds-")
    servers = {}
    try:
        for name, build in (("baseline", args.baseline_dir), ("this tree", args.build_dir)):
            servers[name] = start(os.path.join(build, "server", "kvledger-server"), os.path.join(tmp, name + ".log"),
                                  ["--unknown_model=generic", "--max_models=64"])
        print("| mode | baseline records/s | this tree records/s | ratio | baseline p50 ms | this tree p50 ms |")
        print("|---|---|---|---|---|---|")
        for mode in args.modes.split(","):
            runs = {name: [] for name in servers}
            for rep in range(args.repetitions):
                order = list(servers.items())
                for name, (_, grpc_address, _) in (order if rep % 2 == 0 else order[::-1]):  # neither always first
                    runs[name].append(bench(cli, grpc_address, mode, args.duration))
            med = {n: statistics.median(r["records_per_second"] for r in rs) for n, rs in runs.items()}
            p50 = {n: statistics.median(r["p50_ms"] for r in rs) for n, rs in runs.items()}
            print(f"| {mode} | {med['baseline']:.0f} | {med['this tree']:.0f} | {med['this tree'] / med['baseline']:.2f} "
                  f"| {p50['baseline']:.3f} | {p50['this tree']:.3f} |")
        for name, (_, grpc_address, metrics) in servers.items():
            populate(grpc_address, 64)
        print()
        print("| /metrics round trip, median of 50 (64 models x 5 tiers) | ms |")
        print("|---|---|")
        for _ in range(2):
            for name, (_, _, metrics) in servers.items():
                print(f"| {name} | {scrape_ms(metrics):.2f} |")
    finally:
        for proc, _, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
