#include "server/listener_watchdog.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace kvledger {
namespace {

// Reads the whole of an open /proc file from its start.
std::string ReadFromStart(int fd) {
  std::string text;
  if (lseek(fd, 0, SEEK_SET) < 0) return text;
  char buffer[16384];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

struct ListenRow {
  std::string inode;
  uint16_t port = 0;
  int64_t queued = 0;  // for a listening socket, rx_queue is its accept queue
};

// The LISTEN rows of a /proc/net/tcp{,6} table.
std::vector<ListenRow> ListenRows(const std::string& table) {
  std::vector<ListenRow> rows;
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
    if (f.size() < 10 || f[3] != "0A") continue;
    ListenRow row;
    const size_t colon = f[1].rfind(':');
    uint32_t port = 0;
    if (colon == absl::string_view::npos || !absl::SimpleHexAtoi(f[1].substr(colon + 1), &port)) continue;
    row.port = static_cast<uint16_t>(port);
    const size_t queues = f[4].find(':');
    if (queues == absl::string_view::npos || !absl::SimpleHexAtoi(f[4].substr(queues + 1), &row.queued)) continue;
    row.inode = std::string(f[9]);
    rows.push_back(std::move(row));
  }
  return rows;
}

// Inodes of the sockets this process holds.
absl::flat_hash_set<std::string> OwnSocketInodes() {
  absl::flat_hash_set<std::string> inodes;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return inodes;
  while (dirent* entry = readdir(dir)) {
    char target[64];
    const std::string path = absl::StrCat("/proc/self/fd/", entry->d_name);
    const ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    absl::string_view link(target, static_cast<size_t>(n));
    if (absl::ConsumePrefix(&link, "socket:[") && absl::ConsumeSuffix(&link, "]")) inodes.insert(std::string(link));
  }
  closedir(dir);
  return inodes;
}

// Descriptors this process has open (reads /proc/self/fd); -1 if it cannot tell.
int64_t OpenDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int64_t count = 0;
  while (readdir(dir) != nullptr) ++count;
  closedir(dir);
  return count - 3;  // ".", ".." and the directory's own descriptor
}

}  // namespace

absl::StatusOr<uint64_t> RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return absl::InternalError(absl::StrCat("getrlimit: ", strerror(errno)));
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return absl::InternalError(absl::StrCat("setrlimit(RLIMIT_NOFILE, ", limit.rlim_max, "): ", strerror(errno),
                                              " (the limit stays ", before, ")"));
    }
  }
  return static_cast<uint64_t>(limit.rlim_cur);
}

absl::StatusOr<std::unique_ptr<ListenerWatchdog>> ListenerWatchdog::Start(
    uint16_t port, absl::Duration deaf_after, std::function<void(const std::string&)> on_deaf,
    absl::Duration interval, std::function<void(int64_t queued)> on_check) {
  auto watchdog = std::unique_ptr<ListenerWatchdog>(new ListenerWatchdog());
  watchdog->port_ = port;
  watchdog->deaf_after_ = deaf_after;
  watchdog->interval_ = interval;
  watchdog->on_deaf_ = std::move(on_deaf);
  watchdog->on_check_ = std::move(on_check);
  const auto own = OwnSocketInodes();
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // no IPv6 in this kernel
    watchdog->tables_.push_back(fd);
    for (const ListenRow& row : ListenRows(ReadFromStart(fd))) {
      if (row.port == port && own.contains(row.inode)) watchdog->inodes_.push_back(row.inode);
    }
  }
  if (watchdog->inodes_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("listener watchdog: no socket of this process listens on port ", port, " in /proc/net/tcp"));
  }
  watchdog->thread_ = std::thread([w = watchdog.get()] { w->Run(); });
  return watchdog;
}

ListenerWatchdog::~ListenerWatchdog() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
  for (int fd : tables_) close(fd);
}

int64_t ListenerWatchdog::QueuedConnections() {
  int64_t queued = 0;
  for (int fd : tables_) {
    for (const ListenRow& row : ListenRows(ReadFromStart(fd))) {
      for (const std::string& inode : inodes_) {
        if (row.inode == inode) queued += row.queued;
      }
    }
  }
  return queued;
}

void ListenerWatchdog::Run() {
  // A spare descriptor, given back for a moment to count descriptors when none is left.
  int spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
  absl::Time queued_since = absl::InfiniteFuture();
  while (!stop_.WaitForNotificationWithTimeout(interval_)) {
    const int64_t queued = QueuedConnections();
    if (on_check_) on_check_(queued);
    const absl::Time now = absl::Now();
    if (queued == 0) {
      queued_since = absl::InfiniteFuture();
      continue;
    }
    if (queued_since == absl::InfiniteFuture()) queued_since = now;
    if (now - queued_since < deaf_after_) continue;
    if (spare >= 0) close(spare);
    const int64_t open_now = OpenDescriptors();
    rlimit limit{};
    getrlimit(RLIMIT_NOFILE, &limit);
    on_deaf_(absl::StrCat("the gRPC listener on port ", port_, " has accepted no connection for ",
                          absl::FormatDuration(absl::Trunc(now - queued_since, absl::Seconds(1))), " while ", queued,
                          " wait in its accept queue (open descriptors: ", open_now, " of ", limit.rlim_cur,
                          "); gRPC does not resume accepting after running out of descriptors"));
    return;
  }
  if (spare >= 0) close(spare);
}

}  // namespace kvledger
