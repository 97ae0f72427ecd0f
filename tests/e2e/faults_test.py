"""Hostile and unlucky clients against the real kvledger-server binary, each attack bounded in time
and count: descriptor exhaustion, HTTP/2 rapid reset, CONTINUATION floods, a huge message, a client
that never reads, many connections and a million model names. Each test measures the server's
resident memory (and CPU where it matters), prints a MEASURED line (docs/security.md quotes them)
and asserts the bound the docs state. Loopback only.

usage: faults_test.py KVLEDGER_SERVER PYTHON_DIR
"""
import http.client
import json
import os
import resource
import socket
import struct
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

SERVER = sys.argv[1]
sys.path.insert(0, sys.argv[2])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
del sys.argv[1:3]

import grpc  # noqa: E402

from harness import Server, parse_exposition, poll  # noqa: E402
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402

MiB = 1 << 20


def status(pid, key):
    """A /proc/PID/status figure in bytes (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class PeakRss:
    """Samples a process's resident set every 20 ms while the with-block runs."""

    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, 0, threading.Event()

    def __enter__(self):
        self.before = status(self.pid, "VmRSS")
        self.peak = self.before
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(0.02):
            try:
                self.peak = max(self.peak, status(self.pid, "VmRSS"))
            except (OSError, KeyError):
                return

    def settle(self, deadline=25):
        """Waits (inside the block) until the server is idle and its resident set back within 128 MiB of where it started,
        or the deadline passes; returns (seconds it took or None, the resident set then). The deadline
        grows with how long the server took to work off the attack: on a loaded machine both take longer."""
        start = time.monotonic()
        busy = cpu_seconds(self.pid)
        while time.monotonic() - start < 180:  # first the server works off what the attack queued
            time.sleep(0.5)
            idle, busy = cpu_seconds(self.pid) - busy < 0.05, cpu_seconds(self.pid)
            if idle:
                break
        deadline += 2 * (time.monotonic() - start)
        start = time.monotonic()
        while time.monotonic() - start < deadline:
            now = status(self.pid, "VmRSS")
            if now < self.before + 128 * MiB:
                return time.monotonic() - start, now
            time.sleep(0.1)
        return None, status(self.pid, "VmRSS")

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, status(self.pid, "VmRSS"))


def measured(name, rss, settled=None, **figures):
    extra = "".join(f" {k}={v}" for k, v in figures.items())
    if settled is not None:
        took, after = settled
        extra += f" rss_after={after / MiB:.0f}MiB" + (f" back_within_128MiB_after={took:.0f}s" if took is not None else "")
    print(f"MEASURED {name}: rss_before={rss.before / MiB:.0f}MiB rss_peak={rss.peak / MiB:.0f}MiB{extra}",
          flush=True)


# --- a raw HTTP/2 client: just enough framing to misbehave ----------------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, CONTINUATION = 0, 1, 3, 4, 9
END_STREAM, END_HEADERS = 0x1, 0x4


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out, value = [first | limit], value - limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes(out + [value])


def hpack_literal(name, value):
    """A literal header field without indexing, new name, no Huffman coding."""
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def request_headers(address, method=b"/kvledger.v1.Ledger/Record"):
    return b"".join(hpack_literal(n, v) for n, v in [
        (b":method", b"POST"), (b":scheme", b"http"), (b":path", method), (b":authority", address.encode()),
        (b"content-type", b"application/grpc"), (b"te", b"trailers")])


class RawConnection:
    """A TCP connection speaking raw HTTP/2; a thread reads and discards what the server sends
    unless `read` is False (a client that never reads its socket)."""

    def __init__(self, address, read=True, ack_settings=False):
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
        if ack_settings:  # waits for the server's SETTINGS and acknowledges them, enabling its limits
            self._read_until_settings()
            self.sock.sendall(frame(SETTINGS, 1, 0))
        self.closed = threading.Event()
        if read:
            threading.Thread(target=self._drain, daemon=True).start()

    def _read_until_settings(self):
        buffer = b""
        while True:
            while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
                length, kind, flags = int.from_bytes(buffer[:3], "big"), buffer[3], buffer[4]
                if kind == SETTINGS and not flags & 1:
                    return
                buffer = buffer[9 + length:]
            data = self.sock.recv(65536)
            if not data:
                raise AssertionError("the server closed the connection before sending SETTINGS")
            buffer += data

    def _drain(self):
        try:
            while self.sock.recv(65536):
                pass
        except OSError:
            pass
        self.closed.set()

    def send(self, data):
        try:
            self.sock.sendall(data)
            return True
        except OSError:  # the server closed the connection
            return False

    def close(self):
        self.sock.close()


