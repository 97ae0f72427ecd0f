"""The compute-time model on the records real engines send, through the real server: a synthetic
engine whose prefill pass really takes 12 ms + FLOPs / 3e14 FLOP/s (with +-3 % noise) reports misses
of many sizes, partial hits, and a mix dominated by 16-token suffixes after block-aligned hits (device
hits with no reload, host hits whose reload is 30 % slower or faster than recomputing). The server's
estimates (Explain, /metrics, the gauges) must be within 10 % of the engine's truth, and every slower
reload counted.

Usage: compute_model_test.py KVLEDGER_SERVER PYTHON_STUBS_DIR
"""
import os
import random
import sys
import tempfile
import unittest

SERVER = sys.argv[1]
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
del sys.argv[1:3]

import grpc  # noqa: E402

from harness import Server, parse_exposition, poll, sample  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402

MODEL = "llama-3.1-8b"
FIXED, RATE = 0.012, 3e14  # the engine's truth: a pass over F FLOPs takes FIXED + F / RATE


def shape(prompt, match, tier=record_pb2.TIER_UNSPECIFIED):
    return record_pb2.Record(model=MODEL, prompt_tokens=prompt, logical_match_tokens=match, tier=tier)


class ComputeModelTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvledger-compute-")
        self.server = Server(SERVER, log_dir=self.tmp)
        self.addCleanup(self.server.stop)
        self.channel = grpc.insecure_channel(self.server.grpc_address)
        self.addCleanup(self.channel.close)
        self.stub = ledger_pb2_grpc.LedgerStub(self.channel)
        self.noise = random.Random(7)
        self.flops = {}

    def work(self, record):
        """(avoided, remaining) prefill FLOPs of a record's shape, as the server counts them."""
        key = (record.prompt_tokens, record.logical_match_tokens)
        if key not in self.flops:
            f = self.stub.Explain(record, timeout=10)
            self.flops[key] = (f.prefill_avoided_reused_flops, f.prefill_baseline_flops - f.prefill_avoided_reused_flops)
        return self.flops[key]

    def served(self, prompt, match, tier, reload_factor=None):
        """One request as the engine served it: its suffix pass measured with noise; a device hit
        reloads nothing (0 s); a host hit's reload is reload_factor x the truth of recomputing."""
        r = shape(prompt, match, tier)
        avoided, remaining = self.work(r)
        r.suffix_prefill_seconds = (FIXED + remaining / RATE) * self.noise.uniform(0.97, 1.03)
        if tier == record_pb2.TIER_DEVICE:
            r.reload_seconds = 0
        elif reload_factor is not None:
            r.reload_seconds = reload_factor * avoided / RATE
        return r

    def send(self, records):
        for i in range(0, len(records), 200):
            response = self.stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=records[i:i + 200]), timeout=30)
            self.assertEqual(len(response.rejections), 0, response)

    def test_estimates_hold_on_engine_shapes(self):
        # Before the model is ready, a 16-token suffix has no estimate: it is never scaled up.
        short = shape(4096, 4080, record_pb2.TIER_DEVICE)
        short.suffix_prefill_seconds = 0.02
        before = self.stub.Explain(short, timeout=10)
        self.assertFalse(before.recompute_estimate_available)
        self.assertEqual(before.estimate_basis, record_pb2.BASIS_NONE)

        sizes = [256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384]
        warm = [self.served(self.noise.choice(sizes), 0, record_pb2.TIER_UNSPECIFIED) for _ in range(100)]
        for _ in range(100):  # partial hits, page-aligned, from host memory
            prompt = self.noise.choice(sizes[3:])
            warm.append(self.served(prompt, 16 * self.noise.randrange(1, prompt // 32), record_pb2.TIER_HOST, 0.5))
        self.send(warm)
        samples = poll("the compute model to be ready",
                       lambda: (lambda s: s if ("kvledger_prefill_flops_per_second", frozenset({("model", MODEL)})) in s
                                else None)(parse_exposition(self.server.scrape())))
        rate = sample(samples, "kvledger_prefill_flops_per_second", model=MODEL)
        fixed = sample(samples, "kvledger_prefill_fixed_seconds", model=MODEL)
        print(f"fitted: {rate:.4g} FLOP/s (truth {RATE:.4g}), fixed {fixed * 1e3:.3f} ms (truth {FIXED * 1e3} ms)")
        self.assertAlmostEqual(rate / RATE, 1, delta=0.1)
        self.assertAlmostEqual(fixed / FIXED, 1, delta=0.1)

        # The mix real engines send: 600 device hits and 100 host hits with 16-token suffixes.
        hits = [self.served(4096 + 16 * (i % 64), 4080 + 16 * (i % 64), record_pb2.TIER_DEVICE) for i in range(600)]
        hits += [self.served(4096, 4080, record_pb2.TIER_HOST, 1.3 if i % 2 else 0.7) for i in range(100)]
        self.send(hits)

        for name, record in (("16-token suffix", shape(4096, 4080, record_pb2.TIER_DEVICE)),
                             ("partial hit", shape(8192, 2048, record_pb2.TIER_HOST)),
                             ("miss", shape(12288, 0))):
            avoided, remaining = self.work(record)
            record.suffix_prefill_seconds = FIXED + remaining / RATE
            f = self.stub.Explain(record, timeout=10)
            self.assertEqual(f.estimate_basis, record_pb2.BASIS_LIVE, name)
            full_truth = FIXED + (avoided + remaining) / RATE
            print(f"{name}: full prefill {f.estimated_full_prefill_seconds:.4f} s / truth {full_truth:.4f} s = "
                  f"{f.estimated_full_prefill_seconds / full_truth:.3f}"
                  + (f"; recompute {f.estimated_recompute_seconds:.4f} s / truth {avoided / RATE:.4f} s = "
                     f"{f.estimated_recompute_seconds / (avoided / RATE):.3f}" if avoided else ""))
            self.assertAlmostEqual(f.estimated_full_prefill_seconds / full_truth, 1, delta=0.1, msg=name)
            if avoided:
                self.assertAlmostEqual(f.estimated_recompute_seconds / (avoided / RATE), 1, delta=0.1, msg=name)

        s = parse_exposition(self.server.scrape())
        host = {"model": MODEL, "tier": "host"}
        device = {"model": MODEL, "tier": "device"}
        # Every one of the 50 host reloads 30 % slower than recomputing is counted, and none of the faster.
        self.assertEqual(sample(s, "kvledger_reload_slower_than_recompute_total", **host), 50)
        self.assertEqual(sample(s, "kvledger_reload_compared_requests_total", **host), 100)
        # The device hits' summed estimate against the engine's truth.
        truth = sum(self.work(r)[0] / RATE for r in hits[:600])
        estimated = sample(s, "kvledger_estimated_recompute_seconds_total", **device)
        print(f"600 device hits: estimated recompute {estimated:.3f} s / truth {truth:.3f} s = {estimated / truth:.3f}")
        self.assertEqual(sample(s, "kvledger_reload_compared_requests_total", **device), 600)
        self.assertAlmostEqual(estimated / truth, 1, delta=0.1)
        self.assertEqual(sample(s, "kvledger_reload_slower_than_recompute_total", **device), 0)


if __name__ == "__main__":
    unittest.main()
