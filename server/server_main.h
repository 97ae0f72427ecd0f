// main() of kvledger-server and kvledger-noop-server: flags -> ServerOptions -> KvledgerServer,
// then serve until SIGINT or SIGTERM.
#ifndef KVLEDGER_SERVER_SERVER_MAIN_H_
#define KVLEDGER_SERVER_SERVER_MAIN_H_

#include <memory>

#include "lib/accounting/record_sink.h"
#include "lib/base/exit_status.h"

namespace kvledger {

// Exits (lib/base/exit_status.h) kExitOk after a clean shutdown, kExitBadInput for a bad flag, kExitFailed
// when the server cannot start for another reason, kExitDeafListener when the gRPC listener went deaf.
// `summary` heads --help; `sink`, when given, takes the records instead of the ledger.
int ServerMain(int argc, char** argv, const char* program, const char* summary,
               std::unique_ptr<RecordSink> sink = nullptr);

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_SERVER_MAIN_H_