def ledger_stub(server):
    return ledger_pb2_grpc.LedgerStub(grpc.insecure_channel(server.grpc_address))


def good_record(model="llama-3.1-8b"):
    return record_pb2.Record(model=model, tier=record_pb2.TIER_HOST, prompt_tokens=4096,
                             logical_match_tokens=2048, reload_seconds=0.01)


class FaultsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        self.tmp.cleanup()

    def start(self, *args, **kwargs):
        server = Server(SERVER, *args, log_dir=self.tmp.name, **kwargs)
        self.servers.append(server)
        return server

    def assert_still_serves(self, server):
        stub = ledger_stub(server)
        stub.Record(good_record(), timeout=30)

    def test_descriptor_exhaustion_is_not_a_silent_deaf_listener(self):
        # The soft limit is raised to the hard one at start; a burst of connections then exhausts it.
        server = self.start("--deaf_listener_seconds=2",
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (64, 128)))
        self.assertIn("open_files_limit=128", server.read_log())
        with open(f"/proc/{server.proc.pid}/limits") as f:
            self.assertRegex(f.read(), r"Max open files\s+128\s+128")
        host, port = server.grpc_address.rsplit(":", 1)
        burst = [socket.create_connection((host, int(port))) for _ in range(160)]
        poll("the server to run out of descriptors", lambda: len(os.listdir(f"/proc/{server.proc.pid}/fd")) >= 127)
        for s in burst:
            s.close()
        # gRPC 1.51 does not accept again once it ran out of descriptors; the watchdog sees connections
        # wait and exits 3 so that the supervisor restarts it (a healthy restart beats a process that
        # looks alive and hears nothing). The property is "never deaf while alive": should the listener
        # serve again instead (seen once, under a parallel test run), that holds too, and is said.
        end = time.monotonic() + 60
        recovered = False
        while server.proc.poll() is None and time.monotonic() < end and not recovered:
            try:
                ledger_stub(server).Record(good_record(), timeout=1)
                recovered = True
            except grpc.RpcError:
                pass
        log = server.read_log()
        if recovered:
            print("MEASURED descriptor_exhaustion: the listener served again; no exit was needed", flush=True)
            return
        self.assertIsNotNone(server.proc.poll(), f"deaf for 60 s and still running; log: {log[-3000:]}")
        self.assertEqual(server.proc.returncode, 3, log)
        self.assertRegex(log, r"the gRPC listener on port \d+ has accepted no connection for \d+s while \d+ wait in "
                              r"its accept queue \(open descriptors: \d+ of 128\).*exiting \(status 3\)")

    def test_healthy_listener_is_left_alone(self):
        server = self.start("--deaf_listener_seconds=1")
        stub = ledger_stub(server)
        for _ in range(5):  # connections come and go across several watchdog periods
            channel = grpc.insecure_channel(server.grpc_address)
            ledger_pb2_grpc.LedgerStub(channel).Record(good_record(), timeout=30)
            channel.close()
            time.sleep(0.5)
        stub.Record(good_record(), timeout=30)
        self.assertIsNone(server.proc.poll())

    def test_rapid_reset(self):
        # HEADERS + RST_STREAM pairs as fast as one connection carries them, for at most 3 s. gRPC 1.51 has
        # no reset-rate limit: the server survives and gives the memory back, but the peak grows with
        # the attack (docs/security.md); a proxy in front closes it.
        server = self.start()
        pid = server.proc.pid
        conn = RawConnection(server.grpc_address)
        headers = request_headers(server.grpc_address)
        cpu_before, start, pairs, stream = cpu_seconds(pid), time.monotonic(), 0, 1
        with PeakRss(pid) as rss:
            while time.monotonic() - start < 3 and pairs < 500_000:
                chunk = []
                for _ in range(500):
                    chunk.append(frame(HEADERS, END_HEADERS, stream, headers))
                    chunk.append(frame(RST_STREAM, 0, stream, struct.pack(">I", 8)))  # CANCEL
                    stream += 2
                if not conn.send(b"".join(chunk)):
                    break
                pairs += 500
            elapsed = time.monotonic() - start
            conn.close()
            self.assert_still_serves(server)
            settled = rss.settle()
        cpu = cpu_seconds(pid) - cpu_before
        measured("rapid_reset", rss, settled, pairs=pairs, attack_seconds=f"{elapsed:.1f}", server_cpu_seconds=f"{cpu:.1f}")
        self.assertIsNotNone(settled[0], "memory was not given back after the attack")

    def test_continuation_flood(self):
        # One HEADERS frame that never ends: CONTINUATION frames of valid header fields, up to 64 MiB.
        server = self.start()
        pid = server.proc.pid
        conn = RawConnection(server.grpc_address)
        junk = hpack_literal(b"x-junk", b"a" * 16000)
        sent, closed_after = 0, None
        with PeakRss(pid) as rss:
            conn.send(frame(HEADERS, 0, 1, request_headers(server.grpc_address)))
            while sent < 64 * MiB:
                if not conn.send(frame(CONTINUATION, 0, 1, junk) * 16):
                    closed_after = sent
                    break
                sent += 16 * len(junk)
            conn.close()
            self.assert_still_serves(server)
            settled = rss.settle()
        measured("continuation_flood", rss, settled, sent_mib=f"{sent / MiB:.0f}",
                 closed_by_server_after_mib="no" if closed_after is None else f"{closed_after / MiB:.1f}")
        self.assertIsNotNone(settled[0], "memory was not given back after the attack")

    def test_huge_message(self):
        # A Record call announcing a 400 MB message; the body is streamed until the server stops it.
        server = self.start()
        pid = server.proc.pid
        conn = RawConnection(server.grpc_address)
        sent = 0
        with PeakRss(pid) as rss:
            conn.send(frame(HEADERS, END_HEADERS, 1, request_headers(server.grpc_address)))
            conn.send(frame(DATA, 0, 1, b"\x00" + struct.pack(">I", 400_000_000)))
            chunk = frame(DATA, 0, 1, b"\x0a" * 16384)
            conn.sock.settimeout(5)
            while sent < 100 * MiB and not conn.closed.is_set():
                try:
                    conn.sock.sendall(chunk * 16)
                except OSError:  # refused: the server stopped reading or closed
                    break
                sent += 16 * 16384
            conn.close()
            self.assert_still_serves(server)
        measured("huge_message_400MB", rss, body_sent_mib=f"{sent / MiB:.1f}")
        self.assertLess(rss.peak - rss.before, 64 * MiB)

    def never_reading_client(self, ack_settings):
        """Up to 50,000 small Record calls on one connection whose replies are never read; returns the
        calls the server took before it stopped reading, the PeakRss and the settled figures."""
        server = self.start()
        pid = server.proc.pid
        conn = RawConnection(server.grpc_address, read=False, ack_settings=ack_settings)
        conn.sock.settimeout(5)
        body = good_record().SerializeToString()
        message = b"\x00" + struct.pack(">I", len(body)) + body
        headers = request_headers(server.grpc_address)
        sent, stream = 0, 1
        with PeakRss(pid) as rss:
            while sent < 50_000:
                chunk = b"".join(frame(HEADERS, END_HEADERS, s, headers) + frame(DATA, END_STREAM, s, message)
                                 for s in range(stream, stream + 200, 2))
                try:
                    conn.sock.sendall(chunk)
                except OSError:  # the server stopped reading: its buffers are full
                    break
                sent += 100
                stream += 200
            conn.close()
            self.assert_still_serves(server)
            settled = rss.settle()
        return sent, rss, settled

    def test_buggy_client_that_never_reads(self):
        # A client that acknowledges SETTINGS but never reads its replies: --max_concurrent_streams and
        # TCP back-pressure stop it; the server holds little.
        sent, rss, settled = self.never_reading_client(ack_settings=True)
        measured("never_reads_acked_settings", rss, settled, calls_taken=sent)
        self.assertLess(sent, 50_000)
        self.assertLess(rss.peak, rss.before + 64 * MiB)

    def test_hostile_client_that_never_reads(self):
        # The same without acknowledging SETTINGS: gRPC 1.51 enforces the stream limit only once the
        # client acknowledged it, so every call is taken and its reply buffered. Measured and bounded by
        # the attack's size only (docs/security.md); the memory is given back when the client leaves.
        sent, rss, settled = self.never_reading_client(ack_settings=False)
        measured("never_reads_unacked_settings", rss, settled, calls_taken=sent)
        self.assertIsNotNone(settled[0], "memory was not given back after the client left")

    def test_many_streaming_connections(self):
        # 16 connections streaming batches at once; memory must not grow with them without bound.
        server = self.start()
        pid = server.proc.pid
        batch = ledger_pb2.RecordBatchRequest(records=[good_record()] * 1000)
        channels = [grpc.insecure_channel(server.grpc_address, options=[("grpc.use_local_subchannel_pool", 1)])
                    for _ in range(16)]

        def stream(channel):
            ledger_pb2_grpc.LedgerStub(channel).StreamRecords(iter([batch] * 50), timeout=120)

        with PeakRss(pid) as rss:
            threads = [threading.Thread(target=stream, args=(c,)) for c in channels]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for c in channels:
                c.close()
        samples = parse_exposition(server.scrape())
        total = sum(v for (name, _), v in samples.items() if name == "kvledger_requests_total")
        self.assertEqual(total, 16 * 50 * 1000)
        measured("16_streaming_connections", rss, records=int(total))
        self.assertLess(rss.peak, 512 * MiB)

    def test_idle_streams_hold_little(self):
        # 32 StreamRecords calls, each sending one batch of 1,024 records that carry 3.5 KiB of
        # request id apiece (rejected for it, but parsed first: 3.6 MB a batch), then falling silent.
        # A stream keeps its batch only while it is small, so the idle streams hold little: once the
        # freed heap is handed back, the resident set is within a third of the batches' bytes of
        # where it started (once 256 such streams held 1,191 MB, past the Kubernetes base's 1 GiB limit).
        server = self.start()
        big = record_pb2.Record(model="llama-3.1-8b", prompt_tokens=100, logical_match_tokens=0,
                                request_id="x" * 3500)
        batch = ledger_pb2.RecordBatchRequest(records=[big] * 1024).SerializeToString()
        channel = grpc.insecure_channel(server.grpc_address, options=[("grpc.max_send_message_length", 8 << 20)])
        call = channel.stream_unary("/kvledger.v1.Ledger/StreamRecords", request_serializer=lambda raw: raw,
                                    response_deserializer=lambda raw: raw)
        release = threading.Event()
        streams = 32

        def requests():
            yield batch
            release.wait(300)  # silent, the stream open

        rejected = ("kvledger_records_rejected_total", frozenset({("reason", "invalid_request_id")}))
        with PeakRss(server.proc.pid) as rss:
            futures = [call.future(requests(), timeout=300) for _ in range(streams)]
            poll("every stream's batch to be read",
                 lambda: parse_exposition(server.scrape()).get(rejected) == streams * 1024, deadline=240)
            # What the silent streams hold: the server hands freed heap back every 10 s, so the resident
            # set falls to it (held batches would keep it up: 145 MiB over the start before).
            bound = rss.before + streams * len(batch) // 3
            held = poll("the freed batches to be handed back",
                        lambda: (lambda now: now if now < bound else None)(status(server.proc.pid, "VmRSS")),
                        deadline=30, interval=0.5)
        release.set()
        for f in futures:
            f.result(timeout=60)
        channel.close()
        measured("32_idle_streams_after_a_large_batch", rss, streams=streams,
                 rss_held=f"{held / MiB:.0f}MiB", batch_bytes=len(batch))
        self.assertLess(held, bound)

    def test_idle_streams_hold_little_of_their_answers(self):
        # 256 StreamRecords calls, each sending one batch of 1,000 records rejected with a long message,
        # then falling silent. A stream's answer lists at most 32 KiB of rejections (the counts stay
        # exact), so the silent streams hold little: within 96 KiB a stream (its kept batch and its
        # listed answer) plus 32 MiB of where the server started (once 2,048 such streams held 1,117 MB,
        # ~548 kB a stream).
        server = self.start()
        bad = record_pb2.Record(model="llama-3.1-8b", prompt_tokens=100, logical_match_tokens=0,
                                request_id="x" * 300)
        batch = ledger_pb2.RecordBatchRequest(records=[bad] * 1000).SerializeToString()
        # 4 connections of 64 streams (--max_concurrent_streams), each its own subchannel.
        channels = [grpc.insecure_channel(server.grpc_address, options=[("grpc.max_send_message_length", 8 << 20),
                                                                          ("grpc.channel_id", i)])
                    for i in range(4)]
        calls = [c.stream_unary("/kvledger.v1.Ledger/StreamRecords", request_serializer=lambda raw: raw,
                                response_deserializer=ledger_pb2.RecordBatchResponse.FromString) for c in channels]
        release = threading.Event()
        streams = 256

        def requests():
            yield batch
            release.wait(300)

        rejected = ("kvledger_records_rejected_total", frozenset({("reason", "invalid_request_id")}))
        with PeakRss(server.proc.pid) as rss:
            futures = [calls[i % 4].future(requests(), timeout=300) for i in range(streams)]
            poll("every stream's batch to be read",
                 lambda: parse_exposition(server.scrape()).get(rejected) == streams * 1000, deadline=240)
            bound = rss.before + streams * 96 * 1024 + 32 * MiB
            held = poll("the freed batches to be handed back",
                        lambda: (lambda now: now if now < bound else None)(status(server.proc.pid, "VmRSS")),
                        deadline=30, interval=0.5)
        release.set()
        summaries = [f.result(timeout=60) for f in futures]
        for c in channels:
            c.close()
        measured("256_idle_streams_with_rejections", rss, streams=streams, rss_held=f"{held / MiB:.0f}MiB")
        self.assertLess(held, bound)
        self.assertEqual({s.rejected for s in summaries}, {1000})
        self.assertTrue(all(0 < len(s.rejections) < 1000 for s in summaries))

    def test_a_million_model_names(self):
        # --unknown_model=generic with 1,000,000 distinct names: labels stay bounded, every record counts.
        server = self.start("--unknown_model=generic")
        pid = server.proc.pid
        stub = ledger_stub(server)
        with PeakRss(pid) as rss:
            for b in range(100):
                records = [record_pb2.Record(model=f"m{b}-{i}", tier=record_pb2.TIER_HOST, prompt_tokens=100,
                                             logical_match_tokens=50) for i in range(10_000)]
                reply = stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=records), timeout=120)
                self.assertEqual(reply.accepted, 10_000)
            start = time.monotonic()
            text = server.scrape()
            scrape_seconds = time.monotonic() - start
        samples = parse_exposition(text)
        total = sum(v for (name, _), v in samples.items() if name == "kvledger_requests_total")
        models = {dict(labels).get("model") for (name, labels), _ in samples.items() if name == "kvledger_requests_total"}
        self.assertEqual(total, 1_000_000)
        self.assertIn("other", models)
        self.assertLessEqual(len(models), 64 + 14 + 1)
        measured("million_model_names", rss, series=len(samples), model_labels=len(models),
                 scrape_ms=f"{scrape_seconds * 1000:.0f}", exposition_kib=f"{len(text) / 1024:.0f}")
        self.assertLess(rss.peak, 256 * MiB)

    def test_a_model_named_other_cannot_claim_the_folded_label(self):
        # A client reporting model="other" while slots are free is folded into the reserved label, so
        # no two series ever share a name and label set, and /api/v1/totals lists "other" once.
        server = self.start("--unknown_model=generic", "--max_models=2")
        stub = ledger_stub(server)
        batches = [("finetune-a", 1), ("other", 2002), ("finetune-b", 3), ("finetune-c", 5)]  # c: past the cap
        for model, count in batches:
            records = [record_pb2.Record(model=model, tier=record_pb2.TIER_DEVICE, prompt_tokens=100,
                                         logical_match_tokens=50) for _ in range(count)]
            self.assertEqual(stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=records), timeout=60).accepted, count)
        text = server.scrape()
        series = [line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
        self.assertEqual(len(series), len(set(series)), "two series share a name and label set")
        samples = parse_exposition(text)
        self.assertEqual(samples[("kvledger_requests_total", frozenset({("model", "other"), ("tier", "device")}))],
                         2002 + 5)
        self.assertEqual(sum(v for (name, _), v in samples.items() if name == "kvledger_requests_total"), 2011)
        with urllib.request.urlopen(f"http://{server.metrics_address}/api/v1/totals", timeout=10) as r:
            totals = json.loads(r.read())
        models = [m["model"] for m in totals["models"]]
        self.assertEqual(models.count("other"), 1, models)

    def test_dedup_window_is_bounded_in_bytes(self):
        # Batches of one good record and 99 unknown-model records each leave an outcome of 99 long
        # rejection messages in the batch-id window: with the defaults the window holds at most
        # --batch_dedup_bytes (64 MiB), forgets the oldest for room (counted by cause), and the server
        # stays under 128 MiB. Empty batches and batches whose every record was rejected are never
        # remembered and evict nothing, so 1,500 of them cannot flush it (once they did in 2.77 s); a
        # retry of a remembered batch still counts nothing.
        server = self.start()
        stub = ledger_stub(server)
        bad = [record_pb2.Record(model=f"no-such-model-{i}", prompt_tokens=100) for i in range(99)]
        records = [good_record()] + bad
        with PeakRss(server.proc.pid) as rss:
            for b in range(3000):
                reply = stub.RecordBatch(ledger_pb2.RecordBatchRequest(batch_id=f"b{b}", records=records), timeout=60)
                self.assertEqual((reply.accepted, reply.rejected), (1, 99))
        samples = parse_exposition(server.scrape())
        window = samples[("kvledger_batch_dedup_bytes", frozenset())]
        entries = samples[("kvledger_batch_dedup_entries", frozenset())]
        by_bytes = samples[("kvledger_batch_dedup_evictions_total", frozenset({("cause", "bytes")}))]
        self.assertLessEqual(window, 64 * MiB)
        self.assertGreater(window, 48 * MiB)
        self.assertGreater(by_bytes, 0)
        self.assertEqual(entries + by_bytes, 3000)
        for b in range(1000):  # empty batches: nothing to count twice, so nothing remembered
            stub.RecordBatch(ledger_pb2.RecordBatchRequest(batch_id=f"empty{b}"), timeout=60)
        for b in range(1500):  # every record rejected: nothing counted, nothing remembered, nothing evicted
            reply = stub.RecordBatch(ledger_pb2.RecordBatchRequest(batch_id=f"rejected{b}", records=bad), timeout=60)
            self.assertEqual(reply.rejected, 99)
        samples = parse_exposition(server.scrape())
        self.assertEqual(samples[("kvledger_batch_dedup_entries", frozenset())], entries)
        self.assertEqual(samples[("kvledger_batch_dedup_evictions_total", frozenset({("cause", "bytes")}))], by_bytes)
        retry = stub.RecordBatch(ledger_pb2.RecordBatchRequest(batch_id="b2999", records=records), timeout=60)
        self.assertEqual((retry.accepted, retry.rejected, len(retry.rejections)), (1, 99, 99))
        samples = parse_exposition(server.scrape())
        self.assertEqual(samples[("kvledger_deduplicated_batches_total", frozenset())], 1)
        self.assertEqual(sum(v for (n, _), v in samples.items() if n == "kvledger_requests_total"), 3000)
        self.assertEqual(sum(v for (n, _), v in samples.items() if n == "kvledger_records_rejected_total"),
                         3000 * 99 + 1500 * 99)
        measured("dedup_window", rss, window_mib=f"{window / MiB:.1f}", entries=int(entries),
                 evicted_for_bytes=int(by_bytes))
        self.assertLess(rss.peak, 128 * MiB)

    def raw_call(self, server, method, *, stream=False):
        """A call of /kvledger.v1.Ledger/METHOD that sends bytes as they are."""
        channel = grpc.insecure_channel(server.grpc_address, options=[("grpc.max_send_message_length", 8 * MiB)])
        self.addCleanup(channel.close)
        make = channel.stream_unary if stream else channel.unary_unary
        return make(f"/kvledger.v1.Ledger/{method}", request_serializer=lambda raw: raw,
                    response_deserializer=lambda raw: raw)

    def test_a_message_costs_little_more_than_its_size(self):
        # 16 attackers at once, each sending messages that are a few bytes on the wire and hundreds in
        # memory once parsed: 1.5 M empty records in a RecordBatch (3 MB) and in a stream, 650,000
        # candidates in an Advise, a Record of 1.3 M unknown fields, one of 1 M state boundaries and one
        # of a 4 MB group.
        # Each is counted in its wire bytes and refused before it is materialised; the server stays
        # under 256 MiB, and every other call still counts.
        server = self.start()
        attacks = [
            ("RecordBatch", b"\x0a\x00" * 1_500_000, "1500000 records in one batch: must be at most 10000"),
            ("StreamRecords", b"\x0a\x00" * 1_500_000, "1500000 records in one batch: must be at most 10000"),
            ("Advise", b"\x1a\x04\x08\x02\x10\x01" * 650_000, "candidates (650000 of them): at most 16"),
            ("Record", b"\xc0\x3e\x01" * 1_300_000, "nested messages and unknown fields: must be at most 24"),
            ("Record", b"\x5a\x02\x08\x01" * 1_000_000, "nested messages and unknown fields: must be at most 24"),
            # A 4 MB group of 2 M varints: once +91.6 MiB each to parse, and answered OK.
            ("Record", b"\x9b\x01" + b"\x08\x01" * 2_000_000 + b"\x9c\x01", "carries a group (wire type 3 or 4)"),
        ]
        calls = {(m, stream): self.raw_call(server, m, stream=stream)
                 for m, stream in {(m, m == "StreamRecords") for m, _, _ in attacks}}
        errors = []

        def attack(method, body, expected):
            stream = method == "StreamRecords"
            for _ in range(3):
                try:
                    call = calls[(method, stream)]
                    call(iter([body]) if stream else body, timeout=60)
                    errors.append(f"{method}: accepted")
                except grpc.RpcError as e:
                    if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "bulk lane" in e.details():
                        continue  # the address's quarter of the bulk lane is full: refused before parsing
                    if e.code() != grpc.StatusCode.INVALID_ARGUMENT or expected not in e.details():
                        errors.append(f"{method}: {e.code()} {e.details()[:200]}")

        def good_batch(stub):
            """The 10,000 good records, retried while the bulk lane refuses them, as a Reporter does."""
            for _ in range(600):
                try:
                    return stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=[good_record()] * 10_000), timeout=60)
                except grpc.RpcError as e:
                    if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                        raise
                    time.sleep(0.1)
            raise AssertionError("the bulk lane refused the good batch for a minute")

        with PeakRss(server.proc.pid) as rss:
            threads = [threading.Thread(target=attack, args=attacks[i % len(attacks)]) for i in range(16)]
            for t in threads:
                t.start()
            good = good_batch(ledger_stub(server))
            for t in threads:
                t.join()
        self.assertEqual(errors, [])
        self.assertEqual(good.accepted, 10_000)
        samples = parse_exposition(server.scrape())
        self.assertEqual(sum(v for (n, _), v in samples.items() if n == "kvledger_requests_total"), 10_000)
        oversized = samples[("kvledger_oversized_batches_total", frozenset())]
        self.assertGreater(oversized, 0)
        measured("16_attackers_materialising_messages", rss, messages=16 * 3)
        self.assertLess(rss.peak, 256 * MiB)

    def test_slow_http_clients_do_not_starve_metrics(self):
        # 128 connections from 127.0.0.1 that send their request heads a byte a second and reconnect
        # when cut or refused (past 64 open ones), plus 8 that ask for /metrics 50 times and never read
        # the answers: clients on other addresses (Prometheus) are served every time, promptly.
        server = self.start("--unknown_model=generic")
        stub = ledger_stub(server)
        records = [record_pb2.Record(model=f"m{i}", tier=record_pb2.TIER_HOST, prompt_tokens=100,
                                     logical_match_tokens=50) for i in range(64)]
        stub.RecordBatch(ledger_pb2.RecordBatchRequest(records=records), timeout=30)  # a larger exposition
        host, port = server.metrics_address.rsplit(":", 1)
        stop = threading.Event()
        refused = []

        def slow_head():
            while not stop.is_set():
                try:
                    with socket.create_connection((host, int(port)), timeout=10) as s:
                        for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
                            if stop.wait(1):
                                return
                            s.sendall(bytes([byte]))
                except OSError as e:  # cut by the server: reconnect
                    refused.append(e)

        def never_reads():
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect((host, int(port)))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 50)
            stop.wait(30)
            s.close()

        threads = [threading.Thread(target=slow_head) for _ in range(128)]
        threads += [threading.Thread(target=never_reads) for _ in range(8)]
        for t in threads:
            t.start()
        times = []
        try:
            end = time.monotonic() + 14  # past the 5 s head deadline and the 10 s write deadline
            while time.monotonic() < end:
                for source in ("127.0.0.2", "127.0.0.3"):
                    start = time.monotonic()
                    with socket.create_connection((host, int(port)), timeout=5, source_address=(source, 0)) as s:
                        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        reply = b""
                        while chunk := s.recv(65536):
                            reply += chunk
                    times.append(time.monotonic() - start)
                    self.assertTrue(reply.startswith(b"HTTP/1.1 200 OK"), (source, reply[:200]))
                    self.assertIn(b"kvledger_requests_total", reply)
                time.sleep(0.5)
        finally:
            stop.set()
            for t in threads:
                t.join()
        times.sort()
        print(f"MEASURED slow_http_clients: scrapes={len(times)} median_s={times[len(times) // 2]:.3f} "
              f"max_s={times[-1]:.3f} attacker_reconnects={len(refused)}", flush=True)
        self.assertLess(times[-1], 5)

    def test_one_address_cannot_hold_every_http_connection(self):
        # Past 64 open connections from one address, new ones get 503 and are closed; another address
        # is still served.
        server = self.start()
        host, port = server.metrics_address.rsplit(":", 1)
        held = [socket.create_connection((host, int(port)), timeout=10) for _ in range(64)]
        try:
            with socket.create_connection((host, int(port)), timeout=10) as extra:
                reply = extra.recv(1024)
            self.assertTrue(reply.startswith(b"HTTP/1.1 503"), reply)
            with urllib.request.urlopen(f"http://{server.metrics_address}/metrics", timeout=10) as r:
                self.fail(f"served beyond the limit: {r.status}")
        except urllib.error.URLError:
            pass
        except (ConnectionError, http.client.HTTPException):
            pass
        with socket.create_connection((host, int(port)), timeout=10, source_address=("127.0.0.2", 0)) as other:
            other.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            self.assertTrue(other.recv(64).startswith(b"HTTP/1.1 200 OK"))
        for s in held:
            s.close()
        poll("a connection from 127.0.0.1 again", lambda: server.scrape())

    def test_invalid_utf8_does_not_flood_the_log(self):
        # 2,000 Records whose model string is not UTF-8: each is refused, and the log stays short.
        server = self.start()
        body = good_record(model="llama").SerializeToString().replace(b"llama", b"ll\xffma")
        channel = grpc.insecure_channel(server.grpc_address)
        call = channel.unary_unary("/kvledger.v1.Ledger/Record", request_serializer=lambda raw: raw,
                                   response_deserializer=ledger_pb2.RecordBatchResponse.FromString)
        for _ in range(2000):
            with self.assertRaises(grpc.RpcError):
                call(body, timeout=30)
        channel.close()
        self.assert_still_serves(server)
        log = server.read_log()
        self.assertLessEqual(log.count("invalid UTF-8"), 5, log[-2000:])
        self.assertIn("protobuf: further lines this minute are left out and counted", log)
        print(f"MEASURED invalid_utf8: messages=2000 log_bytes={len(log)}", flush=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
