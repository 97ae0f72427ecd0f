"""The engine adapters and the vLLM stat logger, driven with what vLLM, SGLang and OpenAI-compatible
servers really send (stand-ins under tests/client/standins/, each field commented with its upstream
source) into a real kvledger-server, asserting on its /metrics: a miss is counted as a miss, an abort
is not a record but is counted, a hit of mixed or unknown source is not labelled as one tier, a time
that may contain a reload is not used as a compute time, aggregate transfers reach the live reload
bandwidth, and importing kvledger changes nothing in the host process.

Usage: engine_adapters_test.py SERVER_BINARY REPO_ROOT
"""
import logging
import os
import subprocess
import sys
import tempfile
import types
import unittest

SERVER, ROOT = sys.argv[1], os.path.abspath(sys.argv[2])
PACKAGE = os.path.join(ROOT, "client", "python")
STANDINS = os.path.join(ROOT, "tests", "client", "standins")
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, PACKAGE)
sys.path.insert(0, STANDINS)
import harness  # noqa: E402
import kvledger  # noqa: E402
from engine_shapes import openai_response, sglang_meta_info, sglang_timed_meta_info  # noqa: E402
from kvledger import adapters  # noqa: E402
from kvledger.v1 import advice_pb2, ledger_pb2, ledger_pb2_grpc, record_pb2  # noqa: E402
from vllm.config import CacheConfig, KVTransferConfig, ModelConfig, VllmConfig  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402
from vllm.v1.engine import FinishReason  # noqa: E402
from vllm.v1.metrics import stats as vllm_stats  # noqa: E402
from vllm.v1.kv_cache_interface import KVCacheConfig  # noqa: E402
from vllm.v1.metrics.loggers import StatLoggerBase  # noqa: E402
from vllm.v1.metrics.stats import FinishedRequestStats, IterationStats, SchedulerStats  # noqa: E402
import grpc  # noqa: E402

MODEL = "llama-3.1-8b"


def finished(reason=FinishReason.STOP, *, prompt=4096, cached=2048, generated=32, prefill=0.2, e2e=1.0,
             decode=0.7, request_id=None):
    return FinishedRequestStats(reason, e2e_latency=e2e, num_prompt_tokens=prompt, num_generation_tokens=generated,
                                queued_time=0.05, prefill_time=prefill, inference_time=prefill + decode,
                                decode_time=decode, num_cached_tokens=cached, request_id=request_id)


def vllm_config(connector=False, served="meta-llama/Llama-3.1-8B-Instruct"):
    return VllmConfig(ModelConfig(served_model_name=served), CacheConfig(block_size=16),
                      KVTransferConfig() if connector else None)


