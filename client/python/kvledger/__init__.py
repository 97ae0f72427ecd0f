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

# fork() safety: gRPC's C core only survives a fork when its fork support is on, which it reads when
# grpc is first imported. Turn it on unless the host decided otherwise (no effect if grpc was
# imported first: then set GRPC_ENABLE_FORK_SUPPORT=true in the environment yourself).
_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "true")
_os.environ.setdefault("GRPC_POLL_STRATEGY", "poll")

from kvledger.advice import Advisor  # noqa: E402
from kvledger.records import make_record  # noqa: E402
from kvledger.reporter import Reporter  # noqa: E402
from kvledger.trace import read_trace, write_trace  # noqa: E402

__version__ = "0.1.0"
__all__ = ["Advisor", "Reporter", "make_record", "read_trace", "write_trace", "__version__"]
