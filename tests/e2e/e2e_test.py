"""End to end: the real kvledger-server binary, the kvledger CLI, an independent Python grpcio
client, promtool and a real Prometheus server, all on loopback.

Usage: e2e_test.py SERVER_BINARY NOOP_SERVER_BINARY CLI_BINARY PYTHON_STUBS_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

SERVER, NOOP_SERVER, CLI, STUBS = sys.argv[1:5]
sys.path.insert(0, STUBS)
import grpc  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402
import reflection_pb2  # noqa: E402
import reflection_pb2_grpc  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402


# Independent arithmetic for llama-3.1-8b (docs/cost-model.md §5): 32 layers, 32 heads x 128,
# 8 KV heads, FFN 14336, hidden 4096.
def llama8b_attention_flops(tokens):
    return 32 * (2 * 32 * 256) * tokens * (tokens + 1) // 2


def llama8b_token_flops(tokens):
    per_layer = 2 * (4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336)
    return 32 * per_layer * tokens


def record(model="llama-3.1-8b", n=4096, match=2048, tier=record_pb2.TIER_DEVICE, **kw):
    return record_pb2.Record(model=model, tier=tier, prompt_tokens=n, logical_match_tokens=match,
                             reload_seconds=kw.pop("reload", 0.01), suffix_prefill_seconds=kw.pop("suffix", 0.2),
                             ttft_seconds=kw.pop("ttft", 0.25), **kw)


class EndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.server = harness.Server(SERVER, "--max_models=3", log_dir=cls.tmp.name)
        cls.channel = grpc.insecure_channel(cls.server.grpc_address)
        cls.stub = ledger_pb2_grpc.LedgerStub(cls.channel)
        cls.run_traffic()
        cls.text = cls.server.scrape()
        cls.samples = harness.parse_exposition(cls.text)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        code = cls.server.stop()
        cls.tmp.cleanup()
        assert code == 0, f"server exited with {code}"

    @classmethod
    def cli(cls, *args):
        return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60)

    @classmethod
    def run_traffic(cls):
        """Every record the assertions below count, sent once."""
        # 1. The CLI: a 50 % logical hit on a full-attention model, and a malformed record.
        cls.send_ok = cls.cli("send", "--target", cls.server.grpc_address, "--model", "llama-3.1-8b",
                              "--tier", "device", "--prompt-tokens", "4096", "--logical-match-tokens", "2048",
                              "--reload-seconds", "0.01", "--suffix-prefill-seconds", "0.2", "--ttft-seconds", "0.25")
        cls.send_bad = cls.cli("send", "--target", cls.server.grpc_address, "--model", "llama-3.1-8b",
                               "--prompt-tokens", "4096", "--logical-match-tokens", "5000")
        # 2. Python: one hybrid record, a mixed batch, a stream.
        cls.stub.Record(record(model="kimi-linear-48b-a3b", n=2000, match=1000, tier=record_pb2.TIER_HOST,
                               recompute_tokens=300), timeout=10)
        cls.batch = cls.stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=[
            record(model="qwen3-8b", n=1000, match=0, tier=record_pb2.TIER_UNSPECIFIED),
            record(n=100, match=200),                     # rejected: match > N
            record(model="gemma-2-9b", n=10000, match=5000, tier=record_pb2.TIER_DISK),
            record(model="nope-7b"),                      # rejected: unknown model
        ]), timeout=10)
        batches = [ledger_pb2.RecordBatchRequest(records=[record(model="deepseek-v3", n=8192, match=4096,
                                                                 tier=record_pb2.TIER_REMOTE)] * 5)
                   for _ in range(3)]
        cls.stream = cls.stub.StreamRecords(iter(batches), timeout=10)
        # 3. The CLI replays a trace with one unparseable and one invalid line.
        trace = os.path.join(cls.tmp.name, "trace.jsonl")
        with open(trace, "w") as f:
            f.write(json.dumps({"model": "llama-3.1-8b", "tier": "TIER_DEVICE", "prompt_tokens": 4096,
                                "logical_match_tokens": 2048, "reload_seconds": 0.01,
                                "suffix_prefill_seconds": 0.2, "ttft_seconds": 0.25}) + "\n")
            f.write("{not json\n")
            f.write(json.dumps({"model": "llama-3.1-8b", "tier": "TIER_DEVICE", "prompt_tokens": 4096,
                                "logical_match_tokens": 2048, "reload_seconds": -1}) + "\n")
        cls.replay = cls.cli("replay", "--target", cls.server.grpc_address, trace)

    def value(self, name, **labels):
        return harness.sample(self.samples, name, **labels)

    # Proves: the CLI's record is accepted, the malformed one gets a message that says what to fix.
    def test_cli_send(self):
        self.assertEqual(self.send_ok.returncode, 0, self.send_ok.stderr)
        self.assertEqual(self.send_bad.returncode, 2)  # bad input: exit 2 (docs/operations.md)
        # The server sends the field as data: the CLI names it as the flag the user typed.
        self.assertEqual(self.send_bad.stderr.strip(), "kvledger send: rejected: --logical-match-tokens = 5000: "
                                                       "must be in [0, prompt_tokens = 4096]")

    # Proves: a record sent to the metrics port says so (it answers HTTP/1.1), and is not "rejected".
    def test_send_to_the_metrics_port(self):
        sent = self.cli("send", "--target", self.server.metrics_address, "--model", "llama-3.1-8b",
                        "--prompt-tokens", "10", "--logical-match-tokens", "0", "--timeout", "5")
        self.assertEqual(sent.returncode, 1)
        self.assertIn("it answers HTTP/1.1, not gRPC (is it kvledger-server's metrics port?", sent.stderr)
        self.assertNotIn("rejected", sent.stderr)

    # Proves: a batch rejects bad records by index and reason and counts the good ones.
    def test_batch_rejections(self):
        self.assertEqual((self.batch.accepted, self.batch.rejected), (2, 2))
        self.assertEqual([(r.index, r.reason) for r in self.batch.rejections],
                         [(1, "invalid_logical_match_tokens"), (3, "unknown_model")])
        self.assertIn("known profiles:", self.batch.rejections[1].message)
        self.assertEqual((self.stream.accepted, self.stream.rejected), (15, 0))

    # Proves: replay reports accepted/rejected with reasons and line numbers.
    def test_replay_summary(self):
        self.assertEqual(self.replay.returncode, 2)  # bad input: exit 2 (docs/operations.md)
        self.assertIn("1 accepted, 2 rejected", self.replay.stdout)
        self.assertIn("unparseable: 1", self.replay.stdout)
        self.assertIn("line 3: reload_seconds = -1: must be finite", self.replay.stdout)
        self.assertNotIn("[#", self.replay.stderr)  # no progress bar when stderr is not a terminal

    # Proves: invalid record over Python grpcio gets INVALID_ARGUMENT naming field, value and rule.
    def test_python_invalid_argument(self):
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.Explain(record(n=0, match=0), timeout=10)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(caught.exception.details(), "prompt_tokens = 0: must be in [1, 2147483648]")
        # The reason, as RecordBatch's rejections carry it, in the trailing metadata (Record too).
        self.assertIn(("kvledger-reject-reason", "invalid_prompt_tokens"), caught.exception.trailing_metadata())
        with self.assertRaises(grpc.RpcError) as caught:
            self.stub.Record(record(n=10, match=11), timeout=10)
        self.assertIn(("kvledger-reject-reason", "invalid_logical_match_tokens"), caught.exception.trailing_metadata())
        self.assertIn(("kvledger-reject-field", "logical_match_tokens"), caught.exception.trailing_metadata())

    # Proves: Explain over the wire matches independent arithmetic, and the CLI's remote explain
    # prints the same JSON as its offline explain, but for the seconds: offline, the record alone
    # estimates (basis record); a server with no compute model for the model says unknown (none).
    def test_explain(self):
        figures = self.stub.Explain(record(), timeout=10)
        self.assertEqual(figures.attention_baseline_flops, llama8b_attention_flops(4096))
        self.assertEqual(figures.attention_avoided_reused_flops, llama8b_attention_flops(2048))
        args = ["explain", "--model", "kimi-linear-48b-a3b", "--prompt-tokens", "2000",
                "--logical-match-tokens", "1000", "--suffix-prefill-seconds", "0.1", "--json"]
        offline = self.cli(*args)
        remote = self.cli(*args, "--target", self.server.grpc_address)
        self.assertEqual(offline.returncode, 0, offline.stderr)
        seconds = ("recompute_estimate_available", "estimate_basis", "estimated_recompute_seconds",
                   "estimated_full_prefill_seconds")
        offline_json, remote_json = json.loads(offline.stdout), json.loads(remote.stdout)
        self.assertEqual([offline_json.pop(k) for k in seconds][:2], [True, "BASIS_RECORD"])
        self.assertEqual([remote_json.pop(k) for k in seconds], [False, "BASIS_NONE", None, None])
        self.assertEqual(offline_json, remote_json)
        self.assertEqual(remote_json["recompute_alignment_tokens"], "232")
        # The text is printed from the wire message the same way on both paths: line for line, but for
        # the estimate's rows.
        estimate_rows = ("recompute estimate available", "estimated recompute seconds", "  estimate basis",
                         "estimated full prefill")
        text = [[line for line in self.cli(*args[:-1], *target).stdout.splitlines()
                 if not line.startswith(estimate_rows)] for target in ((), ("--target", self.server.grpc_address))]
        self.assertEqual(text[0], text[1])
        self.assertIn("recompute: alignment loss      232 tokens", text[1])

    # Proves: exact counters on /metrics for the records sent above (2 llama hits: CLI + replay).
    def test_exact_counters(self):
        llama = dict(model="llama-3.1-8b", tier="device")
        self.assertEqual(self.value("kvledger_requests_total", **llama), 2)
        self.assertEqual(self.value("kvledger_prompt_tokens_total", **llama), 8192)
        self.assertEqual(self.value("kvledger_attention_baseline_flops_total", **llama), 2 * llama8b_attention_flops(4096))
        self.assertEqual(self.value("kvledger_attention_avoided_flops_total", boundary="reused", **llama),
                         2 * llama8b_attention_flops(2048))
        self.assertEqual(self.value("kvledger_prefill_avoided_flops_total", boundary="logical", **llama),
                         2 * (llama8b_attention_flops(2048) + llama8b_token_flops(2048)))
        kimi = dict(model="kimi-linear-48b-a3b", tier="host")
        self.assertEqual(self.value("kvledger_recompute_tokens_total", cause="alignment", **kimi), 232)
        self.assertEqual(self.value("kvledger_recompute_tokens_total", cause="restore", **kimi), 68)
        # The miss counts toward prompt tokens with tier="none".
        self.assertEqual(self.value("kvledger_prompt_tokens_total", model="qwen3-8b", tier="none"), 1000)
        # Known profiles always keep their own label, whatever --max_models (3 here) says: the cap is
        # for names without a profile, which this server rejects.
        self.assertEqual(self.value("kvledger_requests_total", model="gemma-2-9b", tier="disk"), 1)
        self.assertEqual(self.value("kvledger_requests_total", model="deepseek-v3", tier="remote"), 15)
        self.assertEqual(self.value("kvledger_model_label_folded_records_total"), 0)
        self.assertEqual(self.value("kvledger_records_rejected_total", reason="invalid_logical_match_tokens"), 2)
        self.assertEqual(self.value("kvledger_records_rejected_total", reason="unknown_model"), 1)
        self.assertEqual(self.value("kvledger_records_rejected_total", reason="invalid_reload_seconds"), 1)
        self.assertEqual(self.value("kvledger_reload_seconds_count", **llama), 2)
        self.assertNotRegex(self.text, r"request_id=\"", "a request id became a label")

    # Proves: promtool finds nothing to complain about in a real scrape.
    def test_promtool_check_metrics(self):
        result = subprocess.run(["promtool", "check", "metrics"], input=self.text, capture_output=True,
                                text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout.strip() + result.stderr.strip(), "")

    # Proves: standard health checking and server reflection are served.
    def test_health_and_reflection(self):
        health = health_pb2_grpc.HealthStub(self.channel)
        for service in ("", "kvledger.v1.Ledger"):
            reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            self.assertEqual(reply.status, health_pb2.HealthCheckResponse.SERVING)
        reflection = reflection_pb2_grpc.ServerReflectionStub(self.channel)
        replies = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                                  timeout=10)
        names = [s.name for reply in replies for s in reply.list_services_response.service]
        self.assertIn("kvledger.v1.Ledger", names)
        self.assertIn("grpc.health.v1.Health", names)

    # Proves: a real Prometheus scrapes the service, and the PromQL ratio of the exported counters
    # says a 50 % logical hit avoided ~25 % of the attention FLOPs, not 50 %.
    def test_real_prometheus_ratio(self):
        prometheus = harness.Prometheus("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: kvledger\n"
                                        f"    static_configs:\n      - targets: ['{self.server.metrics_address}']\n",
                                        self.tmp.name)
        try:
            query = ('sum(kvledger_attention_avoided_flops_total{model="llama-3.1-8b",boundary="logical"})'
                     ' / sum(kvledger_attention_baseline_flops_total{model="llama-3.1-8b"})')
            ratio = harness.poll("Prometheus to scrape kvledger", lambda: prometheus.value(query), deadline=60,
                                 interval=0.5)
            self.assertAlmostEqual(ratio, 2049 / 8194, places=12)  # A(2048)/A(4096), ~0.25006
        finally:
            prometheus.stop()


class ReplayProgressTest(unittest.TestCase):
    """Its own server: the replay below must not add to EndToEndTest's counted traffic."""

    # Proves: on a terminal, replay draws a progress bar.
    def test_replay_progress_bar_on_a_terminal(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        server = harness.Server(SERVER, log_dir=tmp.name)
        self.addCleanup(server.stop)
        trace = os.path.join(tmp.name, "small.jsonl")
        with open(trace, "w") as f:
            for _ in range(4):
                f.write(json.dumps({"model": "qwen3-32b", "prompt_tokens": 10, "logical_match_tokens": 0}) + "\n")
        command = f"{CLI} replay --target {server.grpc_address} --batch-size 2 {trace}"
        result = subprocess.run(["script", "-qec", command, "/dev/null"], capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertIn("[####################....................] 2/4 lines", result.stdout)
        self.assertIn("[########################################] 4/4 lines", result.stdout)


class SecurityTest(unittest.TestCase):
    # Proves: gRPC over TLS works with the CLI and Python (a plaintext client is refused), and
    # /metrics basic auth turns away a scrape without the right credentials.
    def test_tls_and_metrics_auth(self):
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60)
            password = os.path.join(tmp, "password")
            with open(password, "w") as f:
                f.write("s3cret\n")
            server = harness.Server(SERVER, f"--tls_cert_file={cert}", f"--tls_key_file={key}",
                                    "--metrics_auth_user=prom", f"--metrics_auth_password_file={password}",
                                    log_dir=tmp)
            try:
                sent = subprocess.run([CLI, "send", "--target", server.grpc_address, "--tls-ca-file", cert,
                                       "--model", "qwen3-32b", "--prompt-tokens", "100",
                                       "--logical-match-tokens", "64"], capture_output=True, text=True, timeout=60)
                self.assertEqual(sent.returncode, 0, sent.stderr)
                # Without --tls-ca-file the CLI says the port speaks TLS, not "is it running?".
                plain = subprocess.run([CLI, "send", "--target", server.grpc_address, "--model", "qwen3-32b",
                                        "--prompt-tokens", "100", "--logical-match-tokens", "64", "--timeout", "5"],
                                       capture_output=True, text=True, timeout=60)
                self.assertNotEqual(plain.returncode, 0)
                self.assertIn("it speaks TLS and this connection is plaintext (give --tls-ca-file", plain.stderr)
                with open(cert, "rb") as f:
                    credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
                with grpc.secure_channel(server.grpc_address, credentials) as channel:
                    ledger_pb2_grpc.LedgerStub(channel).Record(record(model="qwen3-32b"), timeout=10)
                with grpc.insecure_channel(server.grpc_address) as channel:
                    with self.assertRaises(grpc.RpcError) as caught:
                        ledger_pb2_grpc.LedgerStub(channel).Record(record(model="qwen3-32b"), timeout=5)
                    self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)

                url = f"http://{server.metrics_address}/metrics"
                with self.assertRaises(urllib.error.HTTPError) as denied:
                    urllib.request.urlopen(url, timeout=10)
                self.assertEqual(denied.exception.code, 401)
                auth = urllib.request.HTTPPasswordMgrWithDefaultRealm()
                auth.add_password(None, url, "prom", "s3cret")
                opener = urllib.request.build_opener(urllib.request.HTTPBasicAuthHandler(auth))
                text = opener.open(url, timeout=10).read().decode()
                samples = harness.parse_exposition(text)
                self.assertEqual(harness.sample(samples, "kvledger_requests_total", model="qwen3-32b", tier="device"), 2)
            finally:
                self.assertEqual(server.stop(), 0)


