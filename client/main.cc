// kvledger: the command-line client and calculators.
#include <iostream>
#include <map>
#include <string>

#include "client/commands.h"

namespace {

constexpr char kUsage[] =
    "usage: kvledger COMMAND [flags]   (kvledger COMMAND --help for its flags)\n\n"
    "offline calculators:\n"
    "  calc       what a token hit ratio alpha buys (attention, block, end to end)\n"
    "  kv-bytes   KV cache size and capacity for a shape or a model profile\n"
    "  explain    every derived figure for one record (offline, or --target for the server)\n"
    "  profiles   the model profile catalog (offline, or --target for the server's)\n"
    "  plan       what cache capacity buys for a real trace: replay it through simulated LRU tiers\n\n"
    "talking to kvledger-server (--target HOST:PORT, default 127.0.0.1:50051):\n"
    "  send       one record\n"
    "  replay     a JSON-lines trace of records, in batches\n"
    "  bench      load generator (unary, batch or stream)\n"
    "  advise     reload or recompute: estimated seconds per candidate tier, and a recommendation\n"
    "  capacity   what each cache capacity would have bought, live, from records with prefix block ids\n"
    "  health     gRPC health check: exit 0 when the server is SERVING (container health checks)\n";

}  // namespace

int main(int argc, char** argv) {
  using Command = int (*)(const kvledger::cli::Args&);
  const std::map<std::string, Command> commands = {
      {"calc", kvledger::cli::Calc},       {"kv-bytes", kvledger::cli::KvBytes},
      {"explain", kvledger::cli::Explain}, {"send", kvledger::cli::Send},
      {"replay", kvledger::cli::Replay},   {"bench", kvledger::cli::Bench},
      {"health", kvledger::cli::Health},   {"advise", kvledger::cli::Advise},
      {"profiles", kvledger::cli::Profiles}, {"plan", kvledger::cli::Plan},
      {"capacity", kvledger::cli::Capacity}};
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    std::cout << kUsage;
    return 0;
  }
  auto it = commands.find(name);
  if (it == commands.end()) {
    std::cerr << "kvledger: unknown command '" << name << "' (see kvledger --help)\n";
    return 2;
  }
  return it->second(kvledger::cli::Args(argv + 2, argv + argc));
}
