// The exit status of every kvledger program, the CLI and the servers alike (docs/operations.md,
// "Messages and exit status").
#ifndef KVLEDGER_LIB_BASE_EXIT_STATUS_H_
#define KVLEDGER_LIB_BASE_EXIT_STATUS_H_

namespace kvledger {

inline constexpr int kExitOk = 0;
// It could not be done: the server cannot be reached or fails (CLI); an address cannot be bound (server).
inline constexpr int kExitFailed = 1;
// What was given is wrong: a flag, a value, a file a flag names, a record or request refused as
// INVALID_ARGUMENT.
inline constexpr int kExitBadInput = 2;
// kvledger-server only: its gRPC listener went deaf (--deaf_listener_seconds), to be restarted.
inline constexpr int kExitDeafListener = 3;

}  // namespace kvledger

#endif  // KVLEDGER_LIB_BASE_EXIT_STATUS_H_