class EmptyPasswordTest(unittest.TestCase):
    # Proves: an empty /metrics password file is refused at start-up (an empty password would let
    # anyone scrape), with a message naming the flag.
    def test_empty_password_file_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            password = os.path.join(tmp, "password")
            with open(password, "w") as f:
                f.write("\nsecond line\n")
            result = subprocess.run([SERVER, "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                                     "--metrics_auth_user=prom", f"--metrics_auth_password_file={password}"],
                                    capture_output=True, text=True, timeout=60)
            self.assertEqual(result.returncode, 2)  # bad input: exit 2 (docs/operations.md)
            self.assertIn(f'--metrics_auth_password_file = "{password}": the first line is empty', result.stderr)


class BadTlsFilesTest(unittest.TestCase):
    # Proves: a wrong TLS file is named at start-up (not reported as "cannot listen"), and a key that
    # does not match its certificate is reported as such.
    def test_bad_certificate_and_key_are_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            def make(name):
                cert, key = os.path.join(tmp, f"{name}-cert.pem"), os.path.join(tmp, f"{name}-key.pem")
                subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                                "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", cert],
                               check=True, capture_output=True, timeout=60)
                return cert, key
            cert, key = make("a")
            _, other_key = make("b")

            def start(cert_file, key_file):
                return subprocess.run([SERVER, "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                                       f"--tls_cert_file={cert_file}", f"--tls_key_file={key_file}"],
                                      capture_output=True, text=True, timeout=60)
            swapped = start(key, cert)
            self.assertEqual(swapped.returncode, 2)  # bad input: exit 2 (docs/operations.md)
            self.assertIn(f'--tls_cert_file = "{key}": holds no PEM certificate (no "-----BEGIN CERTIFICATE-----" line)',
                          swapped.stderr)
            mismatched = start(cert, other_key)
            self.assertEqual(mismatched.returncode, 1)
            self.assertIn("cannot listen, or gRPC refused the TLS certificate and key", mismatched.stderr)
            self.assertIn("check that the key matches the certificate", mismatched.stderr)


class NoopServerTest(unittest.TestCase):
    # Proves: the benchmark baseline speaks the same API, answers OK and counts nothing.
    def test_noop_counts_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            server = harness.Server(NOOP_SERVER, log_dir=tmp)
            try:
                with grpc.insecure_channel(server.grpc_address) as channel:
                    stub = ledger_pb2_grpc.LedgerStub(channel)
                    stub.Record(record(n=10, match=20), timeout=10)  # invalid, still OK: not even validated
                    reply = stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=[record()] * 7), timeout=10)
                    self.assertEqual((reply.accepted, reply.rejected), (7, 0))
                samples = harness.parse_exposition(server.scrape())
                self.assertFalse([k for k in samples if k[0] == "kvledger_requests_total"])
            finally:
                self.assertEqual(server.stop(), 0)


