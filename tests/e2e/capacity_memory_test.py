"""The capacity curves' memory holds whatever the records with ids (docs/operations.md, "Capacity
curves"): a real kvledger-server on its shipped defaults, its batch-id window filled first, takes,
from several gRPC clients at once, 16 caches each sent far more distinct block ids than its share of
--capacity_memory_bytes, and a record of 65,536 repeated ids; a second one with
--capacity_caches=10000 takes 10,000 caches. Each server's peak resident set (VmHWM) must stay within
its idle resident set plus --capacity_memory_bytes, the window's bytes and the gRPC buffers of the
calls in flight, and inside three quarters of the shipped Deployment's 1 GiB limit; every record is replayed (none untracked), the caches past their share are
costed from a sample, and the curve still rises with capacity.

Usage: capacity_memory_test.py KVLEDGER_SERVER REPO_ROOT
"""
import os
import sys
import tempfile
import threading
import unittest
import urllib.request
import json

SERVER, ROOT = sys.argv[1], os.path.abspath(sys.argv[2])
del sys.argv[1:3]
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

import grpc  # noqa: E402

import harness  # noqa: E402
import kvledger  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc  # noqa: E402

MIB = 1 << 20
DEPLOYMENT_LIMIT = 1024 * MIB  # deploy/kubernetes/base/deployment.yaml
BUDGET = 256 * MIB             # --capacity_memory_bytes' default
IDS_PER_RECORD = 8192          # a 128 K-token prompt at 16-token blocks
RECORDS_PER_BATCH = 24         # some 2 MB a call


def memory_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def record(cache, first_id, ids=IDS_PER_RECORD, repeated=False):
    block_ids = [first_id] * ids if repeated else list(range(first_id, first_id + ids))
    return kvledger.make_record(model="llama-3.1-8b", prompt_tokens=16 * ids, prefix_block_ids=block_ids,
                                block_tokens=16, cache_id=cache)


def send(address, records):
    """Sends the records in batches; returns how many were accepted."""
    accepted = 0
    with grpc.insecure_channel(address) as channel:
        stub = ledger_pb2_grpc.LedgerStub(channel)
        for i in range(0, len(records), RECORDS_PER_BATCH):
            reply = stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=records[i:i + RECORDS_PER_BATCH]),
                                     timeout=120)
            accepted += reply.accepted
    return accepted


def send_from_clients(address, per_client):
    """One thread (and channel) per list of records, all at once; the accepted counts."""
    counts = [0] * len(per_client)

    def run(i):
        counts[i] = send(address, per_client[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(per_client))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts


def curve(server):
    with urllib.request.urlopen(f"http://{server.metrics_address}/api/v1/capacity", timeout=30) as r:
        (model,) = json.load(r)["models"]
    return model


class CapacityMemoryTest(unittest.TestCase):
    def start(self, *flags):
        server = harness.Server(SERVER, *flags, log_dir=tempfile.mkdtemp(prefix="kvledger-capmem-"))
        self.addCleanup(server.stop)
        return server, memory_kib(server.proc.pid, "VmRSS") * 1024

    def check_peak(self, server, idle, label, dedup=0):
        peak = memory_kib(server.proc.pid, "VmHWM") * 1024
        print(f"MEASURED {label}: idle_rss_mb={idle / MIB:.0f} peak_rss_mb={peak / MIB:.0f}", flush=True)
        # The stacks' budget and the batch-id window's bytes, plus what gRPC holds for the calls in
        # flight (four clients' 2 MB messages, parsed and copied) and the allocator's slack.
        self.assertLess(peak, idle + BUDGET + dedup + 128 * MIB)
        self.assertLess(peak, DEPLOYMENT_LIMIT * 3 // 4)

    def fill_dedup_window(self, server):
        """Fills the batch-id window to its default 64 MiB: batches of one accepted record and 100
        rejected ones (the window keeps up to 100 rejections of a batch that counted something), under
        ids of their own; returns its bytes."""
        records = [kvledger.make_record(model="llama-3.1-8b", prompt_tokens=4096)]
        records += [kvledger.make_record(model="llama-3.1-8b", prompt_tokens=4096, ttft_seconds=-1.0)] * 100
        with grpc.insecure_channel(server.grpc_address) as channel:
            stub = ledger_pb2_grpc.LedgerStub(channel)
            for i in range(9000):
                reply = stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=records, batch_id=f"fill-{i:05}"),
                                         timeout=60)
                self.assertEqual((reply.accepted, reply.rejected), (1, 100))
        samples = harness.parse_exposition(server.scrape())
        return harness.sample(samples, "kvledger_batch_dedup_bytes")

    # Proves: with the batch-id window full, 16 caches, each sent 4x its share of distinct ids by four
    # clients at once, plus a record of 65,536 repeated ids, hold the server within its budgets; all
    # are replayed, most from a sample.
    def test_sixteen_caches_past_their_share(self):
        server, idle = self.start()
        dedup = self.fill_dedup_window(server)
        self.assertGreater(dedup, 60 * MIB)  # full: the newest outcomes within --batch_dedup_bytes
        per_cache = 4 * 174_592 // IDS_PER_RECORD + 1  # records: four times a cache's share of blocks
        clients = [[] for _ in range(4)]
        for cache in range(16):
            for r in range(per_cache):
                first = (cache << 40) + r * IDS_PER_RECORD
                clients[cache % 4].append(record(f"engine-{cache}", first))
        clients[0].append(record("engine-0", 7, ids=65536, repeated=True))
        sent = sum(len(c) for c in clients)
        self.assertEqual(sum(send_from_clients(server.grpc_address, clients)), sent)
        model = curve(server)
        self.assertEqual(int(model["requests"]), sent)
        self.assertEqual(int(model.get("untracked_requests", 0)), 0)
        self.assertGreater(int(model.get("sampled_requests", 0)), sent // 2)
        self.check_peak(server, idle, "16_caches_dedup_full", dedup)

    # Proves: with --capacity_caches=10000, 10,000 caches (each past its 258-block share) stay within
    # the same budget, every record replayed; each cache's second record is costed from its sample.
    def test_ten_thousand_caches(self):
        server, idle = self.start("--capacity_caches=10000")
        clients = [[] for _ in range(4)]
        for cache in range(10_000):
            clients[cache % 4] += [record(f"pod-{cache}", cache << 32, ids=512)] * 2
        sent = sum(len(c) for c in clients)
        self.assertEqual(sum(send_from_clients(server.grpc_address, clients)), sent)
        model = curve(server)
        self.assertEqual(int(model["requests"]), sent)
        self.assertEqual(int(model.get("untracked_requests", 0)), 0)
        self.assertEqual(int(model.get("sampled_requests", 0)), sent // 2)  # 512 ids, 258 held: the second
        self.check_peak(server, idle, "10000_caches")


if __name__ == "__main__":
    unittest.main(verbosity=2)
