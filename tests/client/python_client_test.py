"""The Python package kvledger (client/python) as a scheduler author uses it, with Debian's
/usr/bin/python3 and real kvledger-server processes on 127.0.0.1: the Reporter across a server
restart, down and stalled servers, full queues and fork(); the trace format with `kvledger replay`;
the checked-in stubs against proto/; and pip installation. The engine adapters and the vLLM plugin
are in engine_adapters_test.py.

Usage: python_client_test.py SERVER_BINARY CLI_BINARY REPO_ROOT
"""
import faulthandler
import filecmp
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

# A hung test prints every thread's stack well before ctest's timeout kills it silently.
faulthandler.dump_traceback_later(240, exit=True)

SERVER, CLI, ROOT = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
PACKAGE = os.path.join(ROOT, "client", "python")
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, PACKAGE)
import harness  # noqa: E402
import kvledger  # noqa: E402

# The Reporter's fork test needs gRPC's fork support, which must be on before grpc is imported.
assert kvledger.enable_fork_support(), "grpc was imported before kvledger.enable_fork_support()"
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402
import grpc  # noqa: E402


def accepted(server):
    samples = harness.parse_exposition(server.scrape())
    return sum(v for (name, _), v in samples.items() if name == "kvledger_requests_total")


def half_hit(i=0):
    return kvledger.make_record(model="llama-3.1-8b", tier="host", prompt_tokens=4096 + i, logical_match_tokens=2048,
                                suffix_prefill_seconds=0.2)


def fast(target, **kw):
    options = dict(flush_interval_seconds=0.02, initial_backoff_seconds=0.02, max_backoff_seconds=0.2,
                   rpc_timeout_seconds=2.0)
    options.update(kw)
    return kvledger.Reporter(target, **options)


def report_latencies(reporter, calls):
    record = half_hit()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        reporter.report(record)
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) * 99 // 100], times[-1]


class DeadTarget:
    """A loopback port that refuses connections (bound, not listening) or stalls them (listening,
    never accepting: the kernel completes the handshake, nobody answers)."""

    def __init__(self, listen):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        if listen:
            self.sock.listen(16)
        self.target = f"127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self):
        self.sock.close()


class CuttingProxy:
    """A loopback TCP proxy in front of a server that cuts the connection the first `cuts` times the
    server starts a reply (an HTTP/2 HEADERS frame on a call's stream): the server has applied the
    call, the client never sees the answer. Its own listening socket binds port 0."""

    def __init__(self, target, cuts):
        host, port = target.rsplit(":", 1)
        self.upstream, self.cuts_left, self.cuts_done = (host, int(port)), cuts, 0
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.target = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:  # the server is gone (the test is ending): refuse the client too
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client, server), daemon=True).start()
            threading.Thread(target=self._replies, args=(server, client), daemon=True).start()

    @staticmethod
    def _pipe(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            s.close()

    def _replies(self, server, client):
        """Forwards the server's frames one by one, cutting before a reply's HEADERS while cuts are left."""
        buffer = b""
        try:
            while data := server.recv(65536):
                buffer += data
                while len(buffer) >= 9:
                    length = int.from_bytes(buffer[:3], "big")
                    if len(buffer) < 9 + length:
                        break
                    kind, stream = buffer[3], int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
                    if kind == 1 and stream != 0:
                        with self.lock:
                            cut = self.cuts_left > 0
                            if cut:
                                self.cuts_left -= 1
                                self.cuts_done += 1
                        if cut:
                            raise OSError("cut")
                    client.sendall(buffer[:9 + length])
                    buffer = buffer[9 + length:]
        except OSError:
            pass
        for s in (server, client):
            s.close()

    def close(self):
        self.listener.close()


class CancellingFront:
    """cancelling_front.py in a process of its own (a gRPC server in the test's process would be
    inherited by test_fork's child): in front of a kvledger server, it forwards each RecordBatch and
    answers the first `cancels` of them CANCELLED after the server applied them."""

    def __init__(self, target, cancels):
        self.proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "client", "cancelling_front.py"), target, str(cancels)],
                                     stdout=subprocess.PIPE, text=True)
        self.target = self.proc.stdout.readline().strip()

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


class ReporterTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def server(self, *args):
        server = harness.Server(SERVER, *args, log_dir=self.tmp.name)
        self.addCleanup(server.stop)
        return server

    # Proves: everything reported before a successful flush arrives exactly once across a server
    # restart in the middle; what was reported while it was down is retried, not lost.
    def test_exactly_once_across_restart(self):
        first = self.server()
        reporter = fast(first.grpc_address)
        self.addCleanup(reporter.close, 1)
        for i in range(500):
            self.assertTrue(reporter.report(half_hit(i)))
        self.assertTrue(reporter.flush(30))
        self.assertEqual(accepted(first), 500)
        self.assertEqual(first.stop(), 0)
        for i in range(500):
            self.assertTrue(reporter.report(half_hit(i)))
        self.assertFalse(reporter.flush(0.3))
        port = first.grpc_address.rsplit(":", 1)[1]
        second = harness.Server(SERVER, log_dir=self.tmp.name, grpc_address=f"127.0.0.1:{port}")
        self.addCleanup(second.stop)
        self.assertTrue(reporter.flush(30))
        self.assertEqual(accepted(second), 500)
        stats = reporter.stats()
        self.assertEqual((stats["sent"], stats["dropped"], stats["queued"]), (1000, 0, 0))
        self.assertGreater(stats["retried"], 0)

    # Proves: when the connection is cut after the server applied a batch and before its reply
    # arrived, the Reporter's retry (same batch_id) is answered with the original outcome and the
    # totals stay exact: every record counted once.
    def test_cut_reply_is_not_counted_twice(self):
        server = self.server()
        proxy = CuttingProxy(server.grpc_address, cuts=3)
        self.addCleanup(proxy.close)
        reporter = fast(proxy.target, max_batch_size=100)
        self.addCleanup(reporter.close, 1)
        for i in range(1000):
            self.assertTrue(reporter.report(half_hit(i)))
        self.assertTrue(reporter.flush(60))
        self.assertEqual(proxy.cuts_done, 3)
        stats = reporter.stats()
        self.assertEqual((stats["sent"], stats["dropped"], stats["queued"]), (1000, 0, 0))
        self.assertGreaterEqual(stats["retried"], 3)
        self.assertEqual(accepted(server), 1000)

    # Proves: through one target of three replicas, a batch whose reply was cut after the replica
    # applied it is retried on that replica (sticky), so the fleet counts every record once; new
    # batches still spread over all three.
    def test_cut_reply_retried_on_the_same_replica(self):
        servers = [self.server() for _ in range(3)]
        proxies = [CuttingProxy(s.grpc_address, cuts=2) for s in servers]
        for proxy in proxies:
            self.addCleanup(proxy.close)
        reporter = fast("ipv4:" + ",".join(p.target for p in proxies), max_batch_size=50)
        self.addCleanup(reporter.close, 1)
        for i in range(1500):
            self.assertTrue(reporter.report(half_hit(i)))
            if i % 50 == 49:
                self.assertTrue(reporter.flush(60))
        self.assertEqual([p.cuts_done for p in proxies], [2, 2, 2])
        counted = [accepted(s) for s in servers]
        self.assertEqual(sum(counted), 1500, counted)
        # Every cut reply's retry reached the replica that had applied it, which answered from memory.
        deduplicated = [harness.parse_exposition(s.scrape())[("kvledger_deduplicated_batches_total", frozenset())]
                        for s in servers]
        self.assertEqual(deduplicated, [2, 2, 2])
        self.assertTrue(all(c > 0 for c in counted), counted)
        self.assertEqual(reporter.stats()["sent"], 1500)

    # Proves: a frozen replica (its port accepts connections, nothing ever answers) costs one batch a
    # short wait: that batch moves after retry_same_replica_seconds and new batches skip the replica,
    # so the two live replicas count every record once, with a handful of retries.
    def test_frozen_replica_is_skipped(self):
        live = [self.server() for _ in range(2)]
        frozen = DeadTarget(listen=True)
        self.addCleanup(frozen.close)
        target = f"ipv4:{live[0].grpc_address},{frozen.target},{live[1].grpc_address}"
        reporter = fast(target, max_batch_size=10, rpc_timeout_seconds=0.5, retry_same_replica_seconds=1.0)
        self.addCleanup(reporter.close, 1)
        for i in range(200):
            self.assertTrue(reporter.report(half_hit(i)))
            if i % 10 == 9:
                self.assertTrue(reporter.flush(30))
        self.assertEqual(sum(accepted(s) for s in live), 200)
        stats = reporter.stats()
        self.assertEqual(stats["sent"], 200)
        self.assertLessEqual(stats["retried"], 6)

    # Proves: report() stays fast while the server refuses connections or stalls (a generous bound;
    # the measured figure is in docs/performance.md), and close() returns promptly, counting the
    # undelivered records as dropped.
    def test_report_stays_fast_when_down_or_stalled(self):
        for listen in (False, True):
            with self.subTest(stalled=listen):
                dead = DeadTarget(listen)
                self.addCleanup(dead.close)
                reporter = fast(dead.target, max_queue_size=100000)
                p99, worst = report_latencies(reporter, 20000)
                self.assertLess(p99, 0.002)
                self.assertLess(worst, 2.0)  # one scheduling hiccup on a busy machine is not a failure
                start = time.monotonic()
                stats = reporter.close(0.3)
                self.assertLess(time.monotonic() - start, 5)
                self.assertEqual(stats["dropped"], stats["reported"])
                self.assertEqual(stats["sent"], 0)

    # Proves: a full queue drops the new records and every drop is counted: the False returns equal
    # stats()["dropped"].
    def test_full_queue_drops_are_counted(self):
        dead = DeadTarget(listen=True)
        self.addCleanup(dead.close)
        reporter = fast(dead.target, max_queue_size=50, max_batch_size=10)
        refused = sum(0 if reporter.report(half_hit(i)) else 1 for i in range(1000))
        self.assertGreaterEqual(refused, 1000 - 50 - 10)
        self.assertEqual(reporter.stats()["dropped"], refused)
        self.assertEqual(reporter.close(0.2)["dropped"], 1000)

    # Proves: a forked child gets its own sender and delivers its records; the parent's are its own.
    def test_fork(self):
        server = self.server()
        reporter = fast(server.grpc_address)
        self.addCleanup(reporter.close, 1)
        self.assertTrue(reporter.report(half_hit()))
        self.assertTrue(reporter.flush(30))
        pid = os.fork()
        if pid == 0:
            signal.alarm(30)  # a hung child dies instead of hanging the suite
            ok = False
            try:  # whatever happens, the child never returns into the test runner
                ok = all(reporter.report(half_hit(i)) for i in range(3)) and reporter.flush(20) \
                    and reporter.stats()["sent"] == 3
                if not ok:
                    print(f"forked child: {reporter.stats()}", file=sys.stderr, flush=True)
            except BaseException:  # noqa: BLE001 - reported, then the child exits 1
                import traceback
                traceback.print_exc()
                sys.stderr.flush()
            os._exit(0 if ok else 1)
        deadline = time.monotonic() + 40
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                self.fail("the forked child hung")
            time.sleep(0.05)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        self.assertEqual(accepted(server), 4)
        self.assertEqual(reporter.stats()["sent"], 1)

    # Proves: keyword fields, the context manager (flush on exit) and server-side rejections.
    def test_keywords_context_manager_and_rejections(self):
        server = self.server()
        with fast(server.grpc_address) as reporter:
            self.assertTrue(reporter.report(model="qwen3-8b", tier="disk", prompt_tokens=100, logical_match_tokens=64,
                                            reload_seconds=0.01, state_boundaries={}))
            self.assertTrue(reporter.report(model="qwen3-8b", prompt_tokens=100, logical_match_tokens=500))
        self.assertEqual(reporter.stats()["sent"], 1)
        self.assertEqual(reporter.stats()["rejected"], 1)
        self.assertEqual(accepted(server), 1)


    # Proves: a batch answered CANCELLED (what a replica shutting down answers a call it meets) is
    # retried on the same replica with its batch id, never dropped, and counted once even when the
    # replica had applied it.
    def test_cancelled_is_retried_and_counted_once(self):
        server = self.server()
        front = CancellingFront(server.grpc_address, cancels=3)
        self.addCleanup(front.close)
        reporter = fast(front.target, max_batch_size=100)
        self.addCleanup(reporter.close, 1)
        for i in range(1000):
            self.assertTrue(reporter.report(half_hit(i)))
        self.assertTrue(reporter.flush(60))
        stats = reporter.stats()
        self.assertEqual((stats["sent"], stats["dropped"], stats["queued"]), (1000, 0, 0))
        self.assertGreaterEqual(stats["retried"], 3)
        self.assertEqual(accepted(server), 1000)

    # Proves: a record too large for any message is refused at report() with its reason, never
    # queued, and every small record around it arrives; against a server whose receive limit is
    # below the Reporter's, a batch refused for its size is split and a record too large alone is
    # rejected — no batch is retried whole forever.
    def test_a_poison_record_never_blocks_the_others(self):
        def with_ids(n):
            return {"model": "llama-3.1-8b", "prompt_tokens": 16 * n, "logical_match_tokens": 0, "block_tokens": 16,
                    "prefix_block_ids": list(range(1, n + 1))}

        server = self.server()
        reporter = fast(server.grpc_address)
        self.addCleanup(reporter.close, 1)
        for i in range(500):
            self.assertTrue(reporter.report(half_hit(i)))
        self.assertFalse(reporter.report(**with_ids(600_000)))  # 4.8 MB
        for i in range(500):
            self.assertTrue(reporter.report(half_hit(i)))
        self.assertTrue(reporter.flush(30))
        stats = reporter.stats()
        self.assertEqual((stats["sent"], stats["rejected"], stats["dropped"]), (1000, 1, 0))
        self.assertIn("must fit in one message of at most 4194304 bytes", reporter.rejection_reasons()["record_too_large"])
        self.assertEqual(accepted(server), 1000)

        small = self.server("--max_receive_message_bytes=65536")
        split = fast(small.grpc_address, max_batch_size=512, flush_interval_seconds=60)
        self.addCleanup(split.close, 1)
        for _ in range(40):
            self.assertTrue(split.report(**with_ids(1000)))
        self.assertTrue(split.report(**with_ids(20000)))  # 160 kB: past the server's limit alone
        for _ in range(40):
            self.assertTrue(split.report(**with_ids(1000)))
        self.assertTrue(split.flush(30))
        stats = split.stats()
        self.assertEqual((stats["sent"], stats["rejected"], stats["dropped"]), (80, 1, 0))
        self.assertIn("larger than max", split.rejection_reasons()["record_too_large"])
        self.assertEqual(accepted(small), 80)


