"""Advise across replicas (--fleet_prometheus_url): three replicas fed uneven traffic and a fourth
that never saw the model, a real Prometheus scraping them with the shipped recording rules, and
every replica reading the fleet's rates back. Every replica must answer the same question alike, from
the fleet's evidence (basis fleet), equal to hand arithmetic over every record sent (Σ bytes /
Σ seconds, not a mean of the replicas' rates; the engine's own compute line); with Prometheus gone
each falls back to its own rates. The break-even gauge of each replica equals its Advise answer and
the CLI's break-even line, from the fleet's rates too. A replica restarted (its counters reset behind the same instance)
and one frozen past several scrapes move no replica's answer by 5 %: the fleet's sums are counters'
increase over a window, not gauges that vanish with their replica. Bad flags exit 2.

Usage: fleet_rates_test.py KVLEDGER_SERVER PYTHON_STUBS_DIR RULES_FILE KVLEDGER_CLI
"""
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

SERVER, RULES, CLI = sys.argv[1], sys.argv[3], sys.argv[4]
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
del sys.argv[1:5]

import grpc  # noqa: E402

import harness  # noqa: E402
from kvledger.v1 import advice_pb2, ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402

MODEL = "llama-3.1-8b"
FIXED, RATE = 0.012, 3e14  # the engines' truth: a prefill pass over F FLOPs takes FIXED + F / RATE
# Host reloads: replica A's 60 at 10 GB/s, replica B's 20 at 2 GB/s. The fleet moved 80 R bytes in
# 60 R / 10e9 + 20 R / 2e9 seconds: 5 GB/s. The mean of the two replicas' rates would be 6 GB/s.
FAST, SLOW, FLEET_BANDWIDTH = 10e9, 2e9, 5e9


def prometheus_config(sd_file):
    return ("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n  - {RULES}\n"
            "scrape_configs:\n  - job_name: kvledger\n    file_sd_configs:\n"
            f"      - files: ['{sd_file}']\n        refresh_interval: 1s\n")


def advise(server):
    with grpc.insecure_channel(server.grpc_address) as channel:
        return ledger_pb2_grpc.LedgerStub(channel).Advise(advice_pb2.AdviceRequest(
            model=MODEL, prompt_tokens=8192,
            candidates=[advice_pb2.AdviceCandidate(tier=record_pb2.TIER_HOST, logical_match_tokens=4096)]), timeout=10)


class FleetRatesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvledger-fleet-")
        sd_file = os.path.join(self.tmp, "targets.json")
        with open(sd_file, "w") as f:
            json.dump([{"targets": []}], f)
        self.prometheus = harness.Prometheus(prometheus_config(sd_file), self.tmp)
        self.addCleanup(self.prometheus.stop)
        self.replicas = [harness.Server(SERVER, f"--fleet_prometheus_url={self.prometheus.url}",
                                        "--fleet_refresh_seconds=1", log_dir=self.tmp) for _ in range(4)]
        for r in self.replicas:
            self.addCleanup(r.stop)
        with open(sd_file + ".tmp", "w") as f:
            json.dump([{"targets": [r.metrics_address for r in self.replicas]}], f)
        os.replace(sd_file + ".tmp", sd_file)

    def send(self, server, records):
        with grpc.insecure_channel(server.grpc_address) as channel:
            stub = ledger_pb2_grpc.LedgerStub(channel)
            reply = stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=records), timeout=30)
            self.assertEqual(reply.accepted, len(records), reply)

    def traffic(self, explain_on):
        """A: 60 host hits at FAST and misses of 1-4 k tokens; B: 20 host hits at SLOW and misses of
        8-16 k; C: misses only; D: nothing. Every suffix pass takes the engines' true time."""
        with grpc.insecure_channel(explain_on.grpc_address) as channel:
            stub = ledger_pb2_grpc.LedgerStub(channel)
            hit = record_pb2.Record(model=MODEL, tier=record_pb2.TIER_HOST, prompt_tokens=8192, logical_match_tokens=4096)
            figures = stub.Explain(hit, timeout=10)
            reused = figures.reused_bytes
            remaining = figures.prefill_baseline_flops - figures.prefill_avoided_reused_flops
            miss_flops = {n: stub.Explain(record_pb2.Record(model=MODEL, prompt_tokens=n), timeout=10).prefill_baseline_flops
                          for n in (1024, 2048, 4096, 8192, 16384)}

        def hits(n, bandwidth):
            return [record_pb2.Record(model=MODEL, tier=record_pb2.TIER_HOST, prompt_tokens=8192, logical_match_tokens=4096,
                                      reload_seconds=reused / bandwidth, suffix_prefill_seconds=FIXED + remaining / RATE)
                    for _ in range(n)]

        def misses(sizes, each):
            return [record_pb2.Record(model=MODEL, prompt_tokens=n, suffix_prefill_seconds=FIXED + miss_flops[n] / RATE)
                    for n in sizes for _ in range(each)]

        a, b, c, _ = self.replicas
        self.send(a, hits(60, FAST) + misses((1024, 2048, 4096), 4))
        self.send(b, hits(20, SLOW) + misses((8192, 16384), 5))
        self.send(c, misses((1024, 16384), 6))

    def test_every_replica_answers_from_the_fleet(self):
        self.traffic(explain_on=self.replicas[3])
        a, b, _, d = self.replicas
        # Before any fleet table counts, each replica's own rates differ by 5x.
        local = [harness.sample(harness.parse_exposition(r.scrape()), "kvledger_reload_bandwidth_bytes_per_second",
                                model=MODEL, tier="host") for r in (a, b)]
        self.assertAlmostEqual(local[0] / FAST, 1, places=6)
        self.assertAlmostEqual(local[1] / SLOW, 1, places=6)

        answers = harness.poll("every replica to answer from the fleet's rates", self.fleet_answers)
        for x in answers:
            self.assertEqual(x.candidates[0].basis, record_pb2.BASIS_FLEET)
            self.assertTrue(math.isclose(x.compute.value, RATE, rel_tol=1e-3), x.compute)
            self.assertTrue(math.isclose(x.compute.fixed_seconds, FIXED, rel_tol=1e-3), x.compute)
            self.assertEqual(x.compute.samples, 60 + 12 + 20 + 10 + 12)
        for field in ("reload_seconds", "prefill_seconds"):
            values = [getattr(x.candidates[0], field) for x in answers]
            self.assertLessEqual(max(values) / min(values), 1.1, (field, values))
        self.assertEqual(len({x.recommendation for x in answers}), 1)
        # One rate per question: each replica's break-even gauge comes from the fleet's rates, as Advise's
        # break_even_tokens does. From B's own 2 GB/s alone it would be ~21,760 tokens; at the fleet's
        # 5 GB/s reloading pays from the first page, on every replica alike.
        gauges = [harness.poll("the break-even gauge to equal Advise's on the replica",
                               lambda r=r: self.break_even_agreed(r)) for r in (a, b)]
        self.assertEqual(gauges[0], gauges[1])
        self.assertLess(gauges[1], 1000)
        text = subprocess.run([CLI, "advise", "--target", b.grpc_address, "--model", MODEL, "--prompt-tokens", "8192",
                               "--candidate", "host:4096"], capture_output=True, text=True, timeout=60)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertRegex(text.stdout, rf"break-even\s+reloading pays from {int(gauges[1])} reusable tokens on\n")
        samples = harness.parse_exposition(d.scrape())
        self.assertGreater(harness.sample(samples, "kvledger_fleet_rates_fetches_total", result="ok"), 0)
        self.assertGreater(harness.sample(samples, "kvledger_fleet_rates_last_success_timestamp_seconds"), 1.7e9)

        # Prometheus gone: after 4 refresh periods each replica answers from its own rates again.
        self.prometheus.stop()
        fallback = harness.poll(
            "A and D to fall back to their own rates",
            lambda: (lambda x, y: (x, y) if x.candidates[0].bandwidth.basis == record_pb2.BASIS_LIVE
                     and y.candidates[0].bandwidth.basis != record_pb2.BASIS_FLEET else None)(advise(a), advise(d)))
        self.assertAlmostEqual(fallback[0].candidates[0].bandwidth.value / FAST, 1, places=3)
        self.assertNotEqual(fallback[1].compute.basis, record_pb2.BASIS_FLEET)
        errors = harness.sample(harness.parse_exposition(a.scrape()), "kvledger_fleet_rates_fetches_total", result="error")
        self.assertGreater(errors, 0)
        self.assertIn("--fleet_prometheus_url", a.read_log())

    def break_even_agreed(self, replica):
        """The replica's kvledger_reload_break_even_tokens for host, once it equals its Advise answer's."""
        want = advise(replica).candidates[0].break_even_tokens
        got = harness.parse_exposition(replica.scrape()).get(
            ("kvledger_reload_break_even_tokens", frozenset({("model", MODEL), ("tier", "host")})))
        return got if got is not None and got == want else None

    def fleet_answers(self):
        """Every replica's answer, once all answer from the fleet with every replica's samples in."""
        answers = [advise(r) for r in self.replicas]
        # Every replica's sums are in (C's misses too, whose scrape may come after A's and B's).
        if all(x.candidates[0].bandwidth.basis == record_pb2.BASIS_FLEET and x.compute.basis == record_pb2.BASIS_FLEET
               and math.isclose(x.candidates[0].bandwidth.value, FLEET_BANDWIDTH, rel_tol=0.02)
               and x.compute.samples == 60 + 12 + 20 + 10 + 12 for x in answers):
            return answers
        return None

    def test_a_restart_and_a_freeze_move_no_answer(self):
        self.traffic(explain_on=self.replicas[3])
        harness.poll("every replica to answer from the fleet's rates", self.fleet_answers)
        a, b, c, d = self.replicas

        def assert_steady(during, seconds):
            """Observes every replica's answer for `seconds` (each refresh is 1 s): never 5 % off."""
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                for r in (a, d):
                    x = advise(r)
                    for what, value, want in (("bandwidth", x.candidates[0].bandwidth.value, FLEET_BANDWIDTH),
                                              ("compute", x.compute.value, RATE)):
                        self.assertLess(abs(value / want - 1), 0.05, (during, what, value, x))
                time.sleep(0.2)

        # B restarts behind the same addresses: its counters start again from 0 under the same instance.
        metrics_port = b.metrics_address.rsplit(":", 1)[1]
        self.assertEqual(b.stop(), 0)
        restarted = harness.Server(SERVER, f"--fleet_prometheus_url={self.prometheus.url}", "--fleet_refresh_seconds=1",
                                   f"--metrics_address=127.0.0.1:{metrics_port}", grpc_address=b.grpc_address,
                                   log_dir=self.tmp)
        self.addCleanup(restarted.stop)
        assert_steady("after B's restart", 6)
        # C freezes past several scrapes (Prometheus marks it down and its series stale), then thaws.
        os.kill(c.proc.pid, signal.SIGSTOP)
        try:
            assert_steady("while C is frozen", 6)
        finally:
            os.kill(c.proc.pid, signal.SIGCONT)
        assert_steady("after C thawed", 3)

    def test_bad_flags(self):
        for flag, message in (("--fleet_prometheus_url=https://prometheus:9090", "https is not supported"),
                              ("--fleet_prometheus_url=http://:9090", "needs a host"),
                              ("--fleet_prometheus_url=http://p:99999", "the port must be a number"),
                              ('--fleet_job=a"b', "must be a job label"),
                              ("--fleet_refresh_seconds=0", "--fleet_refresh_seconds = 0: must be in [1, 3600]")):
            result = subprocess.run([SERVER, flag, "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0"],
                                    capture_output=True, text=True, timeout=30)
            self.assertEqual(result.returncode, 2, (flag, result.stderr))
            self.assertIn(message, result.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
