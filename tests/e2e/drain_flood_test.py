"""A drain no client of the metrics port can shorten, against the real binary and a real Prometheus.

A replica takes records (acknowledged by its answers) while Prometheus scrapes it every 15 s (its
default); it gets SIGTERM, and while it drains and waits for its final scrape, clients on 80 loopback
addresses flood /metrics: some read whole pages, some say they are Prometheus
(X-Prometheus-Scrape-Timeout-Seconds) and read, some say so and reset unread with a receive window of
a few bytes, some read nothing and close. The replica must still wait for Prometheus's scrape after its last acknowledged record (the
replica before this rule left 2-3 s after SIGTERM, and Prometheus never saw its last records):
Prometheus's total then equals what the replica acknowledged. Run in plain HTTP and with TLS and
basic auth on (the flood then has no password: every page it asks for is refused 401).

A stray client that reads a page does not make a new replica ready (--ready_after_scrape_seconds):
only a delivered page asked for by a scraper does.

Usage: drain_flood_test.py KVLEDGER_SERVER PYTHON_STUBS_DIR
"""
import os
import socket
import ssl
import struct
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_edge_test as edge  # noqa: E402  (takes the two arguments)
import harness  # noqa: E402

import grpc  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402

SERVER = edge.SERVER
FLOOD_ADDRESSES = [f"127.0.3.{i}" for i in range(1, 81)]
SCRAPER_HEADER = "X-Prometheus-Scrape-Timeout-Seconds: 10\r\n"


def flood_once(address, source, shape, tls):
    """One GET of /metrics from `source`, in one of the flood's shapes."""
    host, port = address.rsplit(":", 1)
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    conn = raw
    if shape == "reset":
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
    raw.settimeout(5)
    try:
        raw.bind((source, 0))
        raw.connect((host, int(port)))
        if tls:
            conn = tls.wrap_socket(raw, server_hostname="127.0.0.1")
        headers = SCRAPER_HEADER if shape in ("scraper", "reset") else ""
        conn.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n".encode())
        if shape in ("reader", "scraper"):
            while conn.recv(65536):
                pass
        elif shape == "reset":
            time.sleep(0.05)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    finally:
        conn.close()
        raw.close()


class Flood:
    def __init__(self, address, tls=None, threads=8):
        self.stop = threading.Event()
        self.count = 0
        shapes = ("reader", "scraper", "reset", "unread")
        self.threads = [threading.Thread(target=self._run, args=(address, tls, shapes, t), daemon=True)
                        for t in range(threads)]
        for t in self.threads:
            t.start()

    def _run(self, address, tls, shapes, offset):
        i = offset
        while not self.stop.is_set():
            flood_once(address, FLOOD_ADDRESSES[i % len(FLOOD_ADDRESSES)], shapes[(i // 7) % len(shapes)], tls)
            self.count += 1
            i += len(self.threads)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()


class Acknowledged:
    """Records sent in batches of 10 until the replica refuses them; the sum of what it accepted."""

    def __init__(self, grpc_address):
        self.total = 0
        self.channel = grpc.insecure_channel(grpc_address)
        self.stub = ledger_pb2_grpc.LedgerStub(self.channel)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        record = record_pb2.Record(model="llama-3.1-8b", tier=record_pb2.TIER_DEVICE, prompt_tokens=1024,
                                   logical_match_tokens=512)
        while True:
            try:
                self.total += self.stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=[record] * 10),
                                                    timeout=10).accepted
            except grpc.RpcError:
                return
            time.sleep(0.01)

    def finish(self):
        self.thread.join()
        self.channel.close()
        return self.total


class DrainFloodTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvledger-drain-flood-")

    def run_drain(self, server_args=(), scrape_extra="", scheme="http", tls=None):
        grace = 40
        leaving = harness.Server(SERVER, "--shutdown_drain_seconds=1", f"--shutdown_scrape_grace_seconds={grace}",
                                 *server_args, log_dir=self.tmp)
        self.addCleanup(leaving.stop)
        prometheus = harness.Prometheus(
            "global:\n  scrape_interval: 15s\nscrape_configs:\n  - job_name: kvledger\n"
            f"    scheme: {scheme}\n{scrape_extra}    static_configs:\n"
            f"      - targets: ['{leaving.metrics_address}']\n", self.tmp)
        self.addCleanup(prometheus.stop)
        harness.poll("Prometheus to scrape the replica", lambda: prometheus.value('up{job="kvledger"}') == 1)
        records = Acknowledged(leaving.grpc_address)
        harness.poll("records acknowledged", lambda: records.total > 100)
        flood = Flood(leaving.metrics_address, tls)
        terminated = time.monotonic()
        leaving.proc.terminate()
        leaving.proc.wait(timeout=grace + 30)
        took = time.monotonic() - terminated
        flood.finish()
        acknowledged = records.finish()
        self.assertEqual(leaving.proc.returncode, 0)
        print(f"flooded drain ({scheme}): exited {took:.1f} s after SIGTERM, {flood.count} flood requests, "
              f"{acknowledged} records acknowledged", file=sys.stderr)
        total = 'last_over_time(kvledger_requests_total{job="kvledger",model="llama-3.1-8b",tier="device"}[10m])'
        seen = []
        harness.poll(f"Prometheus's total to reach the {acknowledged} records acknowledged",
                     lambda: seen.append(prometheus.value(total)) or seen[-1] == acknowledged, deadline=30)

    def test_a_flood_never_ends_the_drain_early(self):
        self.run_drain()

    def test_a_flood_never_ends_the_drain_early_with_tls_and_basic_auth(self):
        certs = edge.make_certificates(self.tmp)
        config = os.path.join(self.tmp, "web.yml")
        with open(config, "w") as f:
            f.write(f"tls_server_config:\n  cert_file: {certs['server.crt']}\n  key_file: {certs['server.key']}\n"
                    f"basic_auth_users:\n  prometheus: '{edge.bcrypt('s3cret')}'\n")
        context = ssl.create_default_context(cafile=certs["ca.crt"])
        scrape = (f"    tls_config:\n      ca_file: {certs['ca.crt']}\n"
                  "    basic_auth:\n      username: prometheus\n      password: s3cret\n")
        self.run_drain((f"--web_config_file={config}",), scrape, "https", context)

    def test_a_stray_reader_does_not_make_a_replica_ready(self):
        joining = harness.Server(SERVER, "--ready_after_scrape_seconds=600", log_dir=self.tmp)
        self.addCleanup(joining.stop)
        with grpc.insecure_channel(joining.grpc_address) as channel:
            health = health_pb2_grpc.HealthStub(channel)

            def ready():
                request = health_pb2.HealthCheckRequest(service="kvledger.v1.Ledger")
                return health.Check(request, timeout=10).status == health_pb2.HealthCheckResponse.SERVING

            for shape in ("reader", "unread", "reset", "reader"):
                flood_once(joining.metrics_address, "127.0.3.1", shape, None)
            flood_once(joining.metrics_address, "127.0.3.2", "reset", None)  # says scraper, reads nothing
            time.sleep(0.3)  # the readiness check runs every 20 ms: it would have turned by now
            self.assertFalse(ready())
            flood_once(joining.metrics_address, "127.0.3.3", "scraper", None)  # a scraper's page, delivered
            harness.poll("the replica to be ready after a scraper's delivered page", ready)


if __name__ == "__main__":
    unittest.main()
