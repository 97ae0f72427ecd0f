#include "server/server_main.h"

int main(int argc, char** argv) {
  return kvledger::ServerMain(argc, argv, "kvledger-server",
                              "prefix-cache reuse accounting over gRPC, exported to Prometheus");
}
