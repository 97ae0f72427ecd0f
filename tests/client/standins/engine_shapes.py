"""What SGLang and OpenAI-compatible servers put in a finished request's response, as dicts built
the way the upstream code builds them (each key commented with its source)."""


def sglang_meta_info(*, rid="s1", prompt_tokens, cached_tokens, completion_tokens=16, details=None,
                     finish=None, metrics=None):
    """python/sglang/srt/managers/tokenizer_manager.py, the meta_info of a /generate response:
    "prompt_tokens", "completion_tokens", "cached_tokens" always; "cached_tokens_details" only when
    the scheduler sent one (--enable-cache-report / HiCache: {"device": n, "host": n} plus, with an
    L3 storage backend, "storage": n and "storage_backend": its class name, e.g. "HiCacheFile");
    "finish_reason" a dict {"type": "stop" | "length" | "abort", ...} (an abort carries
    "status_code" and "message"); with --enable-metrics the timestamps of
    observability/req_time_stats.py: "request_received_ts", "forward_entry_time",
    "prefill_finished_time" (real-time seconds), "queue_time" (forward entry - wait-queue entry); newer
    releases' TokenizerManager._calculate_timing_metrics adds "prefill_finished_ts" (the first token as
    the tokenizer manager saw it) and "decode_finished_ts" (the request's finish), both time.time()."""
    meta = {"id": rid, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "cached_tokens": cached_tokens, "finish_reason": finish or {"type": "stop", "matched": 2},
            "e2e_latency": 0.5}
    if details is not None:
        meta["cached_tokens_details"] = details
    if metrics:
        meta.update(metrics)
    return meta


def openai_response(*, prompt_tokens, cached_tokens=None, rid="chatcmpl-1"):
    """An OpenAI-compatible chat completion: vllm/entrypoints/openai/ sets
    usage.prompt_tokens_details = {"cached_tokens": n} only with --enable-prompt-tokens-details and
    n > 0; SGLang's entrypoints/openai/usage_processor.py (--enable-cache-report) likewise omits the
    details when nothing was cached. `cached_tokens=None` is that omission."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 5, "total_tokens": prompt_tokens + 5}
    if cached_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return {"id": rid, "object": "chat.completion", "usage": usage,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}
