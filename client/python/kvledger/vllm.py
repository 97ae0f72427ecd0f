"""A vLLM stat logger that reports every finished request to kvledger.

Enable it in a vLLM deployment through the `vllm.stat_logger_plugins` entry point this package
declares (pyproject.toml), after `pip install ./client/python` in vLLM's environment; configure it with
environment variables:

    KVLEDGER_TARGET   kvledger-server HOST:PORT or gRPC target (default 127.0.0.1:50051)
    KVLEDGER_MODEL    the kvledger profile name (default: a guess from the served model name)
    KVLEDGER_TIER     tier of the prefix cache's hits (default device)

vLLM is imported only when the class is first looked up (by vLLM itself), never when kvledger is.
The logger never blocks vLLM's loop: it hands each record to a kvledger.Reporter.
"""
import os

from kvledger.adapters import from_vllm, profile_name
from kvledger.reporter import Reporter

__all__ = ["KvledgerStatLogger"]
_cls = None


def _make_class():
    from vllm.v1.metrics.loggers import StatLoggerBase  # noqa: PLC0415 - deliberately lazy

    class KvledgerStatLogger(StatLoggerBase):
        """Reports IterationStats.finished_requests as kvledger records (kvledger.adapters.from_vllm)."""

        def __init__(self, vllm_config, engine_index=0):
            served = getattr(getattr(vllm_config, "model_config", None), "served_model_name", None) or \
                getattr(getattr(vllm_config, "model_config", None), "model", "unknown")
            if isinstance(served, (list, tuple)):
                served = served[0]
            self.model = os.environ.get("KVLEDGER_MODEL") or profile_name(str(served))
            self.tier = os.environ.get("KVLEDGER_TIER", "device")
            self.engine_index = engine_index
            self.skipped = 0  # finished requests that could not become a record (a field missing)
            self.reporter = Reporter(os.environ.get("KVLEDGER_TARGET", "127.0.0.1:50051"))

        def record(self, scheduler_stats, iteration_stats, *args, **kwargs):
            if iteration_stats is None:
                return
            for finished in getattr(iteration_stats, "finished_requests", ()):
                try:
                    self.reporter.report(from_vllm(finished, model=self.model, tier=self.tier))
                except ValueError:
                    self.skipped += 1

        def log_engine_initialized(self):
            pass

        def log(self):
            pass

    return KvledgerStatLogger


def __getattr__(name):
    global _cls
    if name == "KvledgerStatLogger":
        if _cls is None:
            _cls = _make_class()
        return _cls
    raise AttributeError(name)
