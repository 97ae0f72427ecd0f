"""Everything between /metrics and a person's screen, against the real thing: a real kvledger-server
fed a mixed synthetic trace, a real Prometheus loading the shipped recording rules and alerts, and
every query of the shipped Grafana dashboard evaluated through Prometheus' HTTP API — with the
template variables substituted (All, and one model and tier). Then three replicas behind a gRPC
round_robin client, where the fleet recording rules must equal what was sent.

Exact ratios from rate(): Prometheus only discovers the targets (file_sd) after the first copy of
the trace is fully counted, so every series' first sample is that copy; the same trace is then sent
again. Each rate over the window is then the increase of one copy times a factor that is the same
for every series of a target, so a ratio of sums of rates is exactly the trace's ratio.

Usage: observability_test.py SERVER_BINARY PYTHON_STUBS_DIR REPO_ROOT
"""
import datetime
import json
import math
import os
import random
import re
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

SERVER, STUBS, ROOT = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
sys.path.insert(0, STUBS)
import grpc  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402

DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "dashboards", "kvledger.json")
RULES = os.path.join(ROOT, "deploy", "prometheus", "rules", "kvledger-rules.yml")
ALERTS = os.path.join(ROOT, "deploy", "prometheus", "alerts", "kvledger-alerts.yml")
TIERS = [record_pb2.TIER_DEVICE, record_pb2.TIER_HOST, record_pb2.TIER_DISK, record_pb2.TIER_REMOTE]
TIER_NAMES = {0: "none", 1: "device", 2: "host", 3: "disk", 4: "remote"}
REL = 1e-9


# Independent arithmetic for llama-3.1-8b (docs/cost-model.md §5): 32 layers, 32 query heads of 128
# (pair FLOPs 2 x 32 x 256), 8 KV heads, hidden 4096, FFN 14336; KV page 16 tokens; 131072 KV bytes
# per token (2 x 32 layers x 8 heads x 128 x 2 bytes).
def llama_attention(tokens):
    return 32 * (2 * 32 * 256) * tokens * (tokens + 1) // 2


def llama_prefill(tokens):
    return llama_attention(tokens) + 32 * 2 * (4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336) * tokens


def llama_recoverable(n, match):
    return min(match, n - 1) // 16 * 16


