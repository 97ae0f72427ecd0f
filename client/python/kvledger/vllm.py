"""A vLLM stat logger that reports every finished request to kvledger.

Enable it in a vLLM deployment through the `vllm.stat_logger_plugins` entry point this package
declares (pyproject.toml), after `pip install ./client/python` in vLLM's environment. vLLM loads
stat-logger plugins only on its async serving path (AsyncLLM: `vllm serve`), and only the plugins
that VLLM_PLUGINS names when that variable is set. Configure it with environment variables:

    KVLEDGER_TARGET   kvledger-server HOST:PORT or gRPC target (default 127.0.0.1:50051)
    KVLEDGER_MODEL    the kvledger profile name (`kvledger profiles` lists them). Set it: without it
                      the logger guesses from the served model name ("Llama-3.3-70B-Instruct" ->
                      "llama-3.3-70b"), and a name outside the server's catalog is rejected (unless
                      the server runs with --unknown_model=generic). The first rejection of each
                      reason is logged once at WARNING with the server's message and the fix.

The tier is not configurable: it follows from vLLM's configuration (adapters.from_vllm). Without a
KV connector (or with kvledger's own, kvledger.vllm_connector, which loads nothing) every hit is the
GPU prefix cache ("device"); with one that loads, vLLM counts connector hits
together with local ones, so a hit is "unknown" and its prefill time, which may contain the load,
is not used as a compute time. Transfer statistics of the connector (scheduler_stats.
kv_connector_stats) are sent as aggregate observations instead: bytes and seconds per tier, which
feed kvledger's live reload bandwidth.

Requests that never produced a token are not records: aborted and failed ones are sent as
unrecorded requests (kvledger_unrecorded_requests_total); every other skip is counted here. vLLM
calls log() every few seconds: at most once a minute it logs a summary (sent, dropped, skipped by
reason). At start it warns once, loudly, when this vLLM's FinishedRequestStats lacks the fields the
logger needs (num_cached_tokens: every request would be skipped).

vLLM is imported only when the class is first looked up (by vLLM itself), never when kvledger is.
The logger never blocks vLLM's loop: it hands records and statistics to a kvledger.Reporter.
"""
import collections
import logging
import os
import time

from kvledger.adapters import SkippedRequest, from_vllm, profile_name
from kvledger.reporter import Reporter

__all__ = ["KvledgerStatLogger", "loads_kv", "transfer_observations"]
_cls = None
_log = logging.getLogger("kvledger.vllm")

# FinishedRequestStats fields the logger reads (vllm/v1/metrics/stats.py).
REQUIRED_FIELDS = ("num_prompt_tokens", "num_cached_tokens", "num_generation_tokens", "finish_reason")
SUMMARY_INTERVAL_SECONDS = 60.0

# Where the connectors' transfer lists load data from (into the GPU): key -> tier. Stores
# (GPU_to_CPU) are not reloads and are not sent.
_LOAD_LISTS = {"CPU_to_GPU": "host"}


def _entries(value):
    return value if isinstance(value, (list, tuple)) else [value]


def _get(obj, name):
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def transfer_observations(kv_connector_stats):
    """(tier, bytes, seconds, transfers) loads found in vLLM's SchedulerStats.kv_connector_stats (a
    dict per connector, possibly nested for MultiConnector; an object's `.data` is read too):
    OffloadingConnector's CPU_to_GPU list of {op_size (bytes), op_time (seconds)} -> host; NIXL's
    bytes_transferred / transfer_duration (numbers or per-transfer lists) -> remote. Shapes not
    listed here are ignored."""
    found = []

    def walk(node, depth):
        if depth > 4 or node is None:
            return
        data = _get(node, "data")
        if data is not None and not isinstance(node, dict):
            node = data
        if not isinstance(node, dict):
            return
        for key, tier in _LOAD_LISTS.items():
            ops = node.get(key)
            if ops:
                size = sum(float(_get(op, "op_size") or 0) for op in _entries(ops))
                secs = sum(float(_get(op, "op_time") or 0) for op in _entries(ops))
                if secs > 0:
                    found.append((tier, int(size), secs, len(_entries(ops))))
        moved, took = node.get("bytes_transferred"), node.get("transfer_duration")
        if moved is not None and took is not None:
            size, secs = sum(float(x) for x in _entries(moved)), sum(float(x) for x in _entries(took))
            if secs > 0:
                found.append(("remote", int(size), secs, len(_entries(took))))
        for key, child in node.items():
            if key not in _LOAD_LISTS and (isinstance(child, dict) or hasattr(child, "data")):
                walk(child, depth + 1)

    walk(kv_connector_stats, 0)
    return found


