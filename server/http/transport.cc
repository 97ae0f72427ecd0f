#include "server/http/transport.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>

namespace kvledger {
namespace {

int MillisUntil(HttpClock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - HttpClock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1000));  // re-check the clock at least every second
}

class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(int fd) : Transport(fd) {}

  ssize_t Read(char* buffer, size_t size) override {
    for (;;) {
      const ssize_t n = recv(fd_, buffer, size, 0);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? kWouldBlock : kBroken;
    }
  }

  ssize_t WriteSome(absl::string_view data, HttpClock::time_point deadline) override {
    size_t written = 0;
    while (written < data.size()) {
      const ssize_t n = send(fd_, data.data() + written, data.size() - written, MSG_NOSIGNAL);
      if (n > 0) {
        written += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!Await(POLLOUT, deadline)) return static_cast<ssize_t>(written);
      } else {
        return kBroken;
      }
    }
    return static_cast<ssize_t>(written);
  }
};

class TlsTransport final : public Transport {
 public:
  TlsTransport(int fd, SSL_CTX* ctx) : Transport(fd), ssl_(SSL_new(ctx)) {
    if (ssl_ != nullptr) {
      SSL_set_fd(ssl_, fd);
      SSL_set_accept_state(ssl_);
    }
  }
  ~TlsTransport() override {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }

  Handshake Continue() override {
    if (ssl_ == nullptr) return Handshake::kFailed;
    if (!hello_checked_) {  // a TLS record starts with its type (0x16 for a handshake); HTTP with a method
      char first = 0;
      const ssize_t n = recv(fd_, &first, 1, MSG_PEEK);
      if (n == 0) return Handshake::kFailed;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? Handshake::kWantRead : Handshake::kFailed;
      hello_checked_ = true;
      if (first >= 'A' && first <= 'Z') return Handshake::kPlainHttp;
    }
    const int rc = SSL_do_handshake(ssl_);
    if (rc == 1) return Handshake::kDone;
    switch (SSL_get_error(ssl_, rc)) {
      case SSL_ERROR_WANT_READ: return Handshake::kWantRead;
      case SSL_ERROR_WANT_WRITE: return Handshake::kWantWrite;
      default: ERR_clear_error(); return Handshake::kFailed;
    }
  }

  bool NeedsSocket() const override { return SSL_pending(ssl_) == 0; }

  ssize_t Read(char* buffer, size_t size) override {
    const int n = SSL_read(ssl_, buffer, static_cast<int>(std::min<size_t>(size, 1 << 30)));
    if (n > 0) return n;
    switch (SSL_get_error(ssl_, n)) {
      case SSL_ERROR_WANT_READ:
      case SSL_ERROR_WANT_WRITE: return kWouldBlock;  // a renegotiation write: the next readable event retries
      case SSL_ERROR_ZERO_RETURN: return 0;
      default: ERR_clear_error(); return kBroken;
    }
  }

  ssize_t WriteSome(absl::string_view data, HttpClock::time_point deadline) override {
    size_t written = 0;
    while (written < data.size()) {
      const int n = SSL_write(ssl_, data.data() + written,
                              static_cast<int>(std::min<size_t>(data.size() - written, 1 << 30)));
      if (n > 0) {
        written += static_cast<size_t>(n);
        continue;
      }
      const int error = SSL_get_error(ssl_, n);
      if (error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_WANT_READ) {
        if (!Await(error == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, deadline)) return static_cast<ssize_t>(written);
        continue;
      }
      ERR_clear_error();
      return kBroken;
    }
    return static_cast<ssize_t>(written);
  }

 private:
  SSL* const ssl_;
  bool hello_checked_ = false;
};

}  // namespace

std::unique_ptr<Transport> Transport::Make(int fd, SSL_CTX* tls) {
  if (tls != nullptr) return std::make_unique<TlsTransport>(fd, tls);
  return std::make_unique<PlainTransport>(fd);
}

Transport::~Transport() { close(fd_); }

void Transport::WritePlain(absl::string_view text) {
  [[maybe_unused]] const ssize_t n = send(fd_, text.data(), text.size(), MSG_NOSIGNAL);
}

bool Transport::Write(absl::string_view data, HttpClock::time_point deadline) {
  const ssize_t n = WriteSome(data, deadline);
  return n >= 0 && static_cast<size_t>(n) == data.size();
}

void Transport::Abort() { shutdown(fd_, SHUT_RDWR); }

bool Transport::Await(short events, HttpClock::time_point deadline) const {
  for (;;) {
    if (HttpClock::now() >= deadline) return false;
    pollfd p{fd_, events, 0};
    const int rc = poll(&p, 1, MillisUntil(deadline));
    if (rc < 0 && errno != EINTR) return false;
    if (rc > 0) return (p.revents & events) != 0 && (p.revents & (POLLERR | POLLNVAL)) == 0;
  }
}

struct GzipStream::State {
  z_stream z{};
  bool ok = false;
};

GzipStream::GzipStream() : state_(std::make_unique<State>()) {
  // windowBits 15 + 16: a gzip header and trailer; level 6 (zlib's default) is what promhttp uses.
  state_->ok = deflateInit2(&state_->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
}

GzipStream::~GzipStream() {
  if (state_->ok) deflateEnd(&state_->z);
}

std::string GzipStream::Run(absl::string_view input, int flush) {
  std::string out;
  z_stream& z = state_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  z.avail_in = static_cast<uInt>(input.size());
  char buffer[16384];
  do {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    deflate(&z, flush);
    out.append(buffer, sizeof(buffer) - z.avail_out);
  } while (z.avail_out == 0);
  return out;
}

std::string GzipStream::Add(absl::string_view input) { return Run(input, Z_NO_FLUSH); }
std::string GzipStream::Finish() { return Run("", Z_FINISH); }

}  // namespace kvledger
