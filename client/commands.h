// The kvledger CLI subcommands. Each takes the arguments after its name and returns the process
// exit code: 0 success, 1 a failed operation (RPC error, rejected record), 2 bad usage.
#ifndef KVLEDGER_CLIENT_COMMANDS_H_
#define KVLEDGER_CLIENT_COMMANDS_H_

#include <string>
#include <vector>

namespace kvledger::cli {

using Args = std::vector<std::string>;

int Calc(const Args& args);     // alpha-only calculator (offline)
int KvBytes(const Args& args);  // KV cache size and capacity (offline)
int Explain(const Args& args);  // derived figures for one record: offline, or via --target
int Send(const Args& args);     // one record via the Record RPC
int Replay(const Args& args);   // a JSON-lines trace via RecordBatch
int Bench(const Args& args);    // load generator
int Health(const Args& args);
int Advise(const Args& args);   // reload or recompute, via the Advise RPC   // grpc.health.v1 Check: exit 0 when SERVING

}  // namespace kvledger::cli

#endif  // KVLEDGER_CLIENT_COMMANDS_H_
