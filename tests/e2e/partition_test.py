"""A one-way partition: both Reporters (the C++ one through reporter_example, the Python one in
process) send to two replicas, one of them behind a TCP proxy that, once told to, keeps forwarding
what the clients send but drops every byte the replica answers. The replica keeps applying what
reaches it; its replies never arrive. Each Reporter's batch in flight then waits on that replica for
retry_same_replica_for (its retries deduplicated there), then moves to the other replica, where it
counts a second time: at most one batch per Reporter per partition, as docs/integration.md states.
Nothing is dropped; the overcount is measured and printed.

Usage: partition_test.py KVLEDGER_SERVER REPORTER_EXAMPLE PYTHON_STUBS_DIR
"""
import os
import socket
import sys
import tempfile
import threading
import unittest

SERVER, REPORTER_EXAMPLE = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv[3])
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
del sys.argv[1:4]

import harness  # noqa: E402
from traffic import Traffic, counted  # noqa: E402

PER_SECOND = 200          # records per second from each Reporter
PYTHON_BATCH = 50         # the Python Reporter's max_batch_size here
CPP_BATCH = 512           # ReporterOptions::max_batch_size's default (reporter_example keeps it)


class OneWayProxy:
    """Listens on 127.0.0.1 port 0 (bound by itself) and forwards each connection to `upstream`;
    after partition(), bytes from upstream to the client are read and dropped."""

    def __init__(self, upstream):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.partitioned = threading.Event()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def partition(self):
        self.partitioned.set()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source, sink, answers):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if not (answers and self.partitioned.is_set()):
                    sink.sendall(data)
        except OSError:
            pass

    def close(self):
        self.closed = True
        self.listener.close()


class PartitionTest(unittest.TestCase):
    def test_one_way_partition_counts_at_most_a_batch_per_reporter_twice(self):
        with tempfile.TemporaryDirectory() as tmp:
            behind = harness.Server(SERVER, log_dir=tmp)
            other = harness.Server(SERVER, log_dir=tmp)
            self.addCleanup(other.stop)
            self.addCleanup(behind.stop)
            proxy = OneWayProxy(behind.grpc_address)
            self.addCleanup(proxy.close)
            target = f"ipv4:{proxy.address},{other.grpc_address}"
            traffic = Traffic(REPORTER_EXAMPLE, target, 25, PER_SECOND, python_batch=PYTHON_BATCH, python_stops=True)
            harness.poll("records through the proxy", lambda: counted(behind) > PER_SECOND)
            proxy.partition()
            python_stats, cpp_stats = traffic.finish(self, stop=False)
            acknowledged = python_stats["sent"] + cpp_stats["sent"]
            overcount = counted(behind) + counted(other) - acknowledged
            print(f"one-way partition: {acknowledged} records acknowledged, {overcount:.0f} counted twice "
                  f"(Python retried {python_stats['retried']}, C++ {cpp_stats['retried']})", file=sys.stderr)
            # The partition was met: each Reporter retried, and nothing it had acknowledged went uncounted.
            self.assertGreater(python_stats["retried"], 0)
            self.assertGreater(cpp_stats["retried"], 0)
            self.assertGreaterEqual(overcount, 0)
            self.assertLessEqual(overcount, PYTHON_BATCH + CPP_BATCH)


if __name__ == "__main__":
    unittest.main()
