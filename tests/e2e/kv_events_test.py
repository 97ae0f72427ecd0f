"""The capacity curves from an engine's KV cache events (kvledger.kv_events): a stand-in engine
(tests/client/standins/vllm/distributed/kv_events.py, vLLM's wire format) runs the shipped Mooncake
conversation trace through an LRU cache of C blocks with `kvledger plan`'s rules and publishes, per
request, BlockStored (the blocks from its first miss on, chained to its cached prefix) and
BlockRemoved (what that evicted). The subscriber turns the events into records of reuse distances,
the Python Reporter sends them to a real server (which counts them in its curves only, not as served
requests), and the server's curve at 1.5 C, 2 C and 4 C equals
`kvledger plan` at those capacities within 0.01 (at C and above it is exact but for the requests
that hit every block, which publish nothing), and stays below it under C (a ghost list cannot see
smaller caches). Batches the PUB socket drops are filled from the replay socket. Bad frames, a
truncated payload, a gap nobody can fill, AllBlocksCleared and an engine restart are each named,
reset what they must and lose nothing else.

Usage: kv_events_test.py KVLEDGER_SERVER KVLEDGER_CLI REPO_ROOT
"""
import collections
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.request

SERVER, CLI, ROOT = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
del sys.argv[1:4]
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "tests", "client", "standins"))

import harness  # noqa: E402
import kvledger  # noqa: E402
from kvledger import kv_events  # noqa: E402
from vllm.distributed import kv_events as standin  # noqa: E402

