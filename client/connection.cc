#include "client/connection.h"

#include <netdb.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/commands.h"

namespace kvledger::cli {

namespace {

// A gRPC target, not a URL: http://HOST:PORT is most often the metrics port's address.
absl::Status CheckTarget(const std::string& target) {
  if (absl::StartsWith(target, "http://") || absl::StartsWith(target, "https://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--target = ", target, ": a gRPC target is HOST:PORT (or dns:///HOST:PORT), not a URL; the gRPC port is "
        "kvledger-server's --grpc_address (default 50051), not its metrics port"));
  }
  return absl::OkStatus();
}

absl::Status CheckReadable(const std::string& path) {
  if (!std::ifstream(path)) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-ca-file = ", path, ": cannot be read"));
  }
  return absl::OkStatus();
}

}  // namespace

void Connection::Register(FlagSet& flags) {
  flags.CheckedString("target", &target, "server HOST:PORT (default 127.0.0.1:50051)", CheckTarget);
  flags.CheckedString("tls-ca-file", &tls_ca_file, "PEM CA bundle: connect with TLS and verify the server",
                      CheckReadable);
  flags.Double("timeout", &timeout_seconds, "per-RPC deadline in seconds (default 10)");
  flags.Choice("lb", &load_balancing_policy, {"round_robin", "pick_first"},
               "round_robin (default: calls spread over every address of the target, e.g. every replica "
               "behind a DNS name) or pick_first (one address)");
}

std::unique_ptr<v1::Ledger::Stub> Connection::Stub(bool own_connection) const {
  return v1::Ledger::NewStub(Channel(own_connection));
}

std::shared_ptr<grpc::ChannelCredentials> Connection::Credentials() const {
  if (tls_ca_file.empty()) return grpc::InsecureChannelCredentials();
  std::ifstream in(tls_ca_file);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return grpc::SslCredentials(ssl);
}

std::shared_ptr<grpc::Channel> Connection::Channel(bool own_connection) const {
  grpc::ChannelArguments arguments;
  arguments.SetLoadBalancingPolicyName(load_balancing_policy);
  if (own_connection) arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, Credentials(), arguments);
}

void Connection::SetDeadline(grpc::ClientContext& context) const {
  const auto millis = static_cast<int64_t>(timeout_seconds.value_or(10) * 1000);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(millis));
}

namespace {

// The first HOST:PORT of a target ("HOST:PORT", "dns:///HOST:PORT", "ipv4:A:P,B:Q", "[v6]:PORT").
std::optional<std::pair<std::string, std::string>> FirstAddress(absl::string_view target) {
  for (absl::string_view scheme : {"dns:///", "ipv4:", "ipv6:"}) absl::ConsumePrefix(&target, scheme);
  target = target.substr(0, target.find(','));
  const size_t colon = target.rfind(':');
  if (colon == absl::string_view::npos) return std::nullopt;
  absl::string_view host = target.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  return std::make_pair(std::string(host), std::string(target.substr(colon + 1)));
}

// Whether `target` completes a TLS handshake (its certificate unchecked): a plaintext client's
// failure there means "give --tls-ca-file", not "is it running?". At most two seconds.
bool SpeaksTls(const std::string& target) {
  const auto address = FirstAddress(target);
  if (!address) return false;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(address->first.c_str(), address->second.c_str(), &hints, &found) != 0) return false;
  const int fd = socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  const timeval limit{2, 0};
  bool tls = false;
  if (fd >= 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
    if (connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
      SSL* ssl = ctx != nullptr ? SSL_new(ctx) : nullptr;
      if (ssl != nullptr) {
        SSL_set_fd(ssl, fd);
        SSL_set_alpn_protos(ssl, reinterpret_cast<const unsigned char*>("\x02h2"), 3);
        tls = SSL_connect(ssl) == 1 || SSL_get_peer_certificate(ssl) != nullptr;
        SSL_free(ssl);
      }
      SSL_CTX_free(ctx);
    }
    close(fd);
  }
  freeaddrinfo(found);
  return tls;
}

}  // namespace

std::string DescribeRpcError(const grpc::Status& status, const Connection& connection) {
  const std::string& target = connection.target;
  const bool tls = !connection.tls_ca_file.empty();
  if (absl::StrContains(status.error_message(), "http1.x")) {
    return absl::StrCat("cannot reach ", target, ": it answers HTTP/1.1, not gRPC (is it kvledger-server's metrics "
                        "port? the gRPC port is its --grpc_address, default 50051)");
  }
  if (!tls && status.error_code() == grpc::StatusCode::UNAVAILABLE && SpeaksTls(target)) {
    return absl::StrCat("cannot reach ", target, ": it speaks TLS and this connection is plaintext (give "
                        "--tls-ca-file with the CA bundle that signed kvledger-server's --tls_cert_file)");
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::StrCat("cannot reach ", target, ": ", status.error_message(), " (is kvledger-server running?)");
  }
  return status.error_message();
}

int RpcExitCode(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? kExitBadInput : kExitFailed;
}

}  // namespace kvledger::cli
