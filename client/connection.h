// The connection flags every RPC subcommand of the kvledger CLI takes, and the stub they make.
#ifndef KVLEDGER_CLIENT_CONNECTION_H_
#define KVLEDGER_CLIENT_CONNECTION_H_

#include <memory>
#include <optional>
#include <string>

#include "client/flag_set.h"
#include "grpcpp/grpcpp.h"
#include "kvledger/v1/ledger.grpc.pb.h"

namespace kvledger::cli {

inline constexpr char kDefaultTarget[] = "127.0.0.1:50051";

struct Connection {
  std::string target = kDefaultTarget;
  std::string tls_ca_file;
  std::optional<double> timeout_seconds;
  std::string load_balancing_policy = "round_robin";  // --lb

  // Adds --target, --tls-ca-file, --timeout and --lb.
  void Register(FlagSet& flags);
  // A stub on a new channel; with own_connection the channel never shares a TCP connection with
  // other channels of this process (the load generator's connections are real connections).
  std::unique_ptr<v1::Ledger::Stub> Stub(bool own_connection = false) const;
  // Insecure, or TLS verified against --tls-ca-file.
  std::shared_ptr<grpc::ChannelCredentials> Credentials() const;
  // The channel behind Stub().
  std::shared_ptr<grpc::Channel> Channel(bool own_connection = false) const;
  // Applies --timeout (default 10 s) to one call.
  void SetDeadline(grpc::ClientContext& context) const;
};

// A one-line explanation of a failed call on `connection`, with a hint when the server is
// unreachable: its metrics port, a TLS port reached without --tls-ca-file, or nothing running.
std::string DescribeRpcError(const grpc::Status& status, const Connection& connection);

// The exit status for a failed call: kExitBadInput when the server refused what was sent
// (INVALID_ARGUMENT), kExitFailed otherwise.
int RpcExitCode(const grpc::Status& status);

}  // namespace kvledger::cli

#endif  // KVLEDGER_CLIENT_CONNECTION_H_