class BlockIdsTest(unittest.TestCase):
    # Proves: kvledger.blocks' ids are chained (equal up to the first different block, different from
    # there on), one per block including a partial tail unless full_blocks_only, salted apart; engine
    # hashes convert as vLLM's KV events do (the low 64 bits of the big-endian integer); and a record
    # reported with them builds the server's capacity curve (the second identical prompt hits).
    def test_chained_ids_and_the_curve_they_build(self):
        blocks = kvledger.blocks
        a = blocks.prefix_block_ids(list(range(40)), 16)
        b = blocks.prefix_block_ids(list(range(32)) + [7] * 8, 16)
        c = blocks.prefix_block_ids([99] + list(range(1, 40)), 16)
        self.assertEqual(len(a), 3)  # two full blocks and the 8-token tail
        self.assertEqual(a[:2], b[:2])
        self.assertNotEqual(a[2], b[2])
        self.assertTrue(all(x != y for x, y in zip(a, c)))  # a different first block changes every id
        self.assertEqual(blocks.prefix_block_ids(list(range(40)), 16, full_blocks_only=True), a[:2])
        self.assertNotEqual(blocks.prefix_block_ids(list(range(40)), 16, salt="lora-a")[0], a[0])
        self.assertTrue(all(0 <= x < 2**64 for x in a))
        self.assertEqual(blocks.from_engine_hashes([bytes(range(32)), 2**70 + 5, 12]),
                         [0x18191A1B1C1D1E1F, 5, 12])
        with self.assertRaises(ValueError):
            blocks.prefix_block_ids([1, 2], 0)
        server = harness.Server(SERVER, "--capacity_ladder=16,64", log_dir=tempfile.mkdtemp(prefix="kvledger-blocks-"))
        try:
            with fast(server.grpc_address) as reporter:
                for _ in range(2):
                    reporter.report(model="llama-3.1-8b", prompt_tokens=40, prefix_block_ids=a, block_tokens=16,
                                    cache_id="engine-0")
            self.assertEqual(reporter.stats()["sent"], 2)
            with urllib.request.urlopen(f"http://{server.metrics_address}/api/v1/capacity", timeout=10) as r:
                (curve,) = json.load(r)["models"]
            # Blocks are used tail first, so the first is the most recent: 16 tokens hold it (its next
            # block is 2 deep); 64 hold all.
            self.assertEqual([int(p["match_tokens"]) for p in curve["points"]], [16, 40, 40])
        finally:
            server.stop()


