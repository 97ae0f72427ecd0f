"""Every reference in the project resolves inside it: no citation of a document the repository does not
hold, every relative Markdown link and every `docs/NAME.md` mention names a file that exists, and every
`cost-model.md §N` names a section that exists. And no script checks a command's output by piping it
into `grep -q`, which under `set -o pipefail` fails whenever grep exits before the writer is done.

Usage: references_test.py REPO_ROOT
"""
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.abspath(sys.argv[1])


def tracked_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True).stdout
    files = [f for f in out.splitlines() if os.path.isfile(os.path.join(ROOT, f))]
    if not files:  # a source tree without git metadata: walk it
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if x not in (".git", "build") and not x.startswith("build")]
            files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
    return [f for f in files if not f.startswith("tests/repo/")]


def text_of(path):
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, OSError):
        return None


class ReferencesTest(unittest.TestCase):
    def setUp(self):
        self.files = {f: text_of(f) for f in tracked_files()}
        self.files = {f: t for f, t in self.files.items() if t is not None}

    # Proves: no shell script pipes a command into `grep -q` (read the output whole, then match it).
    def test_no_pipe_into_grep_q(self):
        racy = re.compile(r"\|\s*grep\s+-\w*q")
        for path, text in self.files.items():
            if not (path.endswith(".sh") or path.startswith("scripts/") or path == "Dockerfile"):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if not line.lstrip().startswith("#"):
                    self.assertIsNone(racy.search(line), f"{path}:{number}: {line.strip()}")

    # Proves: nothing cites a specification that is not in the repository.
    def test_no_outside_spec_citations(self):
        outside = re.compile(r"\b(SPEC|MODELS|STACK|STYLE|ARCHITECTURE)\.md\b|\bSPEC\b(?!IAL)")
        bad = [f"{f}:{n}" for f, t in self.files.items() for n, line in enumerate(t.splitlines(), 1)
               if outside.search(line) and "UNSPECIFIED" not in line]
        self.assertEqual(bad, [])

    # Proves: docs/NAME.md mentions and relative Markdown links point at files that exist.
    def test_paths_resolve(self):
        missing = []
        for f, t in self.files.items():
            for m in re.finditer(r"\bdocs/[a-z0-9_-]+\.md\b", t):
                if not os.path.exists(os.path.join(ROOT, m.group(0))):
                    missing.append(f"{f}: {m.group(0)}")
            if f.endswith(".md"):
                for m in re.finditer(r"\]\(([^)#:\s]+)(#[^)]*)?\)", t):
                    target = os.path.normpath(os.path.join(ROOT, os.path.dirname(f), m.group(1)))
                    if not os.path.exists(target):
                        missing.append(f"{f}: {m.group(1)}")
        self.assertEqual(missing, [])

    # Proves: "cost-model.md §N" names a section the document has.
    def test_cost_model_sections_exist(self):
        sections = set(re.findall(r"^#+ (\d+(?:\.\d+)?)[. ]", self.files["docs/cost-model.md"], re.M))
        missing = []
        for f, t in self.files.items():
            for m in re.finditer(r"cost-model\.md ?§ ?(\d+(?:\.\d+)?)(?:[-–](\d+))?", t):
                for s in filter(None, m.groups()):
                    if s not in sections:
                        missing.append(f"{f}: §{s}")
        self.assertEqual(missing, [])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
