"""What a larger cache would have served, from the KV cache events an engine publishes
(docs/cost-model.md §14, "From an engine's KV events"). Run one beside each engine:

    python3 -m kvledger.kv_events --one-store-per-request --endpoint tcp://127.0.0.1:5557 \\
        --replay-endpoint tcp://127.0.0.1:5558 --model llama-3.1-8b --capacity-blocks 16384 \\
        --target kvledger:50051 --cache-id engine-0

The engine's cache of C blocks publishes the blocks it stores and removes, never its hits. The blocks
it removed, most recent first (a *ghost list*), are exactly the LRU stack below the cache: a block
stored again while d-th in that list is a miss that a cache of C + d blocks would have hit. Each
BlockStored event (the blocks one request computed, chained to the request's cached prefix by its
parent) becomes one record: its prompt (the cached prefix, whose position the chain gives, plus the
stored tokens), today's match (that prefix), and per block its reuse distance beyond the cache
(`prefix_block_reuse_distances`: 0 for the prefix, d for a ghost hit, 2^64 - 1 for a block never
seen). The server turns those into its capacity curves from C up (within 0.01 of a model of vLLM's
engine on the shipped traces, low by the requests that hit every block, which store nothing), through
the same counters as records with block ids — for an engine that publishes one BlockStored per
request — and counts them nowhere else (they are not served requests). vLLM v1 with chunked
prefill or decode-block caching (its defaults) publishes one per chunk and per block_size generated
tokens, chained to the request's own earlier blocks, and nothing on the wire tells those from new
requests (docs/cost-model.md §14); SGLang publishes one per page. So the command does not run unless
given --one-store-per-request (an engine with chunked prefill off and one output token), and says why:
for vLLM, kvledger.vllm_connector sends the engine's own blocks instead.

The wire format is vLLM's (vllm/distributed/kv_events.py; SGLang uses it too): ZMQ multipart
frames (topic, sequence number as 8 bytes big-endian, msgpack payload); the payload an EventBatch
(ts, events[, data_parallel_rank]) whose events are tagged BlockStored, BlockRemoved or
AllBlocksCleared, encoded as arrays (tag first; older vLLM and SGLang) or as maps with a "type" tag
(newer vLLM): both are read. A gap in the sequence is filled from the engine's replay socket (a
ROUTER: the first missing sequence number as 8 bytes big-endian in, (sequence, payload) frames out,
then sequence -1); a gap it cannot fill, AllBlocksCleared, and an engine restart (the sequence going
back) each empty the ghost list and the chain positions and are said on stderr and counted. What a
ghost list cannot see: capacities below C (their losses are among the hits), and a request whose
every block hit (it stores nothing).
"""
import argparse
import collections
import sys

import msgpack

from kvledger.blocks import engine_hash_id

NEVER_SEEN = (1 << 64) - 1
# Distances one record carries at most: the server's bound on a record's blocks (the same as for
# prefix_block_ids), so that a record always fits in a message (8 bytes a distance: 512 KiB). A longer
# prompt is replayed on its leading MAX_DISTANCES blocks; its blocks past them read as misses at every
# capacity (counted in EventReplay.capped).
MAX_DISTANCES = 65536
END_SEQ = -1
# What one publisher may cost, whatever it sends (docs/security.md, "KV events"):
MAX_FRAME_BYTES = 16 << 20      # a larger message is dropped by ZMQ (the connection resets: a gap)
MAX_GAP_BATCHES = 100_000       # a gap longer than this is not asked for (vLLM keeps 10,000 batches)
MAX_REPLAY_BYTES = 256 << 20    # the replayed payloads one gap may hold
MAX_REPLAY_SECONDS = 10.0       # how long one gap's replay may take
# Blocks the replay takes as in the cache at most: MAX_PRESENT_FACTOR x --capacity-blocks, plus room
# for one request of MAX_PRESENT_SLACK blocks (SGLang's one-token pages); more (stores without their
# removals) empties its state, said and counted as "cache_overflow". About 150 bytes a block.
MAX_PRESENT_FACTOR = 4
MAX_PRESENT_SLACK = 1 << 20
# Records waiting for the server at most (a record of a 128 K-token prompt at 16-token blocks is
# 64 KiB: 256 MiB at the worst): past it the Reporter drops new ones and counts them.
MAX_QUEUED_RECORDS = 4096
# Why the subscriber does not run unless told the engine publishes one store per request.
NOT_ONE_STORE_PER_REQUEST = (
    "--one-store-per-request not given: vLLM v1 publishes a request's blocks in one BlockStored per prefill "
    "chunk and per block_size generated tokens, SGLang one per page, with no request id, so its events "
    "cannot be tied to requests and a curve from them would be wrong (docs/cost-model.md §14); for vLLM, "
    "kvledger.vllm_connector sends each request's blocks. Give the flag only for an engine that publishes "
    "one BlockStored per request (chunked prefill off, no output block cached: a prefill-only instance)")
