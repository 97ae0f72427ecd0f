"""Load generators never change a server's figures: against a server holding real records (the
README's replay), `kvledger bench` in every mode, `reporter_example` and the Python Reporter with
synthetic=True leave every accounting family of /metrics, the Advise answer (CLI text and JSON) and
so every alert's input as they were; their records are validated, answered and counted in
kvledger_synthetic_records_total only. A synthetic record's rejection reads as a real one's, and a
synthetic call cannot feed engine statistics.

Usage: synthetic_test.py KVLEDGER_SERVER KVLEDGER_CLI REPORTER_EXAMPLE PYTHON_STUBS_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SERVER, CLI, REPORTER_EXAMPLE = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, sys.argv[4])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python"))
del sys.argv[1:5]

import grpc  # noqa: E402

from harness import Server, assert_json_close, parse_exposition  # noqa: E402
from kvledger.reporter import SYNTHETIC_METADATA, Reporter  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402

MODELS = ("deepseek-v3", "gemma-2-9b", "gpt-oss-20b", "kimi-linear-48b-a3b", "llama-3.1-8b", "mistral-7b-v0.1",
          "qwen3-8b", "qwen3-next-80b-a3b")  # those of the trace
TRACE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "trace.jsonl")
# The server's own telemetry: RPCs served, the process, scrapes, streams, the watchdog. A load
# generator's calls are real calls, so these move; nothing else may.
SELF_TELEMETRY = ("grpc_server_", "process_", "kvledger_scrape_duration_seconds", "kvledger_last_scrape_size_bytes",
                  "kvledger_streams_open", "kvledger_watchdog_", "kvledger_synthetic_records_total")
ADVISE = ("advise", "--model", "llama-3.1-8b", "--prompt-tokens", "8192", "--candidate", "device:3000",
          "--candidate", "host:6000")


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)


def figures(server):
    return {k: v for k, v in parse_exposition(server.scrape()).items() if not k[0].startswith(SELF_TELEMETRY)}


def synthetic_count(server, outcome):
    samples = parse_exposition(server.scrape())
    return samples[("kvledger_synthetic_records_total", frozenset({("outcome", outcome)}))]


class SyntheticTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        # generic: an unknown model is counted, so a synthetic one would claim a label slot if it could.
        self.server = Server(SERVER, "--advice_half_life_seconds=86400", "--unknown_model=generic",
                             log_dir=self.tmp.name)
        replayed = cli("replay", TRACE, "--target", self.server.grpc_address)
        self.assertEqual(replayed.returncode, 0, replayed.stderr)

    def tearDown(self):
        self.assertEqual(self.server.stop(), 0)
        self.tmp.cleanup()

    def advice(self):
        text = cli(*ADVISE, "--target", self.server.grpc_address)
        as_json = cli(*ADVISE, "--target", self.server.grpc_address, "--json")
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertEqual(as_json.returncode, 0, as_json.stderr)
        return text.stdout, json.loads(as_json.stdout)

    def current_figures(self):
        """The exported figures once every model's compute fit reflects every record (an Advise
        question refits its model; scrapes read a fit at most a second old)."""
        for model in MODELS:
            asked = cli("advise", "--target", self.server.grpc_address, "--model", model, "--prompt-tokens", "4096",
                        "--candidate", "host:2048")
            self.assertEqual(asked.returncode, 0, asked.stderr)
        return figures(self.server)

    def assert_same_figures(self, before, after):
        self.assertEqual((sorted(set(after) - set(before)), sorted(set(before) - set(after))), ([], []))
        # Decayed gauges age by 2^(-t / one day): below 1e-4 over the test's seconds.
        moved = [(k, before[k], after[k]) for k in before if abs(after[k] - before[k]) > 1e-4 * abs(before[k])]
        self.assertEqual(moved, [])

    def test_load_generators_leave_figures_and_advice_as_they_were(self):
        before, advice_before = self.current_figures(), self.advice()
        self.assertIn("(live: 50 records", advice_before[0])
        sent = 0
        for mode in ("unary", "batch", "stream"):
            bench = cli("bench", "--target", self.server.grpc_address, "--mode", mode, "--connections", "2",
                        "--batch-size", "50", "--duration", "0.5", "--json")
            self.assertEqual(bench.returncode, 0, bench.stderr)
            report = json.loads(bench.stdout)  # bench's own figures are still reported
            self.assertEqual(report["errors"], 0)
            self.assertGreater(report["records_per_second"], 0)
            sent += report["records"]
        example = subprocess.run([REPORTER_EXAMPLE, "--records", "1000", "--target", self.server.grpc_address],
                                 capture_output=True, text=True, timeout=60)
        self.assertEqual(example.returncode, 0, example.stderr)
        self.assertEqual(json.loads(example.stdout)["sent"], 1000)
        sent += 1000
        # A model no label slot holds yet, and host reloads 1000 times slower than the replayed ones:
        # counted, either would add a series or move the live bandwidth and the advice.
        reporter = Reporter(self.server.grpc_address, synthetic=True, flush_interval_seconds=0.05)
        for i in range(300):
            reporter.report(model="llama-3.1-8b" if i % 2 else "a-model-never-seen", prompt_tokens=4096,
                            logical_match_tokens=2048, tier=record_pb2.TIER_HOST, reload_seconds=5.0,
                            suffix_prefill_seconds=0.2, ttft_seconds=5.3)
        self.assertTrue(reporter.flush(30))
        reporter.close(5)
        sent += 300
        self.assertEqual(synthetic_count(self.server, "accepted"), sent)
        self.assert_same_figures(before, self.current_figures())
        text, as_json = self.advice()
        self.assertEqual(text, advice_before[0])
        assert_json_close(self, as_json, advice_before[1], 1e-4)  # decayed weights age by 2^(-t / one day)

    def test_a_synthetic_rejection_reads_as_a_real_one_and_counts_apart(self):
        bad = record_pb2.Record(model="llama-3.1-8b", prompt_tokens=10, logical_match_tokens=20)
        rejected_before = {k: v for k, v in figures(self.server).items() if k[0] == "kvledger_records_rejected_total"}
        with grpc.insecure_channel(self.server.grpc_address) as channel:
            stub = ledger_pb2_grpc.LedgerStub(channel)
            messages = []
            for metadata in (((SYNTHETIC_METADATA, "1"),), None):
                with self.assertRaises(grpc.RpcError) as caught:
                    stub.Record(bad, timeout=10, metadata=metadata)
                self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                messages.append(caught.exception.details())
                if metadata:
                    rejected = {k: v for k, v in figures(self.server).items()
                                if k[0] == "kvledger_records_rejected_total"}
                    self.assertEqual(rejected, rejected_before)
            self.assertEqual(messages[0], messages[1])
            self.assertIn("logical_match_tokens = 20", messages[0])
            batch = stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=[bad, bad], batch_id="b1"), timeout=10,
                                     metadata=((SYNTHETIC_METADATA, "1"),))
            self.assertEqual((batch.accepted, batch.rejected), (0, 2))
            self.assertEqual(synthetic_count(self.server, "rejected"), 3)
            with self.assertRaises(grpc.RpcError) as caught:
                stub.RecordEngineStats(ledger_pb2.EngineStatsRequest(transfers=[ledger_pb2.TransferObservation(
                    model="llama-3.1-8b", tier=record_pb2.TIER_HOST, bytes=1 << 30, seconds=100.0, transfers=1)]),
                    timeout=10, metadata=((SYNTHETIC_METADATA, "1"),))
            self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("kvledger-synthetic = \"1\": engine statistics cannot be synthetic", caught.exception.details())
            # A batch id a synthetic call used is not remembered: the same id, real, is counted.
            real = stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=[bad], batch_id="b1"), timeout=10)
            self.assertEqual(real.rejected, 1)
            rejected = {k: v for k, v in figures(self.server).items() if k[0] == "kvledger_records_rejected_total"}
            self.assertEqual(sum(rejected.values()) - sum(rejected_before.values()), 2)


if __name__ == "__main__":
    unittest.main()
