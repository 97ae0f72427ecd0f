"""The metrics port against the real binary as Prometheus and hostile clients use it: keep-alive
answers without a delayed ACK, slow readers on several addresses never keeping another from scraping,
idle connections from many addresses never locking one out, shutdown in bounded time with a slow
reader, RFC 9112/9110 heads, gzip, and TLS with bcrypt basic auth from an exporter-toolkit web config
file, scraped by a real Prometheus. Only loopback addresses are used (127.0.0.x, several sources).

Usage: http_edge_test.py KVLEDGER_SERVER PYTHON_STUBS_DIR
"""
import gzip
import os
import resource
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
import warnings

SERVER = sys.argv[1]
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
del sys.argv[1:3]

import grpc  # noqa: E402

import harness  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402


def exchange(address, request, source="127.0.0.1", rcvbuf=None, timeout=10):
    """Sends raw request bytes from `source`; returns everything the server answers until it closes."""
    host, port = address.rsplit(":", 1)
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect((host, int(port)))
    with s:
        s.sendall(request)
        reply = b""
        try:
            while chunk := s.recv(65536):
                reply += chunk
        except (socket.timeout, ConnectionResetError):
            pass
    return reply


def slow_reader(address, source, stop, requests, chunk):
    """Until `stop`: connects from `source` with a 4 KiB receive buffer, sends `requests` /metrics
    requests and reads `chunk` bytes every 50 ms; reconnects when cut."""
    host, port = address.rsplit(":", 1)
    while not stop.is_set():
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.bind((source, 0))
        s.connect((host, int(port)))
        with s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * requests)
            while not stop.wait(0.05):
                try:
                    if not s.recv(chunk):
                        break
                except OSError:
                    break


class Running:
    """Threads running `target(*args)` for each args in `each`, until the block ends and `stop` is set."""

    def __init__(self, target, each):
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=target, args=(*args, self.stop)) for args in each]

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join()


def populate(server, models=64):
    """A larger exposition: `models` generic models' series."""
    with grpc.insecure_channel(server.grpc_address) as channel:
        records = [record_pb2.Record(model=f"m{i}", tier=record_pb2.TIER_HOST, prompt_tokens=100,
                                     logical_match_tokens=50, reload_seconds=0.01, suffix_prefill_seconds=0.1,
                                     ttft_seconds=0.2) for i in range(models)]
        ledger_pb2_grpc.LedgerStub(channel).RecordBatch(ledger_pb2.RecordBatchRequest(records=records), timeout=30)