class TraceAndPackagingTest(unittest.TestCase):
    # Proves: write_trace output replays with every record accepted and reads back unchanged.
    def test_write_trace_replays(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.jsonl")
            records = [half_hit(1), {"model": "kimi-linear-48b-a3b", "tier": "remote", "prompt_tokens": 2000,
                                     "logical_match_tokens": 1000, "state_boundaries": {"kda": 768, "mla": 992}},
                       {"model": "qwen3-8b", "prompt_tokens": 10}]
            self.assertEqual(kvledger.write_trace(path, records), 3)
            back = list(kvledger.read_trace(path))
            self.assertEqual(back[0], records[0])
            self.assertEqual(back[1].state_boundaries[0].boundary_tokens, 768)
            server = harness.Server(SERVER, log_dir=tmp)
            try:
                result = subprocess.run([CLI, "replay", "--target", server.grpc_address, path],
                                        capture_output=True, text=True, timeout=60)
                self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
                self.assertIn("3 accepted, 0 rejected", result.stdout)
            finally:
                server.stop()

    # Proves: examples/trace.jsonl covers every attention kind, every tier and misses, and replays
    # with every record accepted; its whole-request fields split some TTFTs, overlap others, and leave
    # parts missing on the rest.
    def test_example_trace(self):
        path = os.path.join(ROOT, "examples", "trace.jsonl")
        records = list(kvledger.read_trace(path))
        self.assertEqual({r.tier for r in records}, {0, 1, 2, 3, 4})
        self.assertTrue({"llama-3.1-8b", "mistral-7b-v0.1", "deepseek-v3", "kimi-linear-48b-a3b"}
                        <= {r.model for r in records})  # full, sliding window, MLA, hybrid linear
        with tempfile.TemporaryDirectory() as tmp:
            server = harness.Server(SERVER, log_dir=tmp)
            try:
                result = subprocess.run([CLI, "replay", "--target", server.grpc_address, path],
                                        capture_output=True, text=True, timeout=60)
                self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
                self.assertIn(f"{len(records)} accepted, 0 rejected", result.stdout)
                # Records with every part of the TTFT, with parts that overlap it, and with parts missing.
                samples = harness.parse_exposition(server.scrape())

                def total(name):
                    return sum(v for (n, _), v in samples.items() if n == name)
                split, overlap = total("kvledger_ttft_decomposed_requests_total"), total("kvledger_ttft_overlap_requests_total")
                self.assertGreater(split, 0)
                self.assertGreater(overlap, 0)
                self.assertLess(split + overlap, len(records))
                self.assertGreater(total("kvledger_decode_requests_total"), 0)
                self.assertLess(total("kvledger_decode_requests_total"), len(records))
            finally:
                server.stop()

    # Proves: the checked-in generated modules are exactly what proto/ generates today.
    def test_stubs_match_proto(self):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["bash", os.path.join(ROOT, "scripts", "generate-python-stubs.sh"), tmp], check=True,
                           timeout=60)
            generated = sorted(os.listdir(os.path.join(tmp, "kvledger", "v1")))
            checked_in = sorted(f for f in os.listdir(os.path.join(PACKAGE, "kvledger", "v1")) if f.endswith(".py")
                                and f != "__init__.py")
            self.assertEqual(generated, checked_in)
            for name in generated:
                self.assertTrue(filecmp.cmp(os.path.join(tmp, "kvledger", "v1", name),
                                            os.path.join(PACKAGE, "kvledger", "v1", name), shallow=False),
                                f"{name} drifted from proto/: run scripts/generate-python-stubs.sh")

    # Proves: pip installs the package from the repository, with the vLLM entry point declared.
    def test_pip_install(self):
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "src")
            shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
            target = os.path.join(tmp, "site")
            result = subprocess.run(["/usr/bin/python3", "-m", "pip", "install", "--quiet", "--no-deps",
                                     "--no-build-isolation", "--no-index", "--target", target, source],
                                    capture_output=True, text=True, timeout=300)
            self.assertEqual(result.returncode, 0, result.stderr)
            with open(os.path.join(target, "kvledger-0.1.0.dist-info", "entry_points.txt")) as f:
                self.assertIn("kvledger = kvledger.vllm:KvledgerStatLogger", f.read())
            # The gateway snippet of docs/integration.md: submodules reachable after a bare import,
            # which still imports no grpc.
            check = subprocess.run(["/usr/bin/python3", "-c", "import sys, kvledger; kvledger.adapters.from_openai; "
                                    "kvledger.blocks.prefix_block_ids; "
                                    "assert 'grpc' not in sys.modules; print(kvledger.__file__)"],
                                   env={**os.environ, "PYTHONPATH": target}, cwd=tmp,
                                   capture_output=True, text=True, timeout=60)
            self.assertTrue(check.stdout.startswith(target), check.stdout + check.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
