"""SIGTERM under load loses nothing: two replicas behind one target, both Reporters (the C++ one
through reporter_example, the Python one in process) sending throughout, and one replica told to
stop. Once its drain period ends it refuses record calls UNAVAILABLE before applying any of them,
saying so in the kvledger-draining trailer; both Reporters retry those batches on the other replica
at once. Then nothing is dropped, and what the two replicas counted (the leaving one read during its
final-scrape period, after its gRPC port closed) is exactly what the Reporters had acknowledged.

A new replica started as the shipped Deployment starts it (--ready_after_scrape_seconds,
--declare_series) reports its ledger service NOT_SERVING, so a readiness probe keeps traffic away,
until Prometheus has scraped it once with its declared cells at 0: every record it then takes is
between Prometheus's first and last sample of it.

Scale-down as the shipped monitoring sees it: a real Prometheus discovers the replicas as pod-role
discovery (the PodMonitor) does, keeping a replica's target until its process has exited. The leaving
replica exits once Prometheus has scraped it after its last acknowledged record, well before its
grace period ends; Prometheus's totals then equal what the Reporters had acknowledged.

Usage: drain_test.py KVLEDGER_SERVER REPORTER_EXAMPLE PYTHON_STUBS_DIR
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

SERVER, REPORTER_EXAMPLE, STUBS = sys.argv[1], sys.argv[2], sys.argv[3]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv[3])
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
del sys.argv[1:4]

import grpc  # noqa: E402

import harness  # noqa: E402
from traffic import Traffic, counted  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402
from kvledger.reporter import DRAINING_METADATA  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402

PER_SECOND = 300  # records per second from each Reporter


def refuses_connections(address):
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        return False
    except OSError:
        return True


def publish_targets(sd_file, servers):
    with open(sd_file + ".tmp", "w") as f:
        json.dump([{"targets": [s.metrics_address for s in servers]}], f)
    os.replace(sd_file + ".tmp", sd_file)


class DrainTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_a_new_replica_is_ready_after_its_first_scrape(self):
        joining = harness.Server(SERVER, "--ready_after_scrape_seconds=600", "--declare_series=llama-3.1-8b:device",
                                 log_dir=self.tmp.name)
        self.addCleanup(joining.stop)
        with grpc.insecure_channel(joining.grpc_address) as channel:
            health = health_pb2_grpc.HealthStub(channel)

            def status(service):
                return health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status

            self.assertEqual(status(""), health_pb2.HealthCheckResponse.SERVING)  # alive
            self.assertEqual(status("kvledger.v1.Ledger"), health_pb2.HealthCheckResponse.NOT_SERVING)  # not ready
            sd_file = os.path.join(self.tmp.name, "targets.json")
            publish_targets(sd_file, [joining])  # pod-role discovery sees a pod before it is ready
            prometheus = harness.Prometheus(
                "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: kvledger\n    file_sd_configs:\n"
                f"      - files: ['{sd_file}']\n        refresh_interval: 1s\n", self.tmp.name)
            self.addCleanup(prometheus.stop)
            harness.poll("the replica to be ready after its first scrape",
                         lambda: status("kvledger.v1.Ledger") == health_pb2.HealthCheckResponse.SERVING)
            cell = 'kvledger_requests_total{job="kvledger",model="llama-3.1-8b",tier="device"}'
            # The scrape that made it ready is in Prometheus once Prometheus has stored it: poll for it.
            first = harness.poll("Prometheus to store the first scrape", lambda: (lambda v: None if v is None else [v])(
                prometheus.value(f"min_over_time({cell}[10m])")))
            self.assertEqual(first, [0])
            stub = ledger_pb2_grpc.LedgerStub(channel)
            record = record_pb2.Record(model="llama-3.1-8b", tier=record_pb2.TIER_DEVICE, prompt_tokens=1024,
                                       logical_match_tokens=512)
            for _ in range(5):
                stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=[record] * 100), timeout=10)
            # Every record lies between the first sample (0) and the last: nothing counted unseen.
            harness.poll("Prometheus to see the 500 records",
                         lambda: prometheus.value(f"max_over_time({cell}[10m]) - min_over_time({cell}[10m])") == 500)

    def test_scale_down_under_load_reaches_prometheus(self):
        grace = 60
        leaving = harness.Server(SERVER, "--shutdown_drain_seconds=1", f"--shutdown_scrape_grace_seconds={grace}",
                                 log_dir=self.tmp.name)
        staying = harness.Server(SERVER, log_dir=self.tmp.name)
        self.addCleanup(staying.stop)
        self.addCleanup(leaving.stop)
        sd_file = os.path.join(self.tmp.name, "targets.json")
        publish_targets(sd_file, [leaving, staying])
        prometheus = harness.Prometheus(
            "global:\n  scrape_interval: 2s\nscrape_configs:\n  - job_name: kvledger\n    file_sd_configs:\n"
            f"      - files: ['{sd_file}']\n        refresh_interval: 1s\n", self.tmp.name)
        self.addCleanup(prometheus.stop)
        total = 'sum(last_over_time(kvledger_requests_total{job="kvledger"}[10m]))'
        harness.poll("Prometheus to scrape both replicas",
                     lambda: prometheus.value('count(up{job="kvledger"} == 1)') == 2)
        traffic = Traffic(REPORTER_EXAMPLE, f"ipv4:{leaving.grpc_address},{staying.grpc_address}", 8, PER_SECOND)
        harness.poll("records on the leaving replica", lambda: counted(leaving) > PER_SECOND)
        terminated = time.monotonic()
        leaving.proc.terminate()
        leaving.proc.wait(timeout=grace + 30)
        took = time.monotonic() - terminated
        publish_targets(sd_file, [staying])  # the pod is gone once its process has exited
        self.assertEqual(leaving.proc.returncode, 0)
        # It ended on Prometheus's scrape after its last acknowledged record, not on the grace.
        print(f"scale-down: the leaving replica exited {took:.1f} s after SIGTERM", file=sys.stderr)
        self.assertLess(took, grace / 2, leaving.read_log())
        acknowledged = sum(stats["sent"] for stats in traffic.finish(self))
        seen = []
        try:
            harness.poll(f"Prometheus's total to reach the {acknowledged} records acknowledged",
                         lambda: seen.append(prometheus.value(total)) or seen[-1] == acknowledged, deadline=60)
        except AssertionError as e:  # over or under, and what each replica counted
            raise AssertionError(f"{e}; Prometheus's total last {seen[-1:]}, the staying replica counted "
                                 f"{counted(staying)}; the leaving replica's log:\n{leaving.read_log()}") from None

    def test_sigterm_under_load_drops_nothing(self):
        leaving = harness.Server(SERVER, "--shutdown_drain_seconds=1", "--shutdown_scrape_grace_seconds=10",
                                 log_dir=self.tmp.name)
        staying = harness.Server(SERVER, log_dir=self.tmp.name)
        self.addCleanup(staying.stop)
        self.addCleanup(leaving.stop)
        traffic = Traffic(REPORTER_EXAMPLE, f"ipv4:{leaving.grpc_address},{staying.grpc_address}", 6, PER_SECOND)
        harness.poll("records on the leaving replica", lambda: counted(leaving) > PER_SECOND / 2)
        leaving.proc.terminate()
        # Its gRPC port closes after the drain period; /metrics stays up for the final scrape.
        harness.poll("the leaving replica's gRPC port to close", lambda: refuses_connections(leaving.grpc_address))
        counted_by_leaving = counted(leaving)
        harness.poll("traffic on the staying replica after the other left", lambda: counted(staying) > PER_SECOND)
        acknowledged = sum(stats["sent"] for stats in traffic.finish(self))
        self.assertEqual(counted_by_leaving + counted(staying), acknowledged)
        self.assertEqual(leaving.stop(), 0)

    # Twelve engine processes (six Python Reporters, six C++ ones), each at 12.5 records a second
    # with a 1 s flush, started a twelfth of that cycle apart, over three replicas; one replica gets
    # SIGTERM. Whenever a reporter's next call lands — in the drain period, among the refusals, or as
    # the gRPC server shuts down — nothing is dropped and every acknowledged record is counted once.
    def test_staggered_reporters_lose_nothing(self):
        leaving = harness.Server(SERVER, "--shutdown_drain_seconds=1", "--shutdown_scrape_grace_seconds=10",
                                 log_dir=self.tmp.name)
        staying = [harness.Server(SERVER, log_dir=self.tmp.name) for _ in range(2)]
        for server in (leaving, *staying):
            self.addCleanup(server.stop)
        target = "ipv4:" + ",".join(s.grpc_address for s in (leaving, *staying))
        per_second, records = 12.5, 125  # 10 s each
        processes = []
        for i in range(12):
            if i % 2 == 0:
                command = [sys.executable, os.path.join(HERE, "paced_reporter.py"), STUBS, target, str(records),
                           str(per_second), "1.0"]
            else:
                command = [REPORTER_EXAMPLE, "--target", target, "--records", str(records), "--records-per-second",
                           str(per_second), "--flush-interval", "1", "--flush-timeout", "60", "--real"]
            processes.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))
            self.addCleanup(lambda p=processes[-1]: p.poll() is None and p.kill())
            time.sleep(1 / 12)  # the stagger itself: a twelfth of the flush cycle
        harness.poll("records on the leaving replica", lambda: counted(leaving) > 0)
        leaving.proc.terminate()
        harness.poll("the leaving replica's gRPC port to close", lambda: refuses_connections(leaving.grpc_address))
        counted_by_leaving = counted(leaving)
        stats = [json.loads(p.communicate(timeout=120)[0]) for p in processes]
        sent = sum(s["sent"] for s in stats)
        self.assertEqual([s["dropped"] for s in stats], [0] * 12, stats)
        self.assertEqual(sent, 12 * records)
        self.assertEqual(counted_by_leaving + sum(counted(s) for s in staying), sent)
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
