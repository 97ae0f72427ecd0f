// main() of kvledger-server and kvledger-noop-server: flags -> ServerOptions -> KvledgerServer,
// then serve until SIGINT or SIGTERM.
#ifndef KVLEDGER_SERVER_SERVER_MAIN_H_
#define KVLEDGER_SERVER_SERVER_MAIN_H_

#include <memory>

#include "lib/accounting/record_sink.h"

namespace kvledger {

// Exit codes: 0 after a clean shutdown, 1 when the server cannot start, 2 for bad flags, 3 when the gRPC
// listener went deaf (--deaf_listener_seconds).
// `summary` heads --help; `sink`, when given, takes the records instead of the ledger.
int ServerMain(int argc, char** argv, const char* program, const char* summary,
               std::unique_ptr<RecordSink> sink = nullptr);

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_SERVER_MAIN_H_