class BenchTest(unittest.TestCase):
    # Proves: the load generator works in every mode, and every record it reports accepted is
    # counted exactly once by the server (no loss, no double counting under concurrent load), as
    # synthetic: in kvledger_synthetic_records_total, never in the ledger's families.
    def test_bench_modes_account_exactly(self):
        with tempfile.TemporaryDirectory() as tmp:
            server = harness.Server(SERVER, log_dir=tmp)
            try:
                accepted = 0
                for mode in ("unary", "batch", "stream"):
                    result = subprocess.run([CLI, "bench", "--target", server.grpc_address, "--mode", mode,
                                             "--connections", "2", "--batch-size", "50", "--duration", "0.5",
                                             "--json"], capture_output=True, text=True, timeout=60)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    report = json.loads(result.stdout)
                    self.assertEqual(set(report) >= {"records_per_second", "rpcs_per_second", "p50_ms", "p99_ms",
                                                     "p999_ms", "errors"}, True, report)
                    self.assertEqual(report["errors"], 0)
                    self.assertGreater(report["records"], 0)
                    accepted += report["records"]
                samples = harness.parse_exposition(server.scrape())
                self.assertEqual(sum(v for (name, _), v in samples.items() if name == "kvledger_requests_total"), 0)
                self.assertEqual(harness.sample(samples, "kvledger_synthetic_records_total", outcome="accepted"),
                                 accepted)
            finally:
                self.assertEqual(server.stop(), 0)


