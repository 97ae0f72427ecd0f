"""Reload or recompute, asked before scheduling: a thin client of the Advise RPC.

    advisor = kvledger.Advisor("127.0.0.1:50051")
    advice = advisor.advise("llama-3.1-8b", prompt_tokens=8192, candidates=[("host", 3000), ("disk", 6000)])
    if advice.recommendation == "host": ...

The answer is the kvledger.v1.Advice message: per candidate the estimated reload, recompute and
prefill seconds (unset when a rate is unknown: test with HasField), the basis of each rate, the
recommendation ("host", ..., "recompute", or "" when nothing could be estimated) and the saving.
With replicas (candidates carrying `replica` and `wait_seconds`), each candidate also has its
expected_seconds and rank, and recommended_replica names the fastest.
"""
import grpc

from kvledger.records import tier_value
from kvledger.reporter import channel_options_with
from kvledger.v1 import advice_pb2, ledger_pb2_grpc


class Advisor:
    def __init__(self, target="127.0.0.1:50051", *, credentials=None, timeout_seconds=1.0,
                 load_balancing_policy="round_robin", channel_options=None):
        self.target = target
        self.timeout_seconds = timeout_seconds
        options = channel_options_with(load_balancing_policy, channel_options)  # every replica of a name asked
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=options)
        self._stub = ledger_pb2_grpc.LedgerStub(self._channel)

    def advise(self, model, prompt_tokens, candidates):
        """`candidates`: (tier, logical_match_tokens) or (tier, logical_match_tokens,
        recoverable_tokens) tuples, the tier as "device" | "host" | "disk" | "remote"; or, to rank
        replicas, dicts {"replica": id, "tier": ..., "logical_match_tokens": n, "wait_seconds": s}
        (recoverable_tokens optional). Raises grpc.RpcError (INVALID_ARGUMENT naming the field) for
        bad input."""
        request = advice_pb2.AdviceRequest(model=model, prompt_tokens=prompt_tokens)
        for candidate in candidates:
            if isinstance(candidate, dict):
                fields = {k: v for k, v in candidate.items() if v is not None}
                fields["tier"] = tier_value(fields["tier"])
                request.candidates.add(**fields)
                continue
            c = request.candidates.add(tier=tier_value(candidate[0]), logical_match_tokens=candidate[1])
            if len(candidate) > 2 and candidate[2] is not None:
                c.recoverable_tokens = candidate[2]
        return self._stub.Advise(request, timeout=self.timeout_seconds)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
