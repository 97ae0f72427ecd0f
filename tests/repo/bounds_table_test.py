"""docs/operations.md's bounds table is the server's own list (kvledger-server --print_bounds): each
bound's flag, default, range and meaning, declared once in the source, read by the flags, their
checks and the docs alike. Also checks that every bound is a flag the server takes and refuses out of
its range, naming the flag and the range.

Usage: bounds_table_test.py KVLEDGER_SERVER REPO_ROOT
"""
import os
import re
import subprocess
import sys
import unittest

SERVER, ROOT = sys.argv[1], sys.argv[2]
del sys.argv[1:3]


def printed():
    return subprocess.run([SERVER, "--print_bounds"], capture_output=True, text=True, check=True, timeout=30).stdout


class BoundsTableTest(unittest.TestCase):
    def test_docs_table_is_the_servers_list(self):
        with open(os.path.join(ROOT, "docs", "operations.md")) as f:
            docs = f.read()
        found = re.search(r"<!-- bounds:begin -->\n(.*?)<!-- bounds:end -->", docs, re.S)
        self.assertIsNotNone(found, "docs/operations.md has no bounds table")
        self.assertEqual(found.group(1), printed(),
                         "docs/operations.md's bounds table differs: paste `kvledger-server --print_bounds` there")

    def test_every_bound_is_a_flag_checked_against_its_range(self):
        rows = [line.split(" | ") for line in printed().splitlines()[2:]]
        self.assertGreater(len(rows), 20)
        for row in rows:
            flag = row[0].strip("| `")
            low, high = (int(x) for x in row[2].split(" – "))
            with self.subTest(flag=flag):
                run = subprocess.run([SERVER, f"{flag}={high + 1}"], capture_output=True, text=True, timeout=30)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertIn(f"{flag} = {high + 1}: must be in [{low}, {high}]", run.stderr)


if __name__ == "__main__":
    unittest.main()