class ShutdownTest(unittest.TestCase):
    # Proves the SIGTERM sequence: health turns NOT_SERVING at once while calls are still served
    # (the drain period), a stream still open gets its summary (status OK and the counts), and
    # /metrics stays up afterwards so a scrape taken after SIGTERM sees every acknowledged record;
    # then the process exits 0.
    def test_sigterm_loses_nothing(self):
        import threading
        release = threading.Event()

        def batches():
            yield ledger_pb2.RecordBatchRequest(records=[record()] * 3)
            release.wait(60)

        with tempfile.TemporaryDirectory() as tmp:
            server = harness.Server(SERVER, "--shutdown_drain_seconds=5", "--shutdown_scrape_grace_seconds=5",
                                    log_dir=tmp)
            channel = grpc.insecure_channel(server.grpc_address)
            try:
                stub = ledger_pb2_grpc.LedgerStub(channel)
                for _ in range(5):
                    stub.Record(record(), timeout=10)
                stream = stub.StreamRecords.future(batches(), timeout=60)
                total = lambda: sum(v for (name, _), v in harness.parse_exposition(server.scrape()).items()  # noqa: E731
                                    if name == "kvledger_requests_total")
                harness.poll("the stream's batch to be counted", lambda: total() == 8)
                server.proc.terminate()
                health = health_pb2_grpc.HealthStub(channel)
                harness.poll("health NOT_SERVING", lambda: health.Check(health_pb2.HealthCheckRequest(), timeout=5).status
                             == health_pb2.HealthCheckResponse.NOT_SERVING, deadline=10, interval=0.05)
                stub.Record(record(), timeout=10)  # still served while draining
                summary = stream.result(timeout=30)
                self.assertEqual((summary.accepted, summary.rejected), (3, 0))
                self.assertEqual(total(), 9)  # a scrape after SIGTERM sees every acknowledged record
                self.assertEqual(server.proc.wait(timeout=30), 0)
                self.assertIn("stopped", server.read_log())
                # It said what it waits for, and how long at most.
                self.assertIn("SIGTERM: still serving for 5 s (--shutdown_drain_seconds)", server.read_log())
                self.assertIn("at most 5 s (--shutdown_scrape_grace_seconds)", server.read_log())
            finally:
                release.set()
                channel.close()
                server.stop()