class ServerTest(unittest.TestCase):
    """Each test owns a fresh server, so its counters are only what the test sent."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.server = harness.Server(SERVER, log_dir=self.tmp.name)
        self.addCleanup(self.server.stop)

    def samples(self):
        return harness.parse_exposition(self.server.scrape())

    def value(self, name, **labels):
        return self.samples().get((name, frozenset(labels.items())))

    def series(self, name):
        """{labels dict as sorted tuple: value} of one family."""
        return {tuple(sorted(labels)): v for (n, labels), v in self.samples().items() if n == name}

    def send(self, records):
        with grpc.insecure_channel(self.server.grpc_address) as channel:
            reply = ledger_pb2_grpc.LedgerStub(channel).RecordBatch(
                ledger_pb2.RecordBatchRequest(records=records), timeout=10)
        self.assertEqual((reply.accepted, reply.rejected), (len(records), 0), reply.rejections)

    def logger(self, connector=False, served="meta-llama/Llama-3.1-8B-Instruct"):
        os.environ["KVLEDGER_TARGET"] = self.server.grpc_address
        self.addCleanup(os.environ.pop, "KVLEDGER_TARGET", None)
        import kvledger.vllm as plugin  # noqa: PLC0415
        logger = plugin.KvledgerStatLogger(vllm_config(connector, served), engine_index=0)
        logger.reporter.flush_interval_seconds = 0.02
        self.addCleanup(logger.reporter.close, 1)
        self.assertIsInstance(logger, StatLoggerBase)
        return logger


class OpenAITest(ServerTest):
    # Proves (1): with cached_tokens_reported=True a response without prompt_tokens_details is a
    # miss, counted with its prompt tokens; without it, it is refused rather than claimed as a miss.
    def test_missing_details_is_a_miss_when_the_server_reports_cached_tokens(self):
        miss = openai_response(prompt_tokens=1200)  # vLLM/SGLang omit the details when nothing was cached
        hit = openai_response(prompt_tokens=1200, cached_tokens=1024)
        with self.assertRaises(adapters.SkippedRequest) as refused:
            adapters.from_openai(miss, model=MODEL)
        self.assertEqual(refused.exception.reason, "missing_field")
        records = [adapters.from_openai(miss, model=MODEL, cached_tokens_reported=True),
                   adapters.from_openai(hit, model=MODEL, cached_tokens_reported=True)]
        self.send(records)
        self.assertEqual(self.value("kvledger_requests_total", model=MODEL, tier="none"), 1)
        self.assertEqual(self.value("kvledger_prompt_tokens_total", model=MODEL, tier="none"), 1200)
        # A gateway cannot see where the hit came from: "unknown" unless it says so.
        self.assertEqual(self.value("kvledger_logical_match_tokens_total", model=MODEL, tier="unknown"), 1024)
        self.assertEqual(adapters.from_openai(hit, model=MODEL, tier="device").tier, record_pb2.TIER_DEVICE)
        # usage.completion_tokens is the output; the decode time is the gateway's own measurement.
        timed = adapters.from_openai(hit, model=MODEL, cached_tokens_reported=True, decode_seconds=0.4)
        self.assertEqual((timed.output_tokens, timed.decode_seconds), (5, 0.4))
        self.assertFalse(timed.HasField("queue_seconds"))

    # Proves: a gateway with the prompt's token ids adds the capacity curves' ids to the same record:
    # one id per full block (vLLM caches full blocks only), and the record counts in the curves too.
    def test_prompt_token_ids_give_the_curves_ids(self):
        hit = openai_response(prompt_tokens=1200, cached_tokens=1024)
        tokens = list(range(1200))
        record = adapters.from_openai(hit, model=MODEL, prompt_token_ids=tokens, block_tokens=16, cache_id="engine-0")
        self.assertEqual(list(record.prefix_block_ids), kvledger.blocks.prefix_block_ids(tokens, 16)[:75])
        self.assertEqual((record.block_tokens, record.cache_id, record.logical_match_tokens), (16, "engine-0", 1024))
        self.send([record])
        self.assertEqual(self.value("kvledger_capacity_requests_total", model=MODEL), 1)
        self.assertEqual(self.value("kvledger_requests_total", model=MODEL, tier="unknown"), 1)
        with self.assertRaisesRegex(ValueError, "needs block_tokens"):
            adapters.from_openai(hit, model=MODEL, prompt_token_ids=tokens)

    # Proves: a gateway's prediction rides along with the engine's answer, and a stale one shows as
    # over-predicted tokens on /metrics.
    def test_prediction_from_a_gateway(self):
        stale = adapters.from_openai(openai_response(prompt_tokens=4096, cached_tokens=1024), model=MODEL,
                                     cached_tokens_reported=True, tier="host", predicted_match_tokens=3072)
        self.assertEqual(stale.predicted_match_tokens, 3072)
        self.send([stale])
        host = dict(model=MODEL, tier="host")
        self.assertEqual(self.value("kvledger_prediction_realised_tokens_total", **host), 1024)
        self.assertEqual(self.value("kvledger_prediction_over_tokens_total", **host), 2048)
        self.assertEqual(self.value("kvledger_prediction_under_tokens_total", **host), 0)
        self.assertEqual(self.value("kvledger_prediction_realised_ratio_bucket", le="0.4", **host), 1)  # 1/3


class VllmAdapterTest(unittest.TestCase):
    # Proves (5): vLLM's count is the block-aligned boundary it resumed from, never the whole
    # prompt: it is both the match and the recoverable boundary; a full or unaligned hit is refused
    # as inconsistent (vLLM never reports one), and no "recompute the last token" record is made.
    def test_block_aligned_boundary_never_the_whole_prompt(self):
        record = adapters.from_vllm(finished(cached=2048), model=MODEL, block_size=16)
        self.assertEqual((record.logical_match_tokens, record.recoverable_tokens), (2048, 2048))
        self.assertFalse(record.HasField("recompute_tokens"))
        for cached in (4096, 2047):
            with self.assertRaises(adapters.SkippedRequest) as refused:
                adapters.from_vllm(finished(prompt=4096, cached=cached), model=MODEL, block_size=16)
            self.assertEqual(refused.exception.reason, "inconsistent")

    # Proves (4): TTFT is e2e - decode (arrival -> first token), never queued + prefill; the prefill
    # time is a compute time only without a connector or for a miss.
    def test_times(self):
        plain = adapters.from_vllm(finished(e2e=1.0, decode=0.7, prefill=0.2), model=MODEL)
        self.assertAlmostEqual(plain.ttft_seconds, 0.3)
        self.assertEqual(plain.suffix_prefill_seconds, 0.2)
        # A device hit (no connector) reloads nothing: 0 s, so it enters the TTFT split and h.
        self.assertEqual((plain.tier, plain.HasField("reload_seconds"), plain.reload_seconds),
                         (record_pb2.TIER_DEVICE, True, 0.0))
        hit = adapters.from_vllm(finished(), model=MODEL, connector=True)
        self.assertFalse(hit.HasField("suffix_prefill_seconds"))
        self.assertFalse(hit.HasField("reload_seconds"))  # a connector's load is not reported per request
        miss = adapters.from_vllm(finished(cached=0), model=MODEL, connector=True)
        self.assertEqual((miss.tier, miss.suffix_prefill_seconds), (record_pb2.TIER_UNSPECIFIED, 0.2))
        older = finished(e2e=0.0)  # e2e not measured: no TTFT rather than a made-up one
        self.assertFalse(adapters.from_vllm(older, model=MODEL).HasField("ttft_seconds"))

    # Proves: the whole-request fields come from the same vLLM quantities (queued_time, num_generation_tokens,
    # decode_time), and the wait is left unset where a connector's asynchronous load may be inside it.
    def test_whole_request_fields(self):
        plain = adapters.from_vllm(finished(), model=MODEL)
        self.assertEqual((plain.queue_seconds, plain.output_tokens, plain.decode_seconds), (0.05, 32, 0.7))
        hit = adapters.from_vllm(finished(), model=MODEL, connector=True)
        self.assertFalse(hit.HasField("queue_seconds"))
        self.assertEqual((hit.output_tokens, hit.decode_seconds), (32, 0.7))
        miss = adapters.from_vllm(finished(cached=0), model=MODEL, connector=True)
        self.assertEqual(miss.queue_seconds, 0.05)
        one = adapters.from_vllm(finished(generated=1, decode=0.0), model=MODEL)
        self.assertEqual(one.output_tokens, 1)
        self.assertFalse(one.HasField("decode_seconds"))  # one token: no decode steps
        no_ttft = adapters.from_vllm(finished(e2e=0.0), model=MODEL)
        self.assertFalse(no_ttft.HasField("queue_seconds"))  # a wait needs the TTFT it is part of

    # Proves (2): no output token means no record, by reason; an abort after the first token ran
    # its prefill and is a record.
    def test_aborts_and_errors(self):
        for reason, expected in ((FinishReason.ABORT, "aborted"), (FinishReason.ERROR, "failed"),
                                 (FinishReason.STOP, "missing_field")):
            with self.assertRaises(adapters.SkippedRequest) as skipped:
                adapters.from_vllm(finished(reason, cached=0, generated=0, prefill=0.0), model=MODEL)
            self.assertEqual(skipped.exception.reason, expected)
        late = adapters.from_vllm(finished(FinishReason.ABORT, generated=3), model=MODEL)
        self.assertEqual(late.logical_match_tokens, 2048)
        self.assertEqual(adapters.vllm_finish_reason(2), "abort")
        self.assertEqual(adapters.vllm_finish_reason("FinishReason.ERROR"), "error")


class SglangTest(ServerTest):
    # Proves (3, 4): the tier follows cached_tokens_details (one tier, "mixed", storage by its
    # backend, "unknown" without details); the prefill forward is a compute time only for a miss
    # or a device-only hit; TTFT comes from the metrics timestamps.
    def test_tiers_and_times(self):
        t0 = 1_700_000_000.0
        metrics = {"request_received_ts": t0, "forward_entry_time": t0 + 0.1, "prefill_finished_time": t0 + 0.35,
                   "queue_time": 0.09}
        cases = [
            ({"device": 2048, "host": 0}, "device"),
            ({"device": 1024, "host": 1024}, "mixed"),
            ({"device": 0, "host": 0, "storage": 2048, "storage_backend": "HiCacheFile"}, "disk"),
            ({"device": 0, "host": 0, "storage": 2048, "storage_backend": "MooncakeStore"}, "remote"),
            ({"device": 0, "host": 0, "storage": 2048, "storage_backend": "MyCustomBackend"}, "unknown"),
            (None, "unknown"),
        ]
        records = []
        for i, (details, tier) in enumerate(cases):
            meta = sglang_meta_info(rid=f"s{i}", prompt_tokens=4096, cached_tokens=2048, details=details,
                                    metrics=metrics)
            record = adapters.from_sglang(meta, model=MODEL)
            self.assertEqual(record.tier, record_pb2.Tier.Value("TIER_" + tier.upper()), details)
            self.assertAlmostEqual(record.ttft_seconds, 0.35, places=6)
            self.assertEqual(record.HasField("suffix_prefill_seconds"), tier == "device", details)
            self.assertEqual(record.HasField("reload_seconds"), tier == "device", details)  # 0 s: in GPU memory
            records.append(record)
        self.assertAlmostEqual(records[0].suffix_prefill_seconds, 0.25, places=6)
        self.send(records)
        tiers = {dict(labels)["tier"] for labels in self.series("kvledger_requests_total")}
        self.assertEqual(tiers, {"device", "mixed", "disk", "remote", "unknown"})
        self.assertIsNone(self.value("kvledger_requests_total", model=MODEL, tier="host"))  # never claimed
        # Only the device-only hit measured a compute time.
        self.assertEqual(self.value("kvledger_suffix_prefill_seconds_count", model=MODEL, tier="device"), 1)
        self.assertIsNone(self.value("kvledger_suffix_prefill_seconds_count", model=MODEL, tier="mixed"))

    # Proves: SGLang's clocks map to the same quantity in both generations and for both request kinds:
    # TTFT from the scheduler's first token for every request (a non-streamed request's first receipt
    # is its 50th token: once TTFT 1.48 s for a truth of 0.5 s); decode only for a streamed request,
    # from the older finish timestamps or the newest decode_throughput; the wait only where no storage
    # prefetch can be inside it. On /metrics a miss's TTFT splits as the hand calculation says.
    def test_whole_request_fields(self):
        for generation in ("older", "newest"):
            for streamed in (True, False):
                meta, truth = sglang_timed_meta_info(generation=generation, streamed=streamed)
                r = adapters.from_sglang(meta, model=MODEL, streamed=streamed)
                case = (generation, streamed)
                self.assertAlmostEqual(r.ttft_seconds, truth["ttft"], places=6, msg=case)
                self.assertAlmostEqual(r.queue_seconds, truth["queue"], places=6, msg=case)
                self.assertEqual(r.output_tokens, 101, case)
                self.assertAlmostEqual(r.suffix_prefill_seconds, truth["prefill"], places=6, msg=case)
                self.assertEqual(r.HasField("decode_seconds"), streamed, case)
                if streamed:
                    self.assertAlmostEqual(r.decode_seconds, truth["decode"], places=6, msg=case)
        # Without the scheduler's timestamps, only a streamed request's first receipt is its first token.
        meta, truth = sglang_timed_meta_info(generation="older", streamed=False)
        del meta["prefill_finished_time"]
        self.assertFalse(adapters.from_sglang(meta, model=MODEL).HasField("ttft_seconds"))
        meta, truth = sglang_timed_meta_info(generation="older", streamed=True, ipc=0)
        del meta["prefill_finished_time"]
        self.assertAlmostEqual(adapters.from_sglang(meta, model=MODEL, streamed=True).ttft_seconds, truth["ttft"],
                               places=6)
        storage, _ = sglang_timed_meta_info(generation="newest", streamed=True, cached_tokens=2048,
                                            details={"device": 0, "host": 0, "storage": 2048,
                                                     "storage_backend": "HiCacheFile"})
        self.assertFalse(adapters.from_sglang(storage, model=MODEL).HasField("queue_seconds"))  # may hold a prefetch
        meta, _ = sglang_timed_meta_info(generation="newest", streamed=True, queue=0.09, prefill=0.25, decode=2.0)
        miss = adapters.from_sglang(meta, model=MODEL, streamed=True)
        self.send([miss])
        none = dict(model=MODEL, tier="none")
        # TTFT 0.35 = queue 0.09 + reload 0 (a miss) + suffix prefill 0.25 + rest 0.01 (arrival -> wait queue).
        for part, want in (("queue", 0.09), ("reload", 0.0), ("suffix_prefill", 0.25), ("rest", 0.01)):
            self.assertAlmostEqual(self.value("kvledger_ttft_part_seconds_total", part=part, **none), want, places=6)
        self.assertEqual(self.value("kvledger_decode_tokens_total", **none), 100)
        self.assertAlmostEqual(self.value("kvledger_decode_seconds_total", **none), 2.0, places=6)
        self.assertEqual(self.value("kvledger_time_per_output_token_seconds_bucket", le="0.02", **none), 1)  # 20 ms

    # Proves (2): an SGLang abort before the first token is not a record ("failed" for a 5xx).
    def test_abort(self):
        abort = {"type": "abort", "message": "client disconnected", "status_code": 499}
        with self.assertRaises(adapters.SkippedRequest) as skipped:
            adapters.from_sglang(sglang_meta_info(prompt_tokens=10, cached_tokens=0, completion_tokens=0,
                                                  finish=abort), model=MODEL)
        self.assertEqual(skipped.exception.reason, "aborted")
        failed = dict(abort, status_code=500)
        with self.assertRaises(adapters.SkippedRequest) as skipped:
            adapters.from_sglang(sglang_meta_info(prompt_tokens=10, cached_tokens=0, completion_tokens=0,
                                                  finish=failed), model=MODEL)
        self.assertEqual(skipped.exception.reason, "failed")


class VllmLoggerTest(ServerTest):
    # Proves (2, 3, 4, 5) end to end: the plugin vLLM loads turns finished requests into records
    # on a real server: misses count as misses, aborts and errors before the first token are
    # unrecorded (not fake misses), a plain deployment's hits are "device", and its prefill times
    # are compute times.
    def test_plain_deployment(self):
        logger = self.logger(connector=False)
        self.assertEqual(logger.model, MODEL)
        iteration = IterationStats()
        iteration.finished_requests = [
            finished(cached=2048, request_id="hit"),
            finished(cached=0, request_id="miss"),
            finished(FinishReason.ABORT, cached=0, generated=0, prefill=0.0),
            finished(FinishReason.ABORT, cached=0, generated=0, prefill=0.0),
            finished(FinishReason.ERROR, cached=0, generated=0, prefill=0.0),
        ]
        logger.record(scheduler_stats=SchedulerStats(), iteration_stats=iteration, mm_cache_stats=None, engine_idx=0)
        logger.log_engine_initialized()
        self.assertTrue(logger.reporter.flush(30))
        self.assertEqual(self.value("kvledger_requests_total", model=MODEL, tier="device"), 1)
        self.assertEqual(self.value("kvledger_requests_total", model=MODEL, tier="none"), 1)
        self.assertEqual(self.value("kvledger_prompt_tokens_total", model=MODEL, tier="none"), 4096)
        self.assertEqual(self.value("kvledger_unrecorded_requests_total", model=MODEL, reason="aborted"), 2)
        self.assertEqual(self.value("kvledger_unrecorded_requests_total", model=MODEL, reason="failed"), 1)
        self.assertEqual(self.value("kvledger_recoverable_model_disagreements_total", model=MODEL, tier="device"), 0)
        # Both prefill times are compute times (the compute model needs 8 records' weight to be ready).
        self.assertEqual(self.value("kvledger_suffix_prefill_seconds_count", model=MODEL, tier="device"), 1)
        self.assertEqual(self.value("kvledger_suffix_prefill_seconds_count", model=MODEL, tier="none"), 1)
        self.assertEqual(dict(logger.skipped), {"aborted": 2, "failed": 1})

    # Proves (3, 4, 7): with a KV connector a hit is "unknown", its prefill time (which may hold a
    # synchronous load) is not a compute time, and the connector's CPU_to_GPU transfers reach the
    # live host bandwidth that Advise answers from, and their own counters.
    def test_connector_deployment(self):
        logger = self.logger(connector=True)
        iteration = IterationStats()
        iteration.finished_requests = [finished(cached=2048), finished(cached=1024)]
        connector_stats = {"CPU_to_GPU": [{"op_size": 1_000_000_000, "op_time": 0.1},
                                          {"op_size": 3_000_000_000, "op_time": 0.3}],
                           "GPU_to_CPU": [{"op_size": 5_000_000_000, "op_time": 0.1}]}  # stores: not reloads
        logger.record(SchedulerStats(kv_connector_stats=connector_stats), iteration)
        self.assertTrue(logger.reporter.flush(30))
        self.assertEqual(self.value("kvledger_requests_total", model=MODEL, tier="unknown"), 2)
        self.assertIsNone(self.value("kvledger_requests_total", model=MODEL, tier="device"))
        self.assertIsNone(self.value("kvledger_suffix_prefill_seconds_count", model=MODEL, tier="unknown"))
        self.assertIsNone(self.value("kvledger_prefill_flops_per_second", model=MODEL))
        self.assertEqual(self.value("kvledger_engine_transfer_bytes_total", model=MODEL, tier="host"), 4e9)
        self.assertEqual(self.value("kvledger_engine_transfer_seconds_total", model=MODEL, tier="host"), 0.4)
        self.assertEqual(self.value("kvledger_engine_transfers_total", model=MODEL, tier="host"), 2)
        self.assertAlmostEqual(self.value("kvledger_reload_bandwidth_bytes_per_second", model=MODEL, tier="host"),
                               1e10, delta=1)
        with grpc.insecure_channel(self.server.grpc_address) as channel:
            advice = ledger_pb2_grpc.LedgerStub(channel).Advise(advice_pb2.AdviceRequest(
                model=MODEL, prompt_tokens=8192, candidates=[advice_pb2.AdviceCandidate(
                    tier=record_pb2.TIER_HOST, logical_match_tokens=4096)]), timeout=10)
        self.assertEqual(advice.candidates[0].bandwidth.basis, record_pb2.BASIS_LIVE)
        self.assertEqual(advice.candidates[0].bandwidth.samples, 1)  # one summed observation per round

    # Proves: beside kvledger's own KV connector (which loads nothing) the stat logger still reports hits
    # as "device", and the connector's curves-only record of the same request counts in the capacity
    # curves alone: the two integrations count each request once.
    def test_beside_kvledgers_own_connector(self):
        os.environ["KVLEDGER_TARGET"] = self.server.grpc_address
        self.addCleanup(os.environ.pop, "KVLEDGER_TARGET", None)
        import kvledger.vllm as plugin  # noqa: PLC0415
        from kvledger import vllm_connector  # noqa: PLC0415
        config = VllmConfig(ModelConfig(), CacheConfig(block_size=16), KVTransferConfig(kv_connector="KvledgerConnector"))
        self.assertFalse(plugin.loads_kv(config.kv_transfer_config))
        self.assertTrue(plugin.loads_kv(KVTransferConfig(kv_connector="MultiConnector")))
        logger = plugin.KvledgerStatLogger(config, engine_index=0)
        self.addCleanup(logger.reporter.close, 1)
        connector = vllm_connector.KvledgerConnector(config, KVConnectorRole.SCHEDULER, KVCacheConfig(num_blocks=1025))
        self.addCleanup(connector.shutdown)
        iteration = IterationStats()
        iteration.finished_requests = [finished(cached=2048, request_id="r1")]
        logger.record(SchedulerStats(), iteration)
        request = types.SimpleNamespace(request_id="r1", num_prompt_tokens=4096, num_cached_tokens=2048,
                                        num_output_tokens=16, block_hashes=[i.to_bytes(32, "big") for i in range(1, 258)])
        connector.request_finished(request, list(range(257)))
        self.assertTrue(logger.reporter.flush(30) and connector.reporter.flush(30))
        self.assertEqual(self.value("kvledger_requests_total", model=MODEL, tier="device"), 1)
        self.assertIsNone(self.value("kvledger_requests_total", model=MODEL, tier="unknown"))
        self.assertEqual(self.value("kvledger_capacity_requests_total", model=MODEL), 1)
        # The engine's 1,024 usable blocks (its null block apart) are the device the second tiers stand below.
        self.assertEqual(self.value("kvledger_capacity_tier_no_device_requests_total", model=MODEL), 0)
        self.assertEqual(vllm_connector.device_blocks_of(config, KVCacheConfig(num_blocks=1025)), 1024)
        self.assertIsNone(vllm_connector.device_blocks_of(config))  # not profiled yet: no device
        config.cache_config.num_gpu_blocks = 513  # older vLLM: no kv_cache_config, the profiled blocks
        self.assertEqual(vllm_connector.device_blocks_of(config), 512)

    # Proves (6): a vLLM whose FinishedRequestStats lacks num_cached_tokens is warned about at start,
    # and log() writes a summary with sends, drops and skips by reason at most once a minute.
    def test_warns_and_summarizes(self):
        real = vllm_stats.FinishedRequestStats
        vllm_stats.FinishedRequestStats = vllm_stats.OlderFinishedRequestStats
        try:
            with self.assertLogs("kvledger.vllm", logging.WARNING) as warned:
                logger = self.logger()
        finally:
            vllm_stats.FinishedRequestStats = real
        self.assertIn("num_cached_tokens", warned.output[0])
        iteration = IterationStats()
        iteration.finished_requests = [vllm_stats.OlderFinishedRequestStats(FinishReason.STOP, num_prompt_tokens=64,
                                                                            num_generation_tokens=4)]
        logger.record(None, iteration)
        with self.assertNoLogs("kvledger.vllm", logging.INFO):
            logger.log()  # less than a minute since start: nothing
        logger._last_summary -= 61
        with self.assertLogs("kvledger.vllm", logging.INFO) as summary:
            logger.log()
        self.assertIn("0 records sent, 0 dropped, 0 rejected; skipped: missing_field 1", summary.output[0])


class VllmModelNameTest(ServerTest):
    # Proves: a served model name outside the catalog ("my-chat-model", guessed as "my-model") is
    # not lost silently: the first rejection is logged once at WARNING with the server's reason and
    # the fix (KVLEDGER_MODEL); with KVLEDGER_MODEL set, the same engine's records count.
    def test_rejected_model_is_warned_once(self):
        logger = self.logger(served="my-chat-model")
        self.assertEqual(logger.model, "my-model")  # "-chat" is stripped like "-instruct"
        iteration = IterationStats()
        iteration.finished_requests = [finished(cached=0), finished(cached=0)]
        logger.record(SchedulerStats(), iteration)
        self.assertTrue(logger.reporter.flush(30))
        with self.assertLogs("kvledger.vllm", logging.WARNING) as warned:
            logger.log()
        self.assertEqual(len(warned.output), 1)
        self.assertIn("unknown_model", warned.output[0])
        self.assertIn('model = "my-model"', warned.output[0])
        self.assertIn("set KVLEDGER_MODEL", warned.output[0])
        logger.record(SchedulerStats(), iteration)
        self.assertTrue(logger.reporter.flush(30))
        with self.assertNoLogs("kvledger.vllm", logging.WARNING):
            logger.log()  # once per reason
        os.environ["KVLEDGER_MODEL"] = MODEL
        self.addCleanup(os.environ.pop, "KVLEDGER_MODEL", None)
        fixed = self.logger(served="my-chat-model")
        fixed.record(SchedulerStats(), iteration)
        self.assertTrue(fixed.reporter.flush(30))
        self.assertEqual(self.value("kvledger_requests_total", model=MODEL, tier="none"), 2)


class EngineStatsRpcTest(ServerTest):
    # Proves (7): RecordEngineStats rejects a bad entry by index, field, value and rule, and counts
    # the others; rejections are exported by reason.
    def test_bad_entries_are_named_and_the_rest_count(self):
        request = ledger_pb2.EngineStatsRequest(
            transfers=[ledger_pb2.TransferObservation(model=MODEL, tier=record_pb2.TIER_DISK, bytes=100, seconds=0.5),
                       ledger_pb2.TransferObservation(model=MODEL, tier=record_pb2.TIER_MIXED, bytes=1, seconds=1)],
            unrecorded=[ledger_pb2.UnrecordedRequests(model=MODEL, reason=ledger_pb2.UNRECORDED_REASON_FAILED,
                                                      requests=2, logical_match_tokens=512),
                        ledger_pb2.UnrecordedRequests(model=MODEL, requests=1)])
        with grpc.insecure_channel(self.server.grpc_address) as channel:
            reply = ledger_pb2_grpc.LedgerStub(channel).RecordEngineStats(request, timeout=10)
        self.assertEqual((reply.accepted, reply.rejected), (2, 2))
        self.assertEqual([(r.index, r.reason) for r in reply.rejections], [(1, "invalid_tier"), (1, "invalid_reason")])
        self.assertEqual(reply.rejections[0].message, "transfers[1].tier = 5: must be the tier the data came from: "
                                                      "device, host, disk or remote (1-4)")
        self.assertEqual(self.value("kvledger_engine_transfer_bytes_total", model=MODEL, tier="disk"), 100)
        self.assertEqual(self.value("kvledger_unrecorded_logical_match_tokens_total", model=MODEL, reason="failed"),
                         512)
        self.assertEqual(self.value("kvledger_engine_stats_rejected_total", reason="invalid_tier"), 1)
        self.assertEqual(self.value("kvledger_engine_stats_rejected_total", reason="invalid_reason"), 1)
        # With every new family and a mixed and an unknown hit present, the page is still well formed
        # for Prometheus, and no two series share a name and label set.
        self.send([kvledger.make_record(model=MODEL, tier=tier, prompt_tokens=100, logical_match_tokens=50)
                   for tier in ("mixed", "unknown")])
        text = self.server.scrape()
        check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                               timeout=60)
        self.assertEqual((check.returncode, check.stdout + check.stderr), (0, ""))
        lines = [line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
        self.assertEqual(len(lines), len(set(lines)))


class EngineStatsIdempotenceTest(ServerTest):
    # Proves: RecordEngineStats sent twice with one batch_id counts once (7 transfers, not 14) and the
    # retry gets the first outcome; without an id it counts twice; the Reporter's retry of a request
    # whose reply it never saw resends that request as it was, id included.
    def test_a_retry_counts_once(self):
        request = ledger_pb2.EngineStatsRequest(batch_id="stats-1", transfers=[ledger_pb2.TransferObservation(
            model=MODEL, tier=record_pb2.TIER_HOST, bytes=1000, seconds=0.5, transfers=7)])
        with grpc.insecure_channel(self.server.grpc_address) as channel:
            stub = ledger_pb2_grpc.LedgerStub(channel)
            first = stub.RecordEngineStats(request, timeout=10)
            retry = stub.RecordEngineStats(request, timeout=10)
            self.assertEqual((first.accepted, retry.accepted), (1, 1))
            self.assertEqual(self.value("kvledger_engine_transfers_total", model=MODEL, tier="host"), 7)
            self.assertEqual(self.value("kvledger_deduplicated_batches_total"), 1)
            request.batch_id = ""
            stub.RecordEngineStats(request, timeout=10)
            stub.RecordEngineStats(request, timeout=10)
        self.assertEqual(self.value("kvledger_engine_transfers_total", model=MODEL, tier="host"), 21)

        class LostReply:
            """A stub whose first RecordEngineStats applies the request and loses its reply."""
            def __init__(self, real):
                self.real, self.sent = real, []

            def RecordEngineStats(self, request, timeout, metadata=None):
                self.sent.append(request.SerializeToString())
                reply = self.real.RecordEngineStats(request, timeout=timeout)
                if len(self.sent) == 1:
                    raise FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED)
                return reply

        class OneReplica:
            """The reporter's replica set (kvledger/replicas.py) reduced to the stub above."""
            def __init__(self, stub):
                self.stub = stub

            def pick(self, key):
                return self.stub

            def close(self):
                pass

        with grpc.insecure_channel(self.server.grpc_address) as channel:
            reporter = kvledger.Reporter(self.server.grpc_address)
            self.addCleanup(reporter.close, 1)
            stub = LostReply(ledger_pb2_grpc.LedgerStub(channel))
            reporter._replicas = OneReplica(stub)
            reporter.report_transfer(MODEL, "disk", 500, 0.25, 3)
            reporter._send_engine_stats()  # the reply is lost: kept for a retry
            reporter.report_transfer(MODEL, "disk", 500, 0.25, 3)  # new figures wait for the next request
            reporter._send_engine_stats()
            reporter._send_engine_stats()
        self.assertEqual(stub.sent[0], stub.sent[1])  # the retry: the same bytes, the same batch id
        self.assertNotEqual(stub.sent[1], stub.sent[2])
        self.assertEqual(self.value("kvledger_engine_transfers_total", model=MODEL, tier="disk"), 6)


class FakeRpcError(grpc.RpcError):
    def __init__(self, code):
        super().__init__()
        self._code = code

    def code(self):
        return self._code


class ImportSideEffectsTest(unittest.TestCase):
    # Proves (8): importing kvledger, its adapters and the vLLM plugin module changes nothing in the
    # host process's environment (no gRPC variables), and does not import grpc for adapters alone;
    # enable_fork_support() is the explicit, scoped opt-in.
    def test_import_changes_no_environment(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")}
        env["PYTHONPATH"] = PACKAGE
        code = ("import os, sys, kvledger, kvledger.adapters; grpc_loaded = 'grpc' in sys.modules; "
                "import kvledger.vllm; "
                "print(grpc_loaded, sorted(k for k in os.environ if k.startswith('GRPC_')))")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "False []")
        code = "import os, kvledger; print(kvledger.enable_fork_support(), os.environ['GRPC_ENABLE_FORK_SUPPORT'])"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.stdout.strip(), "True true", out.stderr)
        code = "import grpc, kvledger; print(kvledger.enable_fork_support())"  # too late: says so
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.stdout.strip(), "False", out.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
