"""kvledger: report prefix-cache (KV-cache) reuse records to a kvledger server.

    import kvledger
    with kvledger.Reporter("127.0.0.1:50051") as reporter:
        reporter.report(model="llama-3.1-8b", tier="host", prompt_tokens=4096, logical_match_tokens=2048,
                        suffix_prefill_seconds=0.2)

`kvledger.Advisor` asks the server, before scheduling, whether reloading a cached prefix beats
recomputing it. `kvledger.adapters` builds records from what vLLM, SGLang and OpenAI-compatible servers report;
`kvledger.vllm.KvledgerStatLogger` is a ready vLLM stat logger; `write_trace`/`read_trace` handle the
JSON-lines trace format that `kvledger replay` reads. The generated protobuf and gRPC modules are in
`kvledger.v1`.
"""
import os as _os
import sys as _sys

from kvledger.records import make_record
from kvledger.trace import read_trace, write_trace

__version__ = "0.1.0"
__all__ = ["Advisor", "Reporter", "enable_fork_support", "make_record", "read_trace", "write_trace", "__version__"]

# Imported on first use, so that `import kvledger` does not import grpc (enable_fork_support must
# run before grpc is imported).
_LAZY = {"Advisor": "kvledger.advice", "Reporter": "kvledger.reporter"}


# Submodules reachable as attributes after a bare `import kvledger` (kvledger.adapters.from_openai),
# imported on first use for the same reason.
_SUBMODULES = ("adapters", "blocks", "vllm")


def __getattr__(name):
    import importlib  # noqa: PLC0415
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"kvledger.{name}")
    raise AttributeError(name)


def enable_fork_support():
    """Turns on gRPC's fork support for this process, which a Reporter needs to keep working in a
    child after fork() (without it, a child that used gRPC aborted in 17 of 25 tries here; with it,
    in none). gRPC reads GRPC_ENABLE_FORK_SUPPORT and GRPC_POLL_STRATEGY when grpc is imported, and
    they then apply to every gRPC user in the process; so kvledger never sets them by itself (an
    engine's API server that loads the vLLM plugin keeps its own gRPC settings). Call this before
    anything imports grpc (`import kvledger` does not; kvledger.Reporter and kvledger.vllm do). It
    sets only what is unset, and returns True when fork support is in effect, False when grpc was
    imported first without it (then set the variables in the environment instead)."""
    already = _os.environ.get("GRPC_ENABLE_FORK_SUPPORT", "").lower() in ("1", "true")
    grpc_loaded = "grpc" in _sys.modules
    _os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "true")
    _os.environ.setdefault("GRPC_POLL_STRATEGY", "poll")
    return already or not grpc_loaded