class UnmeasuredSecondsTest(unittest.TestCase):
    # Proves: a record is estimated only from a compute-time model, never from itself: three records
    # cannot make a live model, so with the built-in profile none is compared; with a profile stating
    # 4e14 FLOP/s every record with a measured reload is, and the compared sums equal the hand-worked
    # figures (estimate 29687350820864 / 4e14 = 0.0742 s each; the unmeasured suffix is the profile's
    # 31886374076416 / 4e14 s).
    def test_only_compared_records_feed_the_comparison(self):
        with tempfile.TemporaryDirectory() as tmp:
            profiles = os.path.join(tmp, "profiles.txtpb")
            with open(profiles, "w") as f:
                f.write('profiles { name: "llama-3.1-8b" serving { prefill_flops_per_second: 4e14 } }\n')
            for args, compared in (([], 0), ([f"--profiles={profiles}"], 2)):
                server = harness.Server(SERVER, *args, log_dir=tmp)
                try:
                    self.check(server, compared)
                finally:
                    self.assertEqual(server.stop(), 0)

    def check(self, server, compared):
        base = [CLI, "send", "--target", server.grpc_address, "--model", "llama-3.1-8b", "--tier", "host",
                "--prompt-tokens", "4096", "--logical-match-tokens", "2048"]
        for extra in (["--reload-seconds", "0.01"], ["--suffix-prefill-seconds", "0.2"],
                      ["--reload-seconds", "0.5", "--suffix-prefill-seconds", "0.2", "--ttft-seconds", "0.8"]):
            result = subprocess.run(base + extra, capture_output=True, text=True, timeout=60)
            self.assertEqual(result.returncode, 0, result.stderr)
        samples = harness.parse_exposition(server.scrape())
        v = lambda name: harness.sample(samples, name, model="llama-3.1-8b", tier="host")  # noqa: E731
        self.assertEqual(v("kvledger_requests_total"), 3)
        self.assertEqual(v("kvledger_reload_compared_requests_total"), compared)
        if compared:
            self.assertEqual(v("kvledger_reload_slower_than_recompute_total"), 1)
            self.assertEqual(v("kvledger_estimated_recompute_seconds_total"), 2 * 0.074218377)
            self.assertEqual(v("kvledger_compared_reload_seconds_total"), 0.51)
            self.assertEqual(v("kvledger_compared_suffix_prefill_seconds_total"), 0.279715935)
            self.assertEqual(v("kvledger_compared_reused_bytes_total"), 2 * 2048 * 131072)
        else:
            self.assertEqual(v("kvledger_reload_slower_than_recompute_total"), 0)
            self.assertEqual(v("kvledger_estimated_recompute_seconds_total"), 0)
        self.assertEqual(v("kvledger_reload_seconds_count"), 2)
        self.assertEqual(v("kvledger_suffix_prefill_seconds_count"), 2)
        self.assertEqual(v("kvledger_ttft_seconds_count"), 1)


