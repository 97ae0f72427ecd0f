"""Runs `kvledger bench` against kvledger-server and kvledger-noop-server side by side, alternating
runs so both see the same machine noise, and prints medians and ratios as a Markdown table.

Then measures stream ingest into kvledger-server while /metrics is scraped 10 times a second, with
64 models x 5 tiers populated, against the same ingest without scrapes (alternating runs).

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
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client", "python"))
import kvledger  # noqa: E402

LISTENING = re.compile(r"listening: grpc=(\S+) metrics=https?://(\S+)/metrics")


def start(binary, log_path, extra=()):
    """Starts a server on free ports; returns (process, gRPC address, metrics host:port)."""
    log = open(log_path, "w+")
    proc = subprocess.Popen([binary, "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                             "--shutdown_drain_seconds=0", "--shutdown_scrape_grace_seconds=0", *extra],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log_path) as f:
            m = LISTENING.search(f.read())
        if m:
            return proc, m.group(1), m.group(2)
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
                for name, (_, address, _) in servers.items():
                    out = subprocess.run([cli, "bench", "--real", "--target", address, "--mode", mode, "--duration",
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
        print()
        scrape_while_ingesting(cli, tmp, args)
    finally:
        for proc, _, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=30)


def populate(address, models):
    """One record in every (model, tier) cell of `models` unknown models, every latency measured;
    exits if any record did not arrive (builds compared side by side must export the same series)."""
    with kvledger.Reporter(address, max_queue_size=8 * models * 5) as reporter:
        for m in range(models):
            for tier in ("none", "device", "host", "disk", "remote"):
                reporter.report(model=f"finetune-{m}", tier=tier, prompt_tokens=8192,
                                logical_match_tokens=0 if tier == "none" else 4096,
                                reload_seconds=None if tier == "none" else 0.004,
                                suffix_prefill_seconds=0.3, ttft_seconds=0.31)
        reporter.flush(120)
        stats = reporter.stats()
    if stats["sent"] != models * 5:
        sys.exit(f"populate: {stats}")


def scrape_while_ingesting(cli, tmp, args):
    proc, address, metrics = start(os.path.join(args.build_dir, "server", "kvledger-server"),
                                   os.path.join(tmp, "scraped.log"), ["--unknown_model=generic", "--max_models=64"])
    try:
        populate(address, 64)
        scrapes = {"count": 0, "seconds": []}

        def scraper(stop):
            while not stop.wait(0.1):
                begin = time.monotonic()
                with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as response:
                    size = len(response.read())
                scrapes["seconds"].append(time.monotonic() - begin)
                scrapes["count"] += 1
                scrapes["bytes"] = size

        runs = {"without scrapes": [], "scraped 10/s": []}
        for _ in range(args.repetitions):
            for name in runs:
                stop = threading.Event()
                thread = threading.Thread(target=scraper, args=(stop,)) if name == "scraped 10/s" else None
                if thread:
                    thread.start()
                out = subprocess.run([cli, "bench", "--real", "--target", address, "--mode", "stream", "--duration",
                                      str(args.duration), "--connections", str(args.connections),
                                      "--batch-size", str(args.batch_size), "--json"],
                                     capture_output=True, text=True, check=True)
                stop.set()
                if thread:
                    thread.join()
                runs[name].append(json.loads(out.stdout)["records_per_second"])
        plain = statistics.median(runs["without scrapes"])
        scraped = statistics.median(runs["scraped 10/s"])
        print(f"Stream ingest while /metrics is scraped 10 times a second (64 models x 5 tiers populated, "
              f"{scrapes.get('bytes', 0):,} bytes per scrape, {scrapes['count']} scrapes, median scrape "
              f"{statistics.median(scrapes['seconds']) * 1000:.1f} ms wall), median of {args.repetitions} "
              f"alternating runs\n")
        print("| ingest | records/s | ratio |")
        print("|---|---|---|")
        print(f"| without scrapes | {plain:,.0f} | 1.00 |")
        print(f"| scraped 10/s | {scraped:,.0f} | {scraped / plain:.2f} |")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
