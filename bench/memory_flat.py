"""Resident memory of kvledger-server against records accounted: streams records with `kvledger bench`
and samples RSS (from /proc) and the accepted count (from /metrics) until TARGET records, then prints
the RSS at 1 million records and at the end. A second run populates MODELS x 5 tiers through the
Python package and prints the resident bytes per (model, tier) cell.

Usage: memory_flat.py BUILD_DIR [--records 100000000] [--models 1000]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_servers import populate, start  # noqa: E402

ACCEPTED = re.compile(r"^kvledger_requests_total\{[^}]*\} (\d+)$", re.M)


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def accepted(metrics):
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=30) as r:
        return sum(int(v) for v in ACCEPTED.findall(r.read().decode()))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build_dir")
    parser.add_argument("--records", type=int, default=100_000_000)
    parser.add_argument("--models", type=int, default=1000)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="kvledger-memory-")
    server = os.path.join(args.build_dir, "server", "kvledger-server")
    cli = os.path.join(args.build_dir, "client", "kvledger")

    proc, grpc_address, metrics = start(server, os.path.join(tmp, "flat.log"))
    try:
        # Load until `target` records, then stop the load and let the server settle (it returns freed
        # memory every 10 s): the resident set then holds what the records left behind, not the
        # buffers of streams in flight (which swing by tens of MiB under load).
        def load_until(target):
            load = subprocess.Popen([cli, "bench", "--real", "--target", grpc_address, "--mode", "stream", "--duration",
                                     "3600", "--connections", "2", "--batch-size", "100", "--json"],
                                    stdout=subprocess.DEVNULL)
            peak = 0
            while accepted(metrics) < target:
                peak = max(peak, rss_bytes(proc.pid))
                time.sleep(0.5)
            load.terminate()
            load.wait()
            time.sleep(12)
            return accepted(metrics), rss_bytes(proc.pid), peak

        begin = time.monotonic()
        rows = [load_until(n) for n in sorted({min(1_000_000, args.records), min(10_000_000, args.records), args.records})]
        print(f"records accounted: {rows[-1][0]:,} in {time.monotonic() - begin:.0f} s (stream, 2 connections)")
        for n, settled, peak in rows:
            print(f"  after {n:>12,} records: {settled / 2**20:.1f} MiB settled (peak under load {peak / 2**20:.1f} MiB)")
        first, last = rows[0][1], rows[-1][1]
        print(f"settled RSS from {rows[0][0]:,} to {rows[-1][0]:,} records: {100 * (last - first) / first:+.1f} %")
    finally:
        proc.terminate()
        proc.wait()

    proc, grpc_address, metrics = start(server, os.path.join(tmp, "cells.log"),
                                         ["--unknown_model=generic", f"--max_models={args.models}"])
    try:
        idle = rss_bytes(proc.pid)
        populate(grpc_address, args.models)
        accepted(metrics)  # one scrape, so its buffers are counted too
        populated = rss_bytes(proc.pid)
        cells = args.models * 5
        print(f"{cells:,} (model, tier) cells populated: RSS {idle / 2**20:.1f} -> {populated / 2**20:.1f} MiB, "
              f"{(populated - idle) / cells:,.0f} bytes per cell")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