class DefaultTierTest(unittest.TestCase):
    # Proves: without --tier a hit is a device hit and a miss has no tier (once it counted as a device
    # miss and lowered the device hit ratio); the JSON API's explain takes the same default.
    def test_a_miss_has_no_tier_unless_given(self):
        with tempfile.TemporaryDirectory() as tmp:
            server = harness.Server(SERVER, log_dir=tmp)
            try:
                for match in ("0", "2048"):
                    sent = subprocess.run([CLI, "send", "--target", server.grpc_address, "--model", "llama-3.1-8b",
                                           "--prompt-tokens", "4096", "--logical-match-tokens", match],
                                          capture_output=True, text=True, timeout=60)
                    self.assertEqual(sent.returncode, 0, sent.stderr)
                samples = harness.parse_exposition(server.scrape())
                for tier, want in (("none", 1), ("device", 1)):
                    self.assertEqual(harness.sample(samples, "kvledger_requests_total", model="llama-3.1-8b", tier=tier),
                                     want)
                self.assertEqual(harness.sample(samples, "kvledger_prompt_tokens_total", model="llama-3.1-8b",
                                                tier="device"), 4096)
            finally:
                self.assertEqual(server.stop(), 0)


class ServerFlagsTest(unittest.TestCase):
    # Proves: --help lists the service's flags; a bad flag value exits 2 naming the flag.
    def test_help_and_bad_flags(self):
        for binary in (SERVER, NOOP_SERVER):
            result = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
            self.assertEqual(result.returncode, 0)
            self.assertIn("--grpc_address", result.stdout)
            self.assertIn("--unknown_model", result.stdout)
            self.assertIn("default: 127.0.0.1:50051", result.stdout)
            # The user sees flags, not the path of the source file that defined them.
            self.assertNotIn("Flags from", result.stdout + result.stderr)
            self.assertNotIn(".cc", result.stdout + result.stderr)
        result = subprocess.run([SERVER, "--unknown_model=maybe"], capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr.strip(), 'kvledger-server: --unknown_model = "maybe": must be reject or generic')
        result = subprocess.run([SERVER, "--grpc_address=localhost"], capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 2)
        self.assertIn('--grpc_address = "localhost": must be HOST:PORT', result.stderr)
        # A misspelled flag is a bad flag like any other (absl alone would exit 1).
        for args in (["--max_batch_record=5"], ["--nope"], ["--grpc_address=127.0.0.1:0", "-nope"]):
            result = subprocess.run([SERVER, *args], capture_output=True, text=True, timeout=60)
            self.assertEqual(result.returncode, 2, args)
            self.assertRegex(result.stderr.strip(), r"^kvledger-server: --\w+: no such flag \(see --help\)$")