TRACE = os.path.join(ROOT, "examples", "traces", "mooncake-conversation.jsonl")
BLOCK, C = 512, 2048  # the engine's cache: 2,048 blocks of 512 tokens
LADDER = [C // 2 * BLOCK, C * BLOCK, C * 3 // 2 * BLOCK, 2 * C * BLOCK, 4 * C * BLOCK]
MODEL = "llama-3.1-8b"


class StandInEngine:
    """An LRU cache of `capacity` blocks with Plan's rules (a request's blocks are looked up, then used
    in order, each insertion evicting the least recently used past the capacity), publishing what it
    stores and removes."""

    def __init__(self, publisher, capacity, array_like=False):
        self.publisher, self.capacity, self.array_like = publisher, capacity, array_like
        self.cache = collections.OrderedDict()  # least recently used first
        self.published = 0  # BlockStored events

    def serve(self, request, send=True):
        ids = request["hash_ids"]
        hit = 0
        while hit < len(ids) and ids[hit] in self.cache:
            hit += 1
        removed = []
        for block in ids:
            self.cache.pop(block, None)
            self.cache[block] = True
            if len(self.cache) > self.capacity:
                removed.append(self.cache.popitem(last=False)[0])
        events = []
        if hit < len(ids):
            tokens = request["input_length"] - hit * BLOCK
            events.append(standin.block_stored(ids[hit:], ids[hit - 1] if hit else None, list(range(tokens)), BLOCK,
                                               array_like=self.array_like))
            self.published += 1
        if removed:
            events.append(standin.block_removed(removed, array_like=self.array_like))
        self.publisher.publish(standin.event_batch(events, array_like=self.array_like), send=send)


def connected(publisher, subscriber):
    """Publishes empty batches until the subscriber has one (ZMQ drops what a PUB sends before its
    subscriber joined)."""
    def probe():
        publisher.publish(standin.event_batch([]))
        return subscriber.poll(50) == [] and subscriber.expected is not None
    harness.poll("the subscriber to join", probe)


class ReplayService(threading.Thread):
    """The publisher's replay socket, answered while the test publishes."""

    def __init__(self, publisher):
        super().__init__(daemon=True)
        self.publisher, self.stop = publisher, threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.publisher.service_replay(timeout_ms=50)


class KvEventsCurveTest(unittest.TestCase):
    # Proves: the events of a cache of C blocks give the curve plan gives, within 0.01 from C up, and
    # a lower bound below C; batches the PUB socket dropped came back through the replay socket.
    def test_curve_from_events_matches_plan(self):
        tmp = tempfile.mkdtemp(prefix="kvledger-kv-events-")
        server = harness.Server(SERVER, "--capacity_ladder=" + ",".join(map(str, LADDER)), log_dir=tmp)
        self.addCleanup(server.stop)
        publisher = standin.ZmqEventPublisher("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
        self.addCleanup(publisher.close)
        replay = kv_events.EventReplay(MODEL, C, cache_id="engine-0")
        log = io.StringIO()
        subscriber = kv_events.Subscriber(replay, publisher.endpoint(), publisher.replay_endpoint(), log=log)
        self.addCleanup(subscriber.close)
        service = ReplayService(publisher)
        service.start()
        self.addCleanup(lambda: (service.stop.set(), service.join()))
        connected(publisher, subscriber)
        engine = StandInEngine(publisher, C)
        with open(TRACE) as f:
            trace = [json.loads(line) for line in f]
        records = []
        with kvledger.Reporter(server.grpc_address, affinity_key="engine-0", max_queue_size=1 << 15) as reporter:
            for n, request in enumerate(trace):
                engine.serve(request, send=n % 997 != 500)  # every 997th batch lost on the PUB socket
                for record in subscriber.poll(0):
                    records.append(record)
                    reporter.report(**record)
            while True:  # what is still on its way
                more = subscriber.poll(500)
                if not more and subscriber.expected == publisher._seq:
                    break
                for record in more:
                    records.append(record)
                    reporter.report(**record)
        self.assertEqual(reporter.stats()["sent"], len(records), reporter.stats())
        self.assertEqual(len(records), engine.published)
        self.assertEqual(replay.resets, collections.Counter(), log.getvalue())
        self.assertEqual(subscriber.errors, 0, log.getvalue())
        with urllib.request.urlopen(f"http://{server.metrics_address}/api/v1/capacity?model={MODEL}") as r:
            (curve,) = json.load(r)["models"]
        live = {int(p["capacity_tokens"]): p["token_hit_ratio"] for p in curve["points"] if "capacity_tokens" in p}
        attention = {int(p["capacity_tokens"]): p["attention_avoided_ratio"] for p in curve["points"]
                     if "capacity_tokens" in p}
        plan = subprocess.run([CLI, "plan", "--model", MODEL, "--json", "--capacity-tokens", ",".join(map(str, LADDER)),
                               TRACE], capture_output=True, text=True, timeout=120, check=True)
        results = json.loads(plan.stdout)["results"]
        expected = {r["capacity_tokens"]["device"]: r["total"]["token_hit_ratio"] for r in results}
        expected_attention = {r["capacity_tokens"]["device"]: r["total"]["attention_avoided_ratio"] for r in results}
        print("capacity: token hit plan / from events, attention avoided plan / from events: " + "; ".join(
            f"{c}: {expected[c]:.4f} / {live[c]:.4f}, {expected_attention[c]:.4f} / {attention[c]:.4f}" for c in LADDER))
        for capacity in LADDER[1:]:
            self.assertAlmostEqual(live[capacity], expected[capacity], delta=0.01, msg=capacity)
            self.assertAlmostEqual(attention[capacity], expected_attention[capacity], delta=0.01, msg=capacity)
        self.assertLess(live[LADDER[0]], expected[LADDER[0]])  # below C: the hits read as misses
        # The records were rebuilt from events, not served requests: the curves count them, nothing else.
        self.assertEqual(int(curve["requests"]), len(records))
        samples = harness.parse_exposition(server.scrape())
        self.assertEqual(sum(v for (name, _), v in samples.items() if name == "kvledger_requests_total"), 0)
        self.assertEqual(sum(v for (name, _), v in samples.items() if name == "kvledger_prompt_tokens_total"), 0)


class KvEventsCommandTest(unittest.TestCase):
    # Proves: `python3 -m kvledger.kv_events --metrics-address` serves its own figures in Prometheus's
    # format (promtool checks them): batches read, one filled from the replay socket, events by type,
    # those of another tier and KV cache group skipped, records sent to the server, the lag behind the
    # engine's clock.
    def test_the_command_serves_its_own_figures(self):
        tmp = tempfile.mkdtemp(prefix="kvledger-kv-events-cmd-")
        server = harness.Server(SERVER, log_dir=tmp)
        self.addCleanup(server.stop)
        publisher = standin.ZmqEventPublisher("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
        self.addCleanup(publisher.close)
        replay = ReplayService(publisher)
        replay.start()
        self.addCleanup(replay.join, 5)  # after stop is set (cleanups run last first), before the publisher closes
        self.addCleanup(replay.stop.set)
        log = open(os.path.join(tmp, "kv_events.log"), "w+")
        self.addCleanup(log.close)
        command = subprocess.Popen(
            [sys.executable, "-m", "kvledger.kv_events", "--one-store-per-request", "--endpoint", publisher.endpoint(),
             "--replay-endpoint", publisher.replay_endpoint(), "--model", MODEL, "--capacity-blocks", "4",
             "--cache-id", "engine-0", "--target", server.grpc_address, "--metrics-address", "127.0.0.1:0"],
            stderr=log, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "client", "python")))
        self.addCleanup(command.wait, 30)
        self.addCleanup(command.kill)

        def address():
            log.seek(0)
            found = re.search(r"metrics at (http://[0-9.:]+/metrics)", log.read())
            return found and found.group(1)
        url = harness.poll("the subscriber's metrics address", address, deadline=30)

        def scrape():
            with urllib.request.urlopen(url, timeout=10) as r:
                return harness.parse_exposition(r.read().decode())

        def value(name, **labels):
            return scrape().get((name, frozenset(labels.items())))

        def connected():
            publisher.publish(standin.event_batch([]))
            return (value("kvledger_kv_events_batches_total") or 0) > 0
        harness.poll("the subscriber connected", connected, deadline=30)
        before = value("kvledger_kv_events_batches_total")
        publisher.publish(standin.event_batch([standin.block_stored([1, 2], None, list(range(1024)), BLOCK)]))
        publisher.publish(standin.event_batch([standin.block_removed([2], medium="CPU")]), send=False)  # a gap
        publisher.publish(standin.event_batch([dict(standin.block_removed([1]), group_idx=1),
                                               standin.block_stored([3], 2, list(range(512)), BLOCK)]))
        harness.poll("every batch read", lambda: value("kvledger_kv_events_batches_total") == before + 3)
        harness.poll("both records sent", lambda: value("kvledger_kv_events_records_total", outcome="sent") == 2)
        self.assertEqual(value("kvledger_kv_events_replayed_batches_total"), 1)
        self.assertEqual(value("kvledger_kv_events_unfilled_gaps_total"), 0)
        self.assertEqual(value("kvledger_kv_events_events_total", type="BlockStored"), 2)
        self.assertEqual(value("kvledger_kv_events_events_total", type="BlockRemoved"), 2)
        self.assertEqual(value("kvledger_kv_events_skipped_events_total", reason="other_medium"), 1)
        self.assertEqual(value("kvledger_kv_events_skipped_events_total", reason="other_group"), 1)
        self.assertLess(value("kvledger_kv_events_lag_seconds"), 60)
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)


