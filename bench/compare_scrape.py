"""The /metrics side of two builds of kvledger-server measured side by side in one run (e.g. before
and after a change to the exposition), alternating so both see the same machine noise:

- CPU per scrape: the server's user + system time (/proc/PID/stat) over a series of scrapes,
  divided by their number, with M models x 5 tiers populated (every latency measured);
- peak RSS a scrape adds: the server's VmHWM after a scrape, its high-water mark reset just before
  (/proc/PID/clear_refs), minus its VmRSS before;
- stream ingest while /metrics is scraped every second and ten times a second, as a ratio of the
  same ingest unscraped (64 models x 5 tiers populated).

Prints medians as Markdown tables. Usage:
  compare_scrape.py BASELINE_BUILD_DIR NEW_BUILD_DIR [--models 64,1000] [--scrapes 20] [--duration 5]
                    [--repetitions 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_servers import populate, start  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def scrape(metrics):
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=60) as response:
        return len(response.read())


def scrape_cost(proc, metrics, scrapes):
    """(CPU ms per scrape, bytes per scrape, peak KiB added by one scrape)."""
    size = scrape(metrics)  # warm up: first-touch allocations are not a scrape's steady cost
    before = cpu_seconds(proc.pid)
    for _ in range(scrapes):
        scrape(metrics)
    cpu_ms = (cpu_seconds(proc.pid) - before) * 1000 / scrapes
    rss = status_kib(proc.pid, "VmRSS")
    with open(f"/proc/{proc.pid}/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    scrape(metrics)
    return cpu_ms, size, status_kib(proc.pid, "VmHWM") - rss


def ingest(cli, address, args, scrape_interval, metrics):
    stop = threading.Event()

    def scraper():
        while not stop.wait(scrape_interval):
            scrape(metrics)

    thread = threading.Thread(target=scraper) if scrape_interval else None
    if thread:
        thread.start()
    out = subprocess.run([cli, "bench", "--real", "--target", address, "--mode", "stream", "--duration", str(args.duration),
                          "--connections", "2", "--batch-size", "100", "--json"],
                         capture_output=True, text=True, check=True)
    stop.set()
    if thread:
        thread.join()
    return json.loads(out.stdout)["records_per_second"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("baseline")
    parser.add_argument("new")
    parser.add_argument("--models", default="64,1000")
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    builds = {"baseline": args.baseline, "new": args.new}
    cli = os.path.join(args.new, "client", "kvledger")
    tmp = tempfile.mkdtemp(prefix="kvledger-scrape-")

    print(f"## Scrape cost, median of {args.repetitions} alternating runs of {args.scrapes} scrapes\n")
    print("| models x 5 tiers | build | bytes | CPU ms per scrape | peak MiB added by a scrape |")
    print("|---|---|---|---|---|")
    for models in (int(m) for m in args.models.split(",")):
        servers = {}
        try:
            for name, build in builds.items():
                servers[name] = start(os.path.join(build, "server", "kvledger-server"),
                                      os.path.join(tmp, f"{name}-{models}.log"),
                                      ["--unknown_model=generic", f"--max_models={models}"])
                populate(servers[name][1], models)
            results = {name: [] for name in builds}
            for _ in range(args.repetitions):
                for name, (proc, _, metrics) in servers.items():
                    results[name].append(scrape_cost(proc, metrics, args.scrapes))
            for name, runs in results.items():
                print(f"| {models} | {name} | {runs[0][1]:,} | {statistics.median(r[0] for r in runs):.1f} | "
                      f"{statistics.median(r[2] for r in runs) / 1024:.1f} |")
        finally:
            for proc, _, _ in servers.values():
                proc.terminate()
                proc.wait(timeout=30)

    print(f"\n## Stream ingest while scraped (64 models x 5 tiers), median of {args.repetitions} alternating runs\n")
    print("| build | unscraped records/s | scraped 1/s | ratio | scraped 10/s | ratio |")
    print("|---|---|---|---|---|---|")
    servers = {}
    try:
        for name, build in builds.items():
            servers[name] = start(os.path.join(build, "server", "kvledger-server"), os.path.join(tmp, f"{name}-ingest.log"),
                                  ["--unknown_model=generic", "--max_models=64"])
            populate(servers[name][1], 64)
        runs = {(name, interval): [] for name in builds for interval in (0, 1.0, 0.1)}
        for _ in range(args.repetitions):
            for name, (_, address, metrics) in servers.items():
                for interval in (0, 1.0, 0.1):
                    runs[(name, interval)].append(ingest(cli, address, args, interval, metrics))
        for name in builds:
            plain, every_second, ten = (statistics.median(runs[(name, i)]) for i in (0, 1.0, 0.1))
            print(f"| {name} | {plain:,.0f} | {every_second:,.0f} | {every_second / plain:.2f} | {ten:,.0f} | "
                  f"{ten / plain:.2f} |")
    finally:
        for proc, _, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
