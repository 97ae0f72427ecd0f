// libFuzzer target: arbitrary bytes as a --web_config_file (exporter-toolkit YAML), through
// ParseWebConfig. Under ASan/UBSan no input crashes or throws; an accepted config holds only what
// the rules allow (TLS with both files; bcrypt hashes only).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "server/http/security.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = kvledger::ParseWebConfig(text, "fuzz.yml");
  if (!config.ok()) return 0;
  if (config->tls && (config->tls->cert_file.empty() || config->tls->key_file.empty())) std::abort();
  for (const auto& [user, hash] : config->basic_auth_users) {
    if (!absl::StartsWith(hash, "$2")) std::abort();
  }
  return 0;
}
