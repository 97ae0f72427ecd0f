"""`kvledger plan` as a user runs it: the simulation checked request by request against an
independent implementation of the rules in docs/planning.md (written here, from the docs, not from
the C++), on a subset of the shipped conversation trace and the whole synthetic one, at several
capacities and tier stacks; every output format; bad traces; and --send into a real server whose
/metrics then equals the plan's totals.

Usage: plan_test.py CLI_BINARY SERVER_BINARY SOURCE_ROOT
"""
import collections
import csv
import io
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ElementTree

CLI, SERVER, ROOT = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402

TRACES = os.path.join(ROOT, "examples", "traces")
CONVERSATION = os.path.join(TRACES, "mooncake-conversation.jsonl")
SYNTHETIC = os.path.join(TRACES, "mooncake-synthetic.jsonl")
BLOCK = 512
# llama-3.1-8b (docs/models.md): 4 * hidden 4096 * 32 layers FLOPs per attended (query, key) pair;
# the engine's 16-token pages make the reusable boundary the match, at most N - 1, rounded down to 16.
PAIR_FLOPS = 4 * 4096 * 32
PAGE = 16


def load(path, lines=None):
    with open(path) as f:
        return [json.loads(line) for line in itertools.islice(f, lines)]


class IndependentPlan:
    """Block-level LRU tiers, top first, each holding what the one above evicts; a request's match is
    its leading blocks present in any tier, then all its blocks become most recent on top, tail first
    (as vLLM frees a finished request's blocks: its first block ends the most recent)."""

    def __init__(self, capacities_tokens):
        self.capacity = [None if c is None else c // BLOCK for c in capacities_tokens]
        self.tiers = [collections.OrderedDict() for _ in capacities_tokens]  # last = most recent

    def where(self, block):
        for i, tier in enumerate(self.tiers):
            if block in tier:
                return i
        return None

    def use(self, block):
        for tier in self.tiers:
            tier.pop(block, None)
        self.tiers[0][block] = True
        for i, tier in enumerate(self.tiers):
            while self.capacity[i] is not None and len(tier) > self.capacity[i]:
                victim, _ = tier.popitem(last=False)
                if i + 1 < len(self.tiers):
                    self.tiers[i + 1][victim] = True

    def request(self, r):
        found = []
        for block in r["hash_ids"]:
            tier = self.where(block)
            if tier is None:
                break
            found.append(tier)
        match = min(len(found) * BLOCK, r["input_length"])
        served = [found.count(i) * BLOCK for i in range(len(self.tiers))]
        if found:
            served[found[-1]] -= len(found) * BLOCK - match
        names = ["device", "host", "disk"]
        tier = "none" if not found else names[found[0]] if len(set(found)) == 1 else "mixed"
        for block in reversed(r["hash_ids"]):
            self.use(block)
        return tier, match, served


def independent_totals(trace, capacities):
    plan = IndependentPlan(capacities)
    by_tier = collections.defaultdict(lambda: collections.Counter())
    served_total = [0] * len(capacities)
    for r in trace:
        tier, match, served = plan.request(r)
        n = r["input_length"]
        reused = min(match, n - 1) // PAGE * PAGE
        c = by_tier[tier]
        c["requests"] += 1
        c["hit_requests"] += match > 0
        c["prompt_tokens"] += n
        c["logical_match_tokens"] += match
        c["attention_baseline_flops"] += PAIR_FLOPS * n * (n + 1) // 2
        c["attention_avoided_flops"] += PAIR_FLOPS * reused * (reused + 1) // 2
        served_total = [a + b for a, b in zip(served_total, served)]
    return by_tier, served_total


def run(*args, stdin=None):
    return subprocess.run([CLI, "plan", *args], capture_output=True, text=True, timeout=120, input=stdin)


def plan_json(trace_path, *args):
    result = run("--model", "llama-3.1-8b", "--json", *args, trace_path)
    if result.returncode != 0:
        raise AssertionError(result.stderr)
    return json.loads(result.stdout)


def flag(capacity):
    return "inf" if capacity is None else str(capacity)


class AgainstIndependentImplementation(unittest.TestCase):
    FIELDS = ("requests", "hit_requests", "prompt_tokens", "logical_match_tokens", "attention_baseline_flops",
              "attention_avoided_flops")

    def check(self, trace_path, trace, device_capacities, lower=(), extra=()):
        args = ["--capacity-tokens", ",".join(flag(c) for c in device_capacities), *extra]
        for name, capacity in zip(("--host-capacity-tokens", "--disk-capacity-tokens"), lower):
            args += [name, flag(capacity)]
        out = plan_json(trace_path, *args)
        self.last = out
        ordered = sorted(device_capacities, key=lambda c: float("inf") if c is None else c)
        self.assertEqual(len(out["results"]), len(ordered))
        for capacity, result in zip(ordered, out["results"]):
            with self.subTest(device=capacity, lower=lower):
                self.assertEqual(result["capacity_tokens"]["device"], capacity)
                by_tier, served = independent_totals(trace, [capacity, *lower])
                self.assertEqual(set(result["by_tier"]), set(by_tier))
                for tier, expected in by_tier.items():
                    got = result["by_tier"][tier]
                    self.assertEqual({k: got[k] for k in self.FIELDS}, {k: expected[k] for k in self.FIELDS}, tier)
                total = result["total"]
                for k in self.FIELDS:
                    self.assertEqual(total[k], sum(c[k] for c in by_tier.values()), k)
                names = ["device", "host", "disk"][:len(served)]
                self.assertEqual([result["matched_tokens_from"][n] for n in names], served)
                self.assertEqual(total["token_hit_ratio"], total["logical_match_tokens"] / total["prompt_tokens"])

    def test_conversation_subset_device_only(self):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
            trace = load(CONVERSATION, 1500)
            f.writelines(json.dumps(r) + "\n" for r in trace)
            f.flush()
            self.check(f.name, trace, [0, 4096, 100_000, 1_000_000, 3_000_000, None])

    def test_conversation_subset_with_host_and_disk(self):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
            trace = load(CONVERSATION, 1500)
            f.writelines(json.dumps(r) + "\n" for r in trace)
            f.flush()
            self.check(f.name, trace, [50_000, 500_000], lower=(1_000_000,))
            self.check(f.name, trace, [20_000, 200_000], lower=(300_000, 2_000_000))
            self.check(f.name, trace, [100_000], lower=(None,))

    def test_whole_synthetic_trace(self):
        self.check(SYNTHETIC, load(SYNTHETIC), [1_000_000, 10_000_000], lower=(20_000_000,))

    # The agentic-coding trace plans whole (its output_length 0 lines included), and with
    # --use-order prompt the token hit at each capacity equals the prefix token hit an independent
    # Python LRU that uses blocks in prompt order gave for it (the figures published with the trace,
    # docs/planning.md); by default (tail first) it equals IndependentPlan's.
    def test_whole_agentic_coding_trace(self):
        import lzma
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "weka.jsonl")
            with lzma.open(os.path.join(TRACES, "weka-agentic-coding-512.jsonl.xz")) as f, open(path, "wb") as out:
                out.write(f.read())
            result = subprocess.run([CLI, "plan", "--model", "llama-3.1-8b", "--capacity-tokens",
                                     "512000,2048000,8192000,32768000,inf", "--use-order", "prompt", "--json", path],
                                    capture_output=True, text=True, timeout=300)
            self.assertEqual(result.returncode, 0, result.stderr)
            plan = json.loads(result.stdout)
            hits = [r["total"]["token_hit_ratio"] for r in plan["results"]]
            for got, want in zip(hits, (0.12679, 0.55241, 0.92750, 0.95221, 0.95252)):
                self.assertAlmostEqual(got, want, delta=5e-6)
            self.assertEqual(plan["results"][0]["total"]["requests"], 11849)
            # No reload or recompute estimate without rates: unknown, not 0.
            self.assertIsNone(plan["results"][0]["total"]["reload_seconds"])
            self.check(path, load(path), [512_000, 8_192_000])

    # With a context of 131,072 tokens (llama-3.1-8b's max_model_len), the agentic-coding prompts that
    # leave no room for an output token are counted apart and never enter the cache: the plan equals
    # the independent LRU over the requests that fit, and the text names what was left out.
    def test_agentic_coding_within_a_context(self):
        import lzma
        context = 131072
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "weka.jsonl")
            with lzma.open(os.path.join(TRACES, "weka-agentic-coding-512.jsonl.xz")) as f, open(path, "wb") as out:
                out.write(f.read())
            trace = load(path)
            fits = [r for r in trace if r["input_length"] + 1 <= context]
            beyond = [(i + 1, r["input_length"]) for i, r in enumerate(trace) if r["input_length"] + 1 > context]
            self.check(path, fits, [2_048_000, None], extra=("--context-tokens", str(context)))
            self.assertEqual(self.last["context_tokens"], context)
            self.assertEqual(self.last["beyond_context"], {
                "requests": len(beyond), "prompt_tokens": sum(n for _, n in beyond),
                "longest_prompt_tokens": max(n for _, n in beyond), "first_line": beyond[0][0]})
            text = run("--model", "llama-3.1-8b", "--context-tokens", "1.31072e5", path)
            self.assertEqual(text.returncode, 0, text.stderr)
            self.assertIn(f"{len(fits)} requests planned", text.stdout)
            self.assertIn(f"context: {context} tokens; {len(beyond)} requests ({100 * len(beyond) / len(trace):.1f}%",
                          text.stdout)
            self.assertIn(f"the first at line {beyond[0][0]}: an engine refuses them", text.stdout)
            self.assertIn(f"note: {len(beyond)} requests have a prompt beyond the context", text.stderr)
        # Without one, the header says none is stated; JSON gives null and an empty count.
        plain = run("--model", "llama-3.1-8b", CONVERSATION)
        self.assertIn("context: not stated for llama-3.1-8b (the longest prompt is", plain.stdout)
        out = plan_json(CONVERSATION)
        self.assertIsNone(out["context_tokens"])
        self.assertEqual(out["beyond_context"]["requests"], 0)
        self.assertIsNone(out["beyond_context"]["first_line"])
        bad = run("--model", "llama-3.1-8b", "--context-tokens", "1", CONVERSATION)
        self.assertEqual((bad.returncode, bad.stderr.strip()),
                         (2, "kvledger plan: --context-tokens = 1: must be in [2, 2147483648] tokens"))

    # Capacities that cannot be what was meant are noted (the plan still runs); a plot says what it
    # wrote, names model and trace, and its share axis stops just above the data (the conversation
    # trace's hit ratio stays below 40 %).
    def test_capacity_notes_and_plot_message(self):
        with tempfile.TemporaryDirectory() as tmp:
            svg = os.path.join(tmp, "curve.svg")
            result = run("--model", "llama-3.1-8b", "--capacity-tokens", "0,1024,1e6,1e7,inf", "--plot", svg,
                         CONVERSATION)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("note: --capacity-tokens = 0: less than one block of 512 tokens", result.stderr)
            self.assertIn("note: --capacity-tokens = 1024 tokens is 128.0 MiB of llama-3.1-8b's KV: capacities are in "
                          "tokens (1 GiB holds 8192 tokens of this model)", result.stderr)
            self.assertIn(f"wrote {svg}: token hit, attention and prefill avoided of llama-3.1-8b on {CONVERSATION} "
                          "at 3 device capacities and unlimited, y axis to 40 %", result.stderr)
            texts = [t.text for t in ElementTree.parse(svg).iter("{http://www.w3.org/2000/svg}text")]
            self.assertIn("What a device KV cache of each capacity buys: llama-3.1-8b on mooncake-conversation.jsonl",
                          texts)
            self.assertIn("40%", texts)
            self.assertNotIn("100%", texts)

    # A record file given to plan, and a trace given to replay: each says which command reads it.
    def test_each_command_names_the_other(self):
        records = os.path.join(ROOT, "examples", "trace.jsonl")
        planned = run("--model", "llama-3.1-8b", records)
        self.assertEqual(planned.returncode, 2)
        self.assertIn("the line is a kvledger record (prompt_tokens, ...): kvledger replay reads record files, "
                      "kvledger plan reads prefix-reuse traces", planned.stderr)
        replayed = subprocess.run([CLI, "replay", "--target", "127.0.0.1:1", CONVERSATION], capture_output=True,
                                  text=True, timeout=120)
        self.assertIn("the line is a prefix-reuse trace request (input_length, hash_ids): kvledger plan reads "
                      "traces, kvledger replay reads record files", replayed.stdout + replayed.stderr)

    # A partial last block: the match stops at the prompt's length, and the block size is a flag.
    def test_block_size_and_partial_blocks(self):
        trace = [{"timestamp": 0, "input_length": 40, "output_length": 1, "hash_ids": [1, 2, 3]},
                 {"timestamp": 1, "input_length": 35, "output_length": 1, "hash_ids": [1, 2, 3]},
                 {"timestamp": 2, "input_length": 20, "output_length": 1, "hash_ids": [1, 9]}]
        text = "".join(json.dumps(r) + "\n" for r in trace)
        result = run("--model", "llama-3.1-8b", "--json", "--block-tokens", "16", "-", stdin=text)
        self.assertEqual(result.returncode, 0, result.stderr)
        total = json.loads(result.stdout)["results"][0]["total"]
        self.assertEqual((total["logical_match_tokens"], total["hit_requests"]), (35 + 16, 2))