def make_trace(models, seed):
    """Records over every model and tier plus misses; some without a suffix time (not compared),
    some slow remote reloads, some restore failures. Deterministic."""
    rng = random.Random(seed)
    records = []
    for model in models:
        for i in range(24):
            n = rng.randrange(512, 8192)
            match = rng.randrange(1, n + 1)
            tier = TIERS[i % 4]
            r = record_pb2.Record(model=model, tier=tier, prompt_tokens=n, logical_match_tokens=match,
                                  request_id=f"{model}-{i}")
            if model == "llama-3.1-8b":
                restore = rng.randrange(0, 3) * 16 if i % 3 == 0 else 0
                rec = llama_recoverable(n, match)
                r.recompute_tokens = match - rec + min(restore, rec)
            elif i % 4 == 1:
                r.recompute_tokens = match  # restore failed entirely
            r.reload_seconds = 5.0 if tier == record_pb2.TIER_REMOTE and i % 8 == 3 else rng.randrange(1, 200) / 1000
            if i % 5 != 4:
                r.suffix_prefill_seconds = rng.randrange(50, 2000) / 1000
            r.ttft_seconds = rng.randrange(60, 6000) / 1000
            # A router's prediction: right, stale (more than was there) or pessimistic (less).
            r.predicted_match_tokens = (match, min(n, match + rng.randrange(1, 2048)), match // 2)[i % 3]
            whole_request(r, rng, i)
            # Chained prefix block ids (the same leading blocks across a model's records) feed the
            # capacity curves.
            r.prefix_block_ids.extend(range(1, n // 512 + 1))
            r.block_tokens = 512
            records.append(r)
        for i, tier in enumerate((record_pb2.TIER_MIXED, record_pb2.TIER_UNKNOWN)):  # no single source tier
            n = rng.randrange(512, 8192)
            records.append(record_pb2.Record(model=model, tier=tier, prompt_tokens=n,
                                             logical_match_tokens=rng.randrange(1, n + 1), reload_seconds=0.01 * (i + 1),
                                             suffix_prefill_seconds=0.5, ttft_seconds=0.9))
        for i in range(4):  # misses
            n = rng.randrange(64, 4096)
            miss = record_pb2.Record(model=model, prompt_tokens=n, suffix_prefill_seconds=n / 10000,
                                     ttft_seconds=n / 9000)
            whole_request(miss, rng, i)
            records.append(miss)
    return records


def whole_request(r, rng, i):
    """Queue, output and decode (docs/cost-model.md §12): most records have every part, some parts that
    overlap their TTFT (a long wait beside a long suffix prefill), some have a part missing."""
    if i % 6 != 5:
        r.queue_seconds = min(r.ttft_seconds, rng.randrange(0, 1500) / 1000)
    r.output_tokens = rng.randrange(1, 400)
    if i % 7 != 6:
        r.decode_seconds = (r.output_tokens - 1) * rng.randrange(8, 90) / 1000


BAD = [record_pb2.Record(model="llama-3.1-8b", tier=record_pb2.TIER_HOST, prompt_tokens=100, logical_match_tokens=200),
       record_pb2.Record(model="bad model name", prompt_tokens=100),
       record_pb2.Record(model="mistral-7b-v0.1", prompt_tokens=100, reload_seconds=-1)]


# What an engine's stat logger sends besides records: aggregate host transfers and requests that
# ended before their first token (RecordEngineStats).
ENGINE_STATS = ledger_pb2.EngineStatsRequest(
    transfers=[ledger_pb2.TransferObservation(model="llama-3.1-8b", tier=record_pb2.TIER_HOST, bytes=4_000_000_000,
                                              seconds=0.5, transfers=8)],
    unrecorded=[ledger_pb2.UnrecordedRequests(model="llama-3.1-8b", reason=ledger_pb2.UNRECORDED_REASON_ABORTED,
                                              requests=3),
                ledger_pb2.UnrecordedRequests(model="llama-3.1-8b", reason=ledger_pb2.UNRECORDED_REASON_FAILED,
                                              requests=1, logical_match_tokens=2048)])


def send(stub, records):
    response = stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=records), timeout=60)
    engine = stub.RecordEngineStats(ENGINE_STATS, timeout=60)
    assert (engine.accepted, engine.rejected) == (3, 0), engine
    return response.accepted, response.rejected


def close(a, b):
    return a is not None and b is not None and math.isclose(a, b, rel_tol=REL, abs_tol=1e-12)


def prometheus_config(sd_file, interval="1s"):
    return (f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"
            f"rule_files:\n  - {RULES}\n  - {ALERTS}\n"
            "scrape_configs:\n  - job_name: kvledger\n    file_sd_configs:\n"
            f"      - files: ['{sd_file}']\n        refresh_interval: 1s\n")


def rule_group_evaluations(prometheus):
    """{group name: when it last evaluated, Unix seconds}."""
    with urllib.request.urlopen(prometheus.url + "/api/v1/rules", timeout=30) as r:
        groups = json.load(r)["data"]["groups"]
    out = {}
    for g in groups:
        stamp = re.sub(r"(\.\d{6})\d*", r"\1", g["lastEvaluation"]).replace("Z", "+00:00")
        out[g["name"]] = datetime.datetime.fromisoformat(stamp).timestamp()
    return out


def publish_targets(sd_file, addresses):
    with open(sd_file + ".tmp", "w") as f:
        json.dump([{"targets": addresses}], f)
    os.replace(sd_file + ".tmp", sd_file)


class Totals:
    """Sums over accepted records, from the trace alone (tokens) and from Explain (FLOPs, seconds)."""

    def __init__(self):
        self.__dict__.update(dict.fromkeys(
            ["n", "match", "rec", "reused", "att_base", "att_reused", "pre_base", "pre_reused",
             "est", "suffix", "reload", "compared", "slower", "align", "restore"], 0.0))

    def add(self, figures, record):
        f = figures
        self.n += f.prompt_tokens
        self.match += f.logical_match_tokens
        self.rec += f.recoverable_tokens
        self.reused += f.reused_tokens
        self.att_base += f.attention_baseline_flops
        self.att_reused += f.attention_avoided_reused_flops
        self.pre_base += f.prefill_baseline_flops
        self.pre_reused += f.prefill_avoided_reused_flops
        self.align += f.recompute_alignment_tokens
        self.restore += f.recompute_restore_tokens
        if f.reload_compared:
            self.compared += 1
            self.est += f.estimated_recompute_seconds
            # Without a measured suffix only a stated throughput (llama's) gives a record its estimate.
            self.suffix += record.suffix_prefill_seconds if record.HasField("suffix_prefill_seconds") else \
                (f.prefill_baseline_flops - f.prefill_avoided_reused_flops) / LLAMA_FLOPS_PER_SECOND
            self.reload += record.reload_seconds
            self.slower += 1 if f.reload_slower_than_recompute else 0

    def e2e(self):
        return (self.est + self.suffix) / (self.reload + self.suffix)


LLAMA_FLOPS_PER_SECOND = 3e14


def stated_throughput(tmp):
    """Server flags for counters that are a pure function of the records (no live compute model):
    estimates at llama's stated throughput, so the hand calculation can follow every record."""
    profiles = os.path.join(tmp, "profiles.txtpb")
    with open(profiles, "w") as f:
        f.write(f'profiles {{ name: "llama-3.1-8b" serving {{ prefill_flops_per_second: {LLAMA_FLOPS_PER_SECOND} }} }}\n')
    return ["--live_compute_model=false", f"--profiles={profiles}"]


def independent_llama(records):
    """The same sums for llama-3.1-8b records, by hand arithmetic only (no kvledger code)."""
    t = Totals()
    for r in records:
        n, match = r.prompt_tokens, r.logical_match_tokens
        rec = llama_recoverable(n, match)
        reused = match - r.recompute_tokens if r.HasField("recompute_tokens") else rec
        t.n += n
        t.match += match
        t.rec += rec
        t.reused += reused
        t.att_base += llama_attention(n)
        t.att_reused += llama_attention(reused)
        t.pre_base += llama_prefill(n)
        t.pre_reused += llama_prefill(reused)
        t.align += match - rec
        t.restore += rec - reused
        if r.HasField("reload_seconds"):  # the server states llama's throughput: every measured reload is compared
            avoided, remaining = llama_prefill(reused), llama_prefill(n) - llama_prefill(reused)
            est = avoided / LLAMA_FLOPS_PER_SECOND
            t.compared += 1
            t.est += est
            t.suffix += r.suffix_prefill_seconds if r.HasField("suffix_prefill_seconds") \
                else remaining / LLAMA_FLOPS_PER_SECOND
            t.reload += r.reload_seconds
            t.slower += 1 if r.reload_seconds > est else 0
    return t


def expected_panels(t):
    """Panel title -> expected value of its first query, for the headline panels."""
    return {
        "Logical token hit ratio": t.match / t.n,
        "Recoverable token ratio": t.rec / t.n,
        "Reused token ratio α": t.reused / t.n,
        "Token hit α (reused)": t.reused / t.n,
        "Attention work avoided": t.att_reused / t.att_base,
        "Prefill FLOPs avoided": t.pre_reused / t.pre_base,
        "Ideal prefill speedup": t.pre_base / (t.pre_base - t.pre_reused),
        "Estimated end-to-end prefill speedup": t.e2e(),
    }


def nanos(seconds):
    return round(seconds * 1e9)


def independent_whole_request(records):
    """docs/cost-model.md §12 by hand for llama-3.1-8b records (no kvledger code): each figure over the
    records that have all of its inputs; the parts charged to the TTFT (suffix prefill first, then the
    wait, then the reload) in integer nanoseconds; estimates at the profile's stated throughput."""
    s = dict.fromkeys(["split", "overlap", "queue", "reload", "suffix", "rest", "h_reload", "h_queue", "h_full",
                       "ttft", "ttft_without", "decode", "decode_tokens", "e2e", "e2e_prefill", "e2e_wo",
                       "e2e_wo_prefill", "kv_byte_seconds"], 0)
    for r in records:
        n, match = r.prompt_tokens, r.logical_match_tokens
        reused = match - r.recompute_tokens if r.HasField("recompute_tokens") else llama_recoverable(n, match)
        reload = r.reload_seconds if r.HasField("reload_seconds") else (0.0 if match == 0 else None)
        est = llama_prefill(reused) / LLAMA_FLOPS_PER_SECOND
        suffix = r.suffix_prefill_seconds if r.HasField("suffix_prefill_seconds") else None
        full = (suffix if suffix is not None else (llama_prefill(n) - llama_prefill(reused)) / LLAMA_FLOPS_PER_SECOND) + est
        queue = r.queue_seconds if r.HasField("queue_seconds") else None
        decode = r.decode_seconds if r.HasField("decode_seconds") else None
        charged = None
        if reload is not None and suffix is not None:
            ttft = nanos(r.ttft_seconds)
            sp = min(nanos(suffix), ttft)
            q = min(nanos(queue) if queue is not None else 0, ttft - sp)
            rl = min(nanos(reload), ttft - sp - q)
            charged = (sp, q, rl)
            if queue is not None:
                s["split"] += 1
                s["overlap"] += 1 if nanos(queue) + nanos(reload) + nanos(suffix) > ttft else 0
                s["queue"] += q / 1e9
                s["reload"] += rl / 1e9
                s["suffix"] += sp / 1e9
                s["rest"] += (ttft - sp - q - rl) / 1e9
                s["h_reload"] += rl / 1e9
                s["h_queue"] += q / 1e9
                s["h_full"] += full
            s["ttft"] += r.ttft_seconds
            s["ttft_without"] += r.ttft_seconds - rl / 1e9 + est
        if decode is not None and r.output_tokens >= 2:
            s["decode"] += decode
            s["decode_tokens"] += r.output_tokens - 1
        if decode is not None:
            if charged is not None:
                sp, _, rl = charged
                s["e2e"] += r.ttft_seconds + decode
                s["e2e_prefill"] += (rl + sp) / 1e9
                s["e2e_wo"] += r.ttft_seconds - rl / 1e9 + est + decode
                s["e2e_wo_prefill"] += sp / 1e9 + est
            # 131072 KV bytes per llama-3.1-8b token: the reused prefix over the TTFT, the prompt through
            # decode, the output's KV growing linearly through decode.
            s["kv_byte_seconds"] += 131072 * (reused * r.ttft_seconds + n * decode
                                              + (r.output_tokens - 1) * decode / 2)
    return s


class DashboardTest(unittest.TestCase):
    # Full, sliding window, MLA, hybrid linear, hybrid local/global; then three fine-tunes without a
    # profile (costed as generic), of which the last two are past --max_models=1 and fold into "other".
    MODELS = ["llama-3.1-8b", "mistral-7b-v0.1", "deepseek-v3", "kimi-linear-48b-a3b", "qwen3-next-80b-a3b",
              "gemma-2-9b", "acme-ft-1", "acme-ft-2", "acme-ft-3"]
    KNOWN = 6

    @classmethod
    def setUpClass(cls):
        with open(DASHBOARD) as f:
            cls.dashboard = json.load(f)
        cls.tmp = tempfile.TemporaryDirectory()
        # A device of two 512-token blocks under each cache: the default --capacity_tiers stand below it.
        cls.server = harness.Server(SERVER, "--max_models=1", "--unknown_model=generic", "--capacity_device_tokens=1024",
                                    *stated_throughput(cls.tmp.name), log_dir=cls.tmp.name)
        sd_file = os.path.join(cls.tmp.name, "targets.json")
        publish_targets(sd_file, [])
        cls.prometheus = harness.Prometheus(prometheus_config(sd_file), cls.tmp.name)
        try:
            assert cls.prometheus.rule_groups() == ["kvledger.alerts", "kvledger.capacity", "kvledger.fleet",
                                                    "kvledger.inputs", "kvledger.job",
                                                    "kvledger.model_tier", "kvledger.tier_model"], \
                cls.prometheus.rule_groups()
            cls.trace = make_trace(cls.MODELS, seed=7)
            with grpc.insecure_channel(cls.server.grpc_address) as channel:
                stub = ledger_pb2_grpc.LedgerStub(channel)
                accepted, rejected = send(stub, cls.trace + BAD)
                assert (accepted, rejected) == (len(cls.trace), len(BAD)), (accepted, rejected)
                cls.all = Totals()
                cls.llama_host = []
                for r in cls.trace:
                    cls.all.add(stub.Explain(r, timeout=10), r)
                    if r.model == "llama-3.1-8b" and r.tier == record_pb2.TIER_HOST:
                        cls.llama_host.append(r)
                publish_targets(sd_file, [cls.server.metrics_address])
                p = cls.prometheus
                harness.poll("the first copy to be scraped",
                             lambda: p.value("sum(kvledger_requests_total)") == accepted, deadline=60, interval=0.2)
                send(stub, cls.trace + BAD)
            harness.poll("the second copy to be scraped",
                         lambda: p.value("sum(kvledger_requests_total)") == 2 * accepted
                         and p.value("sum(kvledger_records_rejected_total)") == 2 * rejected, deadline=60, interval=0.2)
            # The dashboard reads recorded rates: every rule group must have evaluated since (and
            # twice, so its rates see two samples of each series).
            scraped = time.time()
            harness.poll("every rule group to evaluate twice after the last scrape",
                         lambda: min(rule_group_evaluations(p).values()) > scraped + 1.5, deadline=60, interval=0.2)
            cls.at = time.time()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.prometheus.stop()
        code = cls.server.stop()
        cls.tmp.cleanup()
        assert code == 0, f"server exited with {code}"

    def panels(self):
        return [p for p in self.dashboard["panels"] if p["type"] != "row"]

    def queries(self, model, tier):
        for p in self.panels():
            for t in p["targets"]:
                expr = (t["expr"].replace("$__rate_interval", "5m").replace("$model", model).replace("$tier", tier)
                        .replace("$job", ".*").replace("$capacity", "+Inf"))
                yield p, t, expr

    def check_all_queries(self, model, tier, expected):
        checked = 0
        for panel, target, expr in self.queries(model, tier):
            with self.subTest(panel=panel["title"], ref=target["refId"], model=model, tier=tier):
                result = self.prometheus.query(expr, at=self.at)
                self.assertTrue(result, f"empty result: {expr}")
                for series in result:
                    value = float(series["value"][1])
                    self.assertTrue(math.isfinite(value), f"{series['metric']} = {value}: {expr}")
                want = expected.get(panel["title"])
                if want is not None and target["refId"] == "A":
                    self.assertEqual(len(result), 1)
                    self.assertEqual(self.settled(expr, float(result[0]["value"][1]), want), want, panel["title"])
                    checked += 1
        self.assertEqual(checked, len(expected))

    def settled(self, expr, value, want):
        """`value` (the expression at self.at) when it is `want`; else the first value equal to `want` at a
        later instant within 30 s, else every value seen. Prometheus commits a rule group's recorded
        series one rule at a time, so a scrape committed between two rules of one evaluation leaves the
        numerator and denominator of a panel computed over different samples at that instant; the next
        evaluation is consistent again. A wrong panel or wrong counters stay wrong at every instant."""
        if close(value, want):
            return want
        seen = [(self.at, value)]
        end = time.monotonic() + 30
        while time.monotonic() < end:
            time.sleep(1.1)  # one evaluation interval and a little more
            at = time.time()
            seen.append((at, self.prometheus.value(expr, at=at)))
            if close(seen[-1][1], want):
                print(f"{expr}: {value} at {self.at:.3f}, {want} from {at:.3f} on", file=sys.stderr)
                return want
        return seen

    # Proves: every panel query, over all models and tiers, returns finite data, and the headline
    # ratios equal the sums of the accepted records (tokens straight from the trace; FLOPs and
    # seconds from the Explain RPC of each record).
    def test_every_query_with_all(self):
        expected = expected_panels(self.all)
        self.assertTrue(close(expected["Logical token hit ratio"],
                              sum(r.logical_match_tokens for r in self.trace) / sum(r.prompt_tokens for r in self.trace)))
        self.check_all_queries(".*", ".*", expected)

    # Proves: with one model and tier selected, every panel returns data and the headline ratios
    # equal hand arithmetic on the trace's llama-3.1-8b host records (no kvledger code involved).
    def test_every_query_with_one_model_and_tier(self):
        t = independent_llama(self.llama_host)
        self.assertGreater(t.compared, 0)
        self.assertGreater(t.restore, 0)
        self.check_all_queries("llama-3.1-8b", "host", expected_panels(t))

    # Proves: the variables list real label values, including the folded model="other".
    def test_variables_and_folding(self):
        models = {s["metric"]["model"] for s in self.prometheus.query("group by (model) (kvledger_requests_total)")}
        self.assertEqual(models, set(self.MODELS[:self.KNOWN + 1]) | {"other"})
        self.assertEqual(self.prometheus.value("sum(kvledger_model_label_folded_records_total)"),
                         2 * sum(r.model in self.MODELS[self.KNOWN + 1:] for r in self.trace))
        tiers = {s["metric"]["tier"] for s in self.prometheus.query("group by (tier) (kvledger_requests_total)")}
        self.assertEqual(tiers, {"none", "device", "host", "disk", "remote", "mixed", "unknown"})

    # Proves: the routing rules on a real Prometheus equal a hand calculation over the trace's
    # predictions (right, stale and pessimistic ones) for llama-3.1-8b: precision, over- and
    # under-prediction shares as ratios of sums.
    def test_routing_predictions_by_hand(self):
        predicted = realised = over = under = 0
        for r in self.trace:
            if r.model != "llama-3.1-8b" or not r.HasField("predicted_match_tokens"):
                continue
            p, m = r.predicted_match_tokens, r.logical_match_tokens
            predicted += p
            realised += min(p, m)
            over += max(0, p - m)
            under += max(0, m - p)
        self.assertGreater(over, 0)
        self.assertGreater(under, 0)
        for rule, want in (("model:kvledger_prediction_realised_tokens_per_predicted_token:ratio_rate5m", realised / predicted),
                           ("model:kvledger_prediction_over_tokens_per_predicted_token:ratio_rate5m", over / predicted),
                           ("model:kvledger_prediction_under_tokens_per_logical_match_token:ratio_rate5m",
                            under / (realised + under))):
            with self.subTest(rule=rule):
                expr = f'{rule}{{model="llama-3.1-8b"}}'
                harness.poll(f"{rule} = {want}", lambda expr=expr, want=want: close(self.prometheus.value(expr), want),
                             deadline=30, interval=0.5)

    # Proves: the whole-request rules on a real Prometheus equal a hand calculation over the trace's
    # llama-3.1-8b host records, among them records with every part, with parts that overlap their TTFT
    # and with parts missing: the TTFT split by part, both h's, the TTFT speedup bought by reuse, the time
    # per output token, the prefill's share of end to end (as served and without reuse), and the KV byte-seconds.
    def test_whole_request_by_hand(self):
        s = independent_whole_request(self.llama_host)
        self.assertGreater(s["split"], 0)
        self.assertGreater(s["overlap"], 0)
        self.assertLess(s["split"], len(self.llama_host))  # some records miss a part
        rules = {"model_tier:kvledger_overhead_fraction:ratio_rate5m": s["h_reload"] / s["h_full"],
                 "model_tier:kvledger_overhead_fraction_with_wait:ratio_rate5m": (s["h_reload"] + s["h_queue"]) / s["h_full"],
                 "model_tier:kvledger_ttft_speedup_from_reuse:ratio_rate5m": s["ttft_without"] / s["ttft"],
                 "model_tier:kvledger_time_per_output_token_seconds:ratio_rate5m": s["decode"] / s["decode_tokens"],
                 "model_tier:kvledger_prefill_share_of_e2e:ratio_rate5m": s["e2e_prefill"] / s["e2e"],
                 "model_tier:kvledger_prefill_share_of_e2e_without_reuse:ratio_rate5m": s["e2e_wo_prefill"] / s["e2e_wo"],
                 "model_tier:kvledger_ttft_overlap_requests_per_split_request:ratio_rate5m": s["overlap"] / s["split"]}
        for part in ("queue", "reload", "suffix", "rest"):
            label = "suffix_prefill" if part == "suffix" else part
            rules[f'model_tier:kvledger_ttft_part_seconds_per_request:ratio_rate5m{{part="{label}"}}'] = s[part] / s["split"]
        for rule, want in rules.items():
            with self.subTest(rule=rule):
                expr = rule.replace("ratio_rate5m", 'ratio_rate5m{model="llama-3.1-8b", tier="host"}', 1) \
                    if "{" not in rule else rule.replace('{', '{model="llama-3.1-8b", tier="host", ', 1)
                harness.poll(f"{rule} = {want}", lambda expr=expr, want=want: close(self.prometheus.value(expr), want),
                             deadline=30, interval=0.5)
        # Two copies were sent: the counter holds twice the hand sum.
        got = self.prometheus.value('kvledger_kv_byte_seconds_total{model="llama-3.1-8b", tier="host"}', at=self.at)
        self.assertTrue(close(got, 2 * s["kv_byte_seconds"]), (got, 2 * s["kv_byte_seconds"]))

    # Proves: the shipped recording rules all load and produce data on a real Prometheus, and the
    # job-level token hit ratio equals the trace's.
    def test_recording_rules_produce_data(self):
        with open(RULES) as f:
            names = sorted(set(re.findall(r"record: (\S+)", f.read())))
        self.assertGreater(len(names), 30)
        # This server has no live compute model (stated throughput): its fleet compute sums are
        # proven in fleet_rates_test.py.
        names.remove("model:kvledger_live_compute_fit_sums:increase10m")
        for name in names:
            with self.subTest(rule=name):
                harness.poll(f"{name} to be recorded", lambda: self.prometheus.query(name), deadline=30, interval=0.5)
        want = self.all.match / self.all.n
        harness.poll("the fleet logical ratio", lambda: close(self.prometheus.value(
            "job:kvledger_logical_match_tokens_per_prompt_token:ratio_rate5m"), want), deadline=30, interval=0.5)


class ScaleOutTest(unittest.TestCase):
    # Proves: three uneven replicas (60, 30 and 10 % of the records, each with its own hit ratios)
    # add up: the fleet (job-level) recording rules of one Prometheus scraping all three equal hand
    # arithmetic on what was sent (within rate()'s per-series extrapolation), where an average of the
    # replicas' ratios would not.
    def test_three_replicas_add_up(self):
        with tempfile.TemporaryDirectory() as tmp:
            servers = [harness.Server(SERVER, *stated_throughput(tmp), log_dir=tmp) for _ in range(3)]
            sd_file = os.path.join(tmp, "targets.json")
            publish_targets(sd_file, [])
            prometheus = harness.Prometheus(prometheus_config(sd_file), tmp)
            try:
                self.assertEqual(len(prometheus.rule_groups()), 7)
                trace = [r for r in make_trace(["llama-3.1-8b"], seed=11)]
                # Uneven replicas: ordered by hit ratio and split 60/30/10, so each replica holds a
                # different share of the records with a different hit ratio, and an average of the
                # replicas' ratios is far from the fleet's (checked below, so this test can fail it).
                ordered = sorted(trace, key=lambda r: r.logical_match_tokens / r.prompt_tokens)
                cuts = [0, len(ordered) * 6 // 10, len(ordered) * 9 // 10, len(ordered)]
                parts = [ordered[cuts[i]:cuts[i + 1]] for i in range(3)]
                stubs = []
                for s in servers:
                    channel = grpc.insecure_channel(s.grpc_address)
                    self.addCleanup(channel.close)
                    stubs.append(ledger_pb2_grpc.LedgerStub(channel))

                def send_parts():
                    for stub, part in zip(stubs, parts):
                        for r in part:
                            stub.Record(r, timeout=10)
                send_parts()
                per_replica = [sum(v for (n, _), v in harness.parse_exposition(s.scrape()).items()
                                   if n == "kvledger_requests_total") for s in servers]
                self.assertEqual(per_replica, [len(part) for part in parts])
                publish_targets(sd_file, [s.metrics_address for s in servers])
                harness.poll("three replicas scraped", lambda: prometheus.value(
                    "sum(kvledger_requests_total)") == len(trace) and prometheus.value(
                    'count(up{job="kvledger"} == 1)') == 3, deadline=60, interval=0.2)
                send_parts()
                harness.poll("the second copy scraped", lambda: prometheus.value(
                    "sum(kvledger_requests_total)") == 2 * len(trace), deadline=60, interval=0.2)
                shares = [independent_llama(part) for part in parts]
                mean_of_ratios = sum(x.match / x.n for x in shares) / 3
                t = independent_llama(trace)
                expected = {
                    "job:kvledger_logical_match_tokens_per_prompt_token:ratio_rate5m": t.match / t.n,
                    "job:kvledger_recoverable_tokens_per_prompt_token:ratio_rate5m": t.rec / t.n,
                    "job:kvledger_reused_tokens_per_prompt_token:ratio_rate5m": t.reused / t.n,
                    'job:kvledger_attention_avoided_flops_per_baseline:ratio_rate5m{boundary="reused"}':
                        t.att_reused / t.att_base,
                    'job:kvledger_prefill_avoided_flops_per_baseline:ratio_rate5m{boundary="reused"}':
                        t.pre_reused / t.pre_base,
                    "job:kvledger_prefill_ideal_speedup:ratio_rate5m": t.pre_base / (t.pre_base - t.pre_reused),
                    "job:kvledger_e2e_speedup_estimated:ratio_rate5m": t.e2e(),
                    'job:kvledger_recompute_tokens_per_logical_match_token:ratio_rate5m{cause="alignment"}':
                        t.align / t.match,
                    'job:kvledger_recompute_tokens_per_logical_match_token:ratio_rate5m{cause="restore"}':
                        t.restore / t.match,
                    "job:kvledger_reload_slower_than_recompute:ratio_rate5m": t.slower / t.compared,
                }
                # rate() extrapolates each replica's series by its own scrape phase, so uneven replicas
                # agree with the fleet's arithmetic to within a few interval/span, not exactly: 3 %,
                # against an average of the replicas' ratios that is more than 15 % off.
                self.assertGreater(abs(mean_of_ratios / (t.match / t.n) - 1), 0.15, (mean_of_ratios, t.match / t.n))
                for expr, want in expected.items():
                    with self.subTest(rule=expr):
                        seen = []

                        def matches():
                            seen.append(prometheus.value(expr))
                            return seen[-1] is not None and math.isclose(seen[-1], want, rel_tol=0.03)
                        try:
                            harness.poll(f"{expr} = {want}", matches, deadline=30, interval=0.5)
                        except AssertionError as e:
                            self.fail(f"{e}; last values {seen[-3:]}")
            finally:
                prometheus.stop()
                for s in servers:
                    self.assertEqual(s.stop(), 0)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
