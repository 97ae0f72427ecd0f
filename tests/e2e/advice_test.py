"""Reload or recompute, end to end: records with known bytes, seconds and FLOPs go in over gRPC; the
Advise RPC, `kvledger advise --json` and GET /api/v1/advise must agree with each other and with a
hand calculation from the server's own exported totals. The JSON API answers like the CLI, with
the same errors, behind the same auth as /metrics.

Usage: advice_test.py KVLEDGER_SERVER KVLEDGER_CLI PYTHON_STUBS_DIR
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

SERVER, CLI = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python"))
del sys.argv[1:4]

import grpc  # noqa: E402

from harness import Server, assert_json_close, parse_exposition, poll, sample  # noqa: E402
from kvledger.v1 import advice_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402

BYTES_PER_TOKEN = 131072  # llama-3.1-8b: 2 x 32 layers x 8 KV heads x 128 x 2 bytes
# The engine of these tests: a prefill pass over F FLOPs takes FIXED + F / COMPUTE seconds.
COMPUTE, FIXED = 70369817919488 / 0.4, 0.005


def llama_prefill(tokens):
    """Prefill FLOPs of llama-3.1-8b's first `tokens` tokens (docs/cost-model.md §5): 32 layers x 16384
    FLOPs per attention pair, 13,958,643,712 token-wise FLOPs per token."""
    return 524288 * tokens * (tokens + 1) // 2 + 13958643712 * tokens


def get(server, path, auth=None):
    request = urllib.request.Request(f"http://{server.metrics_address}{path}")
    if auth:
        import base64
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def cli(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60)


def without(d, key):
    """The JSON with every `key` removed at any depth (decayed weights change with the clock)."""
    if isinstance(d, dict):
        return {k: without(v, key) for k, v in d.items() if k != key}
    if isinstance(d, list):
        return [without(v, key) for v in d]
    return d


class AdviceTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvledger-advice-")
        self.server = Server(SERVER, "--advice_half_life_seconds=86400", log_dir=self.tmp)
        self.addCleanup(self.server.stop)
        self.channel = grpc.insecure_channel(self.server.grpc_address)
        self.addCleanup(self.channel.close)
        self.stub = ledger_pb2_grpc.LedgerStub(self.channel)

    def record(self, tier, match, reload, suffix=None):
        """A page-aligned hit on 8192 tokens; its suffix pass takes the engine's time unless given."""
        if suffix is None:
            suffix = FIXED + (llama_prefill(8192) - llama_prefill(match)) / COMPUTE
        self.stub.Record(record_pb2.Record(model="llama-3.1-8b", tier=tier, prompt_tokens=8192,
                                           logical_match_tokens=match, reload_seconds=reload,
                                           suffix_prefill_seconds=suffix), timeout=10)

    def teach(self):
        """Ten misses of several sizes from the engine: the live compute-time model becomes ready
        (docs/cost-model.md §8) with FIXED and COMPUTE."""
        for n in (512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 512):
            self.stub.Record(record_pb2.Record(model="llama-3.1-8b", prompt_tokens=n, logical_match_tokens=0,
                                               suffix_prefill_seconds=FIXED + llama_prefill(n) / COMPUTE), timeout=10)
        gauge = ("kvledger_prefill_flops_per_second", frozenset({("model", "llama-3.1-8b")}))
        poll("the compute model to be ready", lambda: gauge in parse_exposition(self.server.scrape()))

    def advise(self, *candidates):
        request = advice_pb2.AdviceRequest(model="llama-3.1-8b", prompt_tokens=8192)
        for tier, match in candidates:
            request.candidates.add(tier=tier, logical_match_tokens=match)
        return self.stub.Advise(request, timeout=10)

    # The README's block as written: `replay` of the example trace and, at once, `advise`: the answer
    # reflects every record acknowledged before it (once "recommendation unknown" for up to a second,
    # the fit refreshed at most once a second).
    def test_advise_right_after_replay(self):
        trace = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "trace.jsonl")
        replayed = cli("replay", trace, "--target", self.server.grpc_address)
        self.assertEqual(replayed.returncode, 0, replayed.stderr)
        advised = cli("advise", "--target", self.server.grpc_address, "--model", "llama-3.1-8b",
                      "--prompt-tokens", "8192", "--candidate", "device:3000", "--candidate", "host:6000")
        self.assertEqual(advised.returncode, 0, advised.stderr)
        self.assertRegex(advised.stdout, r"recommendation\s+host\n")
        self.assertIn("(live: 50 records", advised.stdout)

    # The break-even a reload knob wants (docs/cost-model.md §13), by hand from the live rates: with
    # B = 4096 x 131072 bytes / 0.5 s and the engine's C, reloading p tokens pays (no wait) from the
    # first 16-token boundary above 2 (131072 C / B - 13958643712) / 524288 - 1. The gauge, the CLI
    # and its JSON say the same; a router's wait moves it up.
    def test_break_even_by_hand(self):
        self.teach()
        self.record(record_pb2.TIER_HOST, 4096, 0.5)
        bandwidth = 4096 * BYTES_PER_TOKEN / 0.5
        want = (int(2 * (BYTES_PER_TOKEN * COMPUTE / bandwidth - 13958643712) / 524288 - 1) // 16 + 1) * 16
        self.assertGreater(want, 16)
        s = parse_exposition(self.server.scrape())
        self.assertEqual(sample(s, "kvledger_reload_break_even_tokens", model="llama-3.1-8b", tier="host"), want)
        args = ("advise", "--target", self.server.grpc_address, "--model", "llama-3.1-8b", "--prompt-tokens", "8192",
                "--candidate", "host:6000")
        text = cli(*args)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertRegex(text.stdout, rf"break-even\s+reloading pays from {want} reusable tokens on\n")
        as_json = json.loads(cli(*args, "--json").stdout)
        self.assertEqual(as_json["candidates"][0]["break_even_tokens"], want)
        waited = json.loads(cli("advise", "--target", self.server.grpc_address, "--model", "llama-3.1-8b",
                                "--prompt-tokens", "8192", "--candidate", "replica=a,tier=host,tokens=6000,wait=0.05",
                                "--json").stdout)
        self.assertGreater(waited["candidates"][0]["break_even_tokens"], want)

    # Ties (docs/cost-model.md §10): a host reload 5 % faster than recomputing its 4,096 tokens is
    # inside the estimate's 10 % stated error, so the answer is a tie and recomputing (it moves no
    # bytes) stands, with the gain said; 20 % faster is a plain "host". The RPC, the CLI's text and
    # JSON say the same.
    def test_a_tie_is_called_a_tie(self):
        recompute = llama_prefill(4096) / COMPUTE
        for share, tie in ((0.95, True), (0.8, False)):
            with self.subTest(share=share):
                server = Server(SERVER, "--advice_half_life_seconds=86400", log_dir=self.tmp)
                self.addCleanup(server.stop)
                channel = grpc.insecure_channel(server.grpc_address)
                self.addCleanup(channel.close)
                self.server, self.stub = server, ledger_pb2_grpc.LedgerStub(channel)
                self.teach()
                self.record(record_pb2.TIER_HOST, 4096, share * recompute)
                answer = self.advise((record_pb2.TIER_HOST, 4096))
                self.assertEqual(answer.tie, tie)
                self.assertEqual(answer.recommendation, "recompute" if tie else "host")
                self.assertAlmostEqual(answer.gain_seconds / ((1 - share) * recompute), 1, delta=1e-3)
                args = ("advise", "--target", server.grpc_address, "--model", "llama-3.1-8b", "--prompt-tokens",
                        "8192", "--candidate", "host:4096")
                text = cli(*args).stdout
                self.assertIn("a tie (within the estimate's 10 % error; the simpler choice stands)" if tie
                              else "over the next choice\n", text)
                as_json = json.loads(cli(*args, "--json").stdout)
                self.assertEqual((as_json["tie"], as_json["recommendation"]), (tie, answer.recommendation))
                self.assertAlmostEqual(as_json["gain_seconds"], answer.gain_seconds, delta=1e-9)

    # Two host records with different bandwidths, after the engine's misses: with a one-day half-life
    # the decay over the test's seconds is below 1e-4, so the live bandwidth is the ratio of the
    # exported totals (compared reused bytes / compared reload seconds), and the compute model is the
    # engine's (FIXED s per pass + F / COMPUTE), which the gauges export.
    def test_advice_matches_a_hand_calculation_from_the_totals(self):
        self.teach()
        self.record(record_pb2.TIER_HOST, 4096, 0.05)
        self.record(record_pb2.TIER_HOST, 2048, 0.04)
        s = parse_exposition(self.server.scrape())
        host = dict(model="llama-3.1-8b", tier="host")
        self.assertEqual(sample(s, "kvledger_compared_reused_bytes_total", **host), (4096 + 2048) * BYTES_PER_TOKEN)
        bandwidth = (sample(s, "kvledger_compared_reused_bytes_total", **host)
                     / sample(s, "kvledger_compared_reload_seconds_total", **host))
        compute, fixed = COMPUTE, FIXED
        self.assertAlmostEqual(bandwidth, 6144 * BYTES_PER_TOKEN / 0.09, delta=1)
        # The exported gauges are the same rates.
        self.assertAlmostEqual(sample(s, "kvledger_reload_bandwidth_bytes_per_second", **host) / bandwidth, 1,
                               delta=1e-4)
        self.assertAlmostEqual(sample(s, "kvledger_prefill_flops_per_second", model="llama-3.1-8b") / compute, 1,
                               delta=1e-9)
        self.assertAlmostEqual(sample(s, "kvledger_prefill_fixed_seconds", model="llama-3.1-8b") / fixed, 1,
                               delta=1e-9)
        advice = self.advise((record_pb2.TIER_HOST, 6000), (record_pb2.TIER_DISK, 6000))
        prefill_flops = int(advice.prefill_flops)
        self.assertEqual(prefill_flops, sample(s, "kvledger_prefill_baseline_flops_total", **host) / 2)
        self.assertEqual(advice.compute.basis, record_pb2.BASIS_LIVE)
        self.assertIn(advice.compute.samples, (10, 12))  # the fit of at most a second ago: with the hits or not
        self.assertAlmostEqual(advice.compute.fixed_seconds / fixed, 1, delta=1e-9)
        self.assertAlmostEqual(advice.recompute_all_seconds / (fixed + prefill_flops / compute), 1, delta=1e-4)
        host_advice, disk_advice = advice.candidates
        # 6000 tokens end on a 16-token page: all of them are reusable.
        self.assertEqual(host_advice.reused_tokens, 6000)
        self.assertEqual(int(host_advice.reused_bytes), 6000 * BYTES_PER_TOKEN)
        self.assertEqual(host_advice.basis, record_pb2.BASIS_LIVE)
        self.assertAlmostEqual(host_advice.reload_seconds / (6000 * BYTES_PER_TOKEN / bandwidth), 1, delta=1e-4)
        self.assertAlmostEqual(host_advice.recompute_seconds / (int(host_advice.reused_flops) / compute), 1,
                               delta=1e-4)
        self.assertAlmostEqual(
            host_advice.prefill_seconds / (host_advice.reload_seconds + fixed
                                           + (prefill_flops - int(host_advice.reused_flops)) / compute), 1,
            delta=1e-4)  # one pass over the rest: its fixed cost and its FLOPs
        # Nothing was ever reloaded from disk, and the profile states no disk bandwidth.
        self.assertEqual(disk_advice.basis, record_pb2.BASIS_NONE)
        self.assertFalse(disk_advice.HasField("reload_seconds"))
        self.assertEqual(advice.recommendation, "host")
        self.assertAlmostEqual(advice.saving_seconds, advice.recompute_all_seconds - host_advice.prefill_seconds,
                               delta=1e-12)

    # The RPC (through the CLI) and the HTTP API give the same JSON; errors name the same field.
    def test_cli_and_http_agree(self):
        self.teach()
        self.record(record_pb2.TIER_HOST, 4096, 0.05)
        self.record(record_pb2.TIER_HOST, 4096, 0.05)  # one ratio: the rate does not move with time
        result = cli("advise", "--target", self.server.grpc_address, "--model", "llama-3.1-8b",
                     "--prompt-tokens", "8192", "--candidate", "host:3000", "--candidate", "disk:6000", "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        from_cli = json.loads(result.stdout)
        status, body = get(self.server, "/api/v1/advise?" + urllib.parse.urlencode(
            [("model", "llama-3.1-8b"), ("prompt_tokens", "8192"), ("candidate", "host:3000"),
             ("candidate", "disk:6000")]))
        self.assertEqual(status, 200, body)
        from_http = json.loads(body)
        assert_json_close(self, without(from_cli, "weight"), without(from_http, "weight"), 1e-12)
        self.assertEqual(from_cli["recommendation"], "host")
        self.assertEqual([c["tier"] for c in from_cli["candidates"]], ["host", "disk"])
        self.assertEqual(from_cli["candidates"][0]["match_tokens"], 3000)
        self.assertEqual(from_cli["candidates"][0]["reused_tokens"], 2992)  # the last 16-token page
        self.assertEqual(from_cli["candidates"][0]["basis"], "live")
        self.assertEqual(from_cli["candidates"][0]["samples"], 2)
        self.assertIsNone(from_cli["candidates"][1]["reload_seconds"])
        self.assertEqual(from_cli["candidates"][1]["basis"], "none")

        bad = cli("advise", "--target", self.server.grpc_address, "--model", "llama-3.1-8b",
                  "--prompt-tokens", "8192", "--candidate", "host:9000")
        self.assertEqual(bad.returncode, 2)
        rule = "candidates[0].logical_match_tokens = 9000: must be in [0, prompt_tokens = 8192]"
        self.assertEqual(bad.stderr.strip(), "kvledger advise: " + rule)
        status, body = get(self.server, "/api/v1/advise?model=llama-3.1-8b&prompt_tokens=8192&candidate=host:9000")
        # The reason a record would get survives Advise: in the JSON and in the RPC's trailing metadata.
        self.assertEqual((status, json.loads(body)), (400, {"error": rule, "reason": "invalid_logical_match_tokens"}))
        with self.assertRaises(grpc.RpcError) as rpc:
            self.advise((record_pb2.TIER_HOST, 9000))
        self.assertEqual(rpc.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(rpc.exception.details(), rule)
        self.assertIn(("kvledger-reject-reason", "invalid_logical_match_tokens"), rpc.exception.trailing_metadata())
        status, body = get(self.server, "/api/v1/advise?model=llama-3.1-8b&prompt_tokens=8192&candidate=ssd:10")
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(body)["error"],
                         'candidate[0] = "ssd:10": the tier must be device, host, disk or remote')

    # Replicas ranked in seconds (docs/cost-model.md §11's example, with the rates of one host record):
    # the CLI's replica= form, the HTTP API and the Python Advisor give the same ranking, equal to
    # the hand calculation: the shorter prefix on the idle replica wins.
    def test_replicas_ranked_in_seconds(self):
        self.teach()
        self.record(record_pb2.TIER_HOST, 4096, 0.05)
        bandwidth, compute = 4096 * BYTES_PER_TOKEN / 0.05, COMPUTE
        whole = 131943542816768
        expected = {"a": 0.5 + 6000 * BYTES_PER_TOKEN / bandwidth + FIXED + (whole - 93190619136000) / compute,
                    "b": 0.02 + 2048 * BYTES_PER_TOKEN / bandwidth + FIXED + (whole - 29687350820864) / compute}
        candidates = ["replica=a,tier=host,tokens=6000,wait=0.5", "replica=b,tier=host,tokens=2048,wait=0.02"]
        result = cli("advise", "--target", self.server.grpc_address, "--model", "llama-3.1-8b", "--prompt-tokens",
                     "8192", *[f"--candidate={c}" for c in candidates], "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        from_cli = json.loads(result.stdout)
        status, body = get(self.server, "/api/v1/advise?" + urllib.parse.urlencode(
            [("model", "llama-3.1-8b"), ("prompt_tokens", "8192")] + [("candidate", c) for c in candidates]))
        self.assertEqual(status, 200, body)
        assert_json_close(self, without(from_cli, "weight"), without(json.loads(body), "weight"), 1e-12)
        for c in from_cli["candidates"]:
            self.assertAlmostEqual(c["expected_seconds"] / expected[c["replica"]], 1, delta=1e-9)
        self.assertEqual([(c["replica"], c["rank"], c["choice"]) for c in from_cli["candidates"]],
                         [("a", 2, "host"), ("b", 1, "host")])
        self.assertEqual((from_cli["recommended_replica"], from_cli["recommendation"]), ("b", "host"))
        import kvledger
        with kvledger.Advisor(self.server.grpc_address, timeout_seconds=10) as advisor:
            advice = advisor.advise("llama-3.1-8b", 8192, [
                {"replica": "a", "tier": "host", "logical_match_tokens": 6000, "wait_seconds": 0.5},
                {"replica": "b", "tier": "host", "logical_match_tokens": 2048, "wait_seconds": 0.02}])
        self.assertEqual((advice.recommended_replica, advice.recommended_candidate), ("b", 1))
        bad = cli("advise", "--target", self.server.grpc_address, "--model", "llama-3.1-8b", "--prompt-tokens", "8192",
                  "--candidate=replica=a,tier=host,tokens=6000,wait=-1")
        self.assertEqual(bad.returncode, 2)
        self.assertEqual(bad.stderr.strip(), "kvledger advise: candidates[0].wait_seconds = -1: must be finite, >= 0 "
                                             "and <= 86400 seconds")

    # A duration too small to be a measurement (5e-324 s) gives no rate, never an infinite one: /metrics
    # has no inf, and gRPC and HTTP answer alike (no live rate, so no estimate and no recommendation).
    def test_tiny_durations_give_no_infinite_rate(self):
        self.record(record_pb2.TIER_HOST, 4096, 5e-324, 5e-324)
        text = self.server.scrape()
        values = [line.rsplit(" ", 1)[1].lower() for line in text.splitlines() if line and not line.startswith("#")]
        self.assertFalse([v for v in values if v in ("inf", "+inf", "-inf", "nan")])
        self.assertNotIn("kvledger_reload_bandwidth_bytes_per_second{", text)
        rpc = self.advise((record_pb2.TIER_HOST, 4096))
        self.assertEqual(rpc.candidates[0].bandwidth.basis, record_pb2.BASIS_NONE)
        self.assertFalse(rpc.candidates[0].HasField("reload_seconds"))
        self.assertEqual(rpc.recommendation, "")
        status, body = get(self.server, "/api/v1/advise?model=llama-3.1-8b&prompt_tokens=8192&candidate=host:4096")
        self.assertEqual(status, 200)
        http = json.loads(body)
        self.assertEqual(http["candidates"][0]["bandwidth"]["basis"], "none")
        self.assertIsNone(http["candidates"][0]["reload_seconds"])
        self.assertIsNone(http["recommendation"])

    # A misspelled or unknown parameter is refused, naming it and the route's parameters, never read as
    # absent (logical_match_token would have made a hit a miss); explain's tier defaults to device, as
    # the CLI's does, so both answer alike for the same inputs.
    def test_unknown_parameters_and_defaults(self):
        status, body = get(self.server, "/api/v1/explain?model=llama-3.1-8b&prompt_tokens=4096"
                                        "&logical_match_token=2048")
        self.assertEqual(status, 400)
        error = json.loads(body)["error"]
        self.assertTrue(error.startswith('"logical_match_token": not a parameter of /api/v1/explain; it takes '), error)
        self.assertIn("logical_match_tokens", error)
        for path in ("/api/v1/calc?alpha=0.5&beta=0.3&Beta=1", "/api/v1/kv-bytes?tokens=1&modle=x",
                     "/api/v1/advise?model=x&prompt_tokens=1&candidates=host:1", "/api/v1/totals?model=x",
                     "/api/v1/profiles?verbose=1"):
            status, body = get(self.server, path)
            self.assertEqual(status, 400, path)
            self.assertIn("not a parameter of", json.loads(body)["error"], path)
        status, body = get(self.server, "/api/v1/explain?model=llama-3.1-8b&prompt_tokens=4096"
                                        "&logical_match_tokens=2048")
        self.assertEqual(status, 200, body)
        cli = subprocess.run([CLI, "explain", "--model", "llama-3.1-8b", "--prompt-tokens", "4096",
                              "--logical-match-tokens", "2048", "--json"], capture_output=True, text=True, timeout=60)
        self.assertEqual(json.loads(body), json.loads(cli.stdout))

    # Smaller mismatches: HEAD, OPTIONS, TRACE and any other method get 405 (with Allow: GET); a page size past 32 bits
    # is refused as given, not wrapped; 100 advice candidates are counted as 100.
    def test_methods_wraps_and_counts(self):
        for method in ("OPTIONS", "TRACE", "POST", "PATCH", "CONNECT", "BREW"):
            request = urllib.request.Request(f"http://{self.server.metrics_address}/metrics", method=method)
            with self.assertRaises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            self.assertEqual(refused.exception.code, 405, method)
            self.assertEqual(refused.exception.headers["Allow"], "GET, HEAD", method)
        # HEAD (RFC 9110: GET and HEAD are the methods every server supports): GET's head, no body.
        request = urllib.request.Request(f"http://{self.server.metrics_address}/api/v1/profiles", method="HEAD")
        with urllib.request.urlopen(request, timeout=10) as r:
            self.assertEqual((r.status, r.read()), (200, b""))
            self.assertGreater(int(r.headers["Content-Length"]), 1000)
        status, body = get(self.server, "/api/v1/explain?model=llama-3.1-8b&tier=host&prompt_tokens=100"
                                        "&logical_match_tokens=50&kv_page_tokens=18446744073709551615")
        self.assertEqual((status, json.loads(body)["error"]),
                         (400, "kv_page_tokens = 18446744073709551615: must be in [1, 1048576]"))
        status, body = get(self.server, "/api/v1/advise?model=llama-3.1-8b&prompt_tokens=8192&"
                                        + "&".join(["candidate=host:16"] * 100))
        self.assertEqual((status, json.loads(body)["error"]), (400, "candidates (100 of them): at most 16"))

    # The Python package's Advisor asks the same RPC.
    def test_python_advisor(self):
        import kvledger
        self.teach()
        self.record(record_pb2.TIER_HOST, 4096, 0.05)
        with kvledger.Advisor(self.server.grpc_address, timeout_seconds=10) as advisor:
            advice = advisor.advise("llama-3.1-8b", 8192, [("host", 3000), ("disk", 6000, 5000)])
            self.assertEqual(advice.recommendation, "host")
            self.assertEqual(advice.candidates[1].reused_tokens, 5000)  # the engine's boundary, page-aligned
            with self.assertRaises(grpc.RpcError) as bad:
                advisor.advise("llama-3.1-8b", 8192, [("host", 0)])
            self.assertEqual(bad.exception.details(),
                             "candidates[0].logical_match_tokens = 0: must be >= 1 (a cached prefix)")

    # Before any traffic, and without rates in the profile: every estimate is null, no recommendation.
    def test_unknown_rates_give_null(self):
        status, body = get(self.server, "/api/v1/advise?model=llama-3.1-8b&prompt_tokens=8192&candidate=host:4096")
        self.assertEqual(status, 200)
        advice = json.loads(body)
        self.assertIsNone(advice["recommendation"])
        self.assertIsNone(advice["saving_seconds"])
        self.assertIsNone(advice["recompute_all_seconds"])
        self.assertEqual(advice["compute"]["basis"], "none")
        candidate = advice["candidates"][0]
        self.assertEqual((candidate["reload_seconds"], candidate["recompute_seconds"], candidate["basis"]),
                         (None, None, "none"))
        self.assertEqual(candidate["reused_bytes"], 4096 * BYTES_PER_TOKEN)
        self.assertNotIn("kvledger_reload_bandwidth_bytes_per_second{", self.server.scrape())

    # The calculators answer over HTTP exactly as the CLI prints them, errors named by field.
    def test_calculators_match_the_cli(self):
        for path, args in [
            ("/api/v1/calc?alpha=0.5&prompt_tokens=8192", ["calc", "--alpha", "0.5", "--prompt-tokens", "8192"]),
            ("/api/v1/calc?alpha=0.3&attention=swa&window=1024&prompt_tokens=8192&beta=0.3&overhead=0.05",
             ["calc", "--alpha", "0.3", "--attention", "swa", "--window", "1024", "--prompt-tokens", "8192",
              "--beta", "0.3", "--overhead", "0.05"]),
            ("/api/v1/calc?alpha=0.5&attention=recurrent&checkpoint=256&prompt_tokens=1000",
             ["calc", "--alpha", "0.5", "--attention", "recurrent", "--checkpoint", "256", "--prompt-tokens", "1000"]),
            ("/api/v1/kv-bytes?model=gemma-3-12b&tokens=32768&budget_bytes=42949672960",
             ["kv-bytes", "--model", "gemma-3-12b", "--tokens", "32768", "--budget-bytes", "42949672960"]),
            ("/api/v1/explain?model=kimi-linear-48b-a3b&tier=host&prompt_tokens=8192&logical_match_tokens=5000",
             ["explain", "--model", "kimi-linear-48b-a3b", "--tier", "host", "--prompt-tokens", "8192",
              "--logical-match-tokens", "5000"]),
        ]:
            status, body = get(self.server, path)
            self.assertEqual(status, 200, (path, body))
            result = cli(*args, "--json")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(json.loads(body), json.loads(result.stdout), path)
        # What-if alignment: explain with another page size equals the CLI with that profile override.
        profiles = os.path.join(self.tmp, "pages.textproto")
        with open(profiles, "w") as f:
            f.write('profiles { name: "llama-3.1-8b" serving { kv_page_tokens: 64 } }\n')
        status, body = get(self.server, "/api/v1/explain?model=llama-3.1-8b&tier=host&prompt_tokens=8192"
                                         "&logical_match_tokens=4505&kv_page_tokens=64")
        self.assertEqual(status, 200, body)
        result = cli("explain", "--profiles", profiles, "--model", "llama-3.1-8b", "--tier", "host",
                     "--prompt-tokens", "8192", "--logical-match-tokens", "4505", "--json")
        self.assertEqual(json.loads(body), json.loads(result.stdout))
        self.assertEqual(json.loads(body)["recoverable_tokens"], "4480")
        status, body = get(self.server, "/api/v1/explain?model=llama-3.1-8b&tier=host&prompt_tokens=8192"
                                         "&logical_match_tokens=4505&kv_page_tokens=0")
        self.assertEqual(status, 400)
        self.assertIn("serving.kv_page_tokens", json.loads(body)["error"])
        # alpha= on explain takes floor(alpha N) exactly as calc does.
        status, body = get(self.server, "/api/v1/explain?model=llama-3.1-8b&tier=host&prompt_tokens=1000&alpha=0.3")
        self.assertEqual(json.loads(body)["logical_match_tokens"], "300")
        for path, error in [
            ("/api/v1/calc?alpha=2", "alpha = 2: must be in [0, 1]"),
            ("/api/v1/calc?alpha=0.5&attention=ring", 'attention = "ring": must be full, swa or recurrent'),
            ("/api/v1/calc?alpha=0.5&prompt_tokens=x", 'prompt_tokens = "x": must be a whole number >= 0'),
            # The CLI's rule for a whole number (docs/operations.md, "Messages and exit status").
            ("/api/v1/kv-bytes?model=llama-3.1-8b&tokens=8.5e0", 'tokens = "8.5e0": must be a whole number >= 0'),
            ("/api/v1/kv-bytes?model=llama-3.1-8b&tokens=100&budget_bytes=10&reserved_bytes=20",
             "reserved_bytes = 20: must be at most budget_bytes = 10"),
            ("/api/v1/calc?alpha=0.5&attention=recurrent&checkpoint=256",
             "prompt_tokens: required with attention recurrent"),
            ("/api/v1/explain?model=llama-3.1-8b&prompt_tokens=1000&alpha=0.3&logical_match_tokens=300",
             "alpha: give either it or logical_match_tokens, not both"),
            ("/api/v1/calc", "alpha: required"),
            ("/api/v1/kv-bytes?tokens=5", "layers, kv_heads, head_dim and bytes_per_element: required without model"),
        ]:
            status, body = get(self.server, path)
            self.assertEqual((status, json.loads(body)), (400, {"error": error}), path)
        # A record explain refuses also names its reason, as RecordBatch's rejections do.
        status, body = get(self.server, "/api/v1/explain?model=llama-3.1-8b&prompt_tokens=4096&logical_match_tokens=5000")
        self.assertEqual((status, json.loads(body)), (400, {"error": "logical_match_tokens = 5000: must be in [0, "
                                                            "prompt_tokens = 4096]",
                                                            "reason": "invalid_logical_match_tokens"}))
        status, body = get(self.server, "/api/v1/profiles")
        profiles = {p["name"]: p for p in json.loads(body)["profiles"]}
        self.assertEqual(profiles["llama-3.1-8b"]["bytes_per_cached_token"], BYTES_PER_TOKEN)
        self.assertEqual(profiles["llama-3.1-8b"]["definition"]["hidden_size"], 4096)
        self.assertEqual(len(profiles), 14)
        # Unknown paths are 404; an oversized query is refused and the server keeps serving.
        self.assertEqual(get(self.server, "/api/v1/nothing")[0], 404)
        self.assertEqual(get(self.server, "/api/v1/calc/more")[0], 404)
        self.assertGreaterEqual(get(self.server, "/api/v1/calc?alpha=" + "1" * 40000)[0], 400)
        self.assertEqual(get(self.server, "/api/v1/calc?alpha=0.5")[0], 200)
        # Read-only: anything but GET is refused.
        post = urllib.request.Request(f"http://{self.server.metrics_address}/api/v1/calc?alpha=0.5", data=b"x",
                                      method="POST")
        with self.assertRaises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(post, timeout=10)
        self.assertEqual(refused.exception.code, 405)

    # Totals per model: this replica's records, with the fleet ratios.
    def test_totals(self):
        self.record(record_pb2.TIER_HOST, 4096, 0.05, 0.4)
        status, body = get(self.server, "/api/v1/totals")
        (llama,) = json.loads(body)["models"]
        self.assertEqual((llama["model"], llama["requests"], llama["reused_tokens"]), ("llama-3.1-8b", 1, 4096))
        self.assertEqual(llama["logical_hit_ratio"], 0.5)
        self.assertAlmostEqual(llama["attention_avoided_fraction"], 4096 * 4097 / (8192 * 8193), places=12)


class AuthTest(unittest.TestCase):
    # With basic auth on, every route of the metrics port needs it.
    def test_every_route_needs_the_password(self):
        tmp = tempfile.mkdtemp(prefix="kvledger-advice-auth-")
        password = os.path.join(tmp, "password")
        with open(password, "w") as f:
            f.write("s3cret\n")
        server = Server(SERVER, "--metrics_auth_user=prom", f"--metrics_auth_password_file={password}", log_dir=tmp)
        self.addCleanup(server.stop)
        for path in ["/metrics", "/api/v1/profiles", "/api/v1/calc?alpha=0.5", "/explore"]:
            self.assertEqual(get(server, path, auth="prom:s3cret")[0], 200, path)
            # Wrong or missing: 401, or 429 once an address has failed 5 times in a second (throttled);
            # the password already seen to be right still passes.
            self.assertIn(get(server, path)[0], (401, 429), path)
            self.assertIn(get(server, path, auth="prom:wrong")[0], (401, 429), path)
            self.assertEqual(get(server, path, auth="prom:s3cret")[0], 200, path)
        statuses = [get(server, "/metrics", auth=f"prom:guess{i}")[0] for i in range(20)]
        self.assertIn(429, statuses)  # guessing is throttled: once 2,138 guesses a second


if __name__ == "__main__":
    unittest.main()
