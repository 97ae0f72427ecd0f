"""Mirrors vllm/v1/metrics/stats.py: the per-request and per-step statistics a stat logger receives."""
from dataclasses import dataclass
from typing import Any


@dataclass
class FinishedRequestStats:
    """vllm/v1/metrics/stats.py FinishedRequestStats, built by IterationStats.
    update_from_finished_request from the request's engine-core timestamps:
    e2e_latency = iteration time - arrival; queued_time = scheduled_ts - queued_ts (contains the
    wait for an asynchronous KV-connector load); prefill_time = first_token_ts - scheduled_ts
    (contains a synchronous in-step KV load and any preemption); decode_time = last_token_ts -
    first_token_ts; num_cached_tokens = the request's prefix-cache hit (local + external), set on
    its first output; request_id only in the newest releases."""

    finish_reason: Any  # vllm.v1.engine.FinishReason
    e2e_latency: float = 0.0
    num_prompt_tokens: int = 0
    num_generation_tokens: int = 0
    max_tokens_param: Any = None
    queued_time: float = 0.0
    prefill_time: float = 0.0
    inference_time: float = 0.0
    decode_time: float = 0.0
    mean_time_per_output_token: float = 0.0
    is_corrupted: bool = False
    num_cached_tokens: int = 0
    request_id: Any = None


@dataclass
class OlderFinishedRequestStats:
    """The same class as vLLM releases before num_cached_tokens declare it (the tests swap it in as
    FinishedRequestStats)."""

    finish_reason: Any
    e2e_latency: float = 0.0
    num_prompt_tokens: int = 0
    num_generation_tokens: int = 0
    max_tokens_param: Any = None
    queued_time: float = 0.0
    prefill_time: float = 0.0
    inference_time: float = 0.0
    decode_time: float = 0.0


@dataclass
class SchedulerStats:
    """vllm/v1/metrics/stats.py SchedulerStats: kv_connector_stats is the connector's
    KVConnectorStats data (a dict; OffloadingConnector: "CPU_to_GPU" / "GPU_to_CPU" lists of
    {"op_size": bytes, "op_time": seconds}; NIXL: "bytes_transferred" / "transfer_duration")."""

    num_running_reqs: int = 0
    num_waiting_reqs: int = 0
    kv_cache_usage: float = 0.0
    kv_connector_stats: Any = None


class IterationStats:
    """vllm/v1/metrics/stats.py IterationStats: finished_requests is what the logger reads."""

    def __init__(self):
        self.num_generation_tokens = 0
        self.num_prompt_tokens = 0
        self.finished_requests: list = []
        self.time_to_first_tokens_iter: list = []
