"""Series before the first record: with --declare_series a (model, tier) cell is exported at 0 from
the start, with the same series a record would create, so a real Prometheus that scraped it before
the first record sees every record counted; an undeclared cell's first scraped value is lost to
rate() and increase(). Bad declarations stop the server with exit 2.

Usage: declared_series_test.py SERVER_BINARY PYTHON_STUBS_DIR
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

SERVER, STUBS = sys.argv[1], sys.argv[2]
sys.path.insert(0, STUBS)
import grpc  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402


def batch(model, n):
    return ledger_pb2.RecordBatchRequest(records=[
        record_pb2.Record(model=model, tier=record_pb2.TIER_HOST, prompt_tokens=4096 + i, logical_match_tokens=2048)
        for i in range(n)])


def cell_series(samples, model, tier):
    """The series of one cell: (name, labels other than model and tier)."""
    return {(name, frozenset((k, v) for k, v in labels if k not in ("model", "tier")))
            for (name, labels) in samples if ("model", model) in labels and ("tier", tier) in labels}


class DeclaredSeriesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_counted_from_zero_in_prometheus(self):
        server = harness.Server(SERVER, "--declare_series=llama-3.1-8b:host,qwen3-8b", log_dir=self.tmp.name)
        self.addCleanup(server.stop)
        samples = harness.parse_exposition(server.scrape())
        self.assertEqual(harness.sample(samples, "kvledger_requests_total", model="llama-3.1-8b", tier="host"), 0)
        self.assertEqual({t for (n, ls) in samples for k, t in ls if n == "kvledger_requests_total" and k == "tier"
                          and ("model", "qwen3-8b") in ls}, {"none", "device"})
        declared = cell_series(samples, "llama-3.1-8b", "host")
        prometheus = harness.Prometheus(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: kvledger\n    static_configs:\n"
            f"      - targets: ['{server.metrics_address}']\n", self.tmp.name)
        self.addCleanup(prometheus.stop)
        harness.poll("a scrape before any record",
                     lambda: prometheus.value('kvledger_requests_total{model="llama-3.1-8b",tier="host"}') == 0)
        with grpc.insecure_channel(server.grpc_address) as channel:
            stub = ledger_pb2_grpc.LedgerStub(channel)
            self.assertEqual(stub.RecordBatch(batch("llama-3.1-8b", 50), timeout=10).accepted, 50)
            self.assertEqual(stub.RecordBatch(batch("qwen3-32b", 50), timeout=10).accepted, 50)  # not declared
        # A recorded cell has exactly the series the declared one had.
        self.assertEqual(cell_series(harness.parse_exposition(server.scrape()), "llama-3.1-8b", "host"), declared)
        harness.poll("Prometheus to see the records",
                     lambda: prometheus.value('kvledger_requests_total{model="qwen3-32b"}') == 50
                     and prometheus.value('kvledger_requests_total{model="llama-3.1-8b",tier="host"}') == 50)
        seen = "max_over_time(kvledger_requests_total{{model=\"{0}\",tier=\"host\"}}[10m])" \
               " - min_over_time(kvledger_requests_total{{model=\"{0}\",tier=\"host\"}}[10m])"
        self.assertEqual(prometheus.value(seen.format("llama-3.1-8b")), 50)  # every record
        self.assertEqual(prometheus.value(seen.format("qwen3-32b")), 0)      # the first 50 are invisible

    def test_bad_declarations_are_bad_flags(self):
        for flag, message in (("--declare_series=nope", '"nope": not a profile of the catalog'),
                              ("--declare_series=llama-3.1-8b:hot", "the tier must be none, device"),
                              ("--declare_series=,", "an empty item")):
            result = subprocess.run([SERVER, flag, "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0"],
                                    capture_output=True, text=True, timeout=30)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn(message, result.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
