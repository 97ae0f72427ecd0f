"""Replicas that join and leave behind one DNS name, with both reporters (the C++ Reporter through
reporter_example, the Python Reporter in process) sending throughout, and a real Prometheus scraping
every replica:

- a replica added behind the name gets records from both reporters within one re-resolve (15 s);
- a replica killed with SIGKILL, and its replacement started on a new address behind the same name:
  every record a reporter had acknowledged is accounted for — what Prometheus scraped, plus what the
  killed replica acknowledged after its last scrape (at most a scrape interval of records), never
  more than was acknowledged — and the replacement gets records within one re-resolve.

The name lives in a private /etc/hosts: the test re-runs itself in a user, network and mount
namespace of its own (unshare), where 127.0.0.2-127.0.0.9 are replicas sharing one port, and rewrites
that file as replicas come and go.

Usage: membership_test.py KVLEDGER_SERVER REPORTER_EXAMPLE PYTHON_STUBS_DIR
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "kvledger-grpc.test"

SKIP_CODE = 77  # ctest's SKIP_RETURN_CODE for this test (tests/e2e/CMakeLists.txt)

if os.environ.get("KVLEDGER_TEST_NAMESPACE") != "1":
    # Re-run in namespaces of our own: a private network (loopback only) and a private /etc/hosts.
    # Without user namespaces (a chroot, a default container) a name cannot be given replicas that
    # come and go without touching the machine's own /etc/hosts: the test is skipped, saying why
    # (scripts/test.sh lists it in its stage summary).
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--net", "--mount", "--", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"SKIP: e2e.membership: needs user, network and mount namespaces (unshare: "
              f"{probe.stderr.strip() or 'exit ' + str(probe.returncode)})", flush=True)
        sys.exit(SKIP_CODE)
    hosts = tempfile.NamedTemporaryFile("w", prefix="kvledger-hosts-", delete=False)
    hosts.close()
    script = ("mount --bind \"$KVLEDGER_TEST_HOSTS\" /etc/hosts && ip link set lo up && "
              "exec /usr/bin/python3 \"$@\"")
    env = dict(os.environ, KVLEDGER_TEST_NAMESPACE="1", KVLEDGER_TEST_HOSTS=hosts.name)
    try:
        code = subprocess.call(["unshare", "--user", "--map-root-user", "--net", "--mount", "--", "sh", "-c",
                                script, "sh", os.path.abspath(__file__), *sys.argv[1:]], env=env)
    finally:
        os.unlink(hosts.name)
    sys.exit(code)

SERVER, REPORTER_EXAMPLE = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
del sys.argv[1:4]

import harness  # noqa: E402
import kvledger  # noqa: E402

HOSTS = os.environ["KVLEDGER_TEST_HOSTS"]
RESOLVE_EVERY = 15  # both reporters re-resolve their target this often


def publish_hosts(addresses):
    """The name resolves to `addresses` from now on (written in place: the bind mount holds the inode)."""
    with open(HOSTS, "w") as f:
        f.write("127.0.0.1 localhost\n" + "".join(f"{a} {NAME}\n" for a in addresses))


def publish_targets(sd_file, replicas):
    with open(sd_file + ".tmp", "w") as f:
        json.dump([{"targets": [r.metrics_address for r in replicas]}], f)
    os.replace(sd_file + ".tmp", sd_file)


def requests(replica, model=None):
    samples = harness.parse_exposition(replica.scrape())
    return sum(v for (n, labels), v in samples.items()
               if n == "kvledger_requests_total" and (model is None or ("model", model) in labels))


class PythonTraffic:
    """The Python Reporter, reporting `per_second` records of `model` from a thread until stopped."""

    def __init__(self, target, model, per_second):
        self.reporter = kvledger.Reporter(target, max_batch_size=50, flush_interval_seconds=0.05)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(model, per_second), daemon=True)
        self.thread.start()

    def _run(self, model, per_second):
        i = 0
        start = time.monotonic()
        while not self.stop_event.is_set():
            self.reporter.report(kvledger.make_record(model=model, tier="device", prompt_tokens=1024 + i % 7,
                                                      logical_match_tokens=512))
            i += 1
            self.stop_event.wait(max(0.0, start + i / per_second - time.monotonic()))

    def finish(self):
        """Stops, flushes and closes: the reporter's stats."""
        self.stop_event.set()
        self.thread.join()
        assert self.reporter.flush(30)
        self.reporter.close(5)
        return self.reporter.stats()


class MembershipTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvledger-membership-")
        first = self.replica("127.0.0.2", 0)
        self.port = first.grpc_address.rsplit(":", 1)[1]
        self.replicas = {"127.0.0.2": first}
        self.target = f"dns:///{NAME}:{self.port}"
        self.sd_file = os.path.join(self.tmp, "targets.json")
        publish_targets(self.sd_file, [])
        self.prometheus = harness.Prometheus(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: kvledger\n    file_sd_configs:\n"
            f"      - files: ['{self.sd_file}']\n        refresh_interval: 1s\n", self.tmp)
        self.addCleanup(self.prometheus.stop)

    def replica(self, ip, port):
        server = harness.Server(SERVER, "--unknown_model=generic", grpc_address=f"{ip}:{port}", log_dir=self.tmp)
        self.addCleanup(server.stop)
        return server

    def add(self, ip):
        self.replicas[ip] = self.replica(ip, self.port)
        publish_targets(self.sd_file, self.replicas.values())

    def cpp_traffic(self, model, records, per_second):
        return subprocess.Popen([REPORTER_EXAMPLE, "--target", self.target, "--model", model, "--records",
                                 str(records), "--records-per-second", str(per_second), "--flush-timeout", "30", "--real"],
                                stdout=subprocess.PIPE, text=True)

    def test_replica_added_behind_the_name(self):
        publish_hosts(["127.0.0.2"])
        publish_targets(self.sd_file, self.replicas.values())
        python = PythonTraffic(self.target, "llama-3.1-8b", 200)
        cpp = self.cpp_traffic("qwen3-8b", 200 * 40, 200)  # 40 s: past the re-resolve below
        harness.poll("both reporters on the first replica", lambda: requests(self.replicas["127.0.0.2"], "llama-3.1-8b")
                     and requests(self.replicas["127.0.0.2"], "qwen3-8b"))
        self.add("127.0.0.3")
        publish_hosts(["127.0.0.2", "127.0.0.3"])
        added = time.monotonic()
        new = self.replicas["127.0.0.3"]
        # Within what docs/integration.md promises: the re-resolve, a flush interval and a connection.
        harness.poll("both reporters on the added replica", lambda: requests(new, "llama-3.1-8b")
                     and requests(new, "qwen3-8b"), deadline=RESOLVE_EVERY + 5, interval=0.2)
        print(f"added replica: records from both reporters after {time.monotonic() - added:.1f} s", file=sys.stderr)
        stats = python.finish()
        cpp_stats = json.loads(cpp.communicate(timeout=90)[0])
        self.assertEqual((stats["dropped"], stats["rejected"]), (0, 0), stats)
        self.assertEqual((cpp_stats["dropped"], cpp_stats["rejected"], cpp_stats["sent"]), (0, 0, 200 * 40), cpp_stats)
        # Nothing lost, nothing counted twice.
        self.assertEqual(sum(requests(r, "llama-3.1-8b") for r in self.replicas.values()), stats["sent"])
        self.assertEqual(sum(requests(r, "qwen3-8b") for r in self.replicas.values()), cpp_stats["sent"])

    def test_killed_replica_and_its_replacement(self):
        publish_hosts(["127.0.0.2", "127.0.0.3"])
        self.add("127.0.0.3")
        python = PythonTraffic(self.target, "llama-3.1-8b", 400)
        doomed = self.replicas["127.0.0.3"]
        harness.poll("Prometheus to scrape records on both replicas", lambda: all(
            (self.prometheus.value(f'sum(kvledger_requests_total{{instance="{r.metrics_address}"}})') or 0) > 100
            for r in self.replicas.values()), interval=0.2)
        doomed.proc.send_signal(signal.SIGKILL)
        doomed.proc.wait()
        killed = time.monotonic()
        self.add("127.0.0.4")
        publish_hosts(["127.0.0.2", "127.0.0.4"])
        new = self.replicas["127.0.0.4"]
        harness.poll("the replacement to get records", lambda: requests(new) > 0, deadline=RESOLVE_EVERY + 15,
                     interval=0.2)
        print(f"replacement: records after {time.monotonic() - killed:.1f} s", file=sys.stderr)
        stats = python.finish()
        self.assertEqual((stats["dropped"], stats["rejected"]), (0, 0), stats)
        acknowledged = stats["sent"]
        # What Prometheus holds: each live replica's counter (once scraped at its final value), and
        # the killed one's last scrape.
        live = {ip: requests(r) for ip, r in self.replicas.items() if ip != "127.0.0.3"}
        harness.poll("Prometheus to scrape the final counts", lambda: all(
            self.prometheus.value(f'sum(kvledger_requests_total{{instance="{self.replicas[ip].metrics_address}"}})')
            == n for ip, n in live.items()), interval=0.2)
        last_scrape = self.prometheus.value(
            f'sum(max_over_time(kvledger_requests_total{{instance="{doomed.metrics_address}"}}[10m]))')
        scraped = sum(live.values()) + last_scrape
        unscraped = acknowledged - scraped
        print(f"acknowledged {acknowledged}, scraped {scraped:.0f} (the killed replica's last scrape "
              f"{last_scrape:.0f}), acknowledged after it {unscraped:.0f}", file=sys.stderr)
        # Never more than acknowledged (nothing counted twice), and what is missing is what the
        # killed replica took between its last scrape (1 s interval) and its death: 400 records/s.
        self.assertGreaterEqual(unscraped, 0)
        self.assertLessEqual(unscraped, 400 * 2)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
