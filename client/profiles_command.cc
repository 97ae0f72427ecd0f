// `kvledger profiles`: the model profile catalog, offline (built-in, plus --profiles) or the one a
// server costs records with (--target, the ListProfiles RPC). The JSON is /api/v1/profiles'.
#include <iostream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/flag_set.h"
#include "lib/cost_model/model_shape.h"
#include "lib/profiles/profile_catalog.h"
#include "lib/wire/calculators.h"

namespace kvledger::cli {
namespace {

// The server's catalog, rebuilt from its definitions (they replace the built-in ones of the same name).
absl::StatusOr<ProfileCatalog> ServerCatalog(const Connection& connection, int* exit_code) {
  grpc::ClientContext context;
  connection.SetDeadline(context);
  v1::ProfileCatalog definitions;
  const grpc::Status status = connection.Stub()->ListProfiles(&context, v1::ListProfilesRequest(), &definitions);
  if (!status.ok()) {
    *exit_code = RpcExitCode(status);
    return absl::UnavailableError(DescribeRpcError(status, connection));
  }
  auto catalog = ProfileCatalog::Make(definitions);
  if (!catalog.ok()) *exit_code = kExitFailed;
  return catalog;
}

void PrintTable(const ProfileCatalog& catalog) {
  std::cout << absl::StrFormat("%-22s %-7s %-20s %-14s %s\n", "profile", "layers", "bytes/cached token",
                               "state bytes", "attention");
  for (const std::string& name : catalog.Names()) {
    const Profile& p = *catalog.Find(name);
    uint64_t layers = 0;
    for (const auto& g : p.shape().groups) layers += g.num_layers;
    std::cout << absl::StrFormat("%-22s %-7d %-20s %-14s %s\n", name, layers,
                                 std::to_string(BytesPerCachedToken(p.shape())),
                                 std::to_string(StateBytesPerSequence(p.shape())), p.attention_summary());
  }
}

}  // namespace

int Profiles(const Args& args) {
  Connection connection;
  connection.target.clear();  // offline unless --target is given
  std::string profiles;
  bool json = false;
  FlagSet flags("profiles",
                "The model profile catalog: name, layers, KV bytes per cached token, recurrent state bytes per\n"
                "sequence and attention kinds. Offline: the built-in catalog (and --profiles); with --target,\n"
                "the catalog that server costs records with.");
  connection.Register(flags);
  flags.String("profiles", &profiles, "offline: profile file adding or overriding built-in profiles");
  flags.Switch("json", &json, "print the catalog as /api/v1/profiles does, with every definition");
  if (int code = ParseOrExit(flags, args, "profiles"); code >= 0) return code;
  if (!connection.target.empty() && !profiles.empty()) {
    std::cerr << "kvledger profiles: --profiles: offline only; with --target the server's catalog is listed\n";
    return kExitBadInput;
  }
  int failed = kExitBadInput;
  auto catalog = connection.target.empty() ? ProfileCatalog::LoadFile(profiles) : ServerCatalog(connection, &failed);
  if (!catalog.ok()) {
    std::cerr << "kvledger profiles: " << catalog.status().message() << "\n";
    return failed;
  }
  if (json) {
    std::cout << ProfilesToJson(*catalog) << "\n";
  } else {
    PrintTable(*catalog);
  }
  return kExitOk;
}

}  // namespace kvledger::cli
