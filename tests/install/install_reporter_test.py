"""kvledger::reporter from the installed package, as docs/integration.md says to install it: the
recipe's shell block is run as written (a fresh build tree and a temporary prefix in place of
build-kvledger and /opt/kvledger), then the out-of-tree project in reporter_consumer/ is built against
it with find_package(kvledger COMPONENTS reporter), run against a real kvledger-server, and the server
must have counted its 100 records.

usage: install_reporter_test.py SOURCE_DIR BUILD_DIR KVLEDGER_SERVER WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import unittest

SOURCE, BUILD, SERVER, WORK = sys.argv[1:5]
sys.path.insert(0, os.path.join(SOURCE, "tests", "e2e"))
del sys.argv[1:5]

from harness import Server, parse_exposition, sample  # noqa: E402


def run(*args):
    result = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result.stdout


class InstalledReporterTest(unittest.TestCase):
    def test_find_package_reporter(self):
        shutil.rmtree(WORK, ignore_errors=True)
        prefix = os.path.join(WORK, "prefix")
        with open(os.path.join(SOURCE, "docs", "integration.md")) as f:
            recipe = re.search(r"Linking it from your own project.*?```sh\n(.*?)```", f.read(), re.S).group(1)
        self.assertIn("cmake --install build-kvledger", recipe)
        recipe = recipe.replace("build-kvledger", os.path.join(WORK, "build")).replace("/opt/kvledger", prefix)
        # As on a machine without the test packages: the recipe must not need GTest or Google Benchmark.
        recipe = recipe.replace("cmake -S . ", "cmake -S . -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON "
                                "-DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON ", 1)
        self.assertIn("DISABLE_FIND_PACKAGE_GTest", recipe)
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", recipe], cwd=SOURCE, capture_output=True,
                                text=True, timeout=1500)
        self.assertEqual(result.returncode, 0, f"the recipe failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        self.assertTrue(os.path.exists(os.path.join(prefix, "include", "client", "reporter.h")))
        self.assertTrue(os.path.exists(os.path.join(prefix, "include", "kvledger", "v1", "ledger.grpc.pb.h")))
        consumer = os.path.join(WORK, "consumer")
        run("cmake", "-S", os.path.join(SOURCE, "tests", "install", "reporter_consumer"), "-B", consumer,
            f"-DCMAKE_PREFIX_PATH={prefix}")
        run("cmake", "--build", consumer, "-j2")
        server = Server(SERVER, log_dir=WORK)
        try:
            out = run(os.path.join(consumer, "reporter_consumer"), server.grpc_address)
            self.assertEqual(out.strip(), "sent=100 rejected=0 dropped=0")
            samples = parse_exposition(server.scrape())
            self.assertEqual(sample(samples, "kvledger_requests_total", model="llama-3.1-8b", tier="device"), 100)
            self.assertEqual(sample(samples, "kvledger_reused_tokens_total", model="llama-3.1-8b", tier="device"),
                             100 * 2048)
        finally:
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
