#include "server/server_main.h"

int main(int argc, char** argv) { return kvledger::ServerMain(argc, argv, "kvledger-server", false); }
