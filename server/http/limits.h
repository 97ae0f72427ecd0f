// The HTTP listener's bounds, each declared once: its name (the server's flag is --http_NAME), type,
// default, range and meaning. The struct, the server's flags, their checks and the bounds table of
// docs/operations.md (kvledger-server --print_bounds) are all made from this list.
#ifndef KVLEDGER_SERVER_HTTP_LIMITS_H_
#define KVLEDGER_SERVER_HTTP_LIMITS_H_

#include <cstddef>
#include <cstdint>

// X(name, type, default, min, max, meaning)
#define KVLEDGER_HTTP_BOUNDS(X)                                                                                      \
  X(workers, int, 8, 1, 256, "HTTP answers written at once")                                                         \
  X(served_per_client, int, 2, 1, 256, "HTTP answers in service at once for one client address")                     \
  X(connections_per_client, int, 64, 1, 1000000, "open HTTP connections of one client address; more get 503")       \
  X(connections, int, 1024, 8, 1000000,                                                                              \
    "open HTTP connections in all (at most a quarter of the descriptors); when full, a waiting connection of the "    \
    "address holding the most makes room")                                                                           \
  X(max_in_flight, int, 64, 1, 100000,                                                                               \
    "HTTP requests in service or waiting for a worker; more get 503 at once, except an address's first")            \
  X(in_flight_per_client, int, 8, 1, 100000, "HTTP requests of one client address in service or waiting; more get 503") \
  X(head_bytes, size_t, 16384, 1024, 1 << 20, "largest HTTP request line and headers; more get 431")                \
  X(head_seconds, int, 5, 1, 3600, "seconds from an HTTP request's first byte to its empty line")                    \
  X(idle_seconds, int, 60, 1, 86400, "seconds a kept-alive HTTP connection may idle")                               \
  X(answer_seconds, int, 30, 1, 3600,                                                                                \
    "seconds a client has to take a whole HTTP answer (its last byte acknowledged) before it is cut")                \
  X(parked_bytes, size_t, size_t{64} << 20, 0, uint64_t{64} << 30,                                                   \
    "bytes of HTTP answers held for clients too slow to take them from a worker, each parked whole (a quarter "      \
    "of it at most for one address) or cut")

namespace kvledger {

struct HttpLimits {
#define KVLEDGER_HTTP_LIMITS_FIELD(name, type, default_value, min, max, meaning) type name = default_value;
  KVLEDGER_HTTP_BOUNDS(KVLEDGER_HTTP_LIMITS_FIELD)
#undef KVLEDGER_HTTP_LIMITS_FIELD
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_LIMITS_H_
