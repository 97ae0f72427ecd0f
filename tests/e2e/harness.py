"""Helpers for tests that start real kvledger binaries and a real Prometheus: polling with a
deadline, ports read back from servers that bound port 0, process lifecycle. Only loopback
addresses are used."""
import faulthandler
import json
import os
import re
import socket
import subprocess
import time
import urllib.parse
import urllib.request

DEADLINE_SECONDS = 30

# A test that hangs says where: every thread's stack is printed once it has run this long, before
# ctest's own timeout (120 s for the shortest) kills it without a word. A test that is only slow
# prints it too and goes on.
faulthandler.dump_traceback_later(int(os.environ.get("KVLEDGER_TEST_HANG_SECONDS", "110")), exit=False)


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


def listening_ports(pid):
    """TCP ports a process listens on (IPv4 and IPv6), read from /proc: lets a server bind port 0
    and the test learn which port it got, without a bind-close-reuse race."""
    inodes = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A" and fields[9] in inodes:  # 0A = LISTEN
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except FileNotFoundError:
            pass
    return ports


class Server:
    """A kvledger-server process on 127.0.0.1 with port 0; reads the bound ports from its log."""

    LISTENING = re.compile(r"listening: grpc=(\S+) metrics=https?://(\S+)/metrics")

    # Tests stop servers at once unless they ask for the drain and final-scrape periods.
    FAST_SHUTDOWN = ("--shutdown_drain_seconds=0", "--shutdown_scrape_grace_seconds=0")

    def __init__(self, binary, *extra_args, log_dir, grpc_address="127.0.0.1:0", preexec_fn=None):
        self.log_path = os.path.join(log_dir, f"server-{time.monotonic_ns()}.log")
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(
            [binary, f"--grpc_address={grpc_address}", "--metrics_address=127.0.0.1:0", *self.FAST_SHUTDOWN,
             *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=preexec_fn)
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


def assert_json_close(test, a, b, relative, path="$"):
    """Equal JSON values, numbers within `relative` of each other (decayed figures are recomputed
    per call, so their last digits move between two calls)."""
    if isinstance(a, dict):
        test.assertEqual(sorted(a), sorted(b), path)
        for key in a:
            assert_json_close(test, a[key], b[key], relative, f"{path}.{key}")
    elif isinstance(a, list):
        test.assertEqual(len(a), len(b), path)
        for i, (x, y) in enumerate(zip(a, b)):
            assert_json_close(test, x, y, relative, f"{path}[{i}]")
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool) and (isinstance(a, float) or isinstance(b, float)):
        test.assertLessEqual(abs(a - b), relative * abs(b), path)
    else:
        test.assertEqual(a, b, path)


def sample(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


class Prometheus:
    """A real Prometheus on 127.0.0.1 port 0 (the port is read back from /proc), with the given
    configuration text; its TSDB lives under `tmp`."""

    def __init__(self, config_text, tmp, name="prometheus"):
        self.config = os.path.join(tmp, f"{name}.yml")
        with open(self.config, "w") as f:
            f.write(config_text)
        self.log = open(os.path.join(tmp, f"{name}.log"), "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.config}", f"--storage.tsdb.path={os.path.join(tmp, name + '-data')}",
             "--web.listen-address=127.0.0.1:0", "--log.level=warn"], stdout=self.log, stderr=subprocess.STDOUT)
        port = poll("Prometheus to listen", self._port, deadline=60)
        self.url = f"http://127.0.0.1:{port}"
        poll("Prometheus to be ready", lambda: urllib.request.urlopen(self.url + "/-/ready", timeout=5).status == 200,
             deadline=60, interval=0.2)

    def _port(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited with {self.proc.returncode}")
        ports = listening_ports(self.proc.pid)
        return min(ports) if ports else None

    def query(self, expr, at=None):
        """The instant-query result list; raises on an API error."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = urllib.parse.urlencode(params).encode()
        with urllib.request.urlopen(self.url + "/api/v1/query", data=data, timeout=30) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise AssertionError(f"query failed: {expr}: {body}")
        return body["data"]["result"]

    def rule_groups(self):
        """Names of the rule groups Prometheus loaded, sorted."""
        with urllib.request.urlopen(self.url + "/api/v1/rules", timeout=30) as r:
            return sorted(g["name"] for g in json.load(r)["data"]["groups"])

    def value(self, expr, at=None):
        """The single value of an instant query, or None when it returned nothing."""
        result = self.query(expr, at)
        return float(result[0]["value"][1]) if result else None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