# The fields of each event as older vLLM and SGLang encode them (array_like: the tag, then these).
_ARRAY_FIELDS = {
    "BlockStored": ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium"),
    "BlockRemoved": ("block_hashes", "medium"),
    "AllBlocksCleared": (),
}


class KvEventsError(ValueError):
    """A frame or payload that is not a KV event batch; the message names what and where."""


def block_id(h):
    """An engine's block hash as a 64-bit id (kvledger.blocks.engine_hash_id)."""
    try:
        return engine_hash_id(h)
    except ValueError as e:
        raise KvEventsError(str(e)) from None


def _event(raw, index):
    if isinstance(raw, (list, tuple)):
        if not raw or not isinstance(raw[0], str) or raw[0] not in _ARRAY_FIELDS:
            raise KvEventsError(f"events[{index}] = {str(raw)[:64]}: must start with BlockStored, BlockRemoved or "
                                "AllBlocksCleared")
        kind, names = raw[0], _ARRAY_FIELDS[raw[0]]
        event = dict(zip(names, raw[1:]))
    elif isinstance(raw, dict):
        kind = raw.get("type")
        if not isinstance(kind, str) or kind not in _ARRAY_FIELDS:
            raise KvEventsError(f"events[{index}].type = {kind!r}: must be BlockStored, BlockRemoved or "
                                "AllBlocksCleared")
        event = dict(raw)
    else:
        raise KvEventsError(f"events[{index}] = {str(raw)[:64]}: must be an array or a map")
    event["type"] = kind
    group = event.get("group_idx")
    if group is not None and (not isinstance(group, int) or isinstance(group, bool) or group < 0):
        raise KvEventsError(f"events[{index}].group_idx = {group!r}: must be an integer >= 0")
    if kind != "AllBlocksCleared":
        hashes = event.get("block_hashes")
        if not isinstance(hashes, (list, tuple)):
            raise KvEventsError(f"events[{index}].block_hashes = {hashes!r}: must be a list")
        event["block_hashes"] = [block_id(h) for h in hashes]
    if kind == "BlockStored":
        parent = event.get("parent_block_hash")
        event["parent_block_hash"] = None if parent is None else block_id(parent)
        size = event.get("block_size")
        if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= 1 << 20:
            raise KvEventsError(f"events[{index}].block_size = {size!r}: must be an integer in [1, 1048576]")
        if not isinstance(event.get("token_ids"), (list, tuple, type(None))):
            raise KvEventsError(f"events[{index}].token_ids = {str(event.get('token_ids'))[:64]}: must be a list")
    return event


def decode_batch(payload):
    """(ts, [event dicts with "type"]) of one payload; KvEventsError naming the problem otherwise
    (a truncated or malformed frame among them)."""
    try:
        batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as e:  # noqa: BLE001  (msgpack raises ValueError, TypeError, … on bad bytes)
        raise KvEventsError(f"payload of {len(payload)} bytes: not one msgpack value ({e})") from None
    if isinstance(batch, (list, tuple)) and len(batch) >= 2:
        ts, events = batch[0], batch[1]
    elif isinstance(batch, dict) and "events" in batch:
        ts, events = batch.get("ts"), batch["events"]
    else:
        raise KvEventsError(f"payload = {str(batch)[:64]}: must be an EventBatch (ts, events)")
    if not isinstance(events, (list, tuple)):
        raise KvEventsError(f"events = {str(events)[:64]}: must be a list")
    return ts, [_event(e, i) for i, e in enumerate(events)]


