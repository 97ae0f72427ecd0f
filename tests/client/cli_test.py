"""The kvledger CLI's offline calculators as a user runs them: exact figures from the hand-worked
examples in docs/cost-model.md, both output formats, and usage errors.

Usage: cli_test.py CLI_BINARY
"""
import json
import subprocess
import sys
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

    def test_json_fields(self):
        out = run_json("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "4096",
                       "--logical-match-tokens", "2048", "--suffix-prefill-seconds", "0.2")
        self.assertEqual(out["attention_avoided_reused_flops"], 1100048498688)
        self.assertEqual(out["recoverable_source"], "BOUNDARY_SOURCE_MODEL")

    # An invalid record offline gets the same message the server gives.
    def test_invalid_record(self):
        result = run("explain", "--model", "llama-3.1-8b", "--prompt-tokens", "10", "--logical-match-tokens", "11")
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stderr.strip(),
                         "kvledger explain: logical_match_tokens = 11: must be in [0, prompt_tokens = 10]")


class UsageTest(unittest.TestCase):
    # Bad flags: a one-line error naming the flag, exit 2; --help: usage, exit 0.
    def test_usage_errors(self):
        for args, message in [
            (["calc", "--alpha", "x"], 'kvledger calc: --alpha = "x": must be a number'),
            (["calc", "--alpha", "2"], "kvledger calc: alpha = 2: must be in [0, 1]"),
            (["calc"], "kvledger calc: --alpha: required"),
            (["calc", "--alpha", "0.5", "--bogus", "1"], "kvledger calc: unknown flag --bogus (see kvledger calc --help)"),
            (["calc", "--alpha", "0.5", "--attention", "ring"],
             'kvledger calc: --attention = "ring": must be full, swa or recurrent'),
            (["kv-bytes", "--tokens", "5"],
             "kvledger kv-bytes: --layers, --kv-heads, --head-dim and --bytes-per-element: required without --model"),
            (["frobnicate"], "kvledger: unknown command 'frobnicate' (see kvledger --help)"),
        ]:
            result = run(*args)
            self.assertEqual(result.returncode, 2, args)
            self.assertEqual(result.stderr.strip(), message)
            self.assertEqual(result.stderr.count("\n"), 1)

    def test_help(self):
        for command in ("calc", "kv-bytes", "explain", "send", "replay", "bench"):
            result = run(command, "--help")
            self.assertEqual(result.returncode, 0)
            self.assertIn(f"usage: kvledger {command}", result.stdout)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
