"""Live capacity curves against `kvledger plan`, on the three shipped traces (Mooncake conversation and
synthetic, WEKA agentic coding). Each trace's records, carrying the trace's hash_ids as
prefix_block_ids, go to a server of its own twice: through `kvledger plan --send` (the C++ Reporter,
model llama-3.1-8b) and through the Python Reporter (model qwen3-8b, ids through
kvledger.blocks.from_engine_hashes). A real Prometheus scrapes the three servers with the shipped
rules; the recorded token hit and attention-avoided ratios at every capacity of the ladder must equal
`kvledger plan` at that capacity (floating-point division apart: 1e-9), and on the WEKA trace the
independent LRU's figures of the trace's documentation (to their 5 decimals). Bad ids are refused with the
field, the value and the rule, and the rest of their batch counts.

Usage: capacity_curves_test.py KVLEDGER_SERVER KVLEDGER_CLI REPO_ROOT
"""
import json
import lzma
import os
import subprocess
import sys
import tempfile
import unittest
import urllib.request

SERVER, CLI, ROOT = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
del sys.argv[1:4]
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

import grpc  # noqa: E402

import harness  # noqa: E402
import kvledger  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc  # noqa: E402

RULES = os.path.join(ROOT, "deploy", "prometheus", "rules", "kvledger-rules.yml")
TRACES = os.path.join(ROOT, "examples", "traces")
LADDER = [512_000, 2_048_000, 8_192_000, 32_768_000]  # 1,000 to 64,000 blocks of 512 tokens
# The WEKA trace's prefix token hit at those capacities and unlimited, computed independently of
# kvledger: a plain OrderedDict LRU (lru_hit_ratio.py beside the shared trace, WEKA.md) with each
# request's blocks made most recent tail first, as the server uses them (tests/client/plan_test.py's
# IndependentPlan gives the same). In prompt order the published figures are 0.12679, 0.55241,
# 0.92750, 0.95221 and 0.95252.
WEKA_INDEPENDENT = {"512000": 0.14537, "2048000": 0.58175, "8192000": 0.92813, "32768000": 0.95221, "+Inf": 0.95252}
LABELS = [str(c) for c in LADDER] + ["+Inf"]
CPP_MODEL, PY_MODEL = "llama-3.1-8b", "qwen3-8b"
SAMPLED = "mooncake-conversation-sampled"
EXACT_BUDGET = 1 << 30    # 699,029 blocks a cache: every trace's blocks
SAMPLED_BUDGET = 96 << 20  # 65,514 blocks a cache, of the conversation trace's 182,790
BLOCK = 512