class GhostList:
    """Blocks removed from the cache, most recent first, at most `max_blocks` (the oldest forgotten):
    position() is a block's place (1 = removed last), in O(log n) by a Fenwick tree over removal times."""

    def __init__(self, max_blocks):
        self.max_blocks = max_blocks
        self.clear()

    _MIN_TIMES = 1024

    def clear(self):
        self._time = collections.OrderedDict()  # block -> its removal time, oldest removal first
        # Sized to what is remembered (renumbered into a larger one as that grows), so that emptying it
        # costs little whatever max_blocks is.
        self._tree = [0] * (min(self._MIN_TIMES, 2 * self.max_blocks) + 2)
        self._now = 0

    def __len__(self):
        return len(self._time)

    def _add(self, t, delta):
        while t < len(self._tree):
            self._tree[t] += delta
            t += t & -t

    def _before(self, t):  # removals still remembered at times < t
        total, t = 0, t - 1
        while t > 0:
            total += self._tree[t]
            t -= t & -t
        return total

    def position(self, block):
        t = self._time.get(block)
        return None if t is None else len(self._time) - self._before(t)

    def discard(self, block):
        t = self._time.pop(block, None)
        if t is not None:
            self._add(t, -1)

    def removed(self, block):
        """Remembers `block` as removed last; returns the block forgotten to make room, or None."""
        self.discard(block)
        if self._now + 1 >= len(self._tree):  # times run out: number the remembered ones 1..n again
            order = list(self._time)
            self._tree = [0] * (min(max(self._MIN_TIMES, 2 * len(order)), 2 * self.max_blocks) + 2)
            self._time.clear()
            self._now = 0
            for b in order:
                self._now += 1
                self._time[b] = self._now
                self._add(self._now, 1)
        self._now += 1
        self._time[block] = self._now
        self._add(self._now, 1)
        if len(self._time) > self.max_blocks:
            oldest = next(iter(self._time))
            self.discard(oldest)
            return oldest
        return None


class EventReplay:
    """One engine cache's events in order → records (dicts of Record fields)."""

    def __init__(self, model, capacity_blocks, cache_id="", max_blocks=None, medium="GPU", group_idx=0):
        max_blocks = max_blocks or 4 * capacity_blocks
        self.medium = medium  # events of another tier (an offloading engine's CPU blocks) are not this cache's
        # vLLM tags each event with its KV cache group (group_idx; a hybrid model has one per kind of
        # layer, each with its own blocks): one group's blocks are one cache. Untagged events are group 0.
        self.group_idx = group_idx
        self.model, self.capacity_blocks, self.cache_id = model, capacity_blocks, cache_id
        self.ghost = GhostList(max_blocks)
        self.present = set()  # stored and not removed since: in the cache
        self.positions = {}  # block -> its place in its chain (0 = first), while in the cache or remembered removed
        self.max_blocks = max_blocks
        self.resets = collections.Counter()  # why the state was emptied
        self.unknown_parent = 0               # BlockStored events whose prefix length was unknown
        self.other_medium = 0                 # events of another tier, skipped
        self.other_group = 0                  # events of another KV cache group, skipped
        self.events = collections.Counter()   # events read, by type
        self.capped = 0                       # records cut to their leading MAX_DISTANCES blocks

    def reset(self, why):
        self.ghost.clear()
        self.present.clear()
        self.positions.clear()
        self.resets[why] += 1

    def apply(self, events):
        """The records of one batch's events, applying its removals and clears in order."""
        records = []
        for event in events:
            kind = event["type"]
            self.events[kind] += 1
            if event.get("medium") not in (None, self.medium):
                self.other_medium += 1
                continue
            if kind != "AllBlocksCleared" and (event.get("group_idx") or 0) != self.group_idx:
                self.other_group += 1
                continue
            if kind == "AllBlocksCleared":
                self.reset("all_blocks_cleared")
            elif kind == "BlockRemoved":
                for block in event["block_hashes"]:
                    self.present.discard(block)
                    forgotten = self.ghost.removed(block)
                    if forgotten is not None:
                        self.positions.pop(forgotten, None)
            else:
                record = self._stored(event)
                if record is not None:
                    records.append(record)
        return records

    def _stored(self, event):
        parent, hashes, size = event["parent_block_hash"], event["block_hashes"], event["block_size"]
        if not hashes:
            return None
        if parent is None:
            start = 0
        elif parent in self.positions:
            start = self.positions[parent] + 1
        else:
            self.unknown_parent += 1  # its prefix was stored before this replay began (or forgotten)
            start = None
        # Each block as it stood when the request looked its prompt up: in the cache already (computed
        # again after an earlier miss of the request) is as deep as the cache at most; removed, its
        # place among the removals; else never seen. Then the request's blocks are in the cache.
        distances = []
        for block in hashes:
            place = self.ghost.position(block)
            distances.append(0 if block in self.present else NEVER_SEEN if place is None else place)
        if len(self.present) + len(hashes) > MAX_PRESENT_FACTOR * self.capacity_blocks + MAX_PRESENT_SLACK:
            self.reset("cache_overflow")  # more blocks stored than the cache holds: removals were lost
            if parent is not None:
                start = None  # its chain's positions went with the reset
        for i, block in enumerate(hashes):
            self.present.add(block)
            self.ghost.discard(block)
            if start is not None:
                self.positions[block] = start + i
        if start is None:
            return None
        tokens = len(event.get("token_ids") or ()) or size * len(hashes)
        distances = ([0] * min(start, MAX_DISTANCES) + distances[:MAX_DISTANCES])[:MAX_DISTANCES]
        if start + len(hashes) > MAX_DISTANCES:
            self.capped += 1
        return {"model": self.model, "tier": "device" if start else None, "prompt_tokens": start * size + tokens,
                "logical_match_tokens": start * size, "block_tokens": size, "cache_id": self.cache_id,
                "cache_capacity_blocks": self.capacity_blocks,
                "prefix_block_reuse_distances": distances}


