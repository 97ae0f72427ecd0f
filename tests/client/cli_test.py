"""The kvledger CLI's offline calculators as a user runs them: exact figures from the hand-worked
examples in docs/cost-model.md, both output formats, and usage errors.

Usage: cli_test.py CLI_BINARY
"""
import json
import subprocess
import sys
import tempfile
import unittest

CLI = sys.argv[1]


def run(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60)


def run_json(*args):
    result = run(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


class CalcTest(unittest.TestCase):
    # Example 1: a 50 % hit avoids 25 % of full attention; with beta 0.4 and h 0.1.
    def test_full_attention(self):
        self.assertEqual(run_json("calc", "--alpha", "0.5"),
                         {"attention_remaining": 0.75, "attention_speedup": 4 / 3})
        out = run_json("calc", "--alpha", "0.5", "--beta", "0.4", "--overhead", "0.1")
        self.assertEqual(out["block_remaining"], 0.4 * 0.75 + 0.6 * 0.5)
        self.assertAlmostEqual(out["block_speedup"], 1 / 0.6, places=15)
        self.assertAlmostEqual(out["e2e_speedup"], 1 / 0.7, places=15)

    # Example 3: window fraction 1/4 leaves 4/7 of the work at alpha 1/2, by fraction or by tokens.
    def test_sliding_window(self):
        self.assertAlmostEqual(run_json("calc", "--alpha", "0.5", "--attention", "swa",
                                        "--window-fraction", "0.25")["attention_remaining"], 4 / 7, places=15)
        self.assertAlmostEqual(run_json("calc", "--alpha", "0.5", "--attention", "swa", "--window", "1024",
                                        "--prompt-tokens", "4096")["attention_remaining"], 4 / 7, places=15)

    # Example 4: recurrent, C = 256, N = 1000: resumes at 256, replays 244.
    def test_recurrent(self):
        out = run_json("calc", "--alpha", "0.5", "--attention", "recurrent", "--checkpoint", "256",
                       "--prompt-tokens", "1000")
        self.assertEqual((out["aligned_tokens"], out["replay_tokens"]), (256, 244))
        self.assertEqual(out["attention_remaining"], 0.744)

    # A full hit has no finite speedup: JSON null, text "unbounded".
    def test_unbounded(self):
        self.assertIsNone(run_json("calc", "--alpha", "1")["attention_speedup"])
        self.assertIn("unbounded", run("calc", "--alpha", "1").stdout)

    def test_text_table(self):
        out = run("calc", "--alpha", "0.5").stdout
        self.assertIn("attention remaining    0.750000  (avoided 0.250000)", out)
        self.assertIn("attention speedup      1.3333x", out)


class KvBytesTest(unittest.TestCase):
    # Example 5: llama-3.1-8b shape, 1000 tokens, and how many fit 80 GB minus 16 GB of weights.
    def test_explicit_shape(self):
        out = run_json("kv-bytes", "--layers", "32", "--sequences", "1", "--tokens", "1000", "--kv-heads", "8",
                       "--head-dim", "128", "--bytes-per-element", "2", "--budget-bytes", "80000000000",
                       "--reserved-bytes", "16000000000")
        self.assertEqual(out, {"kv_bytes": 131072000, "bytes_per_token": 131072, "max_tokens": 488281})

    # Profiles: MLA latents, windows that stop growing, constant recurrent state.
    def test_model_profiles(self):
        self.assertEqual(run_json("kv-bytes", "--model", "deepseek-v3", "--tokens", "1000")["kv_bytes"],
                         61 * 576 * 2 * 1000)
        gemma = run_json("kv-bytes", "--model", "gemma-3-12b", "--tokens", "2048", "--sequences", "2")
        self.assertEqual(gemma["kv_bytes"], 2 * (40 * 8192 * 1024 + 8 * 8192 * 2048))
        kimi = run_json("kv-bytes", "--model", "kimi-linear-48b-a3b", "--tokens", "100")
        self.assertEqual(kimi["kv_bytes"], 7 * 576 * 2 * 100 + 20 * (524288 + 36864) * 2)
        self.assertEqual(kimi["state_bytes"], 20 * (524288 + 36864) * 2)


class ExplainTest(unittest.TestCase):
    # The hybrid example: alignment loss and per-group boundaries are visible.
    def test_hybrid_text(self):
        result = run("explain", "--model", "kimi-linear-48b-a3b", "--prompt-tokens", "2000",
                     "--logical-match-tokens", "1000", "--recompute-tokens", "300")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("recompute: alignment loss      232 tokens", result.stdout)
        self.assertIn("recompute: restore failures    68 tokens", result.stdout)
        self.assertRegex(result.stdout, r"kda\s+linear\s+19\s+256\s+768")
        self.assertRegex(result.stdout, r"mla\s+mla\s+7\s+16\s+992")

    # The text walks the same rows as the wire: every figure the JSON holds is printed in its unit,
    # and what the JSON leaves null is said to be missing, not 0.
    def test_whole_request_text(self):
        args = ["explain", "--model", "llama-3.1-8b", "--tier", "host", "--prompt-tokens", "8192",
                "--logical-match-tokens", "4096", "--reload-seconds", "0.02", "--suffix-prefill-seconds", "0.3",
                "--ttft-seconds", "0.5", "--queue-seconds", "0.1", "--output-tokens", "201", "--decode-seconds", "4"]
        result = run(*args)
        self.assertEqual(result.returncode, 0, result.stderr)
        d = run_json(*args)
        self.assertAlmostEqual(d["prefill_share_of_e2e"], 0.32 / 4.5, places=12)
        for line in ("TTFT part: queue               0.1 s", "TTFT part: rest                0.08 s",
                     "  estimate basis               record", "  output tokens per second     50 tokens/s",
                     "  prefill share as served      7.11%", "reload slower than recompute   no",
                     "  avoided at reused            4.399e+12 FLOPs (25.00%)",
                     "router predicted               no prediction"):
            self.assertIn(line + "\n", result.stdout)
        self.assertIsNone(d["predicted_match_tokens"])

    def test_json_fields(self):
        out = run_json("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "4096",
                       "--logical-match-tokens", "2048", "--suffix-prefill-seconds", "0.2")
        self.assertEqual(out["attention_avoided_reused_flops"], 1100048498688)
        self.assertEqual(out["recoverable_source"], "BOUNDARY_SOURCE_MODEL")

    # An invalid record offline gets the same message the server gives.
    def test_invalid_record(self):
        result = run("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "10", "--logical-match-tokens", "11")
        self.assertEqual(result.returncode, 2)  # bad input (docs/operations.md)
        self.assertEqual(result.stderr.strip(),
                         "kvledger explain: --logical-match-tokens = 11: must be in [0, prompt_tokens = 10]")


class RecordFlagsTest(unittest.TestCase):
    # Proves: every field of the Record message is a flag of send and explain (--state-boundary for
    # the repeated state_boundaries), with the field's (flag_help) as its help, so a field added to
    # record.proto reaches the CLI unasked.
    def test_every_record_field_is_a_flag(self):
        import os  # noqa: PLC0415
        import re  # noqa: PLC0415
        proto = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto", "kvledger", "v1",
                             "record.proto")
        with open(proto) as f:
            message = re.search(r"^message Record \{(.*?)^\}", f.read(), re.S | re.M).group(1)
        fields = dict(re.findall(r"^\s+(?:optional |repeated )?\w+ (\w+) = \d+\s*\[\(flag_help\) = \"([^\"]+)\"\];",
                                 message, re.M))
        self.assertEqual(len(fields), len(re.findall(r"^\s+(?:optional |repeated )?\w+ \w+ = \d+", message, re.M)))
        self.assertEqual(fields["decode_seconds"], "first output token to last (default: not measured)")
        for command in ("send", "explain"):
            usage = " ".join(run(command, "--help").stdout.split())
            for field, help_text in fields.items():
                flag = "--state-boundary" if field == "state_boundaries" else "--" + field.replace("_", "-")
                self.assertIn(f" {flag} ", usage, (command, field))
                self.assertIn(" ".join(help_text.split()), usage, (command, field))


class ExplainInputsTest(unittest.TestCase):
    # explain takes the match as a hit ratio (floor(0.3 x 1000) = 300, exactly) and costs a what-if
    # page size: 500 matched tokens on 256-token pages reuse 256.
    def test_alpha_and_what_if(self):
        d = run_json("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "1000", "--alpha", "0.3")
        self.assertEqual(d["logical_match_tokens"], "300")
        d = run_json("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "1000", "--alpha", "0.5",
                     "--kv-page-tokens", "256")
        self.assertEqual((d["logical_match_tokens"], d["reused_tokens"]), ("500", "256"))


class ProfilesTest(unittest.TestCase):
    # The built-in catalog offline: one row per profile with its KV bytes per cached token
    # (llama-3.1-8b: 2 x 32 layers x 8 KV heads x 128 x 2 bytes), and the same as JSON.
    def test_catalog(self):
        result = run("profiles")
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[1:]}
        self.assertEqual(len(rows), 14)
        self.assertEqual(rows["llama-3.1-8b"][1:4], ["32", str(2 * 32 * 8 * 128 * 2), "0"])
        catalog = run_json("profiles")["profiles"]
        self.assertEqual(sorted(p["name"] for p in catalog), sorted(rows))
        by_name = {p["name"]: p for p in catalog}
        self.assertEqual(by_name["llama-3.1-8b"]["bytes_per_cached_token"], 131072)
        self.assertEqual(by_name["kimi-linear-48b-a3b"]["attention"], "linear+mla")


class EdgeTest(unittest.TestCase):
    # The matched prefix is floor(alpha N) of the alpha as typed, exactly: no tolerance makes a
    # near-full hit full, and a decimal is not spoiled by its binary approximation.
    def test_exact_matched_prefix(self):
        def aligned(alpha, n, c=1):
            return run_json("calc", "--alpha", alpha, "--attention", "recurrent", "--checkpoint", str(c),
                            "--prompt-tokens", str(n))["aligned_tokens"]
        self.assertEqual(aligned("0.999999999999", 1000), 999)
        self.assertEqual(aligned("0.3", 1000), 300)
        self.assertEqual(aligned("1", 2 ** 31), 2 ** 31)
        self.assertEqual(aligned("0.5", 2 ** 31 - 1), 2 ** 30 - 1)
        for i in range(0, 1001, 7):  # brute force over decimals with three places
            self.assertEqual(aligned(f"{i / 1000:.3f}", 4097), i * 4097 // 1000)

    # The largest inputs that are accepted give exact answers, not wrapped ones.
    def test_largest_kv_bytes_are_exact(self):
        out = run_json("kv-bytes", "--layers", "4294967295", "--kv-heads", "4294967295", "--head-dim", "4294967295",
                       "--tokens", str(2 ** 30), "--bytes-per-element", "1")
        self.assertEqual(out["kv_bytes"], 2 * (2 ** 32 - 1) ** 3 * 2 ** 30)
        out = run_json("kv-bytes", "--model", "llama-3.1-8b", "--tokens", "18446744073709551615")
        self.assertEqual(out["kv_bytes"], (2 ** 64 - 1) * 131072)

    # The record of the edge-case report: with no suffix prefill time there is no rate, so the
    # estimate, the verdict and the e2e speedup are unavailable, not 0 s and "YES".
    def test_explain_without_suffix_time(self):
        result = run("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "4096",
                     "--logical-match-tokens", "2048", "--reload-seconds", "0.01")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stdout, r"estimated recompute seconds +unknown \(basis none\)")
        self.assertRegex(result.stdout, r"recompute estimate available +no\n")
        self.assertRegex(result.stdout,
                         r"reload slower than recompute +unknown \(no reload time or no recompute estimate\)")
        self.assertRegex(result.stdout, r"\ne2e speedup +unavailable\n")
        d = run_json("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "4096",
                     "--logical-match-tokens", "2048", "--reload-seconds", "0.01")
        self.assertEqual((d["recompute_estimate_available"], d["reload_compared"], d["reload_slower_than_recompute"],
                          d["e2e_speedup"], d["estimated_recompute_seconds"], d["overhead_fraction"]),
                         (False, False, False, None, None, None))
        with_suffix = run_json("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "4096",
                               "--logical-match-tokens", "2048", "--reload-seconds", "0.01",
                               "--suffix-prefill-seconds", "0.2")
        self.assertTrue(with_suffix["reload_compared"])
        self.assertAlmostEqual(with_suffix["estimated_recompute_seconds"], 0.2 * 29687350820864 / 31886374076416,
                               places=12)

        self.assertEqual(with_suffix["estimate_basis"], "BASIS_RECORD")

    # The reproductions of the engine-shapes report, offline. A 16-token suffix after a full-prefix
    # hit once gave 4.76 s (a 96x TTFT speedup, a 1,912 % share): the record alone is below its
    # floor, so there is no estimate; the shares lie in [0, 1] (once 119 % and 145 %); decode 0 s for
    # 4 output tokens is refused; an unset prediction is null; no figure is infinite.
    def test_engine_shapes(self):
        short = run_json("explain", "--model", "llama-3.1-8b", "--tier", "device", "--prompt-tokens", "4096",
                         "--logical-match-tokens", "4096", "--reload-seconds", "0.001",
                         "--suffix-prefill-seconds", "0.02", "--ttft-seconds", "0.05", "--queue-seconds", "0.01",
                         "--output-tokens", "11", "--decode-seconds", "0.2")
        self.assertEqual((short["estimated_recompute_seconds"], short["estimate_basis"], short["ttft_speedup"],
                          short["prefill_share_of_e2e_without_reuse"]), (None, "BASIS_NONE", None, None))
        self.assertAlmostEqual(short["prefill_share_of_e2e"], (0.001 + 0.02) / 0.25, places=12)
        for queue, reload, ttft, room in (("0.1", "0.2", "0.6", 0.3), ("0.3", "0.15", "0.5", 0.2)):
            args = ["--tier", "host", "--prompt-tokens", "8192", "--logical-match-tokens", "4096",
                    "--queue-seconds", queue, "--reload-seconds", reload, "--suffix-prefill-seconds", "0.3",
                    "--ttft-seconds", ttft, "--output-tokens", "3", "--decode-seconds", "0.04"]
            d = run_json("explain", "--model", "llama-3.1-8b", *args)
            self.assertLessEqual(d["prefill_share_of_e2e"], 1)
            self.assertLessEqual(d["prefill_share_of_e2e_without_reuse"], 1)
            self.assertLessEqual(d["ttft_parts"]["queue_seconds"] + d["ttft_parts"]["reload_seconds"], room + 1e-12)
        overlap = run_json("explain", "--model", "llama-3.1-8b", "--tier", "host", "--prompt-tokens", "8192",
                           "--logical-match-tokens", "4096", "--queue-seconds", "0.3", "--reload-seconds", "0.15",
                           "--suffix-prefill-seconds", "0.3", "--ttft-seconds", "0.5")
        self.assertEqual((overlap["ttft_parts"]["queue_seconds"], overlap["ttft_parts"]["reload_seconds"]), (0.2, 0))
        self.assertAlmostEqual(overlap["overhead_fraction_with_wait"] * overlap["estimated_full_prefill_seconds"], 0.2,
                               places=12)
        refused = run("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "100", "--logical-match-tokens", "0",
                      "--output-tokens", "4", "--decode-seconds", "0")
        self.assertEqual(refused.returncode, 2)
        self.assertIn("--decode-seconds = 0: must be > 0 when output_tokens = 4", refused.stderr)
        plain = run_json("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "100", "--logical-match-tokens", "0")
        self.assertEqual([plain[k] for k in ("predicted_match_tokens", "prediction_realised_tokens",
                                             "prediction_over_tokens", "prediction_under_tokens")], [None] * 4)
        extreme = run("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "100", "--logical-match-tokens", "0",
                      "--reload-seconds", "1e-300", "--suffix-prefill-seconds", "1e-320", "--ttft-seconds", "1e-310",
                      "--queue-seconds", "0", "--output-tokens", "2", "--decode-seconds", "1e-320", "--json")
        self.assertEqual(extreme.returncode, 0, extreme.stderr)
        self.assertNotIn("Infinity", extreme.stdout)
        self.assertNotIn("NaN", extreme.stdout)
        self.assertNotIn("inf", run("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "100",
                                    "--logical-match-tokens", "0", "--reload-seconds", "1e-300",
                                    "--suffix-prefill-seconds", "1e-320", "--ttft-seconds", "1e-310",
                                    "--queue-seconds", "0", "--output-tokens", "2",
                                    "--decode-seconds", "1e-320").stdout)


class ReplayLineTest(unittest.TestCase):
    # Proves: a trace line with a tier label instead of the enum's name says what to write; the line
    # is refused before anything is sent (no server needed).
    def test_tier_labels_say_what_to_write(self):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
            f.write('{"model":"llama-3.1-8b","tier":"host","prompt_tokens":100,"logical_match_tokens":50}\n'
                    '{"model":"llama-3.1-8b","tier":"none","prompt_tokens":100}\n')
            f.flush()
            result = run("replay", "--target", "127.0.0.1:1", f.name)
        self.assertEqual(result.returncode, 2)
        self.assertIn('line 1: tier = "host": write the Tier enum\'s name, "TIER_HOST" (or its number)', result.stdout)
        self.assertIn('line 2: tier = "none": a miss has no tier; leave the field out', result.stdout)


class UsageTest(unittest.TestCase):
    # Bad flags: a one-line error naming the flag, exit 2; --help: usage, exit 0.
    def test_usage_errors(self):
        for args, message in [
            (["calc", "--alpha", "x"], 'kvledger calc: --alpha = "x": must be a number'),
            # A URL for a gRPC target, a CA file that is not there: bad flags, before any connection.
            (["health", "--target", "http://127.0.0.1:9464"],
             "kvledger health: --target = http://127.0.0.1:9464: a gRPC target is HOST:PORT (or dns:///HOST:PORT), "
             "not a URL; the gRPC port is kvledger-server's --grpc_address (default 50051), not its metrics port"),
            (["health", "--tls-ca-file", "/nonexistent/ca.pem"],
             "kvledger health: --tls-ca-file = /nonexistent/ca.pem: cannot be read"),
            (["calc", "--alpha", "2"], "kvledger calc: --alpha = 2: must be in [0, 1]"),
            (["calc", "--alpha", "1.0000001"], "kvledger calc: --alpha = 1.0000001: must be in [0, 1]"),
            (["calc", "--alpha", "1.00000000000000000001", "--attention", "recurrent", "--checkpoint", "1",
              "--prompt-tokens", "1000000000"],
             "kvledger calc: --alpha = 1.00000000000000000001: must be in [0, 1]"),
            (["calc", "--alpha", "1", "--attention", "recurrent", "--checkpoint", "1",
              "--prompt-tokens", "18446744073709551615"],
             "kvledger calc: --prompt-tokens = 18446744073709551615: must be in [1, 2147483648]"),
            (["calc", "--alpha", "0.5", "--attention", "recurrent", "--checkpoint", "0", "--prompt-tokens", "10"],
             "kvledger calc: --checkpoint = 0: must be in [1, 2147483648]"),
            (["calc", "--alpha", "0.5", "--attention", "swa", "--window", "4294967296", "--prompt-tokens", "10"],
             "kvledger calc: --window = 4294967296: must be in [1, 2147483648]"),
            (["kv-bytes", "--layers", "4294967296", "--kv-heads", "4294967296", "--head-dim", "4294967296",
              "--tokens", "4294967296", "--bytes-per-element", "1"],
             "kvledger kv-bytes: 2 x --layers 4294967296 x --kv-heads 4294967296 x --head-dim 4294967296 x "
             "--bytes-per-element 1 x --sequences 1 x --tokens 4294967296: exceeds 2^128 bytes; check the inputs"),
            (["kv-bytes", "--model", "llama-3.1-8b", "--tokens", "18446744073709551615",
              "--sequences", "18446744073709551615"],
             "kvledger kv-bytes: --tokens 18446744073709551615 x --sequences 18446744073709551615: "
             "the cache would exceed 2^128 bytes; check the inputs"),
            (["calc"], "kvledger calc: --alpha: required"),
            (["calc", "--alpha", "0.5", "--bogus", "1"], "kvledger calc: unknown flag --bogus (see kvledger calc --help)"),
            (["calc", "--alpha", "0.5", "--attention", "ring"],
             'kvledger calc: --attention = "ring": must be full, swa or recurrent'),
            (["kv-bytes", "--tokens", "5"],
             "kvledger kv-bytes: --layers, --kv-heads, --head-dim and --bytes-per-element: required without --model"),
            (["frobnicate"], "kvledger: unknown command 'frobnicate' (see kvledger --help)"),
            # Each input named as the flag the user typed, what is missing named alone, nothing ignored.
            (["calc", "--alpha", "0.5", "--attention", "recurrent", "--checkpoint", "256"],
             "kvledger calc: --prompt-tokens: required with --attention recurrent"),
            (["calc", "--alpha", "0.5", "--attention", "recurrent", "--prompt-tokens", "1000"],
             "kvledger calc: --checkpoint: required with --attention recurrent"),
            (["calc", "--alpha", "0.5", "--window", "100"],
             "kvledger calc: --window: not an input with --attention full (full attention has none)"),
            (["calc", "--alpha", "0.5", "--checkpoint", "256", "--prompt-tokens", "1000"],
             "kvledger calc: --checkpoint: not an input with --attention full (full attention has none)"),
            (["calc", "--alpha", "0.5", "--attention", "swa", "--window", "10", "--checkpoint", "5"],
             "kvledger calc: --checkpoint: not an input with --attention swa (swa takes --window-fraction, or "
             "--window with --prompt-tokens)"),
            (["kv-bytes", "--model", "llama-3.1-8b", "--tokens", "100", "--budget-bytes", "100",
              "--reserved-bytes", "200"],
             "kvledger kv-bytes: --reserved-bytes = 200: must be at most --budget-bytes = 100"),
            (["kv-bytes", "--model", "llama-3.1-8b", "--tokens", "100", "--reserved-bytes", "200"],
             "kvledger kv-bytes: --reserved-bytes: only with --budget-bytes (it is taken from the budget)"),
            (["kv-bytes", "--model", "llama-3.1-8b", "--tokens", "100", "--budget-bytes", "80.5"],
             'kvledger kv-bytes: --budget-bytes = "80.5": must be a whole number >= 0'),
            (["kv-bytes", "--model", "llama-3.1-8b", "--tokens", "18446744073709551616"],
             'kvledger kv-bytes: --tokens = "18446744073709551616": must be at most 18446744073709551615'),
            (["calc", "--alpha", "0.5", "--alpha", "0.7"],
             "kvledger calc: --alpha: given more than once (each flag takes one value)"),
            (["explain", "--model", "gpt-5", "--prompt-tokens", "10", "--logical-match-tokens", "0"],
             'kvledger explain: --model = "gpt-5": no profile of that name; known profiles: deepseek-v3, gemma-2-9b, '
             "gemma-3-12b, generic, gpt-oss-120b, gpt-oss-20b, kimi-linear-48b-a3b, llama-3.1-70b, llama-3.1-8b, "
             "mistral-7b-v0.1, qwen3-235b-a22b, qwen3-32b, qwen3-8b, qwen3-next-80b-a3b (an unknown model is "
             "costed as generic only where that is allowed: kvledger-server --unknown_model=generic, "
             "kvledger explain --unknown-model generic)"),
            (["profiles", "--bogus"], "kvledger profiles: unknown flag --bogus (see kvledger profiles --help)"),
            (["explain", "--model", "llama-3.1-8b", "--prompt-tokens", "1000"],
             "kvledger explain: --logical-match-tokens or --alpha: required"),
            (["explain", "--model", "llama-3.1-8b", "--prompt-tokens", "1000", "--alpha", "0.3",
              "--logical-match-tokens", "300"],
             "kvledger explain: --alpha: give either it or --logical-match-tokens, not both"),
            (["explain", "--model", "llama-3.1-8b", "--prompt-tokens", "1000", "--alpha", "0.5",
              "--kv-page-tokens", "18446744073709551615"],
             "kvledger explain: --kv-page-tokens = 18446744073709551615: must be in [1, 1048576]"),
        ]:
            result = run(*args)
            self.assertEqual(result.returncode, 2, args)
            self.assertEqual(result.stderr.strip(), message)
            self.assertEqual(result.stderr.count("\n"), 1)

    def test_help(self):
        for command in ("calc", "kv-bytes", "explain", "send", "replay", "bench", "advise", "profiles"):
            result = run(command, "--help")
            self.assertEqual(result.returncode, 0)
            self.assertIn(f"usage: kvledger {command}", result.stdout)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