class OtherFormats(unittest.TestCase):
    """Bailian and LMCache lookup-log traces, written here from their documented fields, plan exactly as
    the Mooncake trace this test converts them to by the rules in docs/planning.md ("The trace")."""

    FIELDS = AgainstIndependentImplementation.FIELDS

    @staticmethod
    def conversations(seed):
        """(seconds, prompt blocks as content ids, output tokens) of multi-turn chats whose blocks repeat
        content at other positions, so raw and chained ids differ."""
        rng = random.Random(seed)
        requests, clock = [], 0.0
        chats = [[rng.randrange(6) for _ in range(rng.randrange(1, 4))] for _ in range(25)]
        for turn in range(6):
            for chat in chats:
                clock += rng.uniform(0.01, 0.5)
                chat.extend(rng.randrange(40) for _ in range(rng.randrange(1, 5)))
                requests.append((round(clock, 3), list(chat), rng.randrange(0, 50)))
        return requests

    def mooncake_of(self, rows, block):
        """rows: (ms, input_length, output_length, chained keys per block)."""
        ids, lines = {}, []
        for ms, length, out, keys in rows:
            lines.append(json.dumps({"timestamp": ms, "input_length": length, "output_length": out,
                                     "hash_ids": [ids.setdefault(k, len(ids)) for k in keys]}))
        return "\n".join(lines) + "\n"

    def same_plan(self, text, mooncake, block, *args):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a.jsonl"), os.path.join(tmp, "b.jsonl")
            with open(a, "w") as f:
                f.write(text)
            with open(b, "w") as f:
                f.write(mooncake)
            capacities = ["--capacity-tokens", f"{block * 8},{block * 40},inf"]
            got = plan_json(a, *capacities, *args)
            want = plan_json(b, *capacities, "--block-tokens", str(block))
        self.assertEqual(got["block_tokens"], block)
        for g, w in zip(got["results"], want["results"]):
            self.assertEqual({k: g["total"][k] for k in self.FIELDS}, {k: w["total"][k] for k in self.FIELDS})
        self.assertGreater(got["results"][-1]["total"]["hit_requests"], 0)
        return got

    def test_bailian_plans_as_its_chained_blocks(self):
        lines, rows = [], []
        for chat_id, (seconds, blocks, out) in enumerate(self.conversations(1)):
            length = len(blocks) * 16 - (chat_id % 7)
            lines.append(json.dumps({"chat_id": chat_id, "parent_chat_id": -1, "timestamp": seconds,
                                     "input_length": length, "output_length": out, "type": "text", "turn": 1,
                                     "hash_ids": blocks}))
            rows.append((round(seconds * 1000), length, out, [tuple(blocks[:i + 1]) for i in range(len(blocks))]))
        text = "\n".join(lines) + "\n"
        got = self.same_plan(text, self.mooncake_of(rows, 16), 16)
        # raw ids as if chained would claim more: the chaining is what the match sees
        raw = [(ms, n, out, [(k[-1],) for k in keys]) for ms, n, out, keys in rows]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "raw.jsonl")
            with open(path, "w") as f:
                f.write(self.mooncake_of(raw, 16))
            unchained = plan_json(path, "--block-tokens", "16")["results"][0]["total"]
        self.assertGreater(unchained["logical_match_tokens"], got["results"][-1]["total"]["logical_match_tokens"])

    def test_lmcache_lookups_plan_as_their_hashes(self):
        lines, rows, seen = [], [], set()
        for i, (seconds, blocks, _) in enumerate(self.conversations(2)):
            length = len(blocks) * 256 - (0 if i % 3 else 100)  # every third prompt ends in a partial chunk
            keys = [tuple(blocks[:j + 1]) for j in range(len(blocks))]
            hashes = ["0x%016x" % (hash(k) & (2 ** 64 - 1)) for k in keys]
            if length % 256:
                hashes.pop()  # the partial chunk unhashed: an id of its own
                keys[-1] = ("tail", i)
            line = {"timestamp": 1711929600 + seconds, "request_id": f"req-{i}", "model_name": "m",
                    "chunk_size": 256, "seq_len": length, "dtypes": ["bfloat16"], "shapes": [[2, 32, 256, 8, 128]],
                    "chunk_hashes": hashes}
            lines.append(json.dumps(line))
            if i % 5 == 0:
                lines.append(json.dumps(line))  # asked again while waiting: one request
            rows.append((round((1711929600 + seconds) * 1000), length, 0, keys))
        text = "\n".join(lines) + "\n"
        self.same_plan(text, self.mooncake_of(rows, 256), 256)
        result = run("--model", "llama-3.1-8b", "-", stdin=text)
        self.assertIn(f"note: {len(lines) - len(rows)} lookups repeat a request id already read", result.stderr)
        self.assertIn("--format", run("--model", "llama-3.1-8b", "--format", "csv", "-", stdin=text).stderr)
        forced = run("--model", "llama-3.1-8b", "--format", "mooncake", "-", stdin=text)
        self.assertEqual(forced.returncode, 2)
        self.assertRegex(forced.stderr, r"line 1: timestamp = [0-9.]+: must be an integer")


    # The two WEKA conversation files shipped in examples/traces/weka/, piped one a line, plan as the
    # Mooncake trace converted here by the rules in docs/planning.md (60 s apart, a 512-token block named
    # by its last 64-token id, ids kept per conversation, partial tails never hit, ordered by time).
    def test_weka_conversations_plan_as_converted(self):
        names = [os.path.join(ROOT, "examples", "traces", "weka", n) for n in ("trace_0001.json", "trace_0002.json")]
        text, rows = "", []
        for k, name in enumerate(names):
            with open(name) as f:
                raw = f.read()
            text += raw.strip() + "\n"
            conversation = json.loads(raw)
            for order, r in enumerate(conversation["requests"]):
                length = r["in"]
                keys = [(k, r["hash_ids"][(j + 1) * 8 - 1]) for j in range(length // 512)]
                if length % 512:
                    keys.append(("tail", k, order))
                rows.append((round((k * 60 + r["t"]) * 1000), k, order, length, r["out"], keys))
        rows.sort(key=lambda r: r[:3])
        mooncake = self.mooncake_of([(ms, n, out, keys) for ms, _, _, n, out, keys in rows], 512)
        got = self.same_plan(text, mooncake, 512)
        self.assertEqual(got["results"][0]["total"]["requests"], 41 + 33)


class OutputFormats(unittest.TestCase):
    def test_text_csv_and_plot(self):
        with tempfile.TemporaryDirectory() as tmp:
            svg = os.path.join(tmp, "curve.svg")
            args = ["--model", "llama-3.1-8b", "--capacity-tokens", "1e5:1e7:3,inf", SYNTHETIC]
            text = run(*args, "--plot", svg)
            self.assertEqual(text.returncode, 0, text.stderr)
            self.assertIn("3993 requests", text.stdout)
            self.assertIn("by record tier, device 100000 tokens", text.stdout)
            root = ElementTree.parse(svg).getroot()
            self.assertEqual(len(root.findall("{http://www.w3.org/2000/svg}polyline")), 3)
            rows = list(csv.DictReader(io.StringIO(run(*args, "--csv").stdout)))
            totals = [r for r in rows if r["tier"] == "total"]
            self.assertEqual([r["device_capacity_tokens"] for r in totals], ["100000", "1000000", "10000000", "inf"])
            out = plan_json(SYNTHETIC, "--capacity-tokens", "1e5:1e7:3,inf")
            for row, result in zip(totals, out["results"]):
                self.assertEqual(int(row["attention_avoided_flops"]), result["total"]["attention_avoided_flops"])
                self.assertEqual(float(row["token_hit_ratio"]), result["total"]["token_hit_ratio"])

    # Seconds: reload from the host at its bandwidth, recompute at the stated compute rate.
    def test_seconds_with_rates(self):
        out = plan_json(SYNTHETIC, "--capacity-tokens", "1e6", "--host-capacity-tokens", "1e8",
                        "--host-bandwidth", "1e10", "--compute-flops-per-second", "1e14")
        total = out["results"][0]["total"]
        self.assertEqual(total["compared_hits"], total["hit_requests"])
        self.assertGreater(total["reload_seconds"], 0)
        self.assertGreater(total["recompute_seconds"], total["reload_seconds"])
        slow = plan_json(SYNTHETIC, "--capacity-tokens", "1e6", "--host-capacity-tokens", "1e8",
                         "--host-bandwidth", "1e6", "--compute-flops-per-second", "1e14")["results"][0]["total"]
        self.assertGreater(slow["cheaper_recomputed_hits"], total["cheaper_recomputed_hits"])


class BadInput(unittest.TestCase):
    GOOD = '{"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}\n'

    def fails(self, text, *expected, args=()):
        result = run("--model", "llama-3.1-8b", *args, "-", stdin=text)
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        for e in expected:
            self.assertIn(e, result.stderr)
        return result.stderr

    def test_trace_problems_name_line_and_field(self):
        self.fails(self.GOOD + '{"timestamp": 6, "input_length": 600, "output_length": 3}\n',
                   "line 2: hash_ids: missing")
        self.fails(self.GOOD + '{"timestamp": 6, "input_length": -4, "output_length": 3, "hash_ids": []}\n',
                   "line 2: input_length = -4")
        self.fails(self.GOOD + '{"timestamp": 6, "input_length": 600, "output_length": 3, "hash_ids": [1,2,3]}\n',
                   "line 2: hash_ids", "3", "--block-tokens")
        self.fails(self.GOOD + '{"timestamp": 4, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}\n',
                   "line 2: timestamp = 4")
        self.fails(self.GOOD + '{"timestamp": 6, "input_length": 600, "outp', "line 2", "truncated")
        self.fails("not json\n", "line 1")

    def test_every_problem_counted(self):
        bad = '{"timestamp": 9, "input_length": 0, "output_length": 3, "hash_ids": []}\n'
        err = self.fails(self.GOOD + bad * 12, "12 problems", "line 2:", "line 11:", "2 more not listed")
        self.assertNotIn("line 12:", err)

    def test_flags(self):
        self.fails(self.GOOD, "--capacity-tokens", args=("--capacity-tokens", "1.5"))
        self.fails(self.GOOD, "--capacity-tokens", args=("--capacity-tokens", "5:1:3"))
        self.fails(self.GOOD, "--disk-capacity-tokens needs --host-capacity-tokens",
                   args=("--disk-capacity-tokens", "1e6"))
        self.fails(self.GOOD, "--send", args=("--send",))
        self.fails(self.GOOD, "--plot", "SVG", args=("--plot", "x.png", "--capacity-tokens", "1,2"))
        result = run("--model", "nope", "-", stdin=self.GOOD)
        self.assertEqual(result.returncode, 2)
        self.assertIn("--model = nope: no profile of that name", result.stderr)


class SendToServer(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.server = harness.Server(SERVER, log_dir=self.tmp.name)

    def tearDown(self):
        self.server.stop()
        self.tmp.cleanup()

    def metric(self, samples, name, **labels):
        return sum(v for (n, ls), v in samples.items()
                   if n == name and all((k, val) in ls for k, val in labels.items()))

    # The server's counters equal the plan's totals: requests and tokens by tier, attention avoided.
    def test_metrics_equal_plan(self):
        self.check_sent(2000)

    # Within a context, the requests an engine refuses are not sent: the server counts what the plan
    # planned (the first 2,000 conversation requests, 532 of them past 16,384 tokens).
    def test_metrics_equal_plan_within_a_context(self):
        self.check_sent(2000 - 532, "--context-tokens", "16384")

    def check_sent(self, planned, *extra):
        trace_path = os.path.join(self.tmp.name, "head.jsonl")
        trace = load(CONVERSATION, 2000)
        with open(trace_path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in trace)
        self.assertEqual(sum(r["input_length"] + 1 > 16384 for r in trace), 532)
        args = ["--capacity-tokens", "3e5", "--host-capacity-tokens", "3e6", "--host-bandwidth", "2e10", *extra]
        offline = plan_json(trace_path, *args)["results"][0]
        self.assertEqual(offline["total"]["requests"], planned)
        sent = run("--model", "llama-3.1-8b", "--json", "--send", "--target", self.server.grpc_address, *args,
                   trace_path)
        self.assertEqual(sent.returncode, 0, sent.stderr)
        self.assertIn(f"sent {planned} records", sent.stderr)
        self.assertIn(f"{planned} counted, 0 rejected, 0 not delivered", sent.stderr)
        self.assertEqual(json.loads(sent.stdout)["results"][0], offline)
        samples = harness.parse_exposition(self.server.scrape())
        for tier, totals in offline["by_tier"].items():
            with self.subTest(tier=tier):
                self.assertEqual(self.metric(samples, "kvledger_requests_total", tier=tier), totals["requests"])
                self.assertEqual(self.metric(samples, "kvledger_logical_match_tokens_total", tier=tier),
                                 totals["logical_match_tokens"])
                self.assertEqual(self.metric(samples, "kvledger_reused_tokens_total", tier=tier),
                                 totals["reused_tokens"])
        total = offline["total"]
        attention = self.metric(samples, "kvledger_attention_avoided_flops_total", boundary="reused")
        self.assertAlmostEqual(attention / total["attention_avoided_flops"], 1, places=12)
        self.assertEqual(self.metric(samples, "kvledger_prompt_tokens_total"), total["prompt_tokens"])

    # --speedup paces the records by the trace's clock: 1 s of trace at 4x takes at least 0.25 s.
    def test_speedup_paces(self):
        text = "".join(json.dumps({"timestamp": t, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}) + "\n"
                       for t in (0, 500, 1000))
        start = time.monotonic()
        result = run("--model", "llama-3.1-8b", "--send", "--speedup", "4", "--target", self.server.grpc_address,
                     "-", stdin=text)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertGreaterEqual(time.monotonic() - start, 0.25)
        samples = harness.parse_exposition(self.server.scrape())
        self.assertEqual(self.metric(samples, "kvledger_requests_total"), 3)

    # With --target and no rate flags the server's rates are used; an unreachable server is exit 1.
    def test_live_rates_and_unreachable(self):
        result = run("--model", "llama-3.1-8b", "--target", self.server.grpc_address, "--capacity-tokens", "1e6",
                     SYNTHETIC)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.server.stop()
        result = run("--model", "llama-3.1-8b", "--target", self.server.grpc_address, "--timeout", "2", SYNTHETIC)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("cannot reach", result.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
