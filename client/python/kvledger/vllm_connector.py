"""A vLLM v1 KV connector that sends kvledger each finished request's blocks in vLLM's own hash space,
for the capacity curves (docs/cost-model.md §14): what a cache of every size would have matched, replayed
from the blocks the engine really looked up and filled. It loads and saves nothing.

Enable it with vLLM's documented flags, after `pip install ./client/python` in vLLM's environment:

    vllm serve MODEL --kv-transfer-config '{"kv_connector": "KvledgerConnector",
        "kv_connector_module_path": "kvledger.vllm_connector", "kv_role": "kv_both"}'

Beside another connector (an offloading or P/D connector), list both under vLLM's MultiConnector.
Configure it with environment variables:

    KVLEDGER_TARGET    kvledger-server HOST:PORT or gRPC target (default 127.0.0.1:50051)
    KVLEDGER_MODEL     the kvledger profile name (default: a guess from the served model name)
    KVLEDGER_CACHE_ID  the cache the curves replay (default: the host name, plus "-dpN" for data-parallel
                       rank N > 0): one per engine instance

Why a connector: its scheduler side is handed each vLLM `Request` when it finishes
(`request_finished(request, block_ids)`, "called exactly once ... before its blocks are freed"), and the
request carries what the curves need: `num_prompt_tokens`, `num_cached_tokens` (the engine's own hit,
set when it was first scheduled), and `block_hashes`, one per full block of prompt and output, in the
hash space vLLM's KV events publish. vLLM's stat loggers see no block hashes; a scheduler class would
have to replace vLLM's. Each record carries `prefix_block_ids` (the prompt's full blocks),
`output_block_ids` (the full blocks the output filled, which vLLM caches) and `curves_only`: the server
counts it in the capacity curves only, so the stat logger (kvledger.vllm) can report the same request's
latencies beside it without counting it twice.

It runs in vLLM's scheduler loop: request_finished converts the hashes and queues one record to a
kvledger.Reporter (which sends from its own thread, drops past its queue and counts what it drops); it
never waits on the network. Requests it cannot send are counted by reason and logged in a summary at
most once a minute: "no_block_hashes" (prefix caching off), "never_scheduled" (aborted before its
lookup), "no_full_prompt_block" (a prompt shorter than one block: nothing to look up),
"duplicate_request_id" (a request id finished twice among the last 65,536).
"""
import collections
import hashlib
import logging
import os
import socket
import time

from kvledger.adapters import profile_name
from kvledger.blocks import from_engine_hashes
from kvledger.reporter import Reporter

__all__ = ["KvledgerConnector", "record_of", "SkippedRequest"]
_cls = None
_log = logging.getLogger("kvledger.vllm_connector")
MAX_BLOCK_IDS = 65536          # the server's bound on each of prefix_block_ids and output_block_ids
MAX_REQUEST_ID_BYTES = 256     # the server's bound on request_id
RECENT_REQUEST_IDS = 65536     # request ids remembered to catch one finished twice (about 8 MB)
# Records waiting for the server at most: a 128 K-token request at 16-token blocks is 64 KiB, so 64 MiB
# at that size while the server is unreachable; past it the Reporter drops new ones and counts them.
MAX_QUEUED_RECORDS = 1024
SUMMARY_INTERVAL_SECONDS = 60.0


class SkippedRequest(Exception):
    """A finished request that is not sent; `reason` names why."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


def _slot_ids(request_id, count):
    """Ids for a request's blocks that hold no cached content (its partial tail): they take a place in
    the engine's free queue and are never hit, so each is unique to the request."""
    key = str(request_id).encode()
    return [int.from_bytes(hashlib.blake2b(key + i.to_bytes(4, "big"), digest_size=8).digest(), "big")
            for i in range(count)]


def device_blocks_of(vllm_config, kv_cache_config=None):
    """The blocks the engine's prefix cache can hold, for the second-tier what-if (cache_capacity_blocks):
    KVCacheConfig.num_blocks (vllm/v1/kv_cache_interface.py; older vLLM: cache_config.num_gpu_blocks)
    less the one BlockPool.__init__ (vllm/v1/core/block_pool.py) takes as its null block. None when
    neither is known yet."""
    total = getattr(kv_cache_config, "num_blocks", None) or getattr(
        getattr(vllm_config, "cache_config", None), "num_gpu_blocks", None)
    return int(total) - 1 if total and int(total) > 1 else None


