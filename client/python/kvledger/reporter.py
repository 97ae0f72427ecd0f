"""kvledger.Reporter: reports records from a serving loop without ever slowing it down.

Same semantics as the C++ kvledger::Reporter (client/reporter.h):
- report() never blocks on the network: it appends to a bounded in-memory queue under a lock held
  only for the append, and returns False when the record was dropped (queue full: the NEW record
  is dropped; or the reporter is closed). Every drop is counted.
- One daemon thread sends the queue in RecordBatch calls of at most max_batch_size records (and
  max_batch_bytes of them, a record past it alone), when a
  batch is full, when flush_interval_seconds has passed, or on flush(). Each batch carries a
  random batch_id that its retries reuse, so the replica that applied a batch whose reply was lost
  does not count it twice.
- A record whose encoding cannot fit in one message (max_message_bytes, by default the server's
  default --max_receive_message_bytes of 4 MiB) is refused at report(): counted as rejected with the
  reason "record_too_large" (rejection_reasons() gives the message), never queued. A batch a server refuses
  as larger than its own limit is split in two and each half sent; a record alone refused so is
  rejected the same way. Neither is ever retried whole.
- UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED and CANCELLED are retried with capped, jittered
  exponential backoff while the reporter is open, to the same replica while it is reachable
  (kvledger/replicas.py: one channel per replica of the target); any other error drops the batch
  (counted). New batches rotate over the replicas (load_balancing_policy "round_robin"), stay on
  the first ("pick_first"), or, with affinity_key (say the engine's cache_id), go to the replica the
  key picks by rendezvous hashing, as the C++ Reporter's does: every record of one cache then
  reaches one replica, which the capacity curves need.
- Every record is accounted once: reported = sent + rejected + dropped + queued.
- close() (also at interpreter exit, and on leaving a `with` block) sends what is queued until its
  timeout, then drops the rest (counted).
- Safe across fork(): a child process gets an empty queue, zeroed counters and its own channel and
  thread, started on its first report(); the parent's queue stays with the parent.
- Engine statistics (report_transfer, report_unrecorded) are summed per key in memory (at most
  max_engine_stats_keys keys; past that, new keys are dropped and counted) and sent by the same
  thread with RecordEngineStats after each round of records; a transient failure keeps them for
  the next round. stats() counts their entries as engine_stats_sent, _rejected and _dropped.
"""
import atexit
import collections
import os
import random
import threading
import time
import uuid
import weakref

import grpc

from kvledger.records import make_record, tier_value
from kvledger.replicas import Replicas
from kvledger.v1 import ledger_pb2, ledger_pb2_grpc

_UNRECORDED_REASONS = {"aborted": 1, "failed": 2}
# The request metadata key of a load generator's call (lib/wire/call_metadata.h, kSyntheticMetadata).
SYNTHETIC_METADATA = "kvledger-synthetic"
# The trailer of a call a shutting-down server refused before applying any of it
# (lib/wire/call_metadata.h, kDrainingMetadata).
DRAINING_METADATA = "kvledger-draining"
# CANCELLED is what a call meets when its replica's gRPC server shuts down under it (the server
# applies nothing once it is draining); like a cut connection, it is retried on the same replica
# while that one is reachable, which deduplicates it by batch id.
_TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED,
              grpc.StatusCode.CANCELLED)
TOO_LARGE_REASON = "record_too_large"
# A batch's bytes beyond its records' own: its batch_id and each record's tag and length.
_BATCH_OVERHEAD_BYTES = 64


def _too_large(error):
    """Whether a failed call was refused for its size (gRPC's "larger than max" on either side)."""
    return error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in (error.details() or "")


def _draining(error):
    """Whether a failed call says its server is leaving (nothing of it applied)."""
    trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    return any(key == DRAINING_METADATA and value == "1" for key, value in (trailers or ()))


def channel_options_with(load_balancing_policy, channel_options):
    """gRPC channel options: the load-balancing policy ("round_robin" spreads over every address of
    a name, "pick_first" pins one), quick reconnects, then the caller's `channel_options`, which win
    over these (gRPC takes the first value of a repeated key, so they are merged, not appended)."""
    options = {"grpc.lb_policy_name": load_balancing_policy, "grpc.initial_reconnect_backoff_ms": 200,
               "grpc.max_reconnect_backoff_ms": 2000}
    options.update(dict(channel_options or []))
    return list(options.items())