class HttpEdgeTest(unittest.TestCase):
    def start(self, *args):
        tmp = tempfile.mkdtemp(prefix="kvledger-http-")
        server = harness.Server(SERVER, "--unknown_model=generic", "--max_models=256", *args, log_dir=tmp)
        self.addCleanup(server.stop)
        return server

    # A small answer on a kept-alive connection comes in one segment with its head, at once (it once
    # waited ~44 ms for a delayed ACK: head and body were two writes without TCP_NODELAY).
    def test_keep_alive_answers_promptly(self):
        server = self.start()
        host, port = server.metrics_address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            times = []
            for _ in range(20):
                start = time.monotonic()
                s.sendall(b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
                reply = s.recv(65536)
                times.append(time.monotonic() - start)
                self.assertTrue(reply.startswith(b"HTTP/1.1 404"), reply)
                self.assertTrue(reply.endswith(b"not found\n"), reply)  # head and body in one segment
        times.sort()
        print(f"MEASURED keep_alive_small_answer: median_ms={1000 * times[10]:.2f} max_ms={1000 * times[-1]:.2f}")
        self.assertLess(times[10], 0.035)  # below the 40 ms minimum of a delayed ACK

    # 8 clients on 4 addresses ask for /metrics with a 4 KiB receive buffer and read a few hundred bytes
    # a second; a fifth address scrapes every half second for 12 s and is answered every time, within 5 s
    # (once 0 of 2: the slow readers held every worker). Their answers wait in memory, not in workers.
    def test_slow_readers_never_starve_another_address(self):
        server = self.start("--http_answer_seconds=60")
        populate(server, 200)
        readers = [(server.metrics_address, f"127.0.0.{10 + i % 4}") for i in range(8)]
        times = []
        with Running(lambda address, source, stop: slow_reader(address, source, stop, 4, 16), readers):
            time.sleep(1)  # the slow readers are in
            end = time.monotonic() + 12
            while time.monotonic() < end:
                start = time.monotonic()
                reply = exchange(server.metrics_address, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                                 source="127.0.0.20", timeout=10)
                times.append(time.monotonic() - start)
                self.assertTrue(reply.startswith(b"HTTP/1.1 200 OK"), reply[:200])
                self.assertIn(b"kvledger_requests_total", reply)
                time.sleep(0.5)
        times.sort()
        print(f"MEASURED slow_readers_4_addresses: scrapes={len(times)} median_s={times[len(times) // 2]:.3f} "
              f"max_s={times[-1]:.3f}")
        self.assertLess(times[-1], 5)

    # 16 addresses hold every connection slot with idle kept-alive connections, refreshed by cheap
    # requests; another address still connects and scrapes (an idle connection of the busiest address
    # makes room), every time.
    def test_idle_connections_never_lock_out_another_address(self):
        server = self.start("--http_connections=128", "--http_connections_per_client=8")
        host, port = server.metrics_address.rsplit(":", 1)
        held = []
        for i in range(16):
            for _ in range(8):
                s = socket.socket()
                s.bind((f"127.0.1.{i + 1}", 0))
                s.connect((host, int(port)))
                held.append(s)
        try:
            served = 0
            for attempt in range(20):
                for s in held[attempt::7][:4]:  # a few refreshed, as an attacker keeps them alive
                    try:
                        s.sendall(b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
                    except OSError:
                        pass
                reply = exchange(server.metrics_address, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                                 source="127.0.0.30")
                served += reply.startswith(b"HTTP/1.1 200 OK")
            self.assertEqual(served, 20)
        finally:
            for s in held:
                s.close()

    # SIGTERM (drain and grace at 0) and SIGINT end the process promptly while a /metrics reader with
    # a tiny receive buffer never reads (SIGTERM once took 58 s; SIGINT never completed).
    def test_shutdown_with_a_slow_reader(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            server = self.start()
            populate(server, 200)
            host, port = server.metrics_address.rsplit(":", 1)
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect((host, int(port)))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 8)
            time.sleep(0.5)  # the answer is being written
            start = time.monotonic()
            server.proc.send_signal(sig)
            server.proc.wait(timeout=30)
            took = time.monotonic() - start
            s.close()
            print(f"MEASURED shutdown_with_slow_reader {sig.name}: seconds={took:.2f}")
            self.assertLess(took, 5, sig.name)

    # RFC 9112 §5.1: whitespace before a header's colon is refused (it was ignored and its body served
    # as a second request); RFC 9110 §7.2: HTTP/1.1 without Host is 400; HEAD is served; bare-LF heads
    # and a request followed at once by a half-close are answered; the head limit is exactly 16,384
    # bytes.
    def test_rfc_heads(self):
        server = self.start()
        a = server.metrics_address
        smuggle = exchange(a, b"GET /nope HTTP/1.1\r\nHost: x\r\nContent-Length : 34\r\n\r\n"
                              b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(smuggle.startswith(b"HTTP/1.1 400"), smuggle[:200])
        self.assertNotIn(b"kvledger_requests_total", smuggle)
        self.assertTrue(exchange(a, b"GET /metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400"))
        head = exchange(a, b"HEAD /api/v1/profiles HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), head[:200])
        self.assertTrue(head.endswith(b"\r\n\r\n"), head[-200:])  # the head only
        bare = exchange(a, b"GET /metrics HTTP/1.1\nHost: x\nConnection: close\n\n")
        self.assertTrue(bare.startswith(b"HTTP/1.1 200"), bare[:200])
        host, port = a.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"GET /api/v1/profiles HTTP/1.1\r\nHost: x\r\n\r\n")
            s.shutdown(socket.SHUT_WR)
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        self.assertTrue(reply.startswith(b"HTTP/1.1 200"), reply[:200])
        line = b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: "
        fits = line + b"a" * (16384 - len(line) - 4) + b"\r\n\r\n"
        self.assertEqual(len(fits), 16384)
        self.assertTrue(exchange(a, fits).startswith(b"HTTP/1.1 404"))
        over = line + b"a" * (16385 - len(line) - 4) + b"\r\n\r\n"
        self.assertTrue(exchange(a, over).startswith(b"HTTP/1.1 431"))

    # gzip when asked (Prometheus sends Accept-Encoding: gzip): the page decompresses to the plain one
    # and is several times smaller.
    def test_gzip(self):
        server = self.start()
        populate(server, 200)
        plain = urllib.request.urlopen(f"http://{server.metrics_address}/metrics", timeout=10).read()
        request = urllib.request.Request(f"http://{server.metrics_address}/metrics",
                                         headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=10) as r:
            self.assertEqual(r.headers["Content-Encoding"], "gzip")
            packed = r.read()
        def counters(text):  # the record counters: the same on both scrapes (gauges and scrape sizes move)
            return sorted(l for l in text.splitlines() if l.startswith(b"kvledger_") and b"_total{" in l)
        unpacked = counters(gzip.decompress(packed))
        self.assertGreater(len(unpacked), 1000)
        self.assertTrue(unpacked == counters(plain), "the gzip page differs from the plain one")
        print(f"MEASURED gzip: plain_bytes={len(plain)} gzip_bytes={len(packed)}")
        self.assertLess(len(packed) * 4, len(plain))


class EdgeBoundsTest(unittest.TestCase):
    # With a hard descriptor limit of 1,024, HTTP connections stay within a quarter of it (idle ones
    # make room for new ones), so 700 HTTP connections from 7 addresses never take the descriptors
    # gRPC needs: a call is served and another address still scrapes (once the watchdog exited 3).
    def test_http_connections_leave_descriptors_for_grpc(self):
        tmp = tempfile.mkdtemp(prefix="kvledger-fds-")
        server = harness.Server(SERVER, log_dir=tmp,
                                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024)))
        self.addCleanup(server.stop)
        host, port = server.metrics_address.rsplit(":", 1)
        held = []
        for i in range(700):
            s = socket.socket()
            s.bind((f"127.0.2.{1 + i % 7}", 0))
            s.connect((host, int(port)))
            held.append(s)
        try:
            harness.poll("the listener to take the connections in",
                         lambda: len(os.listdir(f"/proc/{server.proc.pid}/fd")) > 200)
            open_fds = len(os.listdir(f"/proc/{server.proc.pid}/fd"))
            with grpc.insecure_channel(server.grpc_address) as channel:
                reply = ledger_pb2_grpc.LedgerStub(channel).RecordBatch(ledger_pb2.RecordBatchRequest(
                    records=[record_pb2.Record(model="llama-3.1-8b", prompt_tokens=100, logical_match_tokens=0)]),
                    timeout=10)
            self.assertEqual(reply.accepted, 1)
            scrape = exchange(server.metrics_address, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                              source="127.0.0.40")
            self.assertTrue(scrape.startswith(b"HTTP/1.1 200"), scrape[:200])
            print(f"MEASURED http_connections_vs_descriptors: held=700 server_fds={open_fds} of 1024")
            self.assertLess(open_fds, 1024 // 4 + 64)
        finally:
            for s in held:
                s.close()

    # Engine-statistics counters never go backwards: 168 calls of 100,000 entries of 2^40 transfers
    # each pass 2^64 in the sum, and the counter is 2^64 exactly (a 64-bit sum once fell from
    # 1.392e19 to 1.130e17).
    def test_engine_counters_never_wrap(self):
        tmp = tempfile.mkdtemp(prefix="kvledger-wrap-")
        server = harness.Server(SERVER, "--max_batch_records=100000", log_dir=tmp)
        self.addCleanup(server.stop)
        entry = ledger_pb2.TransferObservation(model="llama-3.1-8b", tier=record_pb2.TIER_HOST, bytes=1, seconds=1,
                                               transfers=1 << 40)
        body = ledger_pb2.EngineStatsRequest(transfers=[entry] * 100_000).SerializeToString()
        with grpc.insecure_channel(server.grpc_address) as channel:
            call = channel.unary_unary("/kvledger.v1.Ledger/RecordEngineStats", request_serializer=lambda raw: raw,
                                       response_deserializer=ledger_pb2.EngineStatsResponse.FromString)
            previous = 0
            for i in range(168):
                self.assertEqual(call(body, timeout=60).accepted, 100_000)
                if i % 42 == 41:
                    value = harness.sample(harness.parse_exposition(server.scrape()), "kvledger_engine_transfers_total",
                                           model="llama-3.1-8b", tier="host")
                    self.assertGreater(value, previous)  # never backwards
                    previous = value
        value = harness.sample(harness.parse_exposition(server.scrape()), "kvledger_engine_transfers_total",
                               model="llama-3.1-8b", tier="host")
        self.assertEqual(value, float(168 * 100_000 * (1 << 40)))
        self.assertGreater(value, 2.0 ** 64)


def make_certificates(tmp):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, with the openssl CLI."""
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tmp, timeout=60)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", "/CN=kvledger-test-ca")
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN=kvledger-{name}")
        with open(os.path.join(tmp, f"{name}.ext"), "w") as f:
            f.write(ext + "\n")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")
    return {n: os.path.join(tmp, n) for n in ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")}


def bcrypt(password):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt  # noqa: PLC0415 - Debian's libxcrypt does bcrypt; the module is deprecated, not gone
    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))  # cost 4: quick in a test


class WebConfigTest(unittest.TestCase):
    # The exporter-toolkit web config: TLS (client certificates required and verified) and a bcrypt
    # user. Plain HTTP and a client without a certificate get nothing; the right user gets the page,
    # a wrong one 401; a real Prometheus scrapes it with tls_config and basic_auth.
    def test_tls_and_bcrypt_basic_auth(self):
        tmp = tempfile.mkdtemp(prefix="kvledger-web-")
        certs = make_certificates(tmp)
        config = os.path.join(tmp, "web.yml")
        with open(config, "w") as f:
            f.write(f"tls_server_config:\n  cert_file: {certs['server.crt']}\n  key_file: {certs['server.key']}\n"
                    f"  client_ca_file: {certs['ca.crt']}\n  client_auth_type: RequireAndVerifyClientCert\n"
                    f"basic_auth_users:\n  prometheus: '{bcrypt('s3cret')}'\n")
        server = harness.Server(SERVER, f"--web_config_file={config}", log_dir=tmp)
        self.addCleanup(server.stop)
        url = f"https://{server.metrics_address}/metrics"
        context = ssl.create_default_context(cafile=certs["ca.crt"])
        context.load_cert_chain(certs["client.crt"], certs["client.key"])

        def get(auth, ctx=context):
            import base64  # noqa: PLC0415
            request = urllib.request.Request(url, headers={"Authorization": "Basic " + base64.b64encode(auth).decode()})
            try:
                with urllib.request.urlopen(request, timeout=10, context=ctx) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as e:
                return e.code, b""

        status, body = get(b"prometheus:s3cret")
        self.assertEqual(status, 200)
        self.assertIn(b"kvledger_requests_total", body)
        self.assertEqual(get(b"prometheus:wrong")[0], 401)
        no_cert = ssl.create_default_context(cafile=certs["ca.crt"])
        with self.assertRaises((urllib.error.URLError, ssl.SSLError, ConnectionResetError)):
            get(b"prometheus:s3cret", no_cert)
        plain = exchange(server.metrics_address, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", timeout=5)
        self.assertNotIn(b"kvledger_requests_total", plain)
        prometheus = harness.Prometheus(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n- job_name: kvledger\n  scheme: https\n"
            f"  tls_config:\n    ca_file: {certs['ca.crt']}\n    cert_file: {certs['client.crt']}\n"
            f"    key_file: {certs['client.key']}\n  basic_auth:\n    username: prometheus\n    password: s3cret\n"
            f"  static_configs:\n  - targets: ['{server.metrics_address}']\n", tmp)
        self.addCleanup(prometheus.stop)
        harness.poll("Prometheus to scrape over TLS", lambda: prometheus.value('up{job="kvledger"}') == 1,
                     deadline=60, interval=0.5)

    def test_bad_config_names_the_key(self):
        tmp = tempfile.mkdtemp(prefix="kvledger-web-")
        config = os.path.join(tmp, "web.yml")
        for text, message in (("tls_server_config:\n  cert_file: /nope\n", "needs both cert_file and key_file"),
                              ("basic_auth_users:\n  u: plaintext\n", "basic_auth_users.u: must be a bcrypt hash"),
                              ("http_server_config:\n  http2: true\n", "http_server_config: not a setting")):
            with open(config, "w") as f:
                f.write(text)
            result = subprocess.run([SERVER, "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                                     f"--web_config_file={config}"], capture_output=True, text=True, timeout=60)
            self.assertNotEqual(result.returncode, 0)
            self.assertIn(message, result.stderr)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    unittest.main()