def record_of(request, model, block_size, cache_id, block_ids=None, device_blocks=None):
    """The curves-only record (Record fields as a dict) of a finished vLLM Request, or SkippedRequest.
    `block_ids`, as request_finished gets them (the resident blocks, a partial tail included), say how
    many blocks the request held: the full ones are its block hashes; the rest (a partial tail) are
    sent as output blocks of their own, since the engine frees them into its queue like any other."""
    hashes = getattr(request, "block_hashes", None) or ()
    if not hashes:
        raise SkippedRequest("no_block_hashes")
    if int(getattr(request, "num_cached_tokens", 0)) < 0:  # -1 until first scheduled: never looked up
        raise SkippedRequest("never_scheduled")
    prompt = int(request.num_prompt_tokens)
    prompt_blocks = min(prompt // block_size, len(hashes))
    if prompt_blocks == 0:
        raise SkippedRequest("no_full_prompt_block")
    if block_ids and isinstance(block_ids[0], (list, tuple)):  # one list per KV cache group
        block_ids = block_ids[0]
    held = len(block_ids) if block_ids else len(hashes)
    ids = from_engine_hashes(hashes[:max(prompt_blocks, min(held, prompt_blocks + MAX_BLOCK_IDS))])
    ids += _slot_ids(request.request_id, min(held - len(hashes), prompt_blocks + MAX_BLOCK_IDS - len(ids)))
    hit = max(0, min(int(getattr(request, "num_cached_tokens", 0) or 0), prompt))
    outputs = int(getattr(request, "num_output_tokens", 0) or 0)
    return {"model": model, "request_id": str(request.request_id).encode()[:MAX_REQUEST_ID_BYTES].decode(errors="ignore"),
            "prompt_tokens": prompt, "logical_match_tokens": hit, "tier": "device" if hit else None,
            "output_tokens": outputs or None, "block_tokens": block_size, "cache_id": cache_id,
            "prefix_block_ids": ids[:min(prompt_blocks, MAX_BLOCK_IDS)],
            "output_block_ids": ids[prompt_blocks:] if prompt_blocks <= MAX_BLOCK_IDS else [],
            "cache_capacity_blocks": device_blocks, "curves_only": True}


def default_cache_id(vllm_config):
    rank = getattr(getattr(vllm_config, "parallel_config", None), "data_parallel_rank", 0) or 0
    return os.environ.get("KVLEDGER_CACHE_ID") or socket.gethostname() + (f"-dp{rank}" if rank else "")


def _make_class():
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (  # noqa: PLC0415 - deliberately lazy
        KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole)

    class KvledgerConnectorMetadata(KVConnectorMetadata):
        """Nothing for the workers. vLLM sends it to them with each step, so it is found by name in this
        module when unpickled (module __getattr__)."""

    KvledgerConnectorMetadata.__module__ = __name__
    KvledgerConnectorMetadata.__qualname__ = "KvledgerConnectorMetadata"

    class KvledgerConnector(KVConnectorBase_V1):
        """Reports finished requests' blocks (scheduler side); the worker side does nothing."""

        def __init__(self, vllm_config, role, kv_cache_config=None):
            try:
                super().__init__(vllm_config, role, kv_cache_config)
            except TypeError:  # vLLM before kv_cache_config was passed to connectors
                super().__init__(vllm_config, role)
            model_config = getattr(vllm_config, "model_config", None)
            served = getattr(model_config, "served_model_name", None) or getattr(model_config, "model", "unknown")
            served = served[0] if isinstance(served, (list, tuple)) else served
            self.model = os.environ.get("KVLEDGER_MODEL") or profile_name(str(served))
            self.block_size = int(vllm_config.cache_config.block_size)
            self.device_blocks = device_blocks_of(vllm_config, kv_cache_config)
            self.cache_id = default_cache_id(vllm_config)
            self.sent = 0
            self.skipped = collections.Counter()
            self._recent = collections.OrderedDict()
            self._last_summary = time.monotonic()
            self.reporter = None
            if role == KVConnectorRole.SCHEDULER:
                self.reporter = Reporter(os.environ.get("KVLEDGER_TARGET", "127.0.0.1:50051"),
                                         affinity_key=self.cache_id, max_queue_size=MAX_QUEUED_RECORDS)

        # Worker side: nothing to load or save.
        def start_load_kv(self, forward_context, **kwargs):
            pass

        def wait_for_layer_load(self, layer_name):
            pass

        def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
            pass

        def wait_for_save(self):
            pass

        # Scheduler side: no external tokens; one record per finished request.
        def get_num_new_matched_tokens(self, request, num_computed_tokens):
            return 0, False

        def update_state_after_alloc(self, request, blocks, num_external_tokens):
            pass

        def build_connector_meta(self, scheduler_output):
            self._maybe_summarize()
            return KvledgerConnectorMetadata()

        def request_finished(self, request, block_ids):
            if self.reporter is None:
                return False, None
            rid = request.request_id
            if rid in self._recent:
                self.skipped["duplicate_request_id"] += 1
                return False, None
            self._recent[rid] = None
            if len(self._recent) > RECENT_REQUEST_IDS:
                self._recent.popitem(last=False)
            try:
                record = record_of(request, self.model, self.block_size, self.cache_id, block_ids,
                                   self.device_blocks or device_blocks_of(self._vllm_config))
            except SkippedRequest as skipped:
                self.skipped[skipped.reason] += 1
                return False, None
            if self.reporter.report(**record):
                self.sent += 1
            return False, None

        def _maybe_summarize(self):
            now = time.monotonic()
            if now - self._last_summary >= SUMMARY_INTERVAL_SECONDS:
                self._last_summary = now
                _log.info("%s", self.summary())

        def summary(self):
            stats = self.reporter.stats() if self.reporter else {"dropped": 0, "rejected": 0}
            skipped = ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items())) or "none"
            return (f"kvledger connector: model {self.model}, cache {self.cache_id}: {self.sent} records sent, "
                    f"{stats['dropped']} dropped, {stats['rejected']} rejected; skipped: {skipped}")

        def shutdown(self):
            if self.reporter is not None:
                self.reporter.close(timeout_seconds=5)

    KvledgerConnector.__module__ = __name__
    KvledgerConnector.__qualname__ = "KvledgerConnector"
    return {"KvledgerConnector": KvledgerConnector, "KvledgerConnectorMetadata": KvledgerConnectorMetadata}


def __getattr__(name):
    global _cls
    if name in ("KvledgerConnector", "KvledgerConnectorMetadata"):
        if _cls is None:
            _cls = _make_class()
            globals().update(_cls)
        return _cls[name]
    raise AttributeError(name)
