"""Mirrors vllm/v1/engine/__init__.py: FinishReason and its external strings."""
import enum

# vllm/v1/engine/__init__.py FINISH_REASON_STRINGS: "possible values of RequestOutput.finish_reason".
FINISH_REASON_STRINGS = ("stop", "length", "abort", "error", "repetition")


class FinishReason(enum.IntEnum):
    """vllm/v1/engine/__init__.py FinishReason. Upstream documents `error` as a "retryable
    request-level internal error (e.g., KV load failure)", always converted to a 500."""

    STOP = 0
    LENGTH = 1
    ABORT = 2
    ERROR = 3
    REPETITION = 4

    def __str__(self):
        return FINISH_REASON_STRINGS[self.value]
