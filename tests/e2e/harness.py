"""Helpers for tests that start real kvledger binaries: free ports, polling with a deadline,
process lifecycle. Only loopback addresses are used."""
import os
import re
import socket
import subprocess
import time
import urllib.request

DEADLINE_SECONDS = 30


def poll(what, fn, deadline=DEADLINE_SECONDS, interval=0.05):
    """Calls fn until it returns a truthy value or the deadline passes."""
    end = time.monotonic() + deadline
    last_error = None
    while time.monotonic() < end:
        try:
            value = fn()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - keep polling, report the last error
            last_error = e
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last error: {last_error})")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A kvledger-server process on 127.0.0.1 with port 0; reads the bound ports from its log."""

    LISTENING = re.compile(r"listening: grpc=(\S+) metrics=http://(\S+)/metrics")

    def __init__(self, binary, *extra_args, log_dir):
        self.log_path = os.path.join(log_dir, f"server-{time.monotonic_ns()}.log")
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(
            [binary, "--grpc_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT)
        match = poll("kvledger-server to listen", self._listening)
        self.grpc_address, self.metrics_address = match.group(1), match.group(2)

    def _listening(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"server exited with {self.proc.returncode}: {self.read_log()}")
        return self.LISTENING.search(self.read_log())

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def scrape(self):
        with urllib.request.urlopen(f"http://{self.metrics_address}/metrics", timeout=10) as r:
            return r.read().decode()

    def stop(self):
        """SIGTERM, then wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=DEADLINE_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def parse_exposition(text):
    """{(name, frozenset(labels.items())): value} for every sample line."""
    samples = {}
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
    label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = line_re.match(line)
        assert m, f"unparseable exposition line: {line!r}"
        labels = frozenset(label_re.findall(m.group(2) or ""))
        samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def sample(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]
