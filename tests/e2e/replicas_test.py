"""Clients of several replicas behind one target (a static address list stands for a DNS name):
`kvledger replay`, `bench` and `advise` and the Python Advisor spread their calls over every replica
by default (they once sent everything to the first address), and the Python Reporter's
load-balancing policy is a real parameter (a `pick_first` is honoured). With an affinity key (a
cache id), every batch of one key reaches one replica, the C++ Reporter (`kvledger plan --send
--cache-id`) and the Python one pick the same replica for a key, and keys spread over the replicas.

Usage: replicas_test.py KVLEDGER_SERVER KVLEDGER_CLI PYTHON_STUBS_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SERVER, CLI = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python"))
del sys.argv[1:4]

import harness  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "trace.jsonl")


class ReplicasTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvledger-replicas-")
        self.servers = [harness.Server(SERVER, "--unknown_model=generic", log_dir=self.tmp) for _ in range(2)]
        for s in self.servers:
            self.addCleanup(s.stop)
        self.target = "ipv4:" + ",".join(s.grpc_address for s in self.servers)

    def counted(self, name, **labels):
        """The sum of a counter on each replica."""
        out = []
        for s in self.servers:
            samples = harness.parse_exposition(s.scrape())
            out.append(sum(v for (n, l), v in samples.items()
                           if n == name and all(dict(l).get(k) == w for k, w in labels.items())))
        return out

    def test_cli_spreads_over_replicas(self):
        # 400 batches of one: round_robin hands them to each replica in turn once both are connected
        # (the first few may all go to whichever connected first).
        replay = subprocess.run([CLI, "replay", "--target", self.target, "--batch-size", "1", EXAMPLES],
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(replay.returncode, 0, replay.stderr)
        per_replica = self.counted("kvledger_requests_total")
        self.assertEqual(sum(per_replica), 400)
        self.assertTrue(all(n > 0 for n in per_replica), per_replica)
        for _ in range(6):
            advise = subprocess.run([CLI, "advise", "--target", self.target, "--model", "llama-3.1-8b",
                                     "--prompt-tokens", "8192", "--candidate", "host:4096", "--json"],
                                    capture_output=True, text=True, timeout=60)
            self.assertEqual(advise.returncode, 0, advise.stderr)
            json.loads(advise.stdout)
        pinned = subprocess.run([CLI, "replay", "--target", self.target, "--lb", "pick_first", "--batch-size", "20",
                                 EXAMPLES],
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(pinned.returncode, 0, pinned.stderr)
        after = self.counted("kvledger_requests_total")
        self.assertEqual(sorted(a - b for a, b in zip(after, per_replica)), [0, 400])  # one replica took them all

    def test_python_clients(self):
        import kvledger  # noqa: PLC0415
        with kvledger.Advisor(self.target, timeout_seconds=10) as advisor:
            for _ in range(100):
                advisor.advise("llama-3.1-8b", 8192, [("host", 4096)])
        asked = self.counted("grpc_server_started_total", grpc_method="Advise")
        self.assertEqual(sum(asked), 100)
        self.assertTrue(all(n > 0 for n in asked), asked)  # every replica asked
        reporter = kvledger.Reporter(self.target, load_balancing_policy="pick_first", max_batch_size=10)
        for i in range(200):
            reporter.report(kvledger.make_record(model="llama-3.1-8b", prompt_tokens=100 + i, logical_match_tokens=0))
        self.assertTrue(reporter.flush(30))
        reporter.close(5)
        self.assertEqual(sorted(self.counted("kvledger_requests_total")), [0, 200])  # pinned: all on one

    # Proves: an affinity key pins a cache's batches to one replica, alike in C++ and Python, while
    # different keys spread over the replicas (rendezvous hashing: 20 keys all on one of two replicas
    # has odds of 2 in a million).
    def test_affinity_key(self):
        import kvledger  # noqa: PLC0415
        trace = os.path.join(self.tmp, "trace.jsonl")
        with open(os.path.join(os.path.dirname(EXAMPLES), "traces", "mooncake-synthetic.jsonl")) as f, \
                open(trace, "w") as out:
            out.writelines(line for _, line in zip(range(300), f))
        send = subprocess.run([CLI, "plan", "--model", "llama-3.1-8b", "--send", "--target", self.target,
                               "--cache-id", "engine-a", trace], capture_output=True, text=True, timeout=120)
        self.assertEqual(send.returncode, 0, send.stderr)
        cpp = self.counted("kvledger_requests_total")
        self.assertEqual(sorted(cpp), [0, 300])
        chosen = []
        for key in ["engine-a"] + [f"engine-{i}" for i in range(20)]:
            before = self.counted("kvledger_requests_total")
            with kvledger.Reporter(self.target, affinity_key=key, max_batch_size=5) as reporter:
                for i in range(40):
                    reporter.report(model="llama-3.1-8b", prompt_tokens=100 + i)
                    if i % 5 == 4:
                        self.assertTrue(reporter.flush(30))  # one batch at a time
            gained = [a - b for a, b in zip(self.counted("kvledger_requests_total"), before)]
            self.assertEqual(sorted(gained), [0, 40], key)
            chosen.append(gained.index(40))
        self.assertEqual(chosen[0], cpp.index(300))  # Python picks what C++ picked for engine-a
        self.assertEqual(set(chosen[1:]), {0, 1})


if __name__ == "__main__":
    unittest.main()
