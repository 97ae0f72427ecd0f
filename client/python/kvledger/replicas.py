"""One gRPC channel per replica behind a target, the same rule as the C++ reporter (client/reporter.h):
a batch's retries go back to the replica that got its first attempt (which deduplicates it by batch
id) while that replica is reachable, and move only when its connection has been failing for
FAILING_FOR_SECONDS, or after retry_same_replica_seconds (a frozen replica keeps its connection up and
never answers: the batch then moves, at the risk of counting twice what that replica applied); a
replica whose call ran out of time gets no new batch for RESOLVE_EVERY_SECONDS; new batches
rotate over the reachable replicas ("round_robin") or stay on the first reachable one
("pick_first"). The target is resolved here — host:port, dns:///host:port, ipv4:/ipv6: lists — and
again every RESOLVE_EVERY_SECONDS, so replicas that join get batches. Any other target (unix:, xds:,
...) is a single channel that gRPC balances, without sticky retries.
"""
import socket
import time

import grpc

RESOLVE_EVERY_SECONDS = 15.0
KEEPALIVE_OPTIONS = (("grpc.keepalive_time_ms", 60000), ("grpc.keepalive_timeout_ms", 10000),
                     ("grpc.keepalive_permit_without_calls", 1))
# A connection cut (an ambiguous failure) leaves the channel failing until it reconnects: a retry
# stays with its replica unless the failure has lasted this long.
FAILING_FOR_SECONDS = 1.0
# grpc_connectivity_state's value for TRANSIENT_FAILURE (grpc.ChannelConnectivity holds (3, "transient failure")).
_TRANSIENT_FAILURE = grpc.ChannelConnectivity.TRANSIENT_FAILURE.value[0]


def resolve(target):
    """(host, addresses): the name (for TLS; empty for literal lists) and gRPC targets of each address,
    e.g. "ipv4:10.0.0.7:50051"; no addresses for another scheme or a name that does not resolve."""
    if target.startswith(("ipv4:", "ipv6:")):
        listed = target.split(":", 1)[1].split(",")
        return "", [("ipv6:" if "[" in a else "ipv4:") + a for a in listed]
    rest = target
    for prefix in ("dns:///", "dns:"):
        if rest.startswith(prefix):
            rest = rest[len(prefix):]
            break
    else:
        if ":/" in rest:
            return "", []
    if "/" in rest or ":" not in rest:
        return "", []
    host, port = rest.rsplit(":", 1)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return host, []
    addresses = []
    for family, _, _, _, sockaddr in found:
        address = f"ipv6:[{sockaddr[0]}]:{port}" if family == socket.AF_INET6 else f"ipv4:{sockaddr[0]}:{port}"
        if address not in addresses:
            addresses.append(address)
    return host, addresses


def affinity_score(key, address):
    """Rendezvous hashing: the replica with the highest FNV-1a 64 of (key, a zero byte, address) gets the
    key's batches, as the C++ Reporter's affinity_key picks (client/reporter.h)."""
    h = 14695981039346656037
    for byte in key.encode() + b"\0" + address.encode():
        h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


class Replicas:
    """Stubs for the replicas of `target`; used from one thread (the reporter's sender)."""

    def __init__(self, target, stub_class, credentials=None, channel_options=(), load_balancing_policy="round_robin",
                 retry_same_replica_seconds=10.0, affinity_key=None):
        self._target = target
        self._affinity_key = affinity_key
        self._stub_class = stub_class
        self._credentials = credentials
        self._options = list(channel_options)
        self._policy = load_balancing_policy
        self._retry_same_replica_seconds = retry_same_replica_seconds
        self._slow_until = {}  # address -> no new batches before (a call there ran out of time)
        self._replicas = {}  # address -> (channel, stub)
        self._order = []
        self._next = 0
        self._pinned = (None, None)  # (key, address) of the last attempt
        self._pinned_until = 0.0     # the key's retries stay with its replica until then
        self._failing_since = {}     # address -> when its channel was first seen failing, this time
        self._resolve_at = 0.0

    def _channel(self, address, host):
        # Keepalive on idle connections too (the server allows a ping every 30 s): a replica that
        # vanished or froze is seen failing, and skipped, before a batch waits on it. Options the
        # caller gave win.
        given = {name for name, _ in self._options}
        options = list(self._options) + [(name, value) for name, value in KEEPALIVE_OPTIONS if name not in given]
        if host and self._credentials is not None:  # certificates name the host, not its address
            options.append(("grpc.ssl_target_name_override", host))
        if self._credentials is None:
            return grpc.insecure_channel(address, options=options)
        return grpc.secure_channel(address, self._credentials, options=options)

    def _refresh(self):
        self._resolve_at = time.monotonic() + RESOLVE_EVERY_SECONDS
        host, addresses = resolve(self._target)
        if not addresses:
            if self._order:
                return  # keep what we have while the name does not resolve
            addresses = [self._target]
        for address in addresses:
            if address not in self._replicas:
                channel = self._channel(address, host)
                self._replicas[address] = (channel, self._stub_class(channel))
        for address in [a for a in self._replicas if a not in addresses]:
            self._replicas.pop(address)[0].close()
        self._order = addresses

    def _failing_for(self, address):
        """Seconds the replica's channel has been failing to connect, 0 when it is not. Read from the channel directly: Channel.subscribe() would start a polling thread,
        which a fork() of the process must not copy."""
        channel = getattr(self._replicas[address][0], "_channel", None)
        check = getattr(channel, "check_connectivity_state", None)
        now = time.monotonic()
        if check is None or check(True) != _TRANSIENT_FAILURE:
            self._failing_since.pop(address, None)
            return 0.0
        return now - self._failing_since.setdefault(address, now) + 1e-9

    def pick(self, key):
        """The stub for an attempt of the request identified by `key` (its batch id)."""
        if time.monotonic() >= self._resolve_at:
            self._refresh()
        pinned_key, pinned_address = self._pinned
        now = time.monotonic()
        if key == pinned_key and now < self._pinned_until and pinned_address in self._replicas \
                and self._failing_for(pinned_address) < FAILING_FOR_SECONDS:
            return self._replicas[pinned_address][1]
        if key != pinned_key:
            self._pinned_until = now + self._retry_same_replica_seconds
        n = len(self._order)
        if self._affinity_key:
            start = max(range(n), key=lambda k: affinity_score(self._affinity_key, self._order[k]))
        else:
            start = 0 if self._policy == "pick_first" else self._next % n
        self._next += 1
        usable = (a for a in (self._order[(start + i) % n] for i in range(n))
                  if not self._failing_for(a) and now >= self._slow_until.get(a, 0.0))
        chosen = next(usable, self._order[start])
        self._pinned = (key, chosen)
        return self._replicas[chosen][1]

    def answered(self, code, draining=False):
        """The outcome (a grpc.StatusCode) of the attempt pick() last chose for: a replica that let a
        call run out of time (frozen or overloaded) gets no new batches for a while; one that answers is
        trusted again. One `draining` (it refused the call before applying any of it, saying so in the
        kvledger-draining trailer) is leaving: the retry goes elsewhere at once, new batches too."""
        address = self._pinned[1]
        if draining:
            self._slow_until[address] = time.monotonic() + RESOLVE_EVERY_SECONDS
            self._pinned_until = 0.0
        elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
            self._slow_until[address] = time.monotonic() + RESOLVE_EVERY_SECONDS
        elif code == grpc.StatusCode.OK:
            self._slow_until.pop(address, None)

    def close(self):
        for channel, _ in self._replicas.values():
            channel.close()
        self._replicas.clear()
