"""SIGTERM under load loses nothing: two replicas behind one target, both Reporters (the C++ one
through reporter_example, the Python one in process) sending throughout, and one replica told to
stop. Once its drain period ends it refuses record calls UNAVAILABLE before applying any of them,
saying so in the kvledger-draining trailer; both Reporters retry those batches on the other replica
at once. Then nothing is dropped, and what the two replicas counted (the leaving one read during its
final-scrape period, after its gRPC port closed) is exactly what the Reporters had acknowledged.

Usage: drain_test.py KVLEDGER_SERVER REPORTER_EXAMPLE PYTHON_STUBS_DIR
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SERVER, REPORTER_EXAMPLE = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv[3])
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
del sys.argv[1:4]

import grpc  # noqa: E402

import harness  # noqa: E402
import kvledger  # noqa: E402
from kvledger.reporter import DRAINING_METADATA  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402

PER_SECOND = 300  # records per second from each Reporter


def counted(server):
    return sum(v for (n, _), v in harness.parse_exposition(server.scrape()).items() if n == "kvledger_requests_total")


def refuses_connections(address):
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        return False
    except OSError:
        return True


class DrainTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_sigterm_under_load_drops_nothing(self):
        leaving = harness.Server(SERVER, "--shutdown_drain_seconds=1", "--shutdown_scrape_grace_seconds=10",
                                 log_dir=self.tmp.name)
        staying = harness.Server(SERVER, log_dir=self.tmp.name)
        self.addCleanup(staying.stop)
        self.addCleanup(leaving.stop)
        target = f"ipv4:{leaving.grpc_address},{staying.grpc_address}"
        cpp = subprocess.Popen([REPORTER_EXAMPLE, "--target", target, "--records", str(PER_SECOND * 6),
                                "--records-per-second", str(PER_SECOND), "--flush-timeout", "30", "--real"],
                               stdout=subprocess.PIPE, text=True)
        reporter = kvledger.Reporter(target, max_batch_size=20, flush_interval_seconds=0.02)
        stop = threading.Event()

        def python_traffic():
            i, start = 0, time.monotonic()
            while not stop.is_set():
                reporter.report(model="llama-3.1-8b", tier=record_pb2.TIER_DEVICE, prompt_tokens=1024 + i % 7,
                                logical_match_tokens=512)
                i += 1
                stop.wait(max(0.0, start + i / PER_SECOND - time.monotonic()))

        thread = threading.Thread(target=python_traffic, daemon=True)
        thread.start()
        harness.poll("records on the leaving replica", lambda: counted(leaving) > PER_SECOND / 2)
        leaving.proc.terminate()
        # Its gRPC port closes after the drain period; /metrics stays up for the final scrape.
        harness.poll("the leaving replica's gRPC port to close", lambda: refuses_connections(leaving.grpc_address))
        counted_by_leaving = counted(leaving)
        harness.poll("traffic on the staying replica after the other left",
                     lambda: counted(staying) > PER_SECOND)
        stop.set()
        thread.join()
        self.assertTrue(reporter.flush(30))
        reporter.close(5)
        python_stats = reporter.stats()
        cpp_out, _ = cpp.communicate(timeout=60)
        self.assertEqual(cpp.returncode, 0)
        cpp_stats = json.loads(cpp_out)
        self.assertEqual((python_stats["dropped"], cpp_stats["dropped"]), (0, 0), (python_stats, cpp_stats))
        acknowledged = python_stats["sent"] + cpp_stats["sent"]
        self.assertEqual(counted_by_leaving + counted(staying), acknowledged)
        self.assertEqual(leaving.stop(), 0)

    def test_a_draining_refusal_applies_nothing_and_says_so(self):
        server = harness.Server(SERVER, "--shutdown_drain_seconds=1", "--shutdown_scrape_grace_seconds=10",
                                log_dir=self.tmp.name)
        self.addCleanup(server.stop)
        record = record_pb2.Record(model="llama-3.1-8b", prompt_tokens=100, logical_match_tokens=0)
        with grpc.insecure_channel(server.grpc_address) as channel:
            stub = ledger_pb2_grpc.LedgerStub(channel)
            stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=[record]), timeout=10)
            server.proc.terminate()
            refusals, accepted = [], [1]

            def refused():  # served during the drain period, then refused
                try:
                    accepted[0] += stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=[record]),
                                                    timeout=10).accepted
                    return False
                except grpc.RpcError as e:
                    refusals.append(e)
                    return True

            harness.poll("a record call to be refused", refused, interval=0.005)
            error = refusals[-1]
            # The first refusal comes from the server (not a closed connection): UNAVAILABLE, the trailer.
            self.assertEqual(error.code(), grpc.StatusCode.UNAVAILABLE, error.details())
            self.assertIn("the server is shutting down: nothing of this call was applied", error.details())
            self.assertIn((DRAINING_METADATA, "1"), tuple(error.trailing_metadata() or ()))
        self.assertEqual(counted(server), accepted[0])


if __name__ == "__main__":
    unittest.main()
