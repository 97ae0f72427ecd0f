"""Records from what inference engines report per request. Pure functions: no engine is imported.

What no engine reports today — the recoverable boundary, per-state-group boundaries and the
per-request reload time — is left unset, so kvledger models the boundary from the model's profile
(KV page and recurrent checkpoint alignment) and does not compare reload with recompute for these
records (docs/integration.md).

Each function takes the kvledger profile name (`model`, e.g. "llama-3.1-8b"; profile_name() guesses
it from a Hugging Face name) because engines report their served model name, which is not a
profile name.
"""
import re

from kvledger.records import make_record

_TIER_ORDER = ("device", "host", "disk", "remote")  # from fastest to slowest


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
        raise ValueError(f"{where}.{name}: missing; cannot build an honest record without it")
    return value


def from_vllm(stats, *, model, tier="device", request_id=None):
    """From vLLM v1's FinishedRequestStats (vllm/v1/metrics/stats.py), as a stat logger receives
    them in IterationStats.finished_requests:

    - num_prompt_tokens -> prompt_tokens
    - num_cached_tokens -> logical_match_tokens (prefix-cache hit tokens; a newer field: older vLLM
      lacks it and this raises ValueError rather than report every request as a miss)
    - a full hit (num_cached_tokens == num_prompt_tokens): vLLM computes the last prompt token again
      to get its logits -> recompute_tokens = 1
    - prefill_time (first scheduled -> first token) -> suffix_prefill_seconds, when > 0
    - queued_time + prefill_time -> ttft_seconds, when prefill_time > 0
    - request_id -> request_id (the argument wins)
    - tier: vLLM's prefix cache is device memory; pass tier= when a KV connector reloads from host,
      disk or a remote cache.
    - reload_seconds, recoverable_tokens, state_boundaries: not reported by vLLM; left unset.
    """
    where = "FinishedRequestStats"
    prompt = int(_require(stats, "num_prompt_tokens", where))
    cached = int(_require(stats, "num_cached_tokens", where))
    prefill = float(_field(stats, "prefill_time", 0.0) or 0.0)
    queued = float(_field(stats, "queued_time", 0.0) or 0.0)
    return make_record(
        request_id=request_id or _field(stats, "request_id"),
        model=model,
        tier=tier if cached > 0 else "none",
        prompt_tokens=prompt,
        logical_match_tokens=cached,
        recompute_tokens=1 if cached > 0 and cached == prompt else None,
        suffix_prefill_seconds=prefill if prefill > 0 else None,
        ttft_seconds=queued + prefill if prefill > 0 else None,
    )


def from_sglang(meta_info, *, model, request_id=None, ttft_seconds=None):
    """From the meta_info SGLang returns for a finished request (python/sglang/srt/managers/
    tokenizer_manager.py; the "meta_info" of a /generate response):

    - prompt_tokens -> prompt_tokens
    - cached_tokens -> logical_match_tokens
    - cached_tokens_details {"device": n, "host": n, "storage"|"disk"|"remote": n} (HiCache) -> tier:
      the slowest tier that contributed tokens (its reload dominates); "storage" (the L3 backends,
      usually another machine) counts as remote. Without details a hit is a device hit.
    - id -> request_id (the argument wins); ttft_seconds as given (SGLang does not put it in
      meta_info).
    - suffix prefill time, reload time, recoverable boundary: not reported; left unset.
    """
    where = "meta_info"
    prompt = int(_require(meta_info, "prompt_tokens", where))
    cached = int(_require(meta_info, "cached_tokens", where))
    tier = "none"
    if cached > 0:
        tier = "device"
        details = _field(meta_info, "cached_tokens_details") or {}
        mapping = {"device": "device", "host": "host", "disk": "disk", "storage": "remote", "remote": "remote"}
        used = [mapping[k] for k, v in details.items() if k in mapping and v]
        if used:
            tier = max(used, key=_TIER_ORDER.index)
    return make_record(request_id=request_id or _field(meta_info, "id"), model=model, tier=tier,
                       prompt_tokens=prompt, logical_match_tokens=cached, ttft_seconds=ttft_seconds)


def from_openai(response, *, model, tier="device", request_id=None, ttft_seconds=None):
    """From an OpenAI-compatible chat/completions response (a dict or the openai client's object),
    for gateways in front of any engine:

    - usage.prompt_tokens -> prompt_tokens
    - usage.prompt_tokens_details.cached_tokens -> logical_match_tokens. A server that omits the
      details does not report caching at all: ValueError, rather than a record claiming a miss.
    - id -> request_id (the argument wins); tier and ttft_seconds as given by the gateway.
    """
    usage = _require(response, "usage", "response")
    prompt = int(_require(usage, "prompt_tokens", "response.usage"))
    details = _require(usage, "prompt_tokens_details", "response.usage")
    cached = int(_require(details, "cached_tokens", "response.usage.prompt_tokens_details"))
    return make_record(request_id=request_id or _field(response, "id"), model=model,
                       tier=tier if cached > 0 else "none", prompt_tokens=prompt,
                       logical_match_tokens=cached, ttft_seconds=ttft_seconds)
