"""Both Reporters sending at once, for the fleet tests: the C++ Reporter through reporter_example
(a process, counting its records as real) and the Python Reporter on a thread of the test."""
import json
import subprocess
import threading
import time

import harness
import kvledger
from kvledger.v1 import record_pb2


def counted(server):
    """The records `server` has counted, over every model and tier (its kvledger_requests_total)."""
    return sum(v for (n, _), v in harness.parse_exposition(server.scrape()).items() if n == "kvledger_requests_total")


class Traffic:
    """`per_second` records a second from each Reporter to `target`: the C++ one for `seconds`, the
    Python one until finish() (or `seconds` with `python_stops`)."""

    def __init__(self, reporter_example, target, seconds, per_second, python_batch=20, python_stops=False):
        self.per_second = per_second
        self.limit = per_second * seconds if python_stops else None
        self.cpp = subprocess.Popen([reporter_example, "--target", target, "--records", str(per_second * seconds),
                                     "--records-per-second", str(per_second), "--flush-timeout", "60", "--real"],
                                    stdout=subprocess.PIPE, text=True)
        self.reporter = kvledger.Reporter(target, max_batch_size=python_batch, flush_interval_seconds=0.02)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._python, daemon=True)
        self.thread.start()

    def _python(self):
        i, start = 0, time.monotonic()
        while not self.stop.is_set() and (self.limit is None or i < self.limit):
            self.reporter.report(model="llama-3.1-8b", tier=record_pb2.TIER_DEVICE, prompt_tokens=1024 + i % 7,
                                 logical_match_tokens=512)
            i += 1
            self.stop.wait(max(0.0, start + i / self.per_second - time.monotonic()))

    def finish(self, test, stop=True):
        """Stops the Python traffic (or waits for it to end), lets the C++ one end, asserts nothing was
        dropped; both Reporters' stats."""
        if stop:
            self.stop.set()
        self.thread.join()
        test.assertTrue(self.reporter.flush(60))
        self.reporter.close(5)
        python_stats = self.reporter.stats()
        cpp_out, _ = self.cpp.communicate(timeout=120)
        test.assertEqual(self.cpp.returncode, 0)
        cpp_stats = json.loads(cpp_out)
        test.assertEqual((python_stats["dropped"], cpp_stats["dropped"]), (0, 0), (python_stats, cpp_stats))
        return python_stats, cpp_stats
