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
    "prefill_finished_time" (real-time seconds), "queue_time" (forward entry - wait-queue entry); older
    releases' TokenizerManager._calculate_timing_metrics adds "prefill_finished_ts" (the first output
    as the tokenizer manager received it) and "decode_finished_ts" (the last); sglang_timed_meta_info
    builds both generations from true events."""
    meta = {"id": rid, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "cached_tokens": cached_tokens, "finish_reason": finish or {"type": "stop", "matched": 2},
            "e2e_latency": 0.5}
    if details is not None:
        meta["cached_tokens_details"] = details
    if metrics:
        meta.update(metrics)
    return meta


def sglang_timed_meta_info(*, generation, streamed, t0=1_700_000_000.0, queue=0.09, prefill=0.25,
                           completion_tokens=101, decode=4.0, ipc=0.002, **kwargs):
    """A finished request of SGLang with --enable-metrics, its meta_info built from the true events
    the way each generation builds it. True events: arrival t0; wait-queue entry t0 + 0.01; forward
    entry `queue` later; the prefill forward ends `prefill` later and produces the first token; the
    other tokens evenly over `decode` seconds. The tokenizer manager receives output `ipc` after the
    scheduler sends it: at every token when streamed, else every 50 tokens
    (DEFAULT_FORCE_STREAM_INTERVAL) and at the finish.

    - "older": TokenizerManager._calculate_timing_metrics (managers/tokenizer_manager.py):
      request_received_ts, prefill_finished_ts = the first receipt, decode_finished_ts = the last,
      decode_throughput = completion_tokens / (last - first receipt); and the scheduler's
      forward_entry_time, prefill_finished_time, queue_time.
    - "newest": observability/req_time_stats.py: APIServerReqTimeStats.convert_to_output_meta_info
      (request_received_ts, request_finished_ts, response_sent_to_client_ts, inference_time,
      decode_throughput) and SchedulerReqTimeStats.convert_to_output_meta_info (forward_entry_time,
      prefill_finished_time, queue_time, prefill_waiting_latency, prefill_launch_latency): no
      prefill_finished_ts, no decode_finished_ts.
    Returns (meta_info, truth) with truth {"ttft", "decode", "queue", "prefill"}."""
    wait_entry = t0 + 0.01
    forward_entry = wait_entry + queue
    first_token = forward_entry + prefill
    step = decode / (completion_tokens - 1) if completion_tokens > 1 else 0.0
    token_time = [first_token + k * step for k in range(completion_tokens)]
    first_sent = token_time[0] if streamed else token_time[min(50, completion_tokens) - 1]
    first_receipt, last_receipt = first_sent + ipc, token_time[-1] + ipc
    metrics = {"request_received_ts": t0, "forward_entry_time": forward_entry, "prefill_finished_time": first_token,
               "queue_time": forward_entry - wait_entry,
               "decode_throughput": completion_tokens / (last_receipt - first_receipt)}
    if generation == "older":
        metrics.update(prefill_finished_ts=first_receipt, decode_finished_ts=last_receipt)
    else:
        metrics.update(request_finished_ts=last_receipt, response_sent_to_client_ts=last_receipt + 0.001,
                       inference_time=last_receipt - forward_entry, prefill_waiting_latency=0.0005,
                       prefill_launch_latency=0.001)
    meta = sglang_meta_info(prompt_tokens=kwargs.pop("prompt_tokens", 4096), cached_tokens=kwargs.pop("cached_tokens", 0),
                            completion_tokens=completion_tokens, metrics=metrics, **kwargs)
    truth = {"ttft": first_token - t0, "decode": token_time[-1] - token_time[0], "queue": queue, "prefill": prefill}
    return meta, truth


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
