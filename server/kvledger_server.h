// One running kvledger service: profile catalog, model registry, aggregator, live rates, the gRPC
// server (Ledger, health, reflection) and the HTTP listener (/metrics, the JSON API, /explore), wired
// together. Used by main() and by the in-process tests.
#ifndef KVLEDGER_SERVER_KVLEDGER_SERVER_H_
#define KVLEDGER_SERVER_KVLEDGER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/accounting/record_sink.h"
#include "server/server_options.h"

namespace kvledger {

class ServerMetrics;

inline constexpr char kVersion[] = "0.1.0";

// The process-wide gRPC settings every server of this process gets: the health service and server
// reflection. Called once by main() before Start(); a library never changes them on its own.
void ConfigureGrpcProcess();

class KvledgerServer {
 public:
  // Loads profiles, binds both listeners and starts serving. Records go to `sink`, or, when it is
  // null, to this server's Ledger (counted and exported). INVALID_ARGUMENT for bad options or a bad
  // profile file; UNAVAILABLE when a listener cannot bind.
  static absl::StatusOr<std::unique_ptr<KvledgerServer>> Start(const ServerOptions& options,
                                                               std::unique_ptr<RecordSink> sink = nullptr);

  ~KvledgerServer();  // shuts down if still running

  // Bound addresses, with the real port when 0 was asked for.
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& metrics_address() const { return metrics_address_; }
  // Where Prometheus scrapes: https://HOST:PORT/metrics with TLS on the HTTP port, else http://.
  std::string metrics_url() const;
  // Number of profiles loaded.
  size_t profile_count() const;
  // The server's own operational metrics (exported on /metrics), e.g. for the listener watchdog.
  ServerMetrics& metrics();
  // Records accepted so far, summed over every model and tier (the sum of kvledger_requests_total);
  // readable after Shutdown.
  uint64_t accepted_records() const;

  // Marks health NOT_SERVING, waits options.shutdown_drain_seconds, ends open streams with their
  // summaries, stops accepting calls, lets in-flight ones finish for up to 5 s (then cancels them),
  // keeps /metrics up options.shutdown_scrape_grace_seconds more, then stops it. Without `patient`
  // (an operator's Ctrl-C) the drain and scrape-grace waits are skipped. Idempotent.
  void Shutdown(bool patient = true);

 private:
  struct State;
  static void ReadFleetRates(const ServerOptions& options, State& state);
  // --ready_after_scrape_seconds: the ledger service NOT_SERVING until the first scrape, then SERVING.
  static void StartReadiness(State& state);
  explicit KvledgerServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
  std::string grpc_address_;
  std::string metrics_address_;
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_KVLEDGER_SERVER_H_
