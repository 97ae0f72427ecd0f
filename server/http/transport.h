// One client connection of the HTTP listener as bytes in and out: plain TCP, or TLS over it
// (OpenSSL, non-blocking). Reads never block (the event thread); writes finish before a deadline
// or fail (the workers), so no client that reads slowly holds a worker past it.
#ifndef KVLEDGER_SERVER_HTTP_TRANSPORT_H_
#define KVLEDGER_SERVER_HTTP_TRANSPORT_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "server/http/clock.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace kvledger {

class Transport {
 public:
  // kPlainHttp: the client's first bytes are a plain HTTP request, not a TLS hello.
  enum class Handshake { kDone, kWantRead, kWantWrite, kFailed, kPlainHttp };
  static constexpr ssize_t kWouldBlock = -1;
  static constexpr ssize_t kBroken = -2;

  // Takes `fd` (non-blocking); with `tls` the connection is TLS, its handshake to be driven.
  static std::unique_ptr<Transport> Make(int fd, SSL_CTX* tls);
  virtual ~Transport();  // closes the socket

  int fd() const { return fd_; }
  // Progress of the TLS handshake (kDone at once for plain TCP).
  virtual Handshake Continue() { return Handshake::kDone; }
  // Whether a read would block on the socket (false when TLS holds bytes already decrypted).
  virtual bool NeedsSocket() const { return true; }
  // Reads without blocking: bytes read, 0 at the client's end of stream, kWouldBlock or kBroken.
  virtual ssize_t Read(char* buffer, size_t size) = 0;
  // Writes all of `data` by `deadline`; false when the client is gone, or did not read in time.
  bool Write(absl::string_view data, HttpClock::time_point deadline);
  // Writes what the socket takes of `data` by `deadline`: the bytes written, or kBroken.
  virtual ssize_t WriteSome(absl::string_view data, HttpClock::time_point deadline) = 0;
  // Best effort, without waiting: `text` as it is on the socket, outside TLS (a refusal to a client
  // that does not speak TLS).
  void WritePlain(absl::string_view text);
  // Ends the connection at once (any thread): a blocked Write returns false.
  void Abort();

 protected:
  explicit Transport(int fd) : fd_(fd) {}
  // Waits for `events` on the socket until `deadline`; false when it passed or the socket broke.
  bool Await(short events, HttpClock::time_point deadline) const;
  const int fd_;
};

// Compresses a response body to gzip (RFC 1952) in pieces, for Content-Encoding: gzip.
class GzipStream {
 public:
  GzipStream();
  ~GzipStream();
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;
  // Compressed bytes for `input` (may be empty until enough has come), and the rest at Finish.
  std::string Add(absl::string_view input);
  std::string Finish();

 private:
  std::string Run(absl::string_view input, int flush);
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_TRANSPORT_H_
