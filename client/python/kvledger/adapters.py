"""Records from what inference engines report per request. Pure functions: no engine is imported.

Each adapter fills a record field only from an engine figure that means the same thing, and leaves
the field unset otherwise ("not measured" is never sent as 0). docs/integration.md has the table per
engine, with the upstream source each mapping was read from.

- A request that never produced its first token (aborted by the client, or failed in the engine,
  e.g. a KV load failure) is not a record: its cached-token count means nothing. The adapter raises
  SkippedRequest with `reason` "aborted" or "failed"; the vLLM logger counts these and sends them to
  kvledger as unrecorded requests (kvledger_unrecorded_requests_total).
- A record names one tier only when the engine's data shows every reused token came from it. A hit
  from several tiers is "mixed"; a hit whose source the engine does not report is "unknown".
- The per-request reload time is reported by no engine. A prefix already in GPU memory has no
  reload, so a device-only hit is sent with reload_seconds = 0; any other hit leaves it unset, and
  the vLLM logger sends aggregate transfer statistics instead (Reporter.report_transfer).

Each function takes the kvledger profile name (`model`, e.g. "llama-3.1-8b"; profile_name() guesses
it from a Hugging Face name) because engines report their served model name, which is not a
profile name.
"""
import re

from kvledger.blocks import prefix_block_ids
from kvledger.records import make_record

# vLLM's FinishReason (vllm/v1/engine/__init__.py) by value; str() of the enum gives these names.
_VLLM_FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")

# SGLang HiCache storage backends (--hicache-storage-backend) by where their data lives. A backend
# not listed here is of unknown locality: its hits are tier "unknown", never guessed.
_LOCAL_STORAGE_BACKENDS = ("hicachefile", "file")
_REMOTE_STORAGE_BACKENDS = ("mooncake", "hf3fs", "3fs", "eic", "aibrix")


class SkippedRequest(ValueError):
    """A finished request that must not become a record. `reason`: "aborted" or "failed" (no first
    token: counted by kvledger as unrecorded), "missing_field" (the engine does not report a figure
    the record needs) or "inconsistent" (the figures contradict how the engine works)."""

    def __init__(self, reason, message, logical_match_tokens=0):
        super().__init__(message)
        self.reason = reason
        self.logical_match_tokens = logical_match_tokens


def profile_name(served_model_name):
    """A best guess at the kvledger profile for an engine's model name:
    "meta-llama/Llama-3.1-8B-Instruct" -> "llama-3.1-8b". Check it against the server's catalog."""
    name = served_model_name.rsplit("/", 1)[-1].lower()
    name = re.sub(r"[-_](instruct|chat|base|it|hf|fp8|awq|gptq|bf16)(?=$|[-_])", "", name)
    name = re.sub(r"^meta-llama-", "llama-", name)
    return name


def _field(obj, name, default=None):
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _require(obj, name, where):
    value = _field(obj, name)
    if value is None:
        raise SkippedRequest("missing_field", f"{where}.{name}: missing; cannot build an honest record without it")
    return value


