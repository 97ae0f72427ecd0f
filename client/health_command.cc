// `kvledger health`: the standard grpc.health.v1.Health/Check call, for container health checks
// and scripts. The two messages are tiny, so they are encoded by hand on a generic stub instead of
// compiling the health .proto into the CLI: the request is HealthCheckRequest{service}, the answer's
// field 1 is the ServingStatus enum (1 = SERVING).
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "client/commands.h"
#include "client/connection.h"
#include "client/flag_set.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace kvledger::cli {
namespace {

// HealthCheckRequest with field 1 (string service) set when non-empty.
std::string EncodeRequest(const std::string& service) {
  std::string out;
  if (service.empty()) return out;
  out.push_back(0x0a);  // field 1, length-delimited
  for (size_t n = service.size(); ; n >>= 7) {  // varint length
    out.push_back(static_cast<char>((n & 0x7f) | (n > 0x7f ? 0x80 : 0)));
    if (n <= 0x7f) break;
  }
  return out + service;
}

// The ServingStatus of a HealthCheckResponse, 0 (UNKNOWN) when absent.
int DecodeStatus(const std::string& bytes) {
  if (bytes.size() >= 2 && bytes[0] == 0x08) return static_cast<unsigned char>(bytes[1]) & 0x7f;
  return 0;
}

const char* StatusName(int status) {
  switch (status) {
    case 1: return "SERVING";
    case 2: return "NOT_SERVING";
    case 3: return "SERVICE_UNKNOWN";
    default: return "UNKNOWN";
  }
}

}  // namespace

int Health(const Args& args) {
  Connection connection;
  std::string service;
  FlagSet flags("health", "grpc.health.v1 Check against the server: prints the status, exits 0 when SERVING, 1 otherwise.");
  connection.Register(flags);
  flags.String("service", &service, "service name to check (default \"\": the whole server; or kvledger.v1.Ledger)");
  if (int code = ParseOrExit(flags, args, "health"); code >= 0) return code;

  grpc::GenericStub stub(connection.Channel());
  grpc::ClientContext context;
  connection.SetDeadline(context);
  const std::string request_bytes = EncodeRequest(service);
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = std::move(s);
                   done = true;
                   done_cv.notify_one();
                 });
  {
    std::unique_lock<std::mutex> lock(mu);
    done_cv.wait(lock, [&] { return done; });
  }
  if (!status.ok()) {
    std::cerr << "kvledger health: " << DescribeRpcError(status, connection) << "\n";
    return 1;
  }
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  const int serving = DecodeStatus(bytes);
  std::cout << StatusName(serving) << "\n";
  return serving == 1 ? 0 : 1;
}

}  // namespace kvledger::cli
