"""A model of a vLLM v1 engine's prefix cache, written from the upstream source (vllm-project/vllm), for
the capacity curves' tests: what a cache of a given size really hit, the KV events it publishes, and the
calls its KV connector receives. No GPU, no tokens: each request is its prompt length, its prompt's
full-block hashes and its output length; each step computes what the scheduler scheduled.

What it follows, file by file (one KV cache group of full attention, FCFS, no speculative decoding,
no LoRA, no multimodal inputs):
- vllm/v1/core/sched/scheduler.py, Scheduler.schedule: RUNNING requests first, each given
  `num_tokens - num_computed_tokens` tokens within the step's token budget (max_num_batched_tokens),
  preempting the last running request (`self.running.pop()`) when allocate_slots fails; then, when
  nothing was preempted, WAITING requests while the budget lasts and fewer than max_num_seqs run: a
  local lookup (get_computed_blocks), the connector's get_num_new_matched_tokens, the chunk
  `min(num_tokens - num_computed_tokens, token_budget)` (without chunked prefill a request that does
  not fit stops the loop), allocate_slots, update_state_after_alloc, `num_cached_tokens` set at the
  first admission only. Scheduler._preempt_request: the request's blocks freed, num_computed_tokens 0,
  back at the head of the queue. Scheduler.update_from_output: a request whose computed tokens reach
  its tokens produced one token; at max_tokens it finishes (Scheduler._free_request: the connector's
  request_finished, then KVCacheManager.free); the step's KV events are taken and published as one
  batch.
- vllm/v1/core/kv_cache_manager.py, KVCacheManager.get_computed_blocks: the longest run of the
  request's block hashes that are cached, capped at `request.num_tokens - 1` tokens (the last token is
  computed for its logits). KVCacheManager.allocate_slots: blocks for `cdiv(computed + new tokens,
  block_size)`, counting the hit's blocks still in the free queue as taken; None when the free queue
  is short; the hit touched, new blocks taken, then cache_blocks up to `min(computed + new tokens,
  request.num_tokens)`, and `request.num_tokens` counts generated tokens (so decode blocks are cached
  as they fill). KVCacheManager.free: the request's blocks freed in reverse ("tail blocks are freed
  first").
- vllm/v1/core/single_type_kv_cache_manager.py, cache_blocks: the hit's blocks count as cached; each
  call caches the newly full blocks (one BlockPool.cache_full_blocks call, one BlockStored).
- vllm/v1/core/block_pool.py, BlockPool: get_new_blocks pops the free queue's head, and a popped block
  that is cached is evicted (_maybe_evict_cached_block: one BlockRemoved per block); touch takes a hit
  block out of the free queue; free_blocks appends blocks whose reference count falls to 0, in the
  order given; cache_full_blocks emits one BlockStored(block_hashes, parent_block_hash = the request's
  block before them, token_ids, block_size). Identical blocks computed by two requests are both cached
  (no de-duplication); a lookup finds the first.
- vllm/v1/core/kv_cache_utils.py, FreeKVCacheBlockQueue: a doubly linked list, popped from the front,
  appended at the back, a touched block removed from the middle.
- vllm/v1/request.py, Request: num_prompt_tokens, num_tokens (prompt + output), num_output_tokens,
  num_computed_tokens, num_cached_tokens (-1 until admitted), block_hashes (one per full block of
  prompt and output, bytes). The null block (block 0) is left out: `num_blocks` are all usable.
"""
import collections
import hashlib

_MASK = (1 << 64) - 1