class Subscriber:
    """An engine's event stream with its sequence checked: gaps filled from the replay socket when there
    is one, else (and for a restart) the replay state emptied."""

    def __init__(self, replay, endpoint, replay_endpoint=None, topic="", log=sys.stderr):
        import zmq  # noqa: PLC0415  (only the subscriber needs it)
        self._zmq = zmq
        self.replay, self.log = replay, log
        self._context = zmq.Context.instance()
        self._sub = self._context.socket(zmq.SUB)
        self._sub.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES)
        self._sub.connect(endpoint)
        self._sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
        self._replay_endpoint = replay_endpoint
        self.expected = None  # the next sequence number
        self.errors = 0       # frames that were not KV event batches (named on stderr)
        self.batches = 0      # batches applied (as they came, or replayed)
        self.replayed = 0     # of them, filled from the replay socket
        self.unfilled_gaps = 0
        self.restarts = 0
        self.last_batch_ts = None  # the engine's time of the last batch applied (its EventBatch.ts)

    def close(self):
        self._sub.close(linger=0)

    def poll(self, timeout_ms):
        """The records of the next batch (and of any gap filled before it); [] when none came in time."""
        if not self._sub.poll(timeout_ms):
            return []
        frames = self._sub.recv_multipart()
        if len(frames) != 3 or len(frames[1]) != 8:
            return self._bad(f"a frame of {len(frames)} parts: must be (topic, 8-byte sequence, payload)")
        seq = int.from_bytes(frames[1], "big", signed=True)
        if seq < 0:
            return self._bad(f"sequence {seq}: must be >= 0")
        records = []
        if self.expected is None and seq > 0 and self._replay_endpoint:
            records += self._fill(0, seq, catch_up=True)  # started late: from the engine's buffer
        elif self.expected is not None and seq < self.expected:
            self.restarts += 1
            self.replay.reset("engine_restart")
            self._say(f"sequence {seq} after {self.expected - 1}: the engine restarted; the ghost list starts again")
        elif self.expected is not None and seq > self.expected:
            records += self._fill(self.expected, seq)
        records += self._apply(seq, frames[2])
        return records

    def _apply(self, seq, payload):
        self.expected = seq + 1
        try:
            ts, events = decode_batch(payload)
        except KvEventsError as e:
            return self._bad(f"batch {seq}: {e}")
        self.batches += 1
        if isinstance(ts, (int, float)) and not isinstance(ts, bool):
            self.last_batch_ts = float(ts)
        return self.replay.apply(events)

    def _fill(self, first, upto, catch_up=False):
        got = self._replayed(first, upto) if self._replay_endpoint and upto - first <= MAX_GAP_BATCHES else {}
        self.replayed += len(got)
        if catch_up:  # whatever the buffer still holds, in order, from where it starts
            records = []
            for seq in sorted(got):
                records += self._apply(seq, got[seq])
            return records
        if len(got) != upto - first:  # every key is in [first, upto): all there, or a gap stays
            self.unfilled_gaps += 1
            self.replay.reset("gap")
            self._say(f"batches {first}..{upto - 1} missing ({len(got)} replayed): the ghost list starts again")
            return []
        records = []
        for seq in range(first, upto):
            records += self._apply(seq, got[seq])
        return records

    def _replayed(self, first, upto):
        """{sequence: payload} the replay socket sends for [first, upto), within MAX_REPLAY_BYTES and
        MAX_REPLAY_SECONDS; a malformed answer ends it."""
        import time  # noqa: PLC0415
        got, size, deadline = {}, 0, time.monotonic() + MAX_REPLAY_SECONDS
        dealer = self._context.socket(self._zmq.DEALER)
        dealer.setsockopt(self._zmq.LINGER, 0)
        dealer.setsockopt(self._zmq.MAXMSGSIZE, MAX_FRAME_BYTES)
        dealer.connect(self._replay_endpoint)
        dealer.send_multipart([b"", first.to_bytes(8, "big")])
        while len(got) < upto - first and dealer.poll(int(max(0, min(2.0, deadline - time.monotonic())) * 1000)):
            frames = dealer.recv_multipart()
            if len(frames) != 3 or len(frames[1]) != 8:
                self._bad(f"a replay answer of {len(frames)} parts: must be (empty, 8-byte sequence, payload)")
                break
            seq = int.from_bytes(frames[1], "big", signed=True)
            if seq == END_SEQ:
                break
            size += len(frames[2])
            if size > MAX_REPLAY_BYTES:
                self._say(f"the replay of batches {first}..{upto - 1} passed {MAX_REPLAY_BYTES} bytes: stopped")
                break
            if first <= seq < upto:
                got[seq] = frames[2]
        dealer.close()
        return got

    def _bad(self, message):
        self.errors += 1
        self._say(message + "; skipped")
        return []

    def _say(self, message):
        print(f"kvledger.kv_events: {message}", file=self.log, flush=True)


