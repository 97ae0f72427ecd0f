// Reports 100 records (a 2048-token device hit on a 4096-token prompt each) to the server given as
// the first argument through kvledger::Reporter, flushes, and prints "sent=N rejected=N dropped=N".
#include <iostream>

#include "client/reporter.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: reporter_consumer HOST:PORT\n";
    return 2;
  }
  kvledger::ReporterOptions options;
  options.target = argv[1];
  kvledger::Reporter reporter(options);
  kvledger::v1::Record record;
  record.set_model("llama-3.1-8b");
  record.set_tier(kvledger::v1::TIER_DEVICE);
  record.set_prompt_tokens(4096);
  record.set_logical_match_tokens(2048);
  for (int i = 0; i < 100; ++i) reporter.Report(record);
  const bool flushed = reporter.Flush(absl::Seconds(10));
  const kvledger::ReporterStats stats = reporter.Shutdown(absl::Seconds(5));
  std::cout << "sent=" << stats.sent << " rejected=" << stats.rejected << " dropped=" << stats.dropped << "\n";
  return flushed ? 0 : 1;
}
