#include "client/connection.h"

#include <chrono>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "client/commands.h"

namespace kvledger::cli {

void Connection::Register(FlagSet& flags) {
  flags.String("target", &target, "server HOST:PORT (default 127.0.0.1:50051)");
  flags.String("tls-ca-file", &tls_ca_file, "PEM CA bundle: connect with TLS and verify the server");
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

std::string DescribeRpcError(const grpc::Status& status, const std::string& target) {
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
