"""Records with block ids beside records without (docs/performance.md, "The bulk lane"): a client
sending 100-record RecordBatch calls without ids, its latency measured alone and then while CLIENTS
other clients (each its own process and connection) send calls of 7 records x 65,536 fresh block ids
(3.7 MB, the capacity curves' costliest shape) as fast as they are answered. Each configuration gets
its own kvledger-server; configurations alternate over the repetitions so they see the same machine
noise. Prints, per configuration, the median over repetitions of the small client's p50 and p99,
alone and loaded, and their ratio, as a Markdown table, and the bulk calls applied a second.

Usage: bulk_fairness.py KVLEDGER_SERVER [--clients 4] [--seconds 10] [--repetitions 3]
       [--config NAME=FLAGS ...]   (default: the lane on, and --bulk_call_bytes=0 as the baseline)
"""
import argparse
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))
sys.path.insert(0, os.path.join(HERE))
import grpc  # noqa: E402

import kvledger  # noqa: E402
from compare_servers import start  # noqa: E402
from kvledger.v1 import ledger_pb2  # noqa: E402

IDS = 65536
METHOD = "/kvledger.v1.Ledger/RecordBatch"


def raw_call(channel):
    return channel.unary_unary(METHOD, request_serializer=lambda b: b, response_deserializer=lambda b: b)


def bulk_messages(client):
    """Four 7-record batches of 65,536 distinct ids each, for cache engine-CLIENT."""
    out = []
    for m in range(4):
        first = (client << 40) + m * 7 * IDS
        records = [kvledger.make_record(model="llama-3.1-8b", prompt_tokens=16 * IDS, block_tokens=16,
                                        prefix_block_ids=range(first + r * IDS, first + (r + 1) * IDS),
                                        cache_id=f"engine-{client}") for r in range(7)]
        out.append(ledger_pb2.RecordBatchRequest(records=records).SerializeToString())
    return out


def bulk_client(address, client, seconds, ready_path):
    """Sends the bulk calls until `seconds` pass or SIGTERM (a RESOURCE_EXHAUSTED is retried after
    50 ms, as the Reporters back off); prints the calls applied while the small client measured
    (from the file `ready_path`.go on)."""
    messages = bulk_messages(client)
    open(ready_path, "w").close()
    applied = 0
    counted_from = None

    def stop(*_):
        print(applied - (counted_from or 0), flush=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    with grpc.insecure_channel(address) as channel:
        call = raw_call(channel)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                call(messages[applied % len(messages)], timeout=120)
                applied += 1
                if counted_from is None and os.path.exists(ready_path + ".go"):
                    counted_from = applied
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                time.sleep(0.05)
    print(applied)


def small_latencies(address, seconds):
    small = ledger_pb2.RecordBatchRequest(records=[
        kvledger.make_record(model="llama-3.1-8b", prompt_tokens=4096, logical_match_tokens=2048)
        for _ in range(100)]).SerializeToString()
    out = []
    with grpc.insecure_channel(address) as channel:
        call = raw_call(channel)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.monotonic()
            call(small, timeout=60)
            out.append(time.monotonic() - t)
    return out


def quantile(values, q):
    return sorted(values)[int(q * (len(values) - 1))] * 1e3


def one_run(server, flags, args, tmp):
    proc, address, _ = start(server, os.path.join(tmp, "server.log"), flags)
    try:
        small_latencies(address, 1)  # warm
        alone = small_latencies(address, args.seconds)
        ready = [os.path.join(tmp, f"ready-{c}") for c in range(args.clients)]
        for r in ready:
            for path in (r, r + ".go"):
                if os.path.exists(path):
                    os.remove(path)
        bulk = [subprocess.Popen([sys.executable, __file__, "--bulk-client", address, str(c),
                                  str(args.seconds + 30), ready[c]], stdout=subprocess.PIPE, text=True)
                for c in range(args.clients)]
        while not all(os.path.exists(r) for r in ready):
            time.sleep(0.05)
        time.sleep(2)  # the bulk calls under way
        for r in ready:
            open(r + ".go", "w").close()
        start_time = time.monotonic()
        loaded = small_latencies(address, args.seconds)
        took = time.monotonic() - start_time
        for b in bulk:
            b.terminate()
        bulk_applied = sum(int(b.communicate()[0] or 0) for b in bulk)
        return {"alone_p50": quantile(alone, 0.5), "alone_p99": quantile(alone, 0.99),
                "loaded_p50": quantile(loaded, 0.5), "loaded_p99": quantile(loaded, 0.99),
                "loaded_calls_per_s": len(loaded) / took, "bulk_calls_per_s": bulk_applied / took}
    finally:
        proc.terminate()
        proc.wait()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--bulk-client":
        bulk_client(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
        return
    p = argparse.ArgumentParser()
    p.add_argument("server")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--config", action="append", default=[])
    args = p.parse_args()
    configs = [c.split("=", 1) for c in args.config] or [["bulk lane (default)", ""],
                                                          ["no lane (--bulk_call_bytes=0)", "--bulk_call_bytes=0"]]
    results = {name: [] for name, _ in configs}
    with tempfile.TemporaryDirectory(prefix="kvledger-bulk-") as tmp:
        for _ in range(args.repetitions):
            for name, flags in configs:
                results[name].append(one_run(args.server, shlex.split(flags), args, tmp))
    print(f"| {args.clients} bulk clients | alone p50 | alone p99 | loaded p50 | loaded p99 | p99 loaded/alone |"
          " small calls/s loaded | bulk calls/s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        ratio = statistics.median(r["loaded_p99"] / r["alone_p99"] for r in runs)
        print(f"| {name} | {med['alone_p50']:.2f} ms | {med['alone_p99']:.2f} ms | {med['loaded_p50']:.2f} ms |"
              f" {med['loaded_p99']:.2f} ms | {ratio:.1f}x | {med['loaded_calls_per_s']:.0f} |"
              f" {med['bulk_calls_per_s']:.1f} |")


if __name__ == "__main__":
    main()
