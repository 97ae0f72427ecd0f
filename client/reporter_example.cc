// reporter_example: sends --records synthetic records to --target through kvledger::Reporter,
// flushes, shuts down, and prints the reporter's Stats as one JSON object. The calls are marked
// synthetic, so the target's figures do not move, unless --real asks for them to be counted. With the server down it
// still finishes within --flush-timeout + --shutdown-timeout, reporting what it dropped.
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/flag_set.h"
#include "lib/wire/json_writer.h"
#include "client/reporter.h"

int main(int argc, char** argv) {
  using kvledger::cli::FlagSet;
  std::optional<uint64_t> records, queue_size;
  std::optional<double> flush_timeout, shutdown_timeout, per_second, flush_interval;
  std::optional<uint64_t> huge_at;
  std::string target = "127.0.0.1:50051", model = "llama-3.1-8b";
  bool real = false;
  FlagSet flags("reporter_example", "Sends synthetic records through kvledger::Reporter and prints its Stats as JSON.");
  flags.Uint64("records", &records, "records to report", true);
  flags.String("target", &target, "kvledger-server HOST:PORT (default 127.0.0.1:50051)");
  flags.String("model", &model, "model of the records (default llama-3.1-8b)");
  flags.Uint64("queue-size", &queue_size, "reporter queue size (default 65536; records beyond a full queue are dropped)");
  flags.Double("flush-timeout", &flush_timeout, "seconds Flush() may take (default 3)");
  flags.Double("records-per-second", &per_second, "report at this pace rather than all at once");
  flags.Switch("real", &real, "count the records in the target's figures (default: marked synthetic, counted only in "
                            "kvledger_synthetic_records_total)");
  flags.Double("shutdown-timeout", &shutdown_timeout, "seconds shutdown may keep sending (default 1)");
  flags.Double("flush-interval", &flush_interval, "seconds a queued record waits for its batch (default 0.1)");
  flags.Uint64("huge-record-at", &huge_at, "the record at this position carries 600,000 prefix block ids (4.8 MB: "
                                           "more than a message may carry)");
  if (int code = kvledger::cli::ParseOrExit(flags, std::vector<std::string>(argv + 1, argv + argc), "reporter_example");
      code >= 0) {
    return code;
  }

  kvledger::ReporterOptions options;
  options.target = target;
  options.flush_interval = absl::Seconds(flush_interval.value_or(0.1));
  options.max_queue_size = std::min<uint64_t>(queue_size.value_or(65536), uint64_t{1} << 24);
  options.synthetic = !real;
  kvledger::Reporter reporter(options);
  kvledger::v1::Record r;
  r.set_model(model);
  const absl::Time start = absl::Now();
  for (uint64_t i = 0; i < *records; ++i) {
    if (per_second && *per_second > 0) absl::SleepFor(start + absl::Seconds(static_cast<double>(i) / *per_second) - absl::Now());
    const int64_t n = 1024 + static_cast<int64_t>(i % 7) * 512;
    r.set_prompt_tokens(n);
    r.set_logical_match_tokens(i % 5 == 0 ? 0 : n / 2);
    r.set_tier(i % 5 == 0 ? kvledger::v1::TIER_UNSPECIFIED : static_cast<kvledger::v1::Tier>(1 + i % 4));
    r.set_suffix_prefill_seconds(0.05 + 0.001 * static_cast<double>(i % 10));
    r.set_ttft_seconds(0.08 + 0.001 * static_cast<double>(i % 10));
    if (huge_at && *huge_at == i) {
      kvledger::v1::Record huge = r;
      huge.set_prompt_tokens(600000 * 16);
      huge.set_block_tokens(16);
      for (uint64_t id = 1; id <= 600000; ++id) huge.add_prefix_block_ids(id);
      reporter.Report(huge);
      continue;
    }
    reporter.Report(r);
  }
  const bool flushed = reporter.Flush(absl::Seconds(flush_timeout.value_or(3)));
  const kvledger::ReporterStats s = reporter.Shutdown(absl::Seconds(shutdown_timeout.value_or(1)));
  kvledger::JsonObject o;
  o.Integer("queued", s.queued).Integer("sent", s.sent).Integer("rejected", s.rejected);
  o.Integer("retried", s.retried).Integer("dropped", s.dropped).Integer("reported", s.reported);
  o.Integer("too_large", s.too_large);
  o.Bool("flushed", flushed);
  std::cout << o.str() << "\n";
  return 0;
}
