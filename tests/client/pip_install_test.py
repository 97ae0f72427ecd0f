"""`pip install ./client/python` as the docs give it: into a venv of Debian's python3 made with
--system-site-packages (grpcio, protobuf, setuptools and wheel come from Debian's packages), with
--no-build-isolation --no-index so pip needs no package index. The installed package is imported
from outside the source tree, its vLLM plugin entry point is registered, and it reports records to
a real kvledger-server.

usage: pip_install_test.py KVLEDGER_SERVER SOURCE_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SERVER, SOURCE = sys.argv[1:3]
sys.path.insert(0, os.path.join(SOURCE, "tests", "e2e"))
del sys.argv[1:3]

from harness import Server, parse_exposition, sample  # noqa: E402

REPORT = """
import importlib.metadata, sys, kvledger
print(kvledger.__file__)
plugins = importlib.metadata.entry_points(group="vllm.stat_logger_plugins")
print(sorted(e.name + "=" + e.value for e in plugins))
with kvledger.Reporter(sys.argv[1]) as reporter:
    for _ in range(3):
        reporter.report(model="llama-3.1-8b", tier="host", prompt_tokens=4096, logical_match_tokens=2048)
    reporter.flush(10)
    print(reporter.stats()["sent"])
"""


class PipInstallTest(unittest.TestCase):
    def test_venv_install_and_report(self):
        with tempfile.TemporaryDirectory() as tmp:
            venv = os.path.join(tmp, "venv")
            subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True, timeout=120)
            # A copy: setuptools writes build/ and *.egg-info beside the sources, which stay untouched.
            package = os.path.join(tmp, "python")
            shutil.copytree(os.path.join(SOURCE, "client", "python"), package,
                            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
            pip = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-index",
                                  package], capture_output=True, text=True, timeout=300)
            self.assertEqual(pip.returncode, 0, pip.stdout[-2000:] + pip.stderr[-2000:])
            server = Server(SERVER, log_dir=tmp)
            try:
                run = subprocess.run([os.path.join(venv, "bin", "python"), "-c", REPORT, server.grpc_address],
                                     capture_output=True, text=True, timeout=120, cwd=tmp)
                self.assertEqual(run.returncode, 0, run.stderr)
                path, plugins, sent = run.stdout.splitlines()
                self.assertTrue(path.startswith(os.path.join(venv, "lib")), path)  # the installed copy
                self.assertEqual(plugins, "['kvledger=kvledger.vllm:KvledgerStatLogger']")
                self.assertEqual(sent, "3")
                samples = parse_exposition(server.scrape())
                self.assertEqual(sample(samples, "kvledger_requests_total", model="llama-3.1-8b", tier="host"), 3)
            finally:
                self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