def _positive(value):
    """A finite duration > 0, else None (engines report 0 for "not measured")."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if 0 < value < float("inf") else None


def vllm_finish_reason(reason):
    """vLLM's FinishReason (the IntEnum, its int value, or its string) as "stop", "length",
    "abort", "error" or "repetition"."""
    if isinstance(reason, int) and 0 <= int(reason) < len(_VLLM_FINISH_REASONS):
        return _VLLM_FINISH_REASONS[int(reason)]
    text = str(reason).lower()
    return text.rsplit(".", 1)[-1]  # "FinishReason.ABORT" -> "abort"


def from_vllm(stats, *, model, connector=False, block_size=None, request_id=None):
    """From vLLM v1's FinishedRequestStats (vllm/v1/metrics/stats.py), as a stat logger receives
    them in IterationStats.finished_requests.

    - A request with no output token (num_generation_tokens == 0) never finished its prefill:
      SkippedRequest, reason "aborted" (finish_reason abort), "failed" (error: vLLM's "retryable
      request-level internal error, e.g. KV load failure") or "missing_field" (any other).
    - num_prompt_tokens -> prompt_tokens
    - num_cached_tokens -> logical_match_tokens and recoverable_tokens. vLLM counts a hit in whole
      KV blocks and caps it below the prompt (the last token is always computed for its logits), so
      the count is already the boundary the engine resumed from. A count >= the prompt, or not a
      multiple of `block_size` (when given), contradicts that: SkippedRequest "inconsistent".
      Older vLLM lacks the field: SkippedRequest "missing_field", never a fake miss.
    - tier: "none" for a miss; "device" when the engine has no KV connector (`connector=False`:
      every hit is its own GPU prefix cache); "unknown" with a connector, whose hits vLLM counts
      together with local ones.
    - prefill_time (first scheduled -> first token) -> suffix_prefill_seconds only when no reload
      can be inside it: a miss, or no connector. With a connector a synchronous KV load runs inside
      that interval, so it is left unset.
    - e2e_latency - decode_time (arrival -> first token) -> ttft_seconds.
    - queued_time (queued -> first scheduled: the scheduling wait) -> queue_seconds, under the same
      rule as prefill_time: with a connector a hit's queued_time contains the asynchronous KV load it
      waited for, so it is left unset. Arrival -> queued (the frontend) falls in the TTFT's rest.
    - num_generation_tokens -> output_tokens; decode_time (first token -> last) -> decode_seconds
      when at least 2 tokens were generated.
    - reload_seconds: 0 for a "device" hit (the prefix was already in GPU memory: nothing to reload);
      not reported per request with a connector, so left unset.
    - request_id: the argument, else the stats' request_id (newer vLLM).
    """
    where = "FinishedRequestStats"
    generated = _field(stats, "num_generation_tokens")
    if generated is not None and int(generated) == 0:
        reason = vllm_finish_reason(_field(stats, "finish_reason"))
        kind = {"abort": "aborted", "error": "failed"}.get(reason, "missing_field")
        raise SkippedRequest(kind, f"{where}: finish_reason {reason} with no output token: the prefill never "
                                   "finished, so this is not a record")
    prompt = int(_require(stats, "num_prompt_tokens", where))
    cached = int(_require(stats, "num_cached_tokens", where))
    if cached >= prompt or (block_size and cached % int(block_size)):
        raise SkippedRequest("inconsistent", f"{where}.num_cached_tokens = {cached}: vLLM reports whole "
                                             f"{block_size or 'KV'}-token blocks below num_prompt_tokens = {prompt}")
    prefill = _positive(_field(stats, "prefill_time"))
    e2e, decode = _positive(_field(stats, "e2e_latency")), float(_field(stats, "decode_time", 0.0) or 0.0)
    ttft = e2e - decode if e2e is not None and e2e - decode >= 0 else None
    tier = "none" if cached == 0 else ("unknown" if connector else "device")
    no_reload_inside = cached == 0 or not connector
    output = int(generated) if generated is not None else None
    return make_record(
        request_id=request_id or _field(stats, "request_id"),
        model=model,
        tier=tier,
        prompt_tokens=prompt,
        logical_match_tokens=cached,
        recoverable_tokens=cached,
        reload_seconds=0.0 if tier == "device" else None,
        suffix_prefill_seconds=prefill if no_reload_inside else None,
        ttft_seconds=ttft,
        queue_seconds=_wait(_field(stats, "queued_time"), ttft) if no_reload_inside else None,
        output_tokens=output,
        decode_seconds=_decode(output, decode if _field(stats, "decode_time") is not None else None),
    )


def _seconds(value):
    """A measured duration (>= 0), or None."""
    if value is None:
        return None
    value = float(value)
    return value if value >= 0 else None


def _wait(queue, ttft):
    """queue_seconds for a record: the wait, only beside a TTFT it fits in (it ends before the first
    token; a larger one was measured from another start and is not this TTFT's wait)."""
    queue = _seconds(queue)
    return queue if queue is not None and ttft is not None and queue <= ttft else None


def _decode(output_tokens, seconds):
    """decode_seconds for a record: only with at least 2 output tokens (one token has no time between
    the first and the last), and only > 0 (several tokens took some time: 0 is "not measured")."""
    if output_tokens is None or output_tokens < 2:
        return None
    return _positive(seconds)


def _storage_tier(backend):
    name = str(backend or "").lower()
    if any(name == b or name.startswith(b) for b in _LOCAL_STORAGE_BACKENDS):
        return "disk"
    if any(b in name for b in _REMOTE_STORAGE_BACKENDS):
        return "remote"
    return "unknown"


def sglang_tier(cached, details):
    """The tier of an SGLang hit from meta_info's cached_tokens_details: "none" for a miss, the one
    tier that contributed, "mixed" for several, "unknown" without details. `storage` (HiCache L3)
    is disk or remote by its storage_backend; an unlisted backend is "unknown"."""
    if cached == 0:
        return "none"
    if not details:
        return "unknown"
    used = set()
    if int(_field(details, "device", 0) or 0) > 0:
        used.add("device")
    if int(_field(details, "host", 0) or 0) > 0:
        used.add("host")
    if int(_field(details, "storage", 0) or 0) > 0:
        used.add(_storage_tier(_field(details, "storage_backend")))
    if not used:
        return "unknown"
    return used.pop() if len(used) == 1 else "mixed"


def _sglang_skip(meta_info):
    """SkippedRequest for a request SGLang aborted before its first token, else None."""
    finish = _field(meta_info, "finish_reason")
    kind = _field(finish, "type") if isinstance(finish, dict) or hasattr(finish, "type") else finish
    if str(kind).lower() != "abort" or int(_field(meta_info, "completion_tokens", 0) or 0) > 0:
        return None
    status = int(_field(finish, "status_code", 0) or 0) if not isinstance(finish, str) else 0
    reason = "failed" if status >= 500 else "aborted"
    return SkippedRequest(reason, f"meta_info.finish_reason: abort (status {status or 'none'}) with no output "
                                  "token: the prefill never finished, so this is not a record")


def _difference(later, earlier):
    later, earlier = _positive(later), _positive(earlier)
    if later is None or earlier is None or later < earlier:
        return None
    return later - earlier


def _sglang_first_token(meta_info, streamed):
    """When the first token existed, on the wall clock: the scheduler's prefill_finished_time (the
    prefill forward that produced it), else, for a streamed request only, the tokenizer manager's
    first receipt (prefill_finished_ts, older releases). A non-streamed request's first receipt is
    the first forwarded batch (every 50 tokens), not its first token."""
    scheduler = _field(meta_info, "prefill_finished_time")
    if scheduler is not None:
        return scheduler
    return _field(meta_info, "prefill_finished_ts") if streamed else None


def _sglang_decode(meta_info, streamed, output):
    """First token -> last, both as the tokenizer manager received them, for a streamed request only:
    decode_finished_ts - prefill_finished_ts (older releases), else completion_tokens /
    decode_throughput (newest: it is completion_tokens / (finished - first receipt))."""
    if not streamed or not output:
        return None
    older = _difference(_field(meta_info, "decode_finished_ts"), _field(meta_info, "prefill_finished_ts"))
    if older is not None:
        return older
    throughput = _positive(_field(meta_info, "decode_throughput"))
    return output / throughput if throughput else None


def from_sglang(meta_info, *, model, request_id=None, ttft_seconds=None, streamed=False):
    """From the meta_info SGLang returns for a finished request (python/sglang/srt/managers/
    tokenizer_manager.py; the "meta_info" of a /generate response), of either generation: older
    releases (TokenizerManager._calculate_timing_metrics: prefill_finished_ts, decode_finished_ts) and
    the newest (observability/req_time_stats.py: APIServerReqTimeStats and SchedulerReqTimeStats).

    - finish_reason {"type": "abort"} with completion_tokens == 0: SkippedRequest "aborted"
      ("failed" when its status_code is >= 500).
    - prompt_tokens -> prompt_tokens; cached_tokens -> logical_match_tokens (the radix-tree
      match; the recoverable boundary is modelled from the profile's page size).
    - cached_tokens_details (--enable-cache-report, HiCache) -> tier by sglang_tier(): one tier,
      "mixed", or "unknown" when SGLang sent no details.
    - With --enable-metrics: prefill_finished_time - forward_entry_time (the prefill forward, both
      the scheduler's) -> suffix_prefill_seconds, only for a miss or a device-only hit (a host or
      storage hit is loaded inside that forward); the first token (_sglang_first_token) -
      request_received_ts -> ttft_seconds.
    - queue_time (wait-queue entry -> forward entry: the scheduling wait) -> queue_seconds for a miss,
      a device or a host hit; left unset for a storage ("disk", "remote"), "mixed" or "unknown" hit,
      whose queue_time may contain HiCache's storage prefetch.
    - completion_tokens -> output_tokens; decode_seconds by _sglang_decode, for a streamed request
      (`streamed=True`: the caller asked for "stream": true) with at least 2 tokens; unset otherwise.
    - id -> request_id (the argument wins); ttft_seconds given by the caller wins.
    - reload time: 0 for a device-only hit (only device tokens in cached_tokens_details: the prefix
      was in GPU memory); not reported otherwise, left unset. Recoverable boundary: not reported.
    """
    skip = _sglang_skip(meta_info)
    if skip is not None:
        raise skip
    where = "meta_info"
    prompt = int(_require(meta_info, "prompt_tokens", where))
    cached = int(_require(meta_info, "cached_tokens", where))
    tier = sglang_tier(cached, _field(meta_info, "cached_tokens_details"))
    suffix = _difference(_field(meta_info, "prefill_finished_time"), _field(meta_info, "forward_entry_time")) \
        if tier in ("none", "device") else None
    if ttft_seconds is None:
        ttft_seconds = _difference(_sglang_first_token(meta_info, streamed), _field(meta_info, "request_received_ts"))
    output = int(_field(meta_info, "completion_tokens", 0) or 0) or None
    queue = _wait(_field(meta_info, "queue_time"), ttft_seconds) if tier in ("none", "device", "host") else None
    return make_record(request_id=request_id or _field(meta_info, "id"), model=model, tier=tier,
                       prompt_tokens=prompt, logical_match_tokens=cached, suffix_prefill_seconds=suffix,
                       reload_seconds=0.0 if tier == "device" else None,
                       ttft_seconds=ttft_seconds, queue_seconds=queue, output_tokens=output,
                       decode_seconds=_decode(output, _sglang_decode(meta_info, streamed, output)))


def from_openai(response, *, model, cached_tokens_reported=False, tier=None, request_id=None,
                ttft_seconds=None, predicted_match_tokens=None, decode_seconds=None, prompt_token_ids=None,
                block_tokens=None, cache_id=None, salt=b""):
    """From an OpenAI-compatible chat/completions response (a dict or the openai client's object),
    for gateways in front of any engine:

    - usage.prompt_tokens -> prompt_tokens
    - usage.prompt_tokens_details.cached_tokens -> logical_match_tokens. vLLM
      (--enable-prompt-tokens-details) and SGLang (--enable-cache-report) omit the details when
      nothing was cached, so a missing count is a miss only when the caller says its server reports
      cached tokens (`cached_tokens_reported=True`); otherwise SkippedRequest "missing_field",
      rather than a record claiming a miss.
    - tier: what the gateway knows (`tier=`); by default a hit is "unknown" (a response does not
      say where the cache was) and a miss "none".
    - id -> request_id (the argument wins); ttft_seconds as measured by the gateway.
    - usage.completion_tokens -> output_tokens; decode_seconds (first token -> last) as measured by a
      streaming gateway, kept only with at least 2 output tokens. A response carries no queue time.
    - predicted_match_tokens: a prefix-aware router's (or gateway's) predicted hit for the replica
      it chose; kvledger compares it with the engine's cached tokens (docs/integration.md, "Routers").
    - prompt_token_ids with block_tokens (the engine's block size) and cache_id (the engine the request
      went to): the capacity curves' prefix_block_ids, kvledger.blocks.prefix_block_ids over the prompt's
      full blocks (vLLM caches full blocks only), with `salt` where the engine keeps prompts apart.
    """
    usage = _require(response, "usage", "response")
    prompt = int(_require(usage, "prompt_tokens", "response.usage"))
    details = _field(usage, "prompt_tokens_details")
    cached = _field(details, "cached_tokens") if details is not None else None
    if cached is None:
        if not cached_tokens_reported:
            raise SkippedRequest("missing_field", "response.usage.prompt_tokens_details.cached_tokens: missing; "
                                                  "pass cached_tokens_reported=True if the server reports cached "
                                                  "tokens (then a missing count is a miss)")
        cached = 0
    cached = int(cached)
    hit_tier = tier or "unknown"
    ids = None
    if prompt_token_ids is not None:
        if not block_tokens:
            raise ValueError("prompt_token_ids needs block_tokens, the engine's block size")
        ids = prefix_block_ids(prompt_token_ids, block_tokens, salt=salt, full_blocks_only=True) or None
    return make_record(request_id=request_id or _field(response, "id"), model=model,
                       tier=hit_tier if cached > 0 else "none", prompt_tokens=prompt,
                       logical_match_tokens=cached, ttft_seconds=ttft_seconds,
                       predicted_match_tokens=predicted_match_tokens,
                       output_tokens=_output_tokens(usage),
                       decode_seconds=_decode(_output_tokens(usage), decode_seconds),
                       prefix_block_ids=ids, block_tokens=block_tokens if ids else None,
                       cache_id=cache_id if ids else None)


def _output_tokens(usage):
    value = _field(usage, "completion_tokens")
    return int(value) if value is not None and int(value) >= 1 else None