def loads_kv(kv_transfer_config):
    """Whether vLLM runs a KV connector that may load tokens, which vLLM then counts as hits with its own:
    any connector but kvledger's (kvledger.vllm_connector loads nothing, so beside it alone every hit is
    still the GPU prefix cache). A MultiConnector counts as one that loads."""
    if kv_transfer_config is None:
        return False
    return getattr(kv_transfer_config, "kv_connector", None) != "KvledgerConnector"


def _make_class():
    from vllm.v1.metrics.loggers import StatLoggerBase  # noqa: PLC0415 - deliberately lazy

    class KvledgerStatLogger(StatLoggerBase):
        """Reports IterationStats.finished_requests as kvledger records (kvledger.adapters.from_vllm)
        and the connector's transfer statistics as aggregate observations."""

        def __init__(self, vllm_config, engine_index=0):
            model_config = getattr(vllm_config, "model_config", None)
            served = getattr(model_config, "served_model_name", None) or getattr(model_config, "model", "unknown")
            if isinstance(served, (list, tuple)):
                served = served[0]
            self.model_set = bool(os.environ.get("KVLEDGER_MODEL"))
            self.model = os.environ.get("KVLEDGER_MODEL") or profile_name(str(served))
            self.served_model = str(served)
            self.warned = set()  # rejection reasons already logged
            self.connector = loads_kv(getattr(vllm_config, "kv_transfer_config", None))
            self.block_size = getattr(getattr(vllm_config, "cache_config", None), "block_size", None)
            self.engine_index = engine_index
            self.sent = 0
            self.skipped = collections.Counter()  # reason -> finished requests that are not records
            self.missing_fields = _missing_fields()
            self._last_summary = time.monotonic()
            self.reporter = Reporter(os.environ.get("KVLEDGER_TARGET", "127.0.0.1:50051"))
            if self.missing_fields:
                _log.warning("kvledger: this vLLM's FinishedRequestStats has no %s: every finished request will be "
                             "skipped and nothing reaches kvledger (needs a vLLM whose stats carry "
                             "num_cached_tokens)", ", ".join(self.missing_fields))

        def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx=0):
            if scheduler_stats is not None:
                stats = getattr(scheduler_stats, "kv_connector_stats", None)
                for tier, size, seconds, count in transfer_observations(stats) if stats else ():
                    self.reporter.report_transfer(self.model, tier, size, seconds, count)
            if iteration_stats is None:
                return
            for finished in getattr(iteration_stats, "finished_requests", ()):
                try:
                    record = from_vllm(finished, model=self.model, connector=self.connector,
                                       block_size=self.block_size)
                except SkippedRequest as skipped:
                    self.skipped[skipped.reason] += 1
                    if skipped.reason in ("aborted", "failed"):
                        self.reporter.report_unrecorded(self.model, skipped.reason, 1, skipped.logical_match_tokens)
                    continue
                if self.reporter.report(record):
                    self.sent += 1

        def log_engine_initialized(self):
            if self.missing_fields:
                _log.warning("kvledger: reporting nothing: FinishedRequestStats lacks %s", ", ".join(self.missing_fields))

        def warn_rejections(self):
            """Logs each rejection reason the server gave once, at WARNING, with what to do."""
            for reason, message in sorted(self.reporter.rejection_reasons().items()):
                if reason in self.warned:
                    continue
                self.warned.add(reason)
                fix = ""
                if reason == "unknown_model":
                    source = "KVLEDGER_MODEL" if self.model_set else f"a guess from the served model {self.served_model!r}"
                    fix = (f" (the model {self.model!r} is {source}): set KVLEDGER_MODEL to one of the server's "
                           "profiles (`kvledger profiles`), or run the server with --unknown_model=generic")
                _log.warning("kvledger: the server rejects this engine's records (%s): %s%s", reason, message, fix)

        def log(self):
            self.warn_rejections()
            now = time.monotonic()
            if now - self._last_summary < SUMMARY_INTERVAL_SECONDS:
                return
            self._last_summary = now
            _log.info("%s", self.summary())

        def summary(self):
            """One line: records handed to the reporter, its drops, skips by reason."""
            stats = self.reporter.stats()
            skipped = ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items())) or "none"
            return (f"kvledger: model {self.model}: {self.sent} records sent, {stats['dropped']} dropped, "
                    f"{stats['rejected']} rejected; skipped: {skipped}")

    return KvledgerStatLogger


def _missing_fields():
    """The REQUIRED_FIELDS this vLLM's FinishedRequestStats does not declare ([] when it cannot tell)."""
    try:
        from vllm.v1.metrics.stats import FinishedRequestStats  # noqa: PLC0415
    except ImportError:
        return []
    declared = getattr(FinishedRequestStats, "__dataclass_fields__", None)
    if declared is None:
        return []
    return [f for f in REQUIRED_FIELDS if f not in declared]


def __getattr__(name):
    global _cls
    if name == "KvledgerStatLogger":
        if _cls is None:
            _cls = _make_class()
        return _cls
    raise AttributeError(name)
