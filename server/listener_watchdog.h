// Guards against a listener that has gone deaf while the process still looks alive.
//
// When the process runs out of file descriptors, the packaged gRPC (1.51) stops accepting on its
// listening socket for good, even after descriptors are free again, while /metrics keeps answering.
// The watchdog reads the kernel's accept queue of the gRPC listening sockets (/proc/net/tcp{,6}):
// a listener that is accepting drains it within milliseconds, so connections that stay queued for
// `deaf_after` mean nobody accepts them. It then calls `on_deaf` with a message naming the address,
// the queue and the descriptor count; kvledger-server exits non-zero so that its supervisor restarts
// it. Linux only; it holds its /proc files open (and one spare descriptor) so that it still works
// when the process has no descriptor left.
#ifndef KVLEDGER_SERVER_LISTENER_WATCHDOG_H_
#define KVLEDGER_SERVER_LISTENER_WATCHDOG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace kvledger {

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the limit now in force.
absl::StatusOr<uint64_t> RaiseDescriptorLimit();

class ListenerWatchdog {
 public:
  // Watches the sockets this process listens on at `port`; checks every `interval`. `on_check`
  // (optional) receives every check's queued-connection count, on the watchdog's thread.
  static absl::StatusOr<std::unique_ptr<ListenerWatchdog>> Start(
      uint16_t port, absl::Duration deaf_after, std::function<void(const std::string&)> on_deaf,
      absl::Duration interval = absl::Seconds(1), std::function<void(int64_t queued)> on_check = nullptr);
  ~ListenerWatchdog();

 private:
  ListenerWatchdog() = default;
  // Connections waiting in the accept queues of the watched sockets.
  int64_t QueuedConnections();
  void Run();

  uint16_t port_ = 0;
  absl::Duration deaf_after_;
  absl::Duration interval_;
  std::function<void(const std::string&)> on_deaf_;
  std::function<void(int64_t)> on_check_;
  std::vector<std::string> inodes_;  // of the listening sockets
  std::vector<int> tables_;          // /proc/net/tcp and /proc/net/tcp6, held open
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_LISTENER_WATCHDOG_H_
