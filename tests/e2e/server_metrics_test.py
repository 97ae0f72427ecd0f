"""The server's own operational metrics on a real kvledger-server: RPCs by method and status code
with their latency (gRPC's Prometheus-interceptor conventions), streams open, deduplicated and
oversized batches, scrape duration and size, the listener watchdog, build info and the process
metrics (start time, CPU, memory, descriptors); and the whole page well formed for promtool with every family present.

Usage: server_metrics_test.py SERVER_BINARY PYTHON_STUBS_DIR
"""
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

SERVER, STUBS = sys.argv[1], sys.argv[2]
sys.path.insert(0, STUBS)
import grpc  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402

LEDGER = {"grpc_service": "kvledger.v1.Ledger"}


def record(i=0, match=2048):
    return record_pb2.Record(model="llama-3.1-8b", tier=record_pb2.TIER_HOST, prompt_tokens=4096 + i,
                             logical_match_tokens=match)


class ServerMetricsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.server = harness.Server(SERVER, "--max_batch_records=3", "--deaf_listener_seconds=30", log_dir=cls.tmp.name)
        cls.channel = grpc.insecure_channel(cls.server.grpc_address)
        cls.stub = ledger_pb2_grpc.LedgerStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()
        cls.tmp.cleanup()

    def samples(self):
        return harness.parse_exposition(self.server.scrape())

    def value(self, name, **labels):
        return self.samples().get((name, frozenset(labels.items())))

    # Proves: a client cannot mint label values: 300 calls to methods this server does not serve (in
    # its own service and in made-up ones) add one grpc_method value, "unknown", and no series besides.
    def test_unknown_methods_make_one_label_value(self):
        before = {dict(l).get("grpc_method") for (n, l) in self.samples() if n == "grpc_server_started_total"}
        for i in range(300):
            service = "kvledger.v1.Ledger" if i % 2 else f"evil.Service{i}"
            call = self.channel.unary_unary(f"/{service}/Method{i}", request_serializer=lambda raw: raw,
                                            response_deserializer=lambda raw: raw)
            with self.assertRaises(grpc.RpcError) as refused:
                call(b"", timeout=10)
            self.assertEqual(refused.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        after = {dict(l).get("grpc_method") for (n, l) in self.samples() if n == "grpc_server_started_total"}
        self.assertLessEqual(after - before, {"unknown"})
        # gRPC serves an unknown method with its generic handler, of type bidi_stream.
        self.assertEqual(sum(v for (n, l), v in self.samples().items() if n == "grpc_server_started_total"
                             and dict(l).get("grpc_method") == "unknown"), 300)
        text = self.server.scrape()
        self.assertNotIn("Method1", text)
        self.assertNotIn("evil.", text)

    # Proves: an accepted and a refused Record show up under their method and code, started and
    # handled agree, and the latency histogram counts both.
    def test_rpcs_by_method_and_code(self):
        self.stub.Record(record(), timeout=10)
        with self.assertRaises(grpc.RpcError) as refused:
            self.stub.Record(record(match=9999), timeout=10)
        self.assertEqual(refused.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        labels = dict(LEDGER, grpc_method="Record", grpc_type="unary")
        ok = self.value("grpc_server_handled_total", grpc_code="OK", **labels)
        bad = self.value("grpc_server_handled_total", grpc_code="InvalidArgument", **labels)
        self.assertGreaterEqual(ok, 1)
        self.assertGreaterEqual(bad, 1)
        self.assertEqual(self.value("grpc_server_started_total", **labels), ok + bad)
        self.assertEqual(self.value("grpc_server_handling_seconds_count", **labels), ok + bad)
        self.assertEqual(self.value("grpc_server_handling_seconds_bucket", le="+Inf", **labels), ok + bad)

    # Proves: a batch past --max_batch_records is counted as oversized with its records; a repeated
    # batch_id is counted as deduplicated; an open stream shows in kvledger_streams_open until it ends.
    def test_batches_and_streams(self):
        with self.assertRaises(grpc.RpcError):
            self.stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=[record(i) for i in range(5)]), timeout=10)
        self.assertEqual(self.value("kvledger_oversized_batches_total"), 1)
        self.assertEqual(self.value("kvledger_oversized_batch_records_total"), 5)
        self.assertEqual(self.value("grpc_server_handled_total", grpc_code="InvalidArgument", grpc_method="RecordBatch",
                                    grpc_type="unary", **LEDGER), 1)
        batch = ledger_pb2.RecordBatchRequest(records=[record(1)], batch_id="retry-me")
        for _ in range(3):
            self.stub.RecordBatch(batch, timeout=10)
        self.assertEqual(self.value("kvledger_deduplicated_batches_total"), 2)

        gate = threading.Event()

        def batches():
            yield ledger_pb2.RecordBatchRequest(records=[record(2)])
            gate.wait(30)

        future = self.stub.StreamRecords.future(batches(), timeout=60)
        harness.poll("the stream to be open", lambda: self.value("kvledger_streams_open") == 1, deadline=30)
        gate.set()
        self.assertEqual(future.result().accepted, 1)
        harness.poll("the stream to close", lambda: self.value("kvledger_streams_open") == 0, deadline=30)
        self.assertEqual(self.value("grpc_server_handled_total", grpc_code="OK", grpc_method="StreamRecords",
                                    grpc_type="client_stream", **LEDGER), 1)

    # Proves: a scrape's duration and size show from the next scrape on; the watchdog reports its
    # queue; build info names the version, revision and gRPC version; the start time is now-ish.
    def test_scrape_watchdog_build_and_start(self):
        first = self.server.scrape()
        second = self.samples()
        count = second[("kvledger_scrape_duration_seconds_count", frozenset())]
        self.assertGreaterEqual(count, 1)
        self.assertGreater(second[("kvledger_last_scrape_size_bytes", frozenset())], len(first) / 2)
        harness.poll("the watchdog's first check", lambda: self.value("kvledger_watchdog_queued_connections") == 0,
                     deadline=30)
        build = [dict(labels) for (name, labels), v in second.items() if name == "kvledger_build_info"]
        self.assertEqual(len(build), 1)
        self.assertEqual(build[0]["version"], "0.1.0")
        self.assertRegex(build[0]["grpc_version"], r"^\d+\.\d+")
        self.assertTrue(build[0]["revision"])
        start = second[("process_start_time_seconds", frozenset())]
        self.assertLess(abs(time.time() - start), 600)

    # Proves: the process metrics every Prometheus client exports agree with what /proc says of the
    # server's process, and its CPU time only grows.
    def test_process_metrics(self):
        pid = self.server.proc.pid
        before = self.samples()
        for i in range(200):
            self.stub.Record(record(i), timeout=10)
        after = self.samples()
        value = lambda samples, name: samples[(name, frozenset())]  # noqa: E731
        self.assertGreaterEqual(value(after, "process_cpu_seconds_total"), value(before, "process_cpu_seconds_total"))
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        rss = int(status["VmRSS"].split()[0]) * 1024
        self.assertLess(abs(value(after, "process_resident_memory_bytes") / rss - 1), 0.5)
        self.assertGreaterEqual(value(after, "process_virtual_memory_bytes"), value(after, "process_resident_memory_bytes"))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        self.assertLess(abs(value(after, "process_open_fds") - fds), 10)
        with open(f"/proc/{pid}/limits") as f:
            soft = next(line.split()[3] for line in f if line.startswith("Max open files"))
        self.assertEqual(value(after, "process_max_fds"), float(soft))

    # Proves: the page with every family present is what promtool accepts, and no two series share a
    # name and label set.
    def test_promtool_and_unique_series(self):
        self.stub.Record(record(7), timeout=10)
        text = self.server.scrape()
        check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        self.assertEqual((check.returncode, check.stdout + check.stderr), (0, ""))
        lines = [line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
        self.assertEqual(len(lines), len(set(lines)))
        self.assertNotIn(" Nan\n", text)
        self.assertNotIn(" inf\n", text.lower())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
