// kvledger-noop-server: the same server with a sink that accepts every record and counts nothing,
// so benchmarks can measure what parsing and gRPC cost on their own.
#include <memory>

#include "lib/accounting/record_sink.h"
#include "server/server_main.h"

namespace {

class DiscardingSink final : public kvledger::RecordSink {
 public:
  kvledger::Verdict Record(const kvledger::RecordFacts&) override { return kvledger::Verdict(); }
};

}  // namespace

int main(int argc, char** argv) {
  return kvledger::ServerMain(argc, argv, "kvledger-noop-server",
                              "parses and discards kvledger records (the benchmark baseline)",
                              std::make_unique<DiscardingSink>());
}
