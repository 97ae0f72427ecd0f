// main() of kvledger-server and kvledger-noop-server: flags -> ServerOptions -> KvledgerServer,
// then serve until SIGINT or SIGTERM.
#ifndef KVLEDGER_SERVER_SERVER_MAIN_H_
#define KVLEDGER_SERVER_SERVER_MAIN_H_

#include <memory>

#include "lib/accounting/record_sink.h"

namespace kvledger {

// Exit codes (docs/operations.md, "Messages and exit status"): 0 after a clean shutdown, 2 for a bad
// flag (unknown, a value out of range, a file it names that is unusable), 1 when the server cannot
// start for another reason (an address that cannot be bound), 3 when the gRPC listener went deaf
// (--deaf_listener_seconds).
inline constexpr int kExitOk = 0;
inline constexpr int kExitCannotStart = 1;
inline constexpr int kExitBadFlags = 2;
inline constexpr int kExitDeafListener = 3;
// `summary` heads --help; `sink`, when given, takes the records instead of the ledger.
int ServerMain(int argc, char** argv, const char* program, const char* summary,
               std::unique_ptr<RecordSink> sink = nullptr);

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_SERVER_MAIN_H_