class Reporter:
    def __init__(self, target="127.0.0.1:50051", *, max_queue_size=2048, max_batch_size=512,
                 flush_interval_seconds=1.0, rpc_timeout_seconds=5.0, initial_backoff_seconds=0.05,
                 max_backoff_seconds=5.0, shutdown_timeout_seconds=5.0, credentials=None, channel_options=None,
                 max_engine_stats_keys=1024, load_balancing_policy="round_robin", retry_same_replica_seconds=10.0,
                 synthetic=False, max_batch_bytes=1 << 20, affinity_key=None, max_message_bytes=4 << 20):
        self.target = target
        self.max_queue_size = max_queue_size
        self.max_batch_size = max_batch_size
        self.max_batch_bytes = max_batch_bytes
        self.max_message_bytes = max_message_bytes
        self.flush_interval_seconds = flush_interval_seconds
        self.rpc_timeout_seconds = rpc_timeout_seconds
        self.initial_backoff_seconds = initial_backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.shutdown_timeout_seconds = shutdown_timeout_seconds
        self.max_engine_stats_keys = max_engine_stats_keys
        self._credentials = credentials
        # A restarted server is found again within a second or two (gRPC's default reconnect backoff
        # grows to 120 s).
        self._channel_options = channel_options_with(load_balancing_policy, channel_options)
        self._load_balancing_policy = dict(self._channel_options)["grpc.lb_policy_name"]
        self._retry_same_replica_seconds = retry_same_replica_seconds
        self._affinity_key = affinity_key
        # synthetic=True marks every call as a load generator's: the server answers as usual but counts
        # the records only in kvledger_synthetic_records_total (for tests and demos).
        self._metadata = ((SYNTHETIC_METADATA, "1"),) if synthetic else None
        self._reset()
        me = weakref.ref(self)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=lambda: me() is not None and me()._reset())
        atexit.register(lambda: me() is not None and me().close(me().shutdown_timeout_seconds))

    def _reset(self):
        """Fresh state: at construction, and in a forked child (whose copy of the parent's lock,
        thread and channel must not be used)."""
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)       # the sender: work, flush, close
        self._answered_cv = threading.Condition(self._lock)  # flush() waiters
        self._queue = collections.deque()
        self._enqueued = 0     # positions handed out
        self._answered = 0     # positions answered (sent, rejected or dropped)
        self._rejections = {}  # reason -> the server's message of the first record rejected for it
        self._engine_retry = None  # (request, entries) of engine statistics to resend as they were
        self._counts = dict.fromkeys(("reported", "sent", "rejected", "dropped", "retried", "engine_stats_sent",
                                      "engine_stats_rejected", "engine_stats_dropped"), 0)
        self._transfers = {}    # (model, tier) -> [bytes, seconds, transfers], not yet sent
        self._unrecorded = {}   # (model, reason) -> [requests, logical_match_tokens], not yet sent
        self._engine_outstanding = 0  # engine-statistics keys queued or in flight
        self._flush_requested = False
        self._closing = False
        self._stop_deadline = None
        self._thread = None
        self._replicas = None  # made by the sender thread
        self._rng = random.Random()

    # -- producer side ------------------------------------------------------------------------
    def report(self, record=None, **fields):
        """Queues a kvledger.v1.Record (or one built from proto field names); False when dropped."""
        if record is None:
            record = make_record(**fields)
        size = record.ByteSize()
        with self._lock:
            self._counts["reported"] += 1
            if size + _BATCH_OVERHEAD_BYTES > self.max_message_bytes:
                self._counts["rejected"] += 1
                self._rejections.setdefault(TOO_LARGE_REASON, (
                    f"record: {size} bytes encoded: must fit in one message of at most {self.max_message_bytes} "
                    "bytes (max_message_bytes, the server's --max_receive_message_bytes)"))
                return False
            if self._closing or len(self._queue) >= self.max_queue_size:
                self._counts["dropped"] += 1
                return False
            self._queue.append(record)
            self._enqueued += 1
            self._start_locked()
            if len(self._queue) == self.max_batch_size:
                self._wake.notify()
        return True

    def report_transfer(self, model, tier, bytes_, seconds, transfers=1):
        """Adds an aggregate KV transfer observation: `bytes_` moved from `tier` ("host", ...) into the
        engine's memory in `seconds`, over `transfers` operations, no request attached. It feeds the
        server's live reload bandwidth, never a per-request figure. Never blocks; False when dropped."""
        return self._add_engine_stat(self._transfers, (model, tier), (int(bytes_), float(seconds), int(transfers)))

    def report_unrecorded(self, model, reason, requests=1, logical_match_tokens=0):
        """Counts finished requests that did not become records: `reason` "aborted" or "failed"
        (kvledger.adapters.SkippedRequest.reason). Never blocks; False when dropped."""
        return self._add_engine_stat(self._unrecorded, (model, reason), (int(requests), int(logical_match_tokens)))

    def _add_engine_stat(self, table, key, values):
        with self._lock:
            if self._closing or (key not in table and len(self._transfers) + len(self._unrecorded)
                                 >= self.max_engine_stats_keys):
                self._counts["engine_stats_dropped"] += 1
                return False
            if key in table:
                table[key] = [a + b for a, b in zip(table[key], values)]
            else:
                table[key] = list(values)
                self._engine_outstanding += 1
            self._start_locked()
        return True

    def _start_locked(self):
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kvledger-reporter", daemon=True)
            self._thread.start()

    def flush(self, timeout_seconds=None):
        """Waits until everything reported before the call is answered (records and engine
        statistics); False on timeout."""
        with self._lock:
            target = self._enqueued
            self._flush_requested = True
            self._wake.notify()
            return self._answered_cv.wait_for(lambda: self._answered >= target and self._engine_outstanding == 0,
                                              timeout_seconds)

    def close(self, timeout_seconds=None):
        """Sends what is queued for up to timeout_seconds (default shutdown_timeout_seconds), drops the
        rest, stops the sender. Idempotent; returns stats()."""
        timeout = self.shutdown_timeout_seconds if timeout_seconds is None else timeout_seconds
        with self._lock:
            if not self._closing:
                self._closing = True
                self._stop_deadline = time.monotonic() + timeout
                self._wake.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, self._stop_deadline - time.monotonic()) + self.rpc_timeout_seconds + 1)
        with self._lock:  # whatever is left (a sender that never started, or one past its deadline)
            self._answer_locked(len(self._queue))
            self._queue.clear()
            self._counts["engine_stats_dropped"] += len(self._transfers) + len(self._unrecorded)
            if self._engine_retry is not None:
                self._counts["engine_stats_dropped"] += self._engine_retry[1]
                self._engine_retry = None
            self._transfers.clear()
            self._unrecorded.clear()
            self._engine_outstanding = 0
            self._answered_cv.notify_all()
        return self.stats()

    def stats(self):
        """{'reported', 'queued', 'sent', 'rejected', 'dropped', 'retried', 'engine_stats_sent',
        'engine_stats_rejected', 'engine_stats_dropped'}."""
        with self._lock:
            s = dict(self._counts)
        s["queued"] = max(0, s["reported"] - s["sent"] - s["rejected"] - s["dropped"])
        return s

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- sender side --------------------------------------------------------------------------
    def rejection_reasons(self):
        """{reason: the server's message (the Reporter's own for record_too_large) for the first record
        rejected with it}, e.g. {"unknown_model": 'model = "my-model": no profile of that name; ...'}."""
        with self._lock:
            return dict(self._rejections)

    def _answer_locked(self, n, sent=0, rejected=0):
        """Accounts n queue positions as answered: sent, rejected, the rest dropped."""
        self._counts["sent"] += sent
        self._counts["rejected"] += rejected
        self._counts["dropped"] += n - sent - rejected
        self._answered += n
        self._answered_cv.notify_all()

    def _run(self):
        if self._replicas is None:
            self._replicas = Replicas(self.target, ledger_pb2_grpc.LedgerStub, self._credentials, self._channel_options,
                                      self._load_balancing_policy, self._retry_same_replica_seconds,
                                      self._affinity_key)
        while True:
            with self._lock:
                self._wake.wait_for(lambda: self._closing or self._flush_requested
                                    or len(self._queue) >= self.max_batch_size, self.flush_interval_seconds)
                self._flush_requested = False
                closing = self._closing
            while True:
                with self._lock:
                    batch, size = [], 0
                    while self._queue and len(batch) < self.max_batch_size:
                        size += self._queue[0].ByteSize()
                        if batch and size > self.max_batch_bytes:
                            break  # the next batch's first
                        batch.append(self._queue.popleft())
                if not batch:
                    break
                self._send(batch)
            self._send_engine_stats()
            if closing:
                self._replicas.close()
                return

    def _send(self, batch):
        request = ledger_pb2.RecordBatchRequest(records=batch, batch_id=uuid.uuid4().hex)
        backoff = self.initial_backoff_seconds
        while True:
            with self._lock:
                deadline = self._stop_deadline
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                with self._lock:
                    self._answer_locked(len(batch))
                return
            timeout = self.rpc_timeout_seconds if deadline is None else min(self.rpc_timeout_seconds, deadline - now)
            try:
                response = self._replicas.pick(request.batch_id).RecordBatch(request, timeout=timeout,
                                                                             metadata=self._metadata)
                self._replicas.answered(grpc.StatusCode.OK)
            except grpc.RpcError as e:
                self._replicas.answered(e.code(), draining=_draining(e))
                if _too_large(e):
                    self._split(batch, e)
                    return
                if e.code() not in _TRANSIENT:
                    with self._lock:
                        self._answer_locked(len(batch))
                    return
                with self._lock:
                    self._counts["retried"] += 1
                    wait_until = time.monotonic() + backoff * self._rng.uniform(0.5, 1.0)
                    while True:
                        limit = wait_until if self._stop_deadline is None else min(wait_until, self._stop_deadline)
                        remaining = limit - time.monotonic()
                        if remaining <= 0:
                            break
                        self._wake.wait(remaining)
                backoff = min(backoff * 2, self.max_backoff_seconds)
                continue
            with self._lock:
                accepted = min(response.accepted, len(batch))
                self._answer_locked(len(batch), accepted, min(response.rejected, len(batch) - accepted))
                for rejection in response.rejections:
                    self._rejections.setdefault(rejection.reason, rejection.message)
            return

    def _split(self, batch, error):
        """A batch refused for its size (nothing of it applied): each half sent on its own, or the
        record alone rejected."""
        if len(batch) > 1:
            self._send(batch[:len(batch) // 2])
            self._send(batch[len(batch) // 2:])
            return
        with self._lock:
            self._answer_locked(1, rejected=1)
            self._rejections.setdefault(TOO_LARGE_REASON, f"record: {batch[0].ByteSize()} bytes: {error.details()}")

    def _send_engine_stats(self):
        """Sends the summed engine statistics once; a transient failure puts them back for the next
        round (unless closing), any other outcome answers them."""
        with self._lock:
            if self._engine_retry is not None:  # the same request, batch id included: idempotent
                request, entries = self._engine_retry
            else:
                transfers, unrecorded = self._transfers, self._unrecorded
                self._transfers, self._unrecorded = {}, {}
                if not transfers and not unrecorded:
                    return
                request = ledger_pb2.EngineStatsRequest(batch_id=uuid.uuid4().hex)
                for (model, tier), (bytes_, seconds, count) in transfers.items():
                    request.transfers.add(model=model, tier=tier_value(tier), bytes=bytes_, seconds=seconds,
                                          transfers=count)
                for (model, reason), (requests, tokens) in unrecorded.items():
                    request.unrecorded.add(model=model, reason=_UNRECORDED_REASONS.get(reason, 0), requests=requests,
                                           logical_match_tokens=tokens)
                entries = len(transfers) + len(unrecorded)
        try:
            response = self._replicas.pick(request.batch_id).RecordEngineStats(request, timeout=self.rpc_timeout_seconds,
                                                                               metadata=self._metadata)
        except grpc.RpcError as e:
            with self._lock:
                if e.code() in _TRANSIENT and not self._closing:
                    self._engine_retry = (request, entries)  # resent as it is: counted once whatever happened
                    self._counts["retried"] += 1
                    return
                self._engine_retry = None
                self._counts["engine_stats_dropped"] += entries
                self._engine_outstanding = max(0, self._engine_outstanding - entries)
                self._answered_cv.notify_all()
            return
        with self._lock:
            self._engine_retry = None
            self._counts["engine_stats_sent"] += response.accepted
            self._counts["engine_stats_rejected"] += response.rejected
            self._engine_outstanding = max(0, self._engine_outstanding - entries)
            self._answered_cv.notify_all()
