"""The /explore page in a real browser: headless Chromium (Debian's) loads it from a running
kvledger-server, driven over the DevTools protocol. The test checks that every displayed figure
equals the JSON API's answer for the same inputs, moves the alpha slider with the keyboard and
checks again, checks a worked example of docs/cost-model.md (reusing half of a prompt leaves three
quarters of full attention), that the "Your trace" section shows /api/v1/plan's figures for the
trace the server was given (within a context typed in, naming what it leaves out; and says how to
give a trace when there is none), that the live section
shows /api/v1/capacity's curve for records sent with block ids, that the page loads
nothing from outside the server (it works offline), and saves a screenshot.

Usage: explore_test.py KVLEDGER_SERVER PYTHON_STUBS_DIR SCREENSHOT_PATH
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.parse
import urllib.request

SERVER, SCREENSHOT = sys.argv[1], sys.argv[3]
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
del sys.argv[1:4]

import grpc  # noqa: E402
import websocket  # noqa: E402  (Debian's python3-websocket)

from harness import Server, poll  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402

TRACE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "traces",
                     "mooncake-synthetic.jsonl")
CHROMIUM = shutil.which("chromium")
DEVTOOLS = re.compile(r"DevTools listening on (ws://\S+)")


class Browser:
    """One headless Chromium and one page, over the DevTools protocol."""

    def __init__(self, tmp):
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-port=0", "--remote-allow-origins=*", f"--user-data-dir={tmp}/profile",
             "--window-size=1400,1100", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        browser_url = None
        while browser_url is None:  # Chromium prints the address once it listens (or exits)
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError("chromium exited before listening")
            m = DEVTOOLS.search(line)
            browser_url = m.group(1) if m else None
        port = urllib.parse.urlparse(browser_url).port
        targets = poll("a page target", lambda: [t for t in json.load(
            urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10)) if t["type"] == "page"])
        self.ws = websocket.create_connection(targets[0]["webSocketDebuggerUrl"], timeout=30)
        self.next_id = 0
        self.requests = []
        self.call("Network.enable")
        self.call("Page.enable")

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("method") == "Network.requestWillBeSent":
                self.requests.append(message["params"]["request"]["url"])
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def press(self, key, code, key_code):
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code, windowsVirtualKeyCode=key_code)

    def close(self):
        self.ws.close()
        self.proc.kill()
        self.proc.wait()
        self.proc.stderr.close()


FIGURES = ["remaining-full", "speedup-full", "remaining-swa", "speedup-swa", "remaining-recurrent",
           "speedup-recurrent", "remaining-model", "speedup-model", "block-remaining", "block-speedup",
           "e2e-speedup", "request-speedup", "request-bound", "boundary-logical", "boundary-recoverable", "boundary-reused", "reused-bytes", "kv-bytes",
           "bytes-per-token", "max-tokens", "fleet-requests", "fleet-logical-hit", "fleet-reused-hit",
           "fleet-attention-avoided", "fleet-prefill-avoided", "advice-recompute"] + \
          [f"advice-{what}-{tier}" for tier in ("device", "host", "disk", "remote") for what in ("reload", "prefill")]
SECONDS = {f for f in FIGURES if f.startswith("advice-")}


SPEEDUPS = {"speedup-full", "speedup-swa", "speedup-recurrent", "speedup-model", "block-speedup", "e2e-speedup",
            "request-speedup", "request-bound"}
SHARES = {"remaining-full", "remaining-swa", "remaining-recurrent", "remaining-model", "block-remaining",
          "fleet-logical-hit", "fleet-reused-hit", "fleet-attention-avoided", "fleet-prefill-avoided"}
BYTES = {"reused-bytes", "kv-bytes", "bytes-per-token"}
BINARY = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50}


def read_back(figure, text):
    """The number a person reads in a figure's text, in the API's unit: a share as a fraction, bytes
    from binary units, a speedup without its ×."""
    if figure in SHARES:
        assert text.endswith(" %"), (figure, text)
        return float(text[:-2]) / 100
    if figure in BYTES:
        number, unit = text.split(" ")
        return float(number) * BINARY[unit]
    if figure in SPEEDUPS:
        assert text.endswith("×"), (figure, text)
        return float(text[:-1])
    if figure in SECONDS:
        assert text.endswith(" s"), (figure, text)
        return float(text[:-2])
    return float(text)


@unittest.skipIf(CHROMIUM is None, "chromium is not installed (scripts/setup installs it)")
class ExploreTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvledger-explore-")
        self.server = Server(SERVER, f"--trace_file={TRACE}", log_dir=self.tmp)
        self.addCleanup(self.server.stop)
        with grpc.insecure_channel(self.server.grpc_address) as channel:
            stub = ledger_pb2_grpc.LedgerStub(channel)
            for model, match in (("llama-3.1-8b", 4096), ("llama-3.1-8b", 2000), ("llama-3.1-8b", 0),
                                 ("kimi-linear-48b-a3b", 6000)):
                stub.Record(record_pb2.Record(model=model, tier=record_pb2.TIER_HOST if match else 0,
                                              prompt_tokens=8192, logical_match_tokens=match), timeout=10)
            # Misses of several sizes with measured prefills make llama's compute model live, and one
            # host hit its host bandwidth: the Advise section has live figures beside unknown ones.
            for n in (512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 512):
                flops = 524288 * n * (n + 1) // 2 + 13958643712 * n
                stub.Record(record_pb2.Record(model="llama-3.1-8b", prompt_tokens=n, logical_match_tokens=0,
                                              suffix_prefill_seconds=0.005 + flops / 2e14), timeout=10)
            stub.Record(record_pb2.Record(model="llama-3.1-8b", tier=record_pb2.TIER_HOST, prompt_tokens=8192,
                                          logical_match_tokens=4096, reload_seconds=0.05), timeout=10)
        poll("llama's compute model to be ready", lambda: self.api("/api/v1/advise", model="llama-3.1-8b",
                                                                   prompt_tokens="8192")["compute"]["basis"] == "live")
        self.browser = Browser(self.tmp)
        self.addCleanup(self.browser.close)

    def api(self, path, **params):
        url = f"http://{self.server.metrics_address}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())

    def expected(self, alpha, model="llama-3.1-8b", page="16", checkpoint="256"):
        """What the page must show for its default inputs at `alpha` (with this model, KV page size and
        checkpoint interval), straight from the API."""
        base = dict(prompt_tokens="8192")
        full = self.api("/api/v1/calc", alpha=alpha, **base)
        swa = self.api("/api/v1/calc", alpha=alpha, attention="swa", window="1024", **base)
        rec = self.api("/api/v1/calc", alpha=alpha, attention="recurrent", checkpoint=checkpoint, **base)
        name = model
        model = self.api("/api/v1/explain", model=name, tier="host", alpha=alpha, kv_page_tokens=page,
                         recurrent_checkpoint_tokens=checkpoint, **base)
        block = self.api("/api/v1/calc", alpha=alpha, beta="0.30", overhead="0.05", queue_share="0.10",
                         decode_share="0.50", **base)
        kv = self.api("/api/v1/kv-bytes", model=name, tokens="8192", budget_bytes=str(40 << 30))
        match = int(float(alpha) * 8192)
        query = [("model", name), ("prompt_tokens", "8192")] + \
            [("candidate", f"{t}:{match}") for t in ("device", "host", "disk", "remote")]
        with urllib.request.urlopen(f"http://{self.server.metrics_address}/api/v1/advise?"
                                    f"{urllib.parse.urlencode(query)}", timeout=10) as r:
            advice = json.loads(r.read())
        self.advice = advice
        by_tier = {c["tier"]: c for c in advice["candidates"]}
        fleet = next((m for m in self.api("/api/v1/totals")["models"] if m["model"] == name),
                     dict.fromkeys(["requests", "logical_hit_ratio", "reused_hit_ratio", "attention_avoided_fraction",
                                    "prefill_avoided_fraction"]))
        return {
            "remaining-full": full["attention_remaining"], "speedup-full": full["attention_speedup"],
            "remaining-swa": swa["attention_remaining"], "speedup-swa": swa["attention_speedup"],
            "remaining-recurrent": rec["attention_remaining"], "speedup-recurrent": rec["attention_speedup"],
            "remaining-model": model["attention_remaining_fraction"],
            "speedup-model": model["attention_speedup"],
            "block-remaining": block["block_remaining"], "block-speedup": block["block_speedup"],
            "e2e-speedup": block["e2e_speedup"], "request-speedup": block["request_speedup"],
            "request-bound": block["request_speedup_bound"],
            "boundary-logical": model["logical_match_tokens"],
            "boundary-recoverable": model["recoverable_tokens"], "boundary-reused": model["reused_tokens"],
            "reused-bytes": model["reused_bytes"], "kv-bytes": kv["kv_bytes"],
            "bytes-per-token": kv["bytes_per_token"], "max-tokens": kv["max_tokens"],
            "fleet-requests": fleet["requests"], "fleet-logical-hit": fleet["logical_hit_ratio"],
            "fleet-reused-hit": fleet["reused_hit_ratio"],
            "fleet-attention-avoided": fleet["attention_avoided_fraction"],
            "fleet-prefill-avoided": fleet["prefill_avoided_fraction"],
            "advice-recompute": advice["recompute_all_seconds"],
            **{f"advice-{what}-{t}": by_tier[t][f"{what}_seconds"] for t in by_tier for what in ("reload", "prefill")},
        }

    def displayed(self):
        return self.browser.evaluate(
            "JSON.stringify(Object.fromEntries(%s.map((id) => [id, [document.getElementById(id).dataset.value,"
            " document.getElementById(id).textContent, document.getElementById(id).title]])))" % json.dumps(FIGURES))

    def wait_ready(self, after):
        return poll("the page to draw", lambda: int(self.browser.evaluate("document.body.dataset.ready || '0'") or 0)
                    > after and int(self.browser.evaluate("document.body.dataset.ready")))

    def assert_shows(self, alpha, **inputs):
        shown = json.loads(self.displayed())
        self.assertEqual(self.browser.evaluate("document.getElementById('error').textContent"), "")
        for figure, value in self.expected(alpha, **inputs).items():
            exact, text, title = shown[figure]
            # The exact value the API gave (kept in data-value and shown on hover) ...
            want = "null" if value is None else (json.dumps(value) if not isinstance(value, str) else value)
            if isinstance(value, float) and value.is_integer():
                want = str(int(value))
            if figure in SECONDS and value is not None:  # a live fit is refitted each second: its last bits move
                self.assertAlmostEqual(float(exact) / value, 1, delta=1e-9, msg=figure)
                want = exact
            self.assertEqual(exact, want, figure)
            if value is None:
                self.assertEqual(text, "unbounded" if figure in SPEEDUPS else "—", figure)
                continue
            self.assertTrue(title.startswith("exact: " + want), (figure, title))
            # ... and what a person reads: read back from the text in its unit, the same value.
            self.assertAlmostEqual(read_back(figure, text) / float(value), 1, delta=1e-3, msg=(figure, text, value))
        # The Advise answer with its basis, as the API gives it.
        answer = self.browser.evaluate("document.getElementById('advice-recommendation').textContent")
        if self.advice["recommendation"] is None:
            self.assertTrue(answer.startswith("unknown"), answer)
        else:
            self.assertTrue(answer.startswith(self.advice["recommendation"]), answer)
        self.assertEqual("a tie" in answer, self.advice["tie"], answer)  # said where the API says so
        for c in self.advice["candidates"]:
            self.assertEqual(self.browser.evaluate(f"document.getElementById('advice-basis-{c['tier']}').textContent"),
                             c["basis"])

    def test_page_shows_the_api_figures_and_follows_the_slider(self):
        url = f"http://{self.server.metrics_address}/explore"
        # Until the API has answered, the page says it is loading (hidden once it has drawn).
        with urllib.request.urlopen(url, timeout=10) as r:
            self.assertIn('<div id="loading">Loading', r.read().decode())
        self.browser.call("Page.navigate", url=url)
        ready = self.wait_ready(0)
        self.assertEqual(self.browser.evaluate("document.getElementById('model').value"), "llama-3.1-8b")
        self.assert_shows("0.50")
        # Reload or recompute: llama's host reload is live and known, so there is an answer; the device,
        # disk and remote bandwidths nobody measured or stated are "none", their reloads unknown.
        self.assertEqual(self.advice["compute"]["basis"], "live")
        self.assertEqual({c["tier"]: c["basis"] for c in self.advice["candidates"]},
                         {"device": "none", "host": "live", "disk": "none", "remote": "none"})
        self.assertIsNotNone(self.advice["recommendation"])
        # docs/cost-model.md: reusing the first half of a prompt skips only a quarter of full attention.
        self.assertEqual(json.loads(self.displayed())["remaining-full"][0], "0.75")
        # The curves: one line per attention kind and the current point marked on each; each line has
        # its own dash pattern and width, so two that coincide both stay visible.
        self.assertEqual(self.browser.evaluate("document.querySelectorAll('#curve polyline').length"), 4)
        self.assertEqual(self.browser.evaluate("document.querySelectorAll('#curve circle').length"), 4)
        styles = json.loads(self.browser.evaluate(
            "JSON.stringify([...document.querySelectorAll('#curve polyline')].map((l) =>"
            " [l.getAttribute('stroke-dasharray') || '', l.getAttribute('stroke-width')]))"))
        self.assertEqual(len(set(map(tuple, styles))), 4, styles)
        # Bytes in binary units, shares as percentages: 8192 tokens of llama-3.1-8b are 1 GiB of KV.
        self.assertEqual(json.loads(self.displayed())["kv-bytes"][1], "1.000 GiB")
        self.assertEqual(json.loads(self.displayed())["remaining-full"][1], "75.00 %")
        self.assertEqual(self.browser.evaluate("getComputedStyle(document.getElementById('loading')).display"), "none")

        # Move the alpha slider with the keyboard: one step of 0.05.
        self.browser.evaluate("document.getElementById('alpha').focus()")
        self.browser.press("ArrowRight", "ArrowRight", 39)
        self.wait_ready(ready)
        self.assertEqual(self.browser.evaluate("document.getElementById('alpha-value').textContent"), "0.55")
        self.assert_shows("0.55")
        # floor(0.55 x 8192) = 4505 tokens matched; 16-token pages keep 4496 of them.
        self.assertEqual(json.loads(self.displayed())["boundary-recoverable"][0], "4496")

        # A 64-token page: the recoverable boundary drops to 4480, as the API says.
        ready = int(self.browser.evaluate("document.body.dataset.ready"))
        self.browser.evaluate("(() => { const e = document.getElementById('page'); e.value = '64';"
                              " e.dispatchEvent(new Event('input')); })()")
        self.wait_ready(ready)
        self.assert_shows("0.55", page="64")
        self.assertEqual(json.loads(self.displayed())["boundary-recoverable"][0], "4480")

        # Another model: a hybrid of linear attention and MLA, whose own page size and checkpoint
        # interval the page adopts from its profile, with its own fleet figures.
        ready = int(self.browser.evaluate("document.body.dataset.ready"))
        self.browser.evaluate("(() => { const e = document.getElementById('model'); e.value = 'kimi-linear-48b-a3b';"
                              " e.dispatchEvent(new Event('input')); })()")
        self.wait_ready(ready)
        page = self.browser.evaluate("document.getElementById('page').value")
        checkpoint = self.browser.evaluate("document.getElementById('checkpoint').value")
        serving = next(p for p in self.api("/api/v1/profiles")["profiles"]
                       if p["name"] == "kimi-linear-48b-a3b")["definition"]["serving"]
        self.assertEqual((int(page), int(checkpoint)),
                         (serving["kv_page_tokens"], serving["recurrent_checkpoint_tokens"]))
        self.assert_shows("0.55", model="kimi-linear-48b-a3b", page=page, checkpoint=checkpoint)
        self.assertEqual(json.loads(self.displayed())["fleet-requests"][1], "1")

        png = base64.b64decode(self.browser.call("Page.captureScreenshot", format="png")["data"])
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        os.makedirs(os.path.dirname(os.path.abspath(SCREENSHOT)), exist_ok=True)
        with open(SCREENSHOT, "wb") as f:
            f.write(png)
        # Offline: every request went to this server.
        origin = f"http://{self.server.metrics_address}/"
        self.assertTrue(self.browser.requests)
        self.assertEqual([u for u in self.browser.requests if not u.startswith(origin)], [])

    def trace_cells(self, table="trace-table"):
        return json.loads(self.browser.evaluate(
            f"JSON.stringify([...document.querySelectorAll('#{table} tr')].slice(1).map((row) =>"
            " [...row.cells].map((c) => c.dataset.value || c.textContent)))"))

    def wait_trace(self, after):
        return poll("the trace section to draw",
                    lambda: int(self.browser.evaluate("document.body.dataset.traceReady || '0'") or 0) > after
                    and int(self.browser.evaluate("document.body.dataset.traceReady")))

    # Proves: the port's root points at the explorer, the exposition and the JSON API.
    def test_root_points_the_way(self):
        with urllib.request.urlopen(f"http://{self.server.metrics_address}/", timeout=10) as r:
            page = r.read().decode()
        for link in ('href="/explore"', 'href="/metrics"', 'href="/api/v1/profiles"'):
            self.assertIn(link, page)

    def test_your_trace_section(self):
        self.browser.call("Page.navigate", url=f"http://{self.server.metrics_address}/explore")
        ready = self.wait_trace(0)
        plan = self.api("/api/v1/plan", model="llama-3.1-8b")["plan"]["results"]
        expected = [[str(r["capacity_tokens"]["device"]) if r["capacity_tokens"]["device"] is not None else "unlimited",
                     str(r["capacity_bytes"]["device"]) if r["capacity_bytes"]["device"] is not None else "null",
                     *[json.dumps(r["total"][k]) for k in ("token_hit_ratio", "attention_avoided_ratio",
                                                           "prefill_avoided_ratio")]] for r in plan]
        self.assertEqual(self.trace_cells(), expected)
        self.assertEqual(self.browser.evaluate("document.querySelectorAll('#trace-curve polyline').length"), 3)
        self.assertIn("3993 requests", self.browser.evaluate("document.getElementById('trace-note').textContent"))
        # Other capacities: the table and the curve follow.
        self.browser.evaluate("(() => { const e = document.getElementById('trace-capacities'); e.value = '1e6,1e7';"
                              " e.dispatchEvent(new Event('change')); })()")
        self.wait_trace(ready)
        plan = self.api("/api/v1/plan", model="llama-3.1-8b", capacity_tokens="1e6,1e7")["plan"]["results"]
        self.assertEqual([row[2] for row in self.trace_cells()], [json.dumps(r["total"]["token_hit_ratio"]) for r in plan])
        self.assertNotIn("context", self.browser.evaluate("document.getElementById('trace-note').textContent"))
        # A context: the requests it leaves out are named and the figures are the plan within it.
        ready = self.wait_trace(0)
        self.browser.evaluate("(() => { const e = document.getElementById('trace-context'); e.value = '8192';"
                              " e.dispatchEvent(new Event('change')); })()")
        self.wait_trace(ready)
        within = self.api("/api/v1/plan", model="llama-3.1-8b", capacity_tokens="1e6,1e7", context_tokens="8192")["plan"]
        beyond = within["beyond_context"]
        self.assertGreater(beyond["requests"], 0)
        self.assertIn(f"Within a context of 8192 tokens: {within['results'][0]['total']['requests']} requests planned; "
                      f"{beyond['requests']} left out ({beyond['prompt_tokens']} prompt tokens, the longest "
                      f"{beyond['longest_prompt_tokens']}, the first on line {beyond['first_line']})",
                      self.browser.evaluate("document.getElementById('trace-note').textContent"))
        self.assertEqual([row[2] for row in self.trace_cells()],
                         [json.dumps(r["total"]["token_hit_ratio"]) for r in within["results"]])
        # A server without a trace says how to give it one.
        bare = Server(SERVER, log_dir=self.tmp)
        self.addCleanup(bare.stop)
        self.browser.call("Page.navigate", url=f"http://{bare.metrics_address}/explore")
        self.wait_trace(0)
        self.assertIn("--trace_file", self.browser.evaluate("document.getElementById('trace-note').textContent"))
        self.assertTrue(self.browser.evaluate("document.getElementById('trace-section').hidden"))

    # Proves: /api/v1/plan applies a context as `kvledger plan --context-tokens` does (prompt + 1 > L
    # is left out and counted), and refuses one out of range naming the parameter and the rule.
    def test_plan_api_context(self):
        with open(TRACE) as f:
            lengths = [json.loads(line)["input_length"] for line in f if line.strip()]
        beyond = [(i + 1, n) for i, n in enumerate(lengths) if n + 1 > 8192]
        self.assertTrue(beyond)
        plan = self.api("/api/v1/plan", model="llama-3.1-8b", capacity_tokens="inf", context_tokens="8192")["plan"]
        self.assertEqual(plan["context_tokens"], 8192)
        self.assertEqual(plan["beyond_context"], {"requests": len(beyond), "prompt_tokens": sum(n for _, n in beyond),
                                                  "longest_prompt_tokens": max(n for _, n in beyond),
                                                  "first_line": beyond[0][0]})
        self.assertEqual(plan["results"][0]["total"]["requests"], len(lengths) - len(beyond))
        with self.assertRaises(urllib.error.HTTPError) as refused:
            self.api("/api/v1/plan", model="llama-3.1-8b", context_tokens="1")
        self.assertEqual(refused.exception.code, 400)
        self.assertIn("context_tokens = 1: must be in [2, 2147483648] tokens", refused.exception.read().decode())

    # Proves: the live section shows /api/v1/capacity's curve for the chosen model (records sent with
    # the trace's block ids), and says how records carry ids for a model without a curve.
    def test_live_capacity_section(self):
        with open(TRACE) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        with grpc.insecure_channel(self.server.grpc_address) as channel:
            stub = ledger_pb2_grpc.LedgerStub(channel)
            for start in range(0, len(lines), 500):
                records = [record_pb2.Record(model="llama-3.1-8b", prompt_tokens=line["input_length"],
                                             prefix_block_ids=line["hash_ids"], block_tokens=512,
                                             cache_capacity_blocks=1000)
                           for line in lines[start:start + 500]]
                self.assertEqual(stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=records), timeout=30).accepted,
                                 len(records))
        self.browser.call("Page.navigate", url=f"http://{self.server.metrics_address}/explore")
        poll("the live section to draw", lambda: int(self.browser.evaluate("document.body.dataset.liveReady || '0'")))
        (curve,) = self.api("/api/v1/capacity", model="llama-3.1-8b")["models"]
        expected = [[str(int(p["capacity_tokens"])) if "capacity_tokens" in p else "unlimited",
                     str(int(p["capacity_bytes"])) if "capacity_bytes" in p else "null",
                     *[json.dumps(p[k]) for k in ("token_hit_ratio", "attention_avoided_ratio", "prefill_avoided_ratio")]]
                    for p in curve["points"]]
        self.assertEqual(self.trace_cells("live-table"), expected)
        self.assertEqual(self.browser.evaluate("document.querySelectorAll('#live-curve polyline').length"), 3)
        # The second tiers below the records' device of 1,000 blocks: the server's default sizes (llama's
        # compute model is live here, so their seconds are known).
        def seconds(t, key):
            return json.dumps(t[key]) if int(t["seconds_known_requests"]) > 0 else "null"
        tiers = [[t["tier"], t["tier_bytes"], t["tier_tokens"], json.dumps(t["token_hit_ratio"]),
                  json.dumps(t["prefill_avoided_ratio"]), seconds(t, "net_seconds_avoided"),
                  seconds(t, "reload_seconds"), t["slower_requests"], seconds(t, "slower_excess_seconds")]
                 for t in curve["tiers"]]
        self.assertGreater(int(curve["tiers"][0]["seconds_known_requests"]), 0)
        self.assertEqual([t[0] for t in tiers], ["host", "host", "host", "disk"])
        self.assertGreater(curve["tiers"][0]["token_hit_ratio"], 0)
        self.assertEqual(self.trace_cells("live-tiers"), tiers)
        self.assertIn("live compute model", self.browser.evaluate("document.getElementById('live-tiers-note').textContent"))
        self.assertIn(f"{len(lines)} records of llama-3.1-8b",
                      self.browser.evaluate("document.getElementById('live-note').textContent"))
        self.browser.evaluate("(() => { const e = document.getElementById('model'); e.value = 'kimi-linear-48b-a3b';"
                              " e.dispatchEvent(new Event('input')); })()")
        poll("the note for a model without a curve", lambda: "prefix_block_ids and block_tokens" in
             self.browser.evaluate("document.getElementById('live-note').textContent"))
        self.assertTrue(self.browser.evaluate("document.getElementById('live-section').hidden"))


if __name__ == "__main__":
    unittest.main()