def trace_lines(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def plan(trace_path, model):
    """`kvledger plan --json` at every capacity of the ladder and unlimited: {label: total}."""
    out = subprocess.run([CLI, "plan", "--model", model, "--json", "--capacity-tokens",
                          ",".join(str(c) for c in LADDER) + ",inf", trace_path],
                         capture_output=True, text=True, timeout=300, check=True)
    results = json.loads(out.stdout)["results"]
    return {label: r["total"] for label, r in zip(LABELS, results)}


class CapacityCurvesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kvledger-curves-")
        cls.traces, cls.requests = {}, {}
        for name in ("mooncake-conversation", "mooncake-synthetic", "weka-agentic-coding-512"):
            source = os.path.join(TRACES, name + (".jsonl.xz" if name.startswith("weka") else ".jsonl"))
            path = os.path.join(cls.tmp, name + ".jsonl")
            lines = trace_lines(source)
            with open(path, "w") as f:
                f.writelines(json.dumps(line) + "\n" for line in lines)
            cls.traces[name] = path
            cls.requests[name] = len(lines)
        # Each trace's server holds every block of it (exact); one more replays the conversation trace
        # with a budget that samples it (docs/cost-model.md §14, "Sampling and memory").
        cls.traces[SAMPLED] = cls.traces["mooncake-conversation"]
        cls.requests[SAMPLED] = cls.requests["mooncake-conversation"]
        ladder = "--capacity_ladder=" + ",".join(map(str, LADDER))
        cls.servers = {name: harness.Server(SERVER, ladder, "--capacity_memory_bytes=" + str(
            SAMPLED_BUDGET if name == SAMPLED else EXACT_BUDGET), log_dir=cls.tmp) for name in cls.traces}
        scrape = "".join(f"  - job_name: {name}\n    static_configs:\n      - targets: ['{s.metrics_address}']\n"
                         for name, s in cls.servers.items())
        cls.prometheus = harness.Prometheus(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n  - {RULES}\nscrape_configs:\n{scrape}", cls.tmp)
        for name, path in cls.traces.items():
            cls.send(name, path)

    @classmethod
    def tearDownClass(cls):
        cls.prometheus.stop()
        for server in cls.servers.values():
            server.stop()

    @classmethod
    def send(cls, name, path):
        server = cls.servers[name]
        subprocess.run([CLI, "plan", "--model", CPP_MODEL, "--send", "--target", server.grpc_address,
                        "--cache-id", "engine-cpp", path], capture_output=True, text=True, timeout=600, check=True)
        with kvledger.Reporter(server.grpc_address, max_queue_size=4096, shutdown_timeout_seconds=60) as reporter:
            for n, line in enumerate(trace_lines(path)):
                if n % 2048 == 2047:
                    assert reporter.flush(60), reporter.stats()  # backpressure: a full queue drops the newest
                reporter.report(model=PY_MODEL, prompt_tokens=line["input_length"], logical_match_tokens=0,
                                output_tokens=line["output_length"] or None, block_tokens=BLOCK,
                                prefix_block_ids=kvledger.blocks.from_engine_hashes(line["hash_ids"]),
                                cache_id="engine-py")
        stats = reporter.stats()
        assert stats["dropped"] == 0 and stats["rejected"] == 0, stats

    def live(self, rule, job, model):
        """{capacity label: value} of a recorded rule once every record is in Prometheus."""
        requests = self.requests[job]
        harness.poll(f"{job} {model} records in Prometheus", lambda: self.prometheus.value(
            f'model:kvledger_capacity_requests:increase10m{{job="{job}",model="{model}"}}') == requests, deadline=120)
        result = self.prometheus.query(f'{rule}{{job="{job}",model="{model}"}}')
        return {r["metric"]["capacity_tokens"]: float(r["value"][1]) for r in result}

    # Proves: through either Reporter and the shipped rules, every capacity's token hit and attention
    # avoided equal kvledger plan at that capacity, on all three traces.
    def test_live_curve_equals_plan(self):
        for job, path in self.traces.items():
            if job == SAMPLED:
                continue
            for model in (CPP_MODEL, PY_MODEL):
                with self.subTest(trace=job, model=model):
                    expected = plan(path, model)
                    hit = self.live("model_capacity:kvledger_capacity_token_hit:ratio_increase10m", job, model)
                    attention = self.live("model_capacity:kvledger_capacity_attention_avoided:ratio_increase10m",
                                          job, model)
                    self.assertEqual(sorted(hit), sorted(LABELS))
                    for label in LABELS:
                        self.assertAlmostEqual(hit[label], expected[label]["token_hit_ratio"], delta=1e-9, msg=label)
                        self.assertAlmostEqual(attention[label], expected[label]["attention_avoided_ratio"],
                                               delta=1e-9, msg=label)
                    if job.startswith("weka"):
                        for label, independent in WEKA_INDEPENDENT.items():
                            self.assertEqual(round(hit[label], 5), independent, label)
                    print(f"{job} {model}: " + ", ".join(
                        f"{label} hit {hit[label]:.4f} attention {attention[label]:.4f}" for label in LABELS))

    # Proves: the CapacityCurve RPC (`kvledger capacity`, text and --json) and GET /api/v1/capacity give
    # the same curve, equal to plan; a server without a ladder and a model without a curve say so.
    def test_cli_and_http_api(self):
        server, path = self.servers["weka-agentic-coding-512"], self.traces["weka-agentic-coding-512"]
        self.live("model_capacity:kvledger_capacity_token_hit:ratio_increase10m", "weka-agentic-coding-512", CPP_MODEL)
        cli = subprocess.run([CLI, "capacity", "--target", server.grpc_address, "--model", CPP_MODEL, "--json"],
                             capture_output=True, text=True, timeout=60, check=True)
        with urllib.request.urlopen(f"http://{server.metrics_address}/api/v1/capacity?model={CPP_MODEL}") as r:
            api = json.load(r)
        self.assertEqual(json.loads(cli.stdout), api)
        (curve,) = api["models"]
        self.assertEqual(int(curve["requests"]), self.requests["weka-agentic-coding-512"])
        expected = plan(path, CPP_MODEL)
        for label, point in zip(LABELS, curve["points"]):
            self.assertEqual(point.get("capacity_tokens"), None if label == "+Inf" else label)
            self.assertEqual(int(point["match_tokens"]), expected[label]["logical_match_tokens"])
            self.assertAlmostEqual(point["prefill_avoided_ratio"], expected[label]["prefill_avoided_ratio"], delta=1e-12)
            self.assertIsNone(point.get("recompute_avoided_seconds"))  # no suffix timings: no compute model
        text = subprocess.run([CLI, "capacity", "--target", server.grpc_address], capture_output=True, text=True,
                              timeout=60, check=True).stdout
        self.assertIn(f"{CPP_MODEL}: {self.requests['weka-agentic-coding-512']} records replayed", text)
        self.assertRegex(text, r"\n +32768000 +4000\.0 GiB +95\.22%")
        today = subprocess.run([CLI, "capacity", "--target", server.grpc_address, "--today", "2048000"],
                               capture_output=True, text=True, timeout=60, check=True).stdout
        now, larger, smaller = (100 * expected[c]["prefill_avoided_ratio"] for c in ("2048000", "8192000", "512000"))
        self.assertIn(f"growing the cache from 2048000 to 8192000 tokens would raise the prefill FLOPs avoided from "
                      f"{now:.2f}% to {larger:.2f}% (+{larger - now:.2f} points)", today)
        self.assertIn(f"shrinking it to 512000 tokens would lower them to {smaller:.2f}% (-{now - smaller:.2f} points)",
                      today)
        missing = subprocess.run([CLI, "capacity", "--target", server.grpc_address, "--model", "gemma-2-9b"],
                                 capture_output=True, text=True, timeout=60)
        self.assertEqual(missing.returncode, 1)
        self.assertIn('model = "gemma-2-9b": no capacity curve yet', missing.stderr)
        bare = harness.Server(SERVER, "--capacity_ladder=", log_dir=self.tmp)
        try:
            off = subprocess.run([CLI, "capacity", "--target", bare.grpc_address], capture_output=True, text=True,
                                 timeout=60)
            self.assertIn("keeps no capacity curves: start it with a --capacity_ladder", off.stderr)
            self.assertNotIn("kvledger_capacity_", bare.scrape())
        finally:
            bare.stop()

    # Proves: --capacity_use_order=prompt replays blocks in prompt order, equal to `kvledger plan
    # --use-order prompt` at every capacity (and differing from the tail-first default); a bad order is
    # refused at start, naming the flag.
    def test_prompt_order_equals_plan_in_prompt_order(self):
        path = self.traces["mooncake-synthetic"]
        server = harness.Server(SERVER, "--capacity_ladder=" + ",".join(map(str, LADDER)),
                                "--capacity_use_order=prompt", log_dir=self.tmp)
        try:
            subprocess.run([CLI, "plan", "--model", CPP_MODEL, "--send", "--target", server.grpc_address,
                            "--use-order", "prompt", "--cache-id", "engine-cpp", path],
                           capture_output=True, text=True, timeout=600, check=True)
            with urllib.request.urlopen(f"http://{server.metrics_address}/api/v1/capacity", timeout=30) as r:
                (curve,) = json.load(r)["models"]
        finally:
            server.stop()
        out = subprocess.run([CLI, "plan", "--model", CPP_MODEL, "--json", "--use-order", "prompt",
                              "--capacity-tokens", ",".join(str(c) for c in LADDER) + ",inf", path],
                             capture_output=True, text=True, timeout=300, check=True)
        expected = [r["total"]["logical_match_tokens"] for r in json.loads(out.stdout)["results"]]
        self.assertEqual([int(p["match_tokens"]) for p in curve["points"]], [int(e) for e in expected])
        tail_first = plan(path, CPP_MODEL)
        self.assertNotEqual([int(e) for e in expected], [int(tail_first[label]["logical_match_tokens"]) for label in LABELS])
        bad = subprocess.run([SERVER, "--capacity_use_order=lru"], capture_output=True, text=True, timeout=30)
        self.assertEqual(bad.returncode, 2)
        self.assertIn('--capacity_use_order = "lru": must be tail-first or prompt', bad.stderr)

    # Proves: `kvledger send` carries ids (and names a bad one by its flag); the same prompt twice hits.
    def test_send_with_ids(self):
        server = self.servers["mooncake-synthetic"]
        send = [CLI, "send", "--target", server.grpc_address, "--model", "qwen3-32b", "--prompt-tokens", "1024",
                "--logical-match-tokens", "0", "--block-tokens", "512", "--cache-id", "cli"]
        for _ in range(2):
            subprocess.run(send + ["--prefix-block-ids", "11,12"], capture_output=True, text=True, timeout=60, check=True)
        bad = subprocess.run(send + ["--prefix-block-ids", "11,x"], capture_output=True, text=True, timeout=60)
        self.assertEqual(bad.returncode, 2)
        self.assertIn('--prefix-block-ids = "11,x": "x" is not a whole number in [0, 2^64)', bad.stderr)
        out = subprocess.run([CLI, "capacity", "--target", server.grpc_address, "--model", "qwen3-32b", "--json"],
                             capture_output=True, text=True, timeout=60, check=True)
        (curve,) = json.loads(out.stdout)["models"]
        self.assertEqual(int(curve["requests"]), 2)
        self.assertEqual(int(curve["points"][-1]["match_tokens"]), 1024)

    # Proves: a cache past its share of --capacity_memory_bytes is costed from a sample, and through
    # either Reporter and the shipped rules every capacity's token hit and attention avoided stay
    # within 0.01 of kvledger plan (the exact figures).
    def test_sampled_curve_within_a_hundredth_of_plan(self):
        path = self.traces[SAMPLED]
        for model in (CPP_MODEL, PY_MODEL):
            with self.subTest(model=model):
                expected = plan(path, model)
                hit = self.live("model_capacity:kvledger_capacity_token_hit:ratio_increase10m", SAMPLED, model)
                attention = self.live("model_capacity:kvledger_capacity_attention_avoided:ratio_increase10m",
                                      SAMPLED, model)
                for label in LABELS:
                    self.assertAlmostEqual(hit[label], expected[label]["token_hit_ratio"], delta=0.01, msg=label)
                    self.assertAlmostEqual(attention[label], expected[label]["attention_avoided_ratio"], delta=0.01,
                                           msg=label)
                sampled = self.prometheus.value(
                    f'model:kvledger_capacity_sampled_requests:increase10m{{job="{SAMPLED}",model="{model}"}}')
                self.assertGreater(sampled, 0)
                print(f"{SAMPLED} {model}: " + ", ".join(
                    f"{label} hit {hit[label] - expected[label]['token_hit_ratio']:+.4f} attention "
                    f"{attention[label] - expected[label]['attention_avoided_ratio']:+.4f}" for label in LABELS),
                    flush=True)

    # Proves: too many ids, ids without a block size and a bad cache id are refused with the field, the
    # value and the rule, counted by reason, and the other records of the batch still count.
    def test_bad_ids_are_named_and_lose_nothing(self):
        server = self.servers["mooncake-synthetic"]
        good = kvledger.make_record(model="mistral-7b-v0.1", prompt_tokens=1024, prefix_block_ids=[1, 2],
                                    block_tokens=512)
        bad = [kvledger.make_record(model="mistral-7b-v0.1", prompt_tokens=1024, prefix_block_ids=[1, 2, 3],
                                    block_tokens=512),
               kvledger.make_record(model="mistral-7b-v0.1", prompt_tokens=1024, prefix_block_ids=[1]),
               kvledger.make_record(model="mistral-7b-v0.1", prompt_tokens=1024, cache_id="a b")]
        with grpc.insecure_channel(server.grpc_address) as channel:
            reply = ledger_pb2_grpc.LedgerStub(channel).RecordBatch(
                ledger_pb2.RecordBatchRequest(records=[good, *bad, good]), timeout=10)
        self.assertEqual(reply.accepted, 2)
        messages = [r.message for r in reply.rejections]
        self.assertEqual(messages, [
            "prefix_block_ids: 3 ids: must be at most 65536 and at most the prompt's blocks, "
            "ceil(prompt_tokens = 1024 / block_tokens = 512) = 2",
            "prefix_block_ids: 1 ids: need block_tokens (the tokens each id covers)",
            'cache_id = "a b": must be at most 128 printable ASCII characters without spaces'])
        samples = harness.parse_exposition(server.scrape())
        self.assertEqual(harness.sample(samples, "kvledger_records_rejected_total", reason="invalid_prefix_block_ids"), 2)
        self.assertEqual(harness.sample(samples, "kvledger_records_rejected_total", reason="invalid_cache_id"), 1)
        self.assertEqual(harness.sample(samples, "kvledger_capacity_requests_total", model="mistral-7b-v0.1"), 2)
        # The second good record repeats the first's ids: both blocks hit at every capacity.
        self.assertEqual(harness.sample(samples, "kvledger_capacity_match_tokens_total", model="mistral-7b-v0.1",
                                        capacity_tokens="+Inf"), 1024)

    # Proves: the second tier (docs/cost-model.md §15) on a real server equals `kvledger plan --tier`
    # on the same trace, through the HTTP API, `kvledger capacity --json` and its text with --tier; a
    # record's own cache_capacity_blocks stands the tiers below that device instead of the flag; a
    # tier not on the server's ladder and a bad tier are refused, naming the flag.
    def test_second_tier_equals_plan_tier(self):
        for inclusive in (False, True):
            with self.subTest(inclusive=inclusive):
                self.second_tier_equals_plan_tier(inclusive)

    def second_tier_equals_plan_tier(self, inclusive):
        path = self.traces["mooncake-synthetic"]
        device, tiers = 512_000, "host:64GiB,host:256GiB,disk:1TiB:6e9:0.001"
        server = harness.Server(SERVER, "--capacity_ladder=" + str(device), "--capacity_tiers=" + tiers,
                                f"--capacity_device_tokens={device}", f"--capacity_tiers_inclusive={str(inclusive).lower()}",
                                log_dir=self.tmp)
        try:
            subprocess.run([CLI, "plan", "--model", CPP_MODEL, "--send", "--target", server.grpc_address,
                            "--capacity-tokens", str(device), "--cache-id", "engine-tier", path],
                           capture_output=True, text=True, timeout=600, check=True)
            with urllib.request.urlopen(f"http://{server.metrics_address}/api/v1/capacity", timeout=30) as r:
                (live,) = json.load(r)["models"]
            cli = subprocess.run([CLI, "capacity", "--target", server.grpc_address, "--json"], capture_output=True,
                                 text=True, timeout=60, check=True)
            self.assertEqual(json.loads(cli.stdout)["models"], [live])
            text = subprocess.run([CLI, "capacity", "--target", server.grpc_address, "--tier", "host:256GiB"],
                                  capture_output=True, text=True, timeout=60, check=True).stdout
            off = subprocess.run([CLI, "capacity", "--target", server.grpc_address, "--tier", "host:2TiB"],
                                 capture_output=True, text=True, timeout=60)
        finally:
            server.stop()
        out = subprocess.run([CLI, "plan", "--model", CPP_MODEL, "--json", "--capacity-tokens", str(device),
                              "--tier", tiers, path] + (["--tier-inclusive"] if inclusive else []),
                             capture_output=True, text=True, timeout=300, check=True)
        (planned,) = json.loads(out.stdout)["second_tiers"]
        self.assertEqual(int(planned["device_tokens"]), device)
        fields = ("tier", "tier_bytes", "tier_tokens", "match_tokens", "token_hit_ratio", "attention_avoided_ratio",
                  "prefill_avoided_ratio", "hit_requests", "seconds_known_requests")
        self.assertEqual(len(live["tiers"]), 3)
        for got, want in zip(live["tiers"], planned["curve"]["tiers"]):
            self.assertEqual({f: got.get(f) for f in fields}, {f: want.get(f) for f in fields})
        self.assertGreater(int(live["tiers"][1]["match_tokens"]), int(live["tiers"][0]["match_tokens"]))
        # 64 GiB is 524,288 tokens of llama-3.1-8b, about the device's 512,000: holding copies, it serves
        # almost nothing beyond the device (its extra 24,288 tokens); beside it, a whole device more.
        if inclusive:
            self.assertLess(int(live["tiers"][0]["match_tokens"]), int(live["tiers"][1]["match_tokens"]) // 10)
        self.assertEqual(live["tiers"][0]["tier_tokens"], str(64 * 2**30 // 131072))
        self.assertRegex(text, r"\n +host +256\.0 GiB +2097152 ")
        self.assertNotIn(" 64.0 GiB", text)
        self.assertEqual(off.returncode, 2)
        self.assertIn("--tier: the host tier of 2199023255552 bytes is not one of the server's --capacity_tiers",
                      off.stderr)
        bad = subprocess.run([SERVER, "--capacity_tiers=gpu:1TiB"], capture_output=True, text=True, timeout=30)
        self.assertEqual(bad.returncode, 2)
        self.assertIn('--capacity_tiers = "gpu:1TiB": a tier is KIND:SIZE', bad.stderr)

    # Proves: a record's cache_capacity_blocks is its device for the tiers (the flag at 0 counts the
    # records without it apart).
    def test_second_tier_below_the_records_own_device(self):
        server = harness.Server(SERVER, "--capacity_ladder=4096", "--capacity_tiers=host:1GiB", log_dir=self.tmp)
        try:
            send = [CLI, "send", "--target", server.grpc_address, "--model", CPP_MODEL, "--prompt-tokens", "1024",
                    "--logical-match-tokens", "0", "--block-tokens", "512", "--cache-id", "engine-own"]
            for ids in ("1,2", "3", "1,2"):
                subprocess.run(send + ["--prefix-block-ids", ids, "--cache-capacity-blocks", "1"],
                               capture_output=True, text=True, timeout=60, check=True)
            subprocess.run(send + ["--prefix-block-ids", "1,2"], capture_output=True, text=True, timeout=60, check=True)
            samples = harness.parse_exposition(server.scrape())
        finally:
            server.stop()
        # A device of one block holds neither of [1, 2] at the third record (depths 2 and 3); a 1 GiB tier
        # (8,192 tokens of llama-3.1-8b) holds both: 1,024 tokens. The fourth gives no device.
        labels = {"model": CPP_MODEL, "tier": "host", "tier_bytes": str(2**30)}
        self.assertEqual(harness.sample(samples, "kvledger_capacity_tier_match_tokens_total", **labels), 1024)
        self.assertEqual(harness.sample(samples, "kvledger_capacity_tier_hit_requests_total", **labels), 1)
        self.assertEqual(harness.sample(samples, "kvledger_capacity_tier_no_device_requests_total", model=CPP_MODEL), 1)

if __name__ == "__main__":
    unittest.main(verbosity=2)
