// The kvledger CLI subcommands. Each takes the arguments after its name and returns the process
// exit code (docs/operations.md, "Messages and exit status"): kExitOk, kExitBadInput when what was
// given is wrong (a flag, a value, a record or request the cost model or the server refuses as
// INVALID_ARGUMENT), kExitFailed when the operation could not be done (the server cannot be reached
// or fails).
#ifndef KVLEDGER_CLIENT_COMMANDS_H_
#define KVLEDGER_CLIENT_COMMANDS_H_

#include <string>
#include <vector>

#include "lib/base/exit_status.h"

namespace kvledger::cli {

using Args = std::vector<std::string>;

using kvledger::kExitBadInput;  // lib/base/exit_status.h
using kvledger::kExitFailed;
using kvledger::kExitOk;


int Calc(const Args& args);     // alpha-only calculator (offline)
int KvBytes(const Args& args);  // KV cache size and capacity (offline)
int Explain(const Args& args);  // derived figures for one record: offline, or via --target
int Send(const Args& args);     // one record via the Record RPC
int Replay(const Args& args);   // a JSON-lines trace via RecordBatch
int Bench(const Args& args);    // load generator
int Health(const Args& args);   // grpc.health.v1 Check: exit 0 when SERVING
int Advise(const Args& args);   // reload or recompute, via the Advise RPC
int Profiles(const Args& args); // the profile catalog: offline, or the server's via --target
int Plan(const Args& args);     // a prefix-reuse trace through simulated cache tiers (offline, or --send)
int Capacity(const Args& args); // the server's live capacity curves, via the CapacityCurve RPC

}  // namespace kvledger::cli

#endif  // KVLEDGER_CLIENT_COMMANDS_H_