class KvEventsInputTest(unittest.TestCase):
    def setUp(self):
        self.publisher = standin.ZmqEventPublisher("tcp://127.0.0.1:*")
        self.addCleanup(self.publisher.close)
        self.replay = kv_events.EventReplay(MODEL, 4)
        self.log = io.StringIO()
        self.subscriber = kv_events.Subscriber(self.replay, self.publisher.endpoint(), log=self.log)
        self.addCleanup(self.subscriber.close)
        connected(self.publisher, self.subscriber)

    def next_records(self):
        return self.subscriber.poll(5000)

    # Proves: both upstream encodings decode alike, and a ghost hit carries its place among the removals.
    def test_both_encodings_and_a_ghost_hit(self):
        for array_like in (True, False):
            self.replay.reset("test")
            p = self.publisher
            p.publish(standin.event_batch([standin.block_stored([1, 2], None, list(range(1024)), BLOCK, array_like=array_like)],
                                          array_like=array_like))
            (first,) = self.next_records()
            self.assertEqual(first["prefix_block_reuse_distances"], [kv_events.NEVER_SEEN] * 2)
            p.publish(standin.event_batch([standin.block_removed([2, 1], array_like=array_like)], array_like=array_like))
            self.assertEqual(self.next_records(), [])
            # Stored again: 1 was removed last (place 1), 2 before it (place 2); 7 is new.
            p.publish(standin.event_batch([standin.block_stored([1, 2, 7], None, list(range(1300)), BLOCK,
                                                                array_like=array_like)], array_like=array_like))
            (again,) = self.next_records()
            self.assertEqual(again["prefix_block_reuse_distances"], [1, 2, kv_events.NEVER_SEEN])
            self.assertEqual(again["prompt_tokens"], 1300)
            # A request that hit 1, 2 and 7 and computed 9.
            p.publish(standin.event_batch([standin.block_stored([9], 7, list(range(40)), BLOCK, array_like=array_like)],
                                          array_like=array_like))
            (hit,) = self.next_records()
            self.assertEqual((hit["logical_match_tokens"], hit["prompt_tokens"]), (3 * BLOCK, 3 * BLOCK + 40))
            self.assertEqual(hit["prefix_block_reuse_distances"], [0, 0, 0, kv_events.NEVER_SEEN])
            kvledger.make_record(**hit)  # every key is a Record field
            # An offloading engine's CPU tier publishes on the same stream: not this cache's events.
            p.publish(standin.event_batch([standin.block_removed([1, 2], medium="CPU", array_like=array_like),
                                           standin.block_stored([4], None, [0], BLOCK, medium="CPU",
                                                                array_like=array_like)], array_like=array_like))
            self.assertEqual(self.next_records(), [])
            self.assertIsNone(self.replay.ghost.position(1))

    # Proves: vLLM's group_idx is honoured: events of another KV cache group (a hybrid model's other kind
    # of layer) are skipped and counted, untagged events are group 0, and a bad group_idx is named.
    def test_other_kv_cache_groups_are_skipped(self):
        stored = dict(standin.block_stored([5, 6], None, list(range(1024)), BLOCK), group_idx=1)
        removed = dict(standin.block_removed([5]), group_idx=1)
        self.publisher.publish(standin.event_batch([stored, removed]))
        self.assertEqual(self.next_records(), [])
        self.assertEqual(self.replay.other_group, 2)
        self.publisher.publish(standin.event_batch([dict(stored, group_idx=0)]))
        (record,) = self.next_records()
        self.assertEqual(record["prefix_block_reuse_distances"], [kv_events.NEVER_SEEN] * 2)
        with self.assertRaisesRegex(kv_events.KvEventsError, r"events\[0\]\.group_idx = -1: must be an integer >= 0"):
            kv_events.decode_batch(standin.event_batch([dict(stored, group_idx=-1)]))

    # Proves: a prompt of more blocks than a record may carry (SGLang's one-token pages make 600,000
    # reachable) becomes a record of its leading MAX_DISTANCES blocks, counted as capped, that fits in
    # a message; its continuation, past the cap, carries the cap's zeros only.
    def test_a_long_prompt_is_capped_to_a_record_that_fits(self):
        long = 600_000
        self.publisher.publish(standin.event_batch([standin.block_stored(list(range(1, long + 1)), None, [], 1)]))
        (record,) = self.next_records()
        self.assertEqual(len(record["prefix_block_reuse_distances"]), kv_events.MAX_DISTANCES)
        self.assertEqual(record["prompt_tokens"], long)
        self.assertLess(kvledger.make_record(**record).ByteSize(), 1 << 20)
        self.publisher.publish(standin.event_batch([standin.block_stored([long + 1], long, [], 1)]))
        (after,) = self.next_records()
        self.assertEqual(after["prefix_block_reuse_distances"], [0] * kv_events.MAX_DISTANCES)
        self.assertEqual((after["logical_match_tokens"], after["prompt_tokens"]), (long, long + 1))
        self.assertEqual(self.replay.capped, 2)

    # Proves: a malformed frame and a truncated payload are named and skipped; the next batch counts.
    def test_bad_frames_are_named_and_skipped(self):
        self.publisher.send_raw([b"", b"\x00"])
        self.assertEqual(self.next_records(), [])
        self.assertIn("a frame of 2 parts: must be (topic, 8-byte sequence, payload)", self.log.getvalue())
        whole = standin.event_batch([standin.block_stored([5], None, [1, 2], BLOCK)])
        self.publisher.publish(whole[:len(whole) // 2])
        self.assertEqual(self.next_records(), [])
        self.assertRegex(self.log.getvalue(), r"batch \d+: payload of \d+ bytes: not one msgpack value")
        self.publisher.publish(standin.event_batch([{"type": "BlockMoved", "block_hashes": []}]))
        self.assertEqual(self.next_records(), [])
        self.assertIn("events[0].type = 'BlockMoved': must be BlockStored, BlockRemoved or AllBlocksCleared",
                      self.log.getvalue())
        self.publisher.publish(whole)
        self.assertEqual(len(self.next_records()), 1)
        self.assertEqual(self.subscriber.errors, 3)
        self.assertEqual(self.replay.resets, collections.Counter())

    # Proves: the payload decoder, fed 20,000 mutations of real batches of both encodings (bytes
    # flipped, cut, inserted) and random bytes, returns events or raises KvEventsError, never
    # anything else, and what decodes replays into records that are Records: what reaches the
    # subscriber can only be named and skipped.
    def test_decoder_under_mutation(self):
        import random  # noqa: PLC0415
        rng = random.Random(3)
        seeds = [standin.event_batch([standin.block_stored([1, 2**64 - 1, b"\x01" * 32], None, [1, 2], BLOCK, array_like=a),
                                      standin.block_removed([5], array_like=a), standin.all_blocks_cleared(array_like=a)],
                                     array_like=a) for a in (True, False)]
        outcomes = collections.Counter()
        for _ in range(20000):
            data = bytearray(rng.choice(seeds))
            for _ in range(rng.randrange(1, 4)):
                op, at = rng.randrange(3), rng.randrange(len(data) + 1)
                if op == 0 and at < len(data):
                    data[at] = rng.randrange(256)
                elif op == 1:
                    del data[at:]
                else:
                    data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5)))
            if rng.random() < 0.05:
                data = bytearray(rng.randbytes(rng.randrange(0, 40)))
            try:
                _, events = kv_events.decode_batch(bytes(data))
                for record in self.replay.apply(events):  # what decodes replays without error
                    kvledger.make_record(**record)
                outcomes["decoded"] += 1
            except kv_events.KvEventsError:
                outcomes["refused"] += 1
        self.assertGreater(outcomes["refused"], 1000)
        self.assertGreater(outcomes["decoded"], 100)

    # Proves: AllBlocksCleared, a gap without a replay socket and an engine restart each empty the
    # ghost list and say why; records go on.
    def test_clear_gap_and_restart_reset(self):
        p = self.publisher
        p.publish(standin.event_batch([standin.block_stored([1], None, [0], BLOCK), standin.block_removed([1])]))
        self.next_records()
        self.assertEqual(self.replay.ghost.position(1), 1)
        p.publish(standin.event_batch([standin.all_blocks_cleared()]))
        self.next_records()
        self.assertIsNone(self.replay.ghost.position(1))
        p.publish(standin.event_batch([standin.block_removed([3])]))
        self.next_records()
        p.publish(standin.event_batch([]), send=False)  # lost, and no replay socket to ask
        p.publish(standin.event_batch([standin.block_stored([3], None, [0], BLOCK)]))
        (record,) = self.next_records()
        self.assertEqual(record["prefix_block_reuse_distances"], [kv_events.NEVER_SEEN])  # the gap forgot 3
        self.assertIn("missing (0 replayed): the ghost list starts again", self.log.getvalue())
        p.restart()
        p.publish(standin.event_batch([standin.block_stored([4], None, [0], BLOCK)]))
        self.assertEqual(len(self.next_records()), 1)
        self.assertIn("the engine restarted", self.log.getvalue())
        self.assertEqual(self.replay.resets,
                         collections.Counter({"all_blocks_cleared": 1, "gap": 1, "engine_restart": 1}))


    # Proves: a hostile publisher's frames are named and bounded: a map event whose type is a list, a
    # negative sequence number, a replay socket answering two-frame messages, a replay socket that
    # keeps answering (stopped by its byte and time bounds), a sequence jump of 2^40 (not asked for).
    def test_a_hostile_publisher_is_named_and_bounded(self):
        import time  # noqa: PLC0415
        import zmq  # noqa: PLC0415
        p = self.publisher
        p.publish(standin.event_batch([{"type": ["BlockStored"], "block_hashes": []}]))
        self.assertEqual(self.next_records(), [])
        self.assertIn("events[0].type = ['BlockStored']: must be BlockStored", self.log.getvalue())
        p.send_raw([b"", (-3).to_bytes(8, "big", signed=True), standin.event_batch([])])
        self.assertEqual(self.next_records(), [])
        self.assertIn("sequence -3: must be >= 0", self.log.getvalue())
        # A replay socket of our own: two-frame answers, then answers without end.
        router = zmq.Context.instance().socket(zmq.ROUTER)
        port = router.bind_to_random_port("tcp://127.0.0.1")
        self.subscriber._replay_endpoint = f"tcp://127.0.0.1:{port}"
        answers = {"shape": "two frames"}

        def answer():
            while router.poll(3000):
                peer, _, _ = router.recv_multipart()
                end = time.monotonic() + 30
                while time.monotonic() < end and answers["shape"] != "done":
                    if answers["shape"] == "two frames":
                        router.send_multipart([peer, b"", b"x"])
                        break
                    try:  # 1 MiB payloads for sequence 0, as long as it listens
                        router.send_multipart([peer, b"", (0).to_bytes(8, "big"), b"\0" * (1 << 20)], zmq.NOBLOCK)
                    except zmq.Again:
                        time.sleep(0.001)
        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        p.publish(standin.event_batch([]), send=False)
        p.publish(standin.event_batch([]))
        self.assertEqual(self.next_records(), [])
        self.assertIn("a replay answer of 2 parts: must be (empty, 8-byte sequence, payload)", self.log.getvalue())
        answers["shape"] = "endless"
        p.publish(standin.event_batch([]), send=False)
        started = time.monotonic()
        p.publish(standin.event_batch([]))
        self.assertEqual(self.next_records(), [])
        self.assertLess(time.monotonic() - started, kv_events.MAX_REPLAY_SECONDS + 5)
        self.assertIn(f"passed {kv_events.MAX_REPLAY_BYTES} bytes: stopped", self.log.getvalue())
        answers["shape"] = "done"
        # A jump of 2^40 batches: not asked for, a gap said at once.
        p.send_raw([b"", (self.subscriber.expected + (1 << 40)).to_bytes(8, "big"), standin.event_batch([])])
        self.assertEqual(self.next_records(), [])
        self.assertEqual(self.replay.resets["gap"], 3)
        thread.join(10)  # it stops once no request came for 3 s
        router.close(linger=0)

    # Proves: a publisher's state is bounded whatever it stores or clears, and the next good batch
    # counts: more stores than the cache holds empty the replay state (said once); 10,000
    # AllBlocksCleared cost little.
    def test_stores_and_clears_are_bounded(self):
        import time  # noqa: PLC0415
        p = self.publisher
        # Stores without removals: past what the cache can hold the state is emptied, said once.
        stored = kv_events.MAX_PRESENT_FACTOR * self.replay.capacity_blocks + kv_events.MAX_PRESENT_SLACK
        step = 1 << 16
        for first in range(0, stored + step, step):
            self.replay.apply(kv_events.decode_batch(
                standin.event_batch([standin.block_stored(list(range(first, first + step)), None, [], 1)]))[1])
        self.assertEqual(self.replay.resets["cache_overflow"], 1)
        self.assertLessEqual(len(self.replay.present), stored)
        # 10,000 clears cost little: the ghost list is sized to what it holds.
        cpu = time.process_time()
        self.replay.apply([{"type": "AllBlocksCleared"}] * 10_000)
        self.assertLess(time.process_time() - cpu, 5)
        self.assertEqual(self.replay.resets["all_blocks_cleared"], 10_000)
        p.send_raw([b"", self.subscriber.expected.to_bytes(8, "big"),
                    standin.event_batch([standin.block_stored([1 << 50], None, [0], BLOCK)])])
        self.assertEqual(len(self.next_records()), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
