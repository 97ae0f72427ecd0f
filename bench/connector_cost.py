"""What kvledger.vllm_connector costs inside vLLM's scheduler loop, per finished request: the time of
its request_finished() (the block hashes turned into ids, one curves-only record built and queued to
a kvledger.Reporter), against two baselines in the same run: a lock plus deque.append of a prebuilt
record (what any bounded queue pays), and vLLM's own hashing of the same request's blocks, which its
scheduler already pays per request (vllm/utils/hashing.py `sha256`: pickle of (parent hash, block
token ids, extra keys), then SHA-256; vllm/v1/core/kv_cache_utils.py hash_block_tokens). The server is stalled (a loopback listener that never answers),
so nothing is delivered and only the queue grows. Requests of 8 K and 128 K prompt tokens at vLLM's
16-token blocks, with 512 output tokens, their hashes 32-byte digests as vLLM keeps them. Each call is
timed on its own; p50 / p99 / max of CALLS calls, medians of REPETITIONS alternating repetitions.
Prints one JSON object per case.  Usage: /usr/bin/python3 bench/connector_cost.py
"""
import collections
import hashlib
import json
import os
import pickle
import socket
import statistics
import sys
import threading
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "client", "standins"))
import kvledger  # noqa: E402
from kvledger import vllm_connector  # noqa: E402
from vllm.config import CacheConfig, KVTransferConfig, ModelConfig, VllmConfig  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402

CALLS, REPETITIONS, BLOCK, OUTPUT = 5000, 5, 16, 512


def measure(calls):
    times, clock = [], time.perf_counter_ns
    for call in calls:
        start = clock()
        call()
        times.append(clock() - start)
    times.sort()
    return [times[len(times) // 2], times[len(times) * 99 // 100], times[-1]]


def requests(prompt, count):
    blocks = (prompt + OUTPUT) // BLOCK
    hashes = [i.to_bytes(32, "big") for i in range(10**12, 10**12 + blocks)]
    return [types.SimpleNamespace(request_id=f"req-{prompt}-{i}", num_prompt_tokens=prompt, num_cached_tokens=BLOCK,
                                  num_output_tokens=OUTPUT, block_hashes=hashes) for i in range(count)]


def main():
    stalled = socket.socket()
    stalled.bind(("127.0.0.1", 0))
    stalled.listen(16)
    os.environ.update(KVLEDGER_TARGET=f"127.0.0.1:{stalled.getsockname()[1]}", KVLEDGER_MODEL="llama-3.1-8b",
                      KVLEDGER_CACHE_ID="bench")
    config = VllmConfig(ModelConfig(), CacheConfig(block_size=BLOCK), KVTransferConfig(kv_connector="KvledgerConnector"))
    record = kvledger.make_record(model="llama-3.1-8b", prompt_tokens=8192, logical_match_tokens=BLOCK)
    results = collections.defaultdict(list)
    for rep in range(REPETITIONS):
        lock, queue = threading.Lock(), collections.deque()

        def append():
            with lock:
                queue.append(record)
        results["baseline_append"].append(measure([append] * CALLS))
        for prompt in (8192, 131072):
            connector = vllm_connector.KvledgerConnector(config, KVConnectorRole.SCHEDULER)
            connector.reporter.max_queue_size = 10 * CALLS
            batch = requests(prompt, CALLS if prompt == 8192 else CALLS // 10)
            ids = list(range((prompt + OUTPUT + BLOCK - 1) // BLOCK))
            results[f"request_finished_{prompt // 1024}k"].append(
                measure([lambda r=r: connector.request_finished(r, ids) for r in batch]))
            connector.reporter.close(0)
            tokens = [tuple(range(i * BLOCK, (i + 1) * BLOCK)) for i in range((prompt + OUTPUT) // BLOCK)]

            def vllm_hashing(tokens=tokens):
                parent = b"\0" * 32
                for block in tokens:
                    parent = hashlib.sha256(pickle.dumps((parent, block, None), protocol=pickle.HIGHEST_PROTOCOL)).digest()
            results[f"vllm_block_hashing_{prompt // 1024}k"].append(measure([vllm_hashing] * (len(batch) // 10)))
    for case, runs in results.items():
        p50, p99, worst = (statistics.median(r[i] for r in runs) / 1000 for i in range(3))
        print(json.dumps({"case": case, "p50_us": round(p50, 2), "p99_us": round(p99, 2), "max_us": round(worst, 1)}))


if __name__ == "__main__":
    main()
