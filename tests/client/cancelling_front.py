"""A gRPC server in front of a kvledger server: forwards each RecordBatch and answers the first CANCELS
of them CANCELLED after the server applied them — the code a call meets when its replica's gRPC
server shuts down under it, here in its worst case (applied before the answer). Prints its target,
then serves until killed.

Usage: cancelling_front.py TARGET CANCELS
"""
import sys
import threading
from concurrent import futures

import grpc


def main(target, cancels):
    left = [cancels]
    lock = threading.Lock()
    upstream = grpc.insecure_channel(target)
    forward = upstream.unary_unary("/kvledger.v1.Ledger/RecordBatch")  # bytes in, bytes out

    def record_batch(request, context):
        answer = forward(request, timeout=10)
        with lock:
            cancel = left[0] > 0
            left[0] -= cancel
        if cancel:
            context.abort(grpc.StatusCode.CANCELLED, "CANCELLED")
        return answer

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "kvledger.v1.Ledger", {"RecordBatch": grpc.unary_unary_rpc_method_handler(record_batch)}),))
    print(f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}", flush=True)
    server.start()
    server.wait_for_termination()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