def _snapshot(counter):
    for _ in range(3):  # the reading thread may meet a key being added: read again
        try:
            return dict(counter)
        except RuntimeError:
            continue
    return {}


def exposition(subscriber, reporter_stats=None, now=None):
    """The subscriber's own figures in Prometheus's text format (one engine cache per process)."""
    import time  # noqa: PLC0415
    replay, now = subscriber.replay, time.time() if now is None else now
    lines = []

    def family(name, kind, help_text, samples):
        lines.append(f"# HELP kvledger_kv_events_{name} {help_text}")
        lines.append(f"# TYPE kvledger_kv_events_{name} {kind}")
        for labels, value in samples:
            label_text = ",".join(f'{k}="{v}"' for k, v in labels)
            lines.append(f"kvledger_kv_events_{name}{{{label_text}}} {value}" if labels else
                         f"kvledger_kv_events_{name} {value}")

    family("batches_total", "counter", "Event batches applied, as they came or filled from the replay socket.",
           [((), subscriber.batches)])
    family("replayed_batches_total", "counter", "Batches filled from the engine's replay socket.",
           [((), subscriber.replayed)])
    family("unfilled_gaps_total", "counter", "Gaps in the sequence the replay socket did not fill (each a reset).",
           [((), subscriber.unfilled_gaps)])
    family("bad_frames_total", "counter", "Frames or batches that were not KV event batches, skipped.",
           [((), subscriber.errors)])
    events = _snapshot(replay.events)
    family("events_total", "counter", "Events read, by type.",
           [((("type", t),), events.get(t, 0)) for t in _ARRAY_FIELDS])
    family("skipped_events_total", "counter", "Events of another tier or KV cache group, skipped.",
           [((("reason", "other_medium"),), replay.other_medium), ((("reason", "other_group"),), replay.other_group)])
    resets = _snapshot(replay.resets)
    family("resets_total", "counter", "Times the replay state was emptied, by why.",
           [((("reason", r),), resets.get(r, 0))
            for r in ("gap", "engine_restart", "all_blocks_cleared", "cache_overflow")])
    family("unknown_parent_stores_total", "counter", "Stores whose prefix was stored before the replay began.",
           [((), replay.unknown_parent)])
    family("remembered_blocks", "gauge", "Removed blocks the ghost list remembers.", [((), len(replay.ghost))])
    if subscriber.last_batch_ts is not None:
        family("lag_seconds", "gauge", "Now minus the engine's time of the last batch applied.",
               [((), round(max(0.0, now - subscriber.last_batch_ts), 3))])
    if reporter_stats is not None:
        family("records_total", "counter", "Records handed to the Reporter, by what became of them.",
               [((("outcome", k),), reporter_stats.get(k, 0)) for k in ("sent", "dropped", "rejected")])
    return "\n".join(lines) + "\n"


