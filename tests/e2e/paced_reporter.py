"""One engine process's Python Reporter for the fleet tests: RECORDS records at PER_SECOND to TARGET,
batched every FLUSH_SECONDS, then its stats as JSON on stdout.

Usage: paced_reporter.py PYTHON_STUBS_DIR TARGET RECORDS PER_SECOND FLUSH_SECONDS
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))

import kvledger  # noqa: E402
from kvledger.v1 import record_pb2  # noqa: E402


def main(target, records, per_second, flush_seconds):
    reporter = kvledger.Reporter(target, flush_interval_seconds=flush_seconds)
    start = time.monotonic()
    for i in range(records):
        time.sleep(max(0.0, start + i / per_second - time.monotonic()))
        reporter.report(model="llama-3.1-8b", tier=record_pb2.TIER_DEVICE, prompt_tokens=1024 + i % 7,
                        logical_match_tokens=512)
    flushed = reporter.flush(60)
    stats = reporter.close(5)
    print(json.dumps(dict(stats, flushed=flushed)))


if __name__ == "__main__":
    main(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