def _mix(*parts):
    """A 64-bit hash of integers (block hashes of the model: deterministic, distinct in practice)."""
    digest = hashlib.blake2b(b"".join(p.to_bytes(8, "big", signed=False) for p in parts), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def prompt_block_hashes(hash_ids, input_length, block_size, trace_block_tokens=512):
    """The full prompt blocks' hashes of a trace request (Mooncake/WEKA `hash_ids`, each naming a chained
    512-token block): at 512 the ids themselves, at a smaller block size each 512-token id's sub-blocks,
    chained under it."""
    full = input_length // block_size
    if block_size == trace_block_tokens:
        return [_mix(h) for h in hash_ids[:full]]
    per = trace_block_tokens // block_size
    return [_mix(hash_ids[j // per], j % per) for j in range(full)]


class Request:
    """vllm/v1/request.py Request: the fields the scheduler, the cache manager and a connector read."""

    def __init__(self, request_id, num_prompt_tokens, prompt_hashes, max_tokens, block_size):
        self.request_id = request_id
        self.num_prompt_tokens = num_prompt_tokens
        self.max_tokens = max(1, max_tokens)
        self.num_output_tokens = 0
        self.num_computed_tokens = 0
        self.num_cached_tokens = -1
        self.num_preemptions = 0
        self._hashes = list(prompt_hashes)  # ints; grown as output fills blocks
        self._block_size = block_size
        self._uid = _mix(len(request_id), *(ord(c) for c in request_id[:32]))

    @property
    def num_tokens(self):
        return self.num_prompt_tokens + self.num_output_tokens

    def hashes_through(self, blocks):
        """The hashes of the first `blocks` full blocks (output blocks chained on from the prompt's,
        unique to the request: the model's outputs are never repeated by another prompt)."""
        while len(self._hashes) < blocks:
            parent = self._hashes[-1] if self._hashes else 0
            self._hashes.append(_mix(parent, self._uid, len(self._hashes)))
        return self._hashes[:blocks]

    @property
    def block_hashes(self):
        """request.block_hashes as vLLM keeps them: bytes (a sha256 digest's width), one per full block."""
        self.hashes_through(self.num_tokens // self._block_size)
        return [h.to_bytes(32, "big") for h in self._hashes]


class BlockPool:
    """vllm/v1/core/block_pool.py BlockPool with kv_cache_utils.FreeKVCacheBlockQueue."""

    def __init__(self, num_blocks, block_size, events):
        self.block_size = block_size
        self.hash = [None] * num_blocks
        self.ref = [0] * num_blocks
        self.free_queue = collections.OrderedDict((b, None) for b in range(num_blocks))  # head = next evicted
        self.cached = {}  # block hash -> {block id: None}, first = the one a lookup finds
        self.events = events

    def get_cached_block(self, block_hash):
        found = self.cached.get(block_hash)
        return next(iter(found)) if found else None

    def get_new_blocks(self, n):
        blocks = []
        for _ in range(n):
            block, _ = self.free_queue.popitem(last=False)
            h = self.hash[block]
            if h is not None:  # _maybe_evict_cached_block
                holders = self.cached[h]
                del holders[block]
                if not holders:
                    del self.cached[h]
                self.hash[block] = None
                self.events.append({"type": "BlockRemoved", "block_hashes": [h], "medium": "GPU"})
            self.ref[block] = 1
            blocks.append(block)
        return blocks

    def touch(self, blocks):
        for block in blocks:
            if self.ref[block] == 0:
                del self.free_queue[block]
            self.ref[block] += 1

    def free_blocks(self, ordered):
        for block in ordered:
            self.ref[block] -= 1
            if self.ref[block] == 0:
                self.free_queue[block] = None

    def cache_full_blocks(self, blocks, hashes, parent):
        for block, h in zip(blocks, hashes):
            self.hash[block] = h
            self.cached.setdefault(h, {})[block] = None
        self.events.append({"type": "BlockStored", "block_hashes": list(hashes), "parent_block_hash": parent,
                            "token_ids": [0] * (len(hashes) * self.block_size), "block_size": self.block_size,
                            "lora_id": None, "medium": "GPU", "lora_name": None})


class KVCacheManager:
    """vllm/v1/core/kv_cache_manager.py KVCacheManager over one single_type_kv_cache_manager."""

    def __init__(self, num_blocks, block_size, events):
        self.block_size = block_size
        self.pool = BlockPool(num_blocks, block_size, events)
        self.req_blocks = {}   # request id -> its blocks, in order
        self.num_cached = {}   # request id -> how many of them are cached

    def get_computed_blocks(self, request):
        limit = (request.num_tokens - 1) // self.block_size
        hit = []
        for h in request.hashes_through(min(limit, request.num_tokens // self.block_size)):
            block = self.pool.get_cached_block(h)
            if block is None:
                break
            hit.append(block)
        return hit, len(hit) * self.block_size

    def allocate_slots(self, request, num_new_tokens, num_new_computed_tokens=0, new_computed_blocks=()):
        blocks = self.req_blocks.setdefault(request.request_id, [])
        computed = request.num_computed_tokens + num_new_computed_tokens
        needed = -(-(computed + num_new_tokens) // self.block_size)
        new = max(0, needed - len(blocks) - len(new_computed_blocks))
        evictable = sum(1 for b in new_computed_blocks if self.pool.ref[b] == 0)
        if new + evictable > len(self.pool.free_queue):
            return None
        if new_computed_blocks:
            self.pool.touch(new_computed_blocks)
            blocks.extend(new_computed_blocks)
            self.num_cached[request.request_id] = len(blocks)
        blocks.extend(self.pool.get_new_blocks(new))
        self.cache_blocks(request, min(computed + num_new_tokens, request.num_tokens))
        return blocks

    def cache_blocks(self, request, num_tokens):
        rid = request.request_id
        done, full = self.num_cached.get(rid, 0), num_tokens // self.block_size
        if full <= done:
            return
        hashes = request.hashes_through(full)
        parent = hashes[done - 1] if done else None
        self.pool.cache_full_blocks(self.req_blocks[rid][done:full], hashes[done:full], parent)
        self.num_cached[rid] = full

    def free(self, request):
        blocks = self.req_blocks.pop(request.request_id, [])
        self.num_cached.pop(request.request_id, None)
        self.pool.free_blocks(reversed(blocks))


class NoConnector:
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        return 0, False

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        pass

    def request_finished(self, request, block_ids):
        return False, None


class Engine:
    """vllm/v1/core/sched/scheduler.py Scheduler driving the model above, one step at a time."""

    def __init__(self, num_blocks, block_size=16, max_num_batched_tokens=8192, max_num_seqs=256,
                 enable_chunked_prefill=True, connector=None, publish=None):
        self.block_size = block_size
        self.events = []
        self.kv = KVCacheManager(num_blocks, block_size, self.events)
        self.budget = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self.chunked = enable_chunked_prefill
        self.connector = connector or NoConnector()
        self.publish = publish or (lambda events: None)
        self.waiting = collections.deque()
        self.running = []
        self.finished = []  # requests in the order they finished
        self.steps = 0

    def add_request(self, request):
        self.waiting.append(request)

    def _preempt(self, request):
        self.kv.free(request)
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        self.waiting.appendleft(request)

    def _schedule_running(self, scheduled, budget):
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            request = self.running[i]
            n = min(request.num_tokens - request.num_computed_tokens, budget)
            if n == 0:
                i += 1
                continue
            while True:
                blocks = self.kv.allocate_slots(request, n)
                if blocks is not None:
                    break
                victim = self.running.pop()
                self._preempt(victim)
                preempted = True
                if victim is request:
                    break
            if blocks is None:
                break
            scheduled[request.request_id] = (request, n)
            budget -= n
            i += 1
        return budget, preempted

    def _schedule_waiting(self, scheduled, budget):
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            request = self.waiting[0]
            hit, local = self.kv.get_computed_blocks(request)
            self.connector.get_num_new_matched_tokens(request, local)
            n = request.num_tokens - local
            if not self.chunked and n > budget:
                break
            n = min(n, budget)
            if self.kv.allocate_slots(request, n, local, hit) is None:
                break
            self.connector.update_state_after_alloc(request, self.kv.req_blocks[request.request_id], 0)
            self.waiting.popleft()
            self.running.append(request)
            request.num_computed_tokens = local
            if request.num_cached_tokens < 0:
                request.num_cached_tokens = local
            scheduled[request.request_id] = (request, n)
            budget -= n

    def step(self):
        """One Scheduler.schedule and update_from_output; False when nothing is left to run."""
        if not self.waiting and not self.running:
            return False
        scheduled = {}
        budget, preempted = self._schedule_running(scheduled, self.budget)
        if not preempted:
            self._schedule_waiting(scheduled, budget)
        if not scheduled:
            raise RuntimeError("no request can be scheduled: a request needs more blocks than the cache has")
        for request, n in scheduled.values():
            request.num_computed_tokens += n
        for request, _ in scheduled.values():
            if request.num_computed_tokens >= request.num_tokens:
                request.num_output_tokens += 1
                if request.num_output_tokens >= request.max_tokens:
                    self.running.remove(request)
                    self.connector.request_finished(request, list(self.kv.req_blocks[request.request_id]))
                    self.kv.free(request)
                    self.finished.append(request)
        if self.events:
            self.publish(list(self.events))
            self.events.clear()
        self.steps += 1
        return True

    def run(self):
        while self.step():
            pass
        return self.finished


def trace_requests(lines, block_size, limit=None, max_blocks=None, output_tokens=None):
    """Requests from trace lines (input_length, output_length, hash_ids), in order; those whose prompt
    and output need more than `max_blocks` blocks are left out (an engine cannot hold them)."""
    out = []
    for i, line in enumerate(lines[:limit]):
        n, m = int(line["input_length"]), int(output_tokens or line.get("output_length") or 1)
        if n < 1 or (max_blocks is not None and -(-(n + m) // block_size) > max_blocks):
            continue
        out.append(Request(f"req-{i}", n, prompt_block_hashes(line["hash_ids"], n, block_size), m, block_size))
    return out


def token_hit_and_attention(requests):
    """The engine's own token hit ratio (cached / prompt tokens) and attention avoided, sum A(hit) / sum
    A(prompt) with A(x) = x(x+1)/2 (full causal attention; every hit is block-aligned and below the
    prompt, so a 16-token page changes nothing)."""
    prompt = sum(r.num_prompt_tokens for r in requests)
    hit = sum(max(r.num_cached_tokens, 0) for r in requests)
    a = lambda x: x * (x + 1) // 2  # noqa: E731
    return hit / prompt, sum(a(max(r.num_cached_tokens, 0)) for r in requests) / sum(a(r.num_prompt_tokens)
                                                                                     for r in requests)