def serve_metrics(address, render):
    """Serves `render()` at http://ADDRESS/metrics from a daemon thread; returns the server (its
    server_address is the bound one: port 0 picks a free port)."""
    import http.server  # noqa: PLC0415
    import threading  # noqa: PLC0415
    host, _, port = address.rpartition(":")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            body = render().encode() if self.path.split("?")[0] == "/metrics" else b"not found\n"
            self.send_response(200 if self.path.split("?")[0] == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((host.strip("[]") or "0.0.0.0", int(port)), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m kvledger.kv_events", description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", required=True, help="the engine's KV events PUB address, e.g. tcp://127.0.0.1:5557")
    parser.add_argument("--replay-endpoint", help="its replay (ROUTER) address, to fill gaps")
    parser.add_argument("--topic", default="", help="the events' topic (default: all)")
    parser.add_argument("--model", required=True, help="the engine's model profile, e.g. llama-3.1-8b")
    parser.add_argument("--capacity-blocks", type=int, required=True,
                        help="the engine's device cache in blocks (vLLM logs its GPU KV cache size in tokens: / block size)")
    parser.add_argument("--cache-id", default="", help="this engine's cache id (also the Reporter's affinity key)")
    parser.add_argument("--medium", default="GPU",
                        help="the tier whose events are read (an offloading engine also publishes CPU; default GPU)")
    parser.add_argument("--group-idx", type=int, default=0,
                        help="the KV cache group whose blocks are read (vLLM's group_idx; a hybrid model has one per "
                             "kind of layer; default 0, and events without one are group 0)")
    parser.add_argument("--target", default="127.0.0.1:50051", help="kvledger-server HOST:PORT")
    parser.add_argument("--max-blocks", type=int, default=None,
                        help="removed blocks remembered, about 200 bytes each (default 4 x --capacity-blocks: curves "
                             "up to 5 times the cache are exact)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long (default: never)")
    parser.add_argument("--metrics-address", default=None,
                        help="HOST:PORT to serve this subscriber's own figures at /metrics (default: not served)")
    parser.add_argument("--one-store-per-request", action="store_true",
                        help="say that the engine publishes one BlockStored per request (chunked prefill off and no "
                             "output block cached, e.g. a prefill-only instance); without it nothing runs")
    args = parser.parse_args(argv)
    if args.capacity_blocks < 1:
        parser.error(f"--capacity-blocks = {args.capacity_blocks}: must be >= 1")
    if not args.one_store_per_request:
        parser.error(NOT_ONE_STORE_PER_REQUEST)
    import time  # noqa: PLC0415
    from kvledger.reporter import Reporter  # noqa: PLC0415
    if args.group_idx < 0:
        parser.error(f"--group-idx = {args.group_idx}: must be >= 0")
    replay = EventReplay(args.model, args.capacity_blocks, args.cache_id, args.max_blocks or 4 * args.capacity_blocks,
                         args.medium, args.group_idx)
    subscriber = Subscriber(replay, args.endpoint, args.replay_endpoint, args.topic)
    end = None if args.seconds is None else time.monotonic() + args.seconds
    with Reporter(args.target, affinity_key=args.cache_id or None, max_queue_size=MAX_QUEUED_RECORDS) as reporter:
        if args.metrics_address:
            metrics = serve_metrics(args.metrics_address, lambda: exposition(subscriber, reporter.stats()))
            print(f"kvledger.kv_events: metrics at http://{args.metrics_address.rpartition(':')[0]}:"
                  f"{metrics.server_address[1]}/metrics", file=sys.stderr, flush=True)
        while end is None or time.monotonic() < end:
            for record in subscriber.poll(200):
                reporter.report(**record)
    subscriber.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
