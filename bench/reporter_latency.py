"""Report() latency of kvledger.Reporter (Python) against its floor, in one run: each call timed on
its own, p50/p99/p99.9/max over 100,000 calls, medians of 5 alternating repetitions, with the server
stalled (a loopback listener that never answers), so nothing is delivered and the queue only fills.
  baseline_append   a lock plus deque.append of a prebuilt record: what any bounded queue pays
  report_record     reporter.report(record) with a prebuilt kvledger.v1.Record
  report_fields     reporter.report(**fields): builds the Record too
  report_fields_ids_16, report_fields_ids_512   the same with 16 or 512 prefix block ids (a 4 K-token
                    prompt in 256- or 8-token blocks; kvledger.blocks.from_engine_hashes included)
Prints one JSON object per case.  Usage: /usr/bin/python3 bench/reporter_latency.py
"""
import collections
import json
import os
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client", "python"))
import kvledger  # noqa: E402

CALLS, REPETITIONS = 100000, 5
FIELDS = dict(model="llama-3.1-8b", tier="host", prompt_tokens=4096, logical_match_tokens=2048, reload_seconds=0.01,
              suffix_prefill_seconds=0.2, ttft_seconds=0.25, request_id="req-000000000001")


def measure(call):
    times = []
    clock = time.perf_counter_ns
    for _ in range(CALLS):
        start = clock()
        call()
        times.append(clock() - start)
    times.sort()
    return [times[len(times) // 2], times[len(times) * 99 // 100], times[len(times) * 999 // 1000], times[-1]]


def main():
    stalled = socket.socket()
    stalled.bind(("127.0.0.1", 0))
    stalled.listen(16)
    target = f"127.0.0.1:{stalled.getsockname()[1]}"
    record = kvledger.make_record(**FIELDS)
    results = collections.defaultdict(list)
    for _ in range(REPETITIONS):
        lock, queue = threading.Lock(), collections.deque()

        def append():
            with lock:
                queue.append(record)
        results["baseline_append"].append(measure(append))
        reporter = kvledger.Reporter(target, max_queue_size=10 * CALLS, rpc_timeout_seconds=60)
        results["report_record"].append(measure(lambda: reporter.report(record)))
        results["report_fields"].append(measure(lambda: reporter.report(**FIELDS)))
        for ids in (16, 512):
            hashes = list(range(10**12, 10**12 + ids))
            results[f"report_fields_ids_{ids}"].append(measure(lambda: reporter.report(
                **FIELDS, prefix_block_ids=kvledger.blocks.from_engine_hashes(hashes), block_tokens=4096 // ids)))
        reporter.close(0)
    for case, runs in results.items():
        p50, p99, p999, worst = (statistics.median(r[i] for r in runs) / 1000 for i in range(4))
        print(json.dumps({"case": case, "p50_us": round(p50, 2), "p99_us": round(p99, 2), "p999_us": round(p999, 2),
                          "max_us": round(worst, 1)}))


if __name__ == "__main__":
    main()