class PortInUseTest(unittest.TestCase):
    # Proves: a gRPC port another process holds is named as such (exit 1), without gRPC's own dump.
    def test_port_in_use(self):
        with tempfile.TemporaryDirectory() as tmp:
            first = harness.Server(SERVER, log_dir=tmp)
            try:
                second = subprocess.run([SERVER, f"--grpc_address={first.grpc_address}", "--metrics_address=127.0.0.1:0"],
                                        capture_output=True, text=True, timeout=60)
                self.assertEqual(second.returncode, 1, second.stderr)
                self.assertIn(f'--grpc_address = "{first.grpc_address}": cannot listen (is the port in use?): '
                              "Address already in use", second.stderr)
                self.assertNotIn("chttp2", second.stderr)
            finally:
                self.assertEqual(first.stop(), 0)


class SeriesCountTest(unittest.TestCase):
    # Proves: what one (model, tier) costs Prometheus is what docs/operations.md states, step by step
    # as its records carry more fields.
    def test_series_per_cell(self):
        # A measured reload adds the 4 counters of sums behind its cell's live bandwidth; a measured
        # suffix prefill the 281 behind its model's compute-time model (labelled by model only). These
        # counts are the per-cell budget docs/operations.md states: a change that adds series fails here.
        steps = [
            ("llama-3.1-8b", "host", ["--logical-match-tokens", "2048", "--reload-seconds", "0.01",
                                      "--suffix-prefill-seconds", "0.2"], 126, 282),
            ("llama-3.1-8b", "host", ["--logical-match-tokens", "2048", "--reload-seconds", "0.01",
                                      "--suffix-prefill-seconds", "0.2", "--ttft-seconds", "0.5", "--queue-seconds",
                                      "0.1", "--output-tokens", "10", "--decode-seconds", "1"], 166, 282),
            ("llama-3.1-8b", "host", ["--logical-match-tokens", "2048", "--predicted-match-tokens", "2000"], 179, 282),
            ("qwen3-8b", "none", ["--logical-match-tokens", "0"], 80, 1),
            ("qwen3-8b", "none", ["--logical-match-tokens", "0", "--suffix-prefill-seconds", "0.3", "--ttft-seconds",
                                  "0.5", "--queue-seconds", "0.1", "--output-tokens", "10", "--decode-seconds", "1"],
             140, 282),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            server = harness.Server(SERVER, log_dir=tmp)
            try:
                for model, tier, flags, cell, per_model in steps:
                    sent = subprocess.run([CLI, "send", "--target", server.grpc_address, "--model", model, "--tier",
                                           tier, "--prompt-tokens", "4096", *flags],
                                          capture_output=True, text=True, timeout=60)
                    self.assertEqual(sent.returncode, 0, sent.stderr)
                    labels = [dict(l) for (_, l) in harness.parse_exposition(server.scrape())]
                    self.assertEqual(sum(1 for l in labels if l.get("model") == model and l.get("tier") == tier),
                                     cell, (model, tier, flags))
                    self.assertEqual(sum(1 for l in labels if l.get("model") == model and "tier" not in l),
                                     per_model, (model, flags))
            finally:
                self.assertEqual(server.stop(), 0)


def unread_families_allowed():
    """The names (and `prefix*` patterns) docs/operations.md lists as read by no panel, rule or alert."""
    import re
    with open(os.path.join(HERE, "..", "..", "docs", "operations.md")) as f:
        text = f.read()
    start = text.index("**Families no panel, rule or alert reads**")
    return re.findall(r"`((?:kvledger|grpc|process)_[a-z0-9_]*\*?)`", text[start:text.index("\n\n", start)])


def deploy_text():
    """Every dashboard, recording rule and alert the project ships."""
    import glob
    root = os.path.join(HERE, "..", "..", "deploy")
    paths = glob.glob(os.path.join(root, "grafana", "dashboards", "*.json")) + \
        glob.glob(os.path.join(root, "prometheus", "rules", "*.yml")) + \
        glob.glob(os.path.join(root, "prometheus", "alerts", "*.yml"))
    return "".join(open(p).read() for p in paths)


class FamilyBudgetTest(unittest.TestCase):
    # Proves: every family a busy server exports is read by a shipped panel, rule or alert, or is one
    # docs/operations.md lists with its reason; a new family needs one or the other.
    def test_every_family_is_read_or_listed(self):
        allowed = unread_families_allowed()
        self.assertIn("grpc_server_*", allowed)
        consumers = deploy_text()
        with tempfile.TemporaryDirectory() as tmp:
            server = harness.Server(SERVER, "--unknown_model=generic", log_dir=tmp)
            try:
                replayed = subprocess.run([CLI, "replay", os.path.join(HERE, "..", "..", "examples", "trace.jsonl"),
                                           "--target", server.grpc_address], capture_output=True, text=True,
                                          timeout=60)
                self.assertEqual(replayed.returncode, 0, replayed.stderr)
                families = sorted({line.split()[2] for line in server.scrape().splitlines()
                                   if line.startswith("# TYPE ")})
            finally:
                self.assertEqual(server.stop(), 0)
        self.assertGreater(len(families), 60)

        def listed(name):
            return any(name == a or (a.endswith("*") and name.startswith(a[:-1])) for a in allowed)

        unread = [f for f in families if f not in consumers and not listed(f)]
        self.assertEqual(unread, [], "read by no panel, rule or alert and not listed in docs/operations.md")


class ClientCountsTest(unittest.TestCase):
    # Proves: replay counts the rejections the server counted, not the ones it listed
    # (--max_listed_rejections 2 for 5 bad lines), and exits 2 for the bad input; `kvledger profiles
    # --target` lists the server's catalog, its --profiles override included, as offline does.
    def test_replay_counts_and_server_profiles(self):
        with tempfile.TemporaryDirectory() as tmp:
            profiles = os.path.join(tmp, "profiles.textproto")
            with open(profiles, "w") as f:
                f.write('profiles { name: "llama-3.1-8b" serving { kv_page_tokens: 32 } }\n')
            server = harness.Server(SERVER, "--max_listed_rejections=2", f"--profiles={profiles}", log_dir=tmp)
            try:
                trace = os.path.join(tmp, "trace.jsonl")
                with open(trace, "w") as f:
                    for i in range(7):
                        f.write(json.dumps({"model": "llama-3.1-8b", "tier": "TIER_DEVICE", "prompt_tokens": 100,
                                            "logical_match_tokens": 200 if i < 5 else 50}) + "\n")
                result = subprocess.run([CLI, "replay", "--target", server.grpc_address, trace],
                                        capture_output=True, text=True, timeout=60)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(f"replayed {trace}: 2 accepted, 5 rejected", result.stdout)
                self.assertIn("invalid_logical_match_tokens: 2", result.stdout)
                self.assertIn("(not listed by the server): 3", result.stdout)
                listed = subprocess.run([CLI, "profiles", "--target", server.grpc_address, "--json"],
                                        capture_output=True, text=True, timeout=60)
                offline = subprocess.run([CLI, "profiles", "--profiles", profiles, "--json"],
                                         capture_output=True, text=True, timeout=60)
                self.assertEqual(listed.returncode, 0, listed.stderr)
                self.assertEqual(json.loads(listed.stdout), json.loads(offline.stdout))
                served = {p["name"]: p for p in json.loads(listed.stdout)["profiles"]}
                self.assertEqual(served["llama-3.1-8b"]["definition"]["serving"]["kv_page_tokens"], 32)
                with urllib.request.urlopen(f"http://{server.metrics_address}/api/v1/profiles", timeout=10) as r:
                    self.assertEqual(json.loads(r.read()), json.loads(listed.stdout))
            finally:
                self.assertEqual(server.stop(), 0)


class DeployConfigTest(unittest.TestCase):
    # Proves: the Prometheus configuration shipped in deploy/ is valid.
    def test_promtool_check_config(self):
        config = os.path.join(HERE, "..", "..", "deploy", "prometheus", "prometheus.yml")
        result = subprocess.run(["promtool", "check", "config", config], capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)


class UnknownModelPolicyTest(unittest.TestCase):
    # Proves: --unknown_model=generic accepts an unknown model and a bad --profiles file stops
    # start-up with a message naming the file, the profile and the field.
    def test_generic_and_bad_profiles(self):
        with tempfile.TemporaryDirectory() as tmp:
            server = harness.Server(SERVER, "--unknown_model=generic", log_dir=tmp)
            try:
                with grpc.insecure_channel(server.grpc_address) as channel:
                    ledger_pb2_grpc.LedgerStub(channel).Record(record(model="acme-13b"), timeout=10)
                samples = harness.parse_exposition(server.scrape())
                self.assertEqual(harness.sample(samples, "kvledger_requests_total", model="acme-13b", tier="device"), 1)
            finally:
                self.assertEqual(server.stop(), 0)
            bad = os.path.join(tmp, "bad.textproto")
            with open(bad, "w") as f:
                f.write('profiles { name: "llama-3.1-8b" serving { kv_page_tokens: 0 } }\n')
            result = subprocess.run([SERVER, "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
                                     f"--profiles={bad}"], capture_output=True, text=True, timeout=60)
            self.assertEqual(result.returncode, 2)  # bad input: exit 2 (docs/operations.md)
            self.assertIn("profile 'llama-3.1-8b': serving.kv_page_tokens = 0", result.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
