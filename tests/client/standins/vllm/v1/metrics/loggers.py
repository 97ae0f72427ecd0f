"""Mirrors vllm/v1/metrics/loggers.py StatLoggerBase: the interface AsyncLLM calls on every stat
logger (plugins included)."""
from abc import ABC, abstractmethod


class StatLoggerBase(ABC):
    @abstractmethod
    def __init__(self, vllm_config, engine_index: int = 0):
        ...

    @abstractmethod
    def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx: int = 0):
        ...

    @abstractmethod
    def log_engine_initialized(self):
        ...

    def log(self):  # noqa: B027 - upstream: optional, called periodically by AsyncLLM
        pass
