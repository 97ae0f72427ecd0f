#include "server/http/security.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "yaml-cpp/yaml.h"

namespace kvledger {
namespace {

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("--web_config_file = \"", path, "\": ", what));
}

// The keys of a mapping, each of which must be among `known`.
absl::Status OnlyKnown(const YAML::Node& node, const std::string& path, absl::string_view where,
                       const std::set<std::string>& known) {
  if (!node.IsMap()) return Bad(path, absl::StrCat(where, ": must be a mapping"));
  for (const auto& item : node) {
    const std::string key = item.first.as<std::string>();
    if (known.count(key) == 0) {
      return Bad(path, absl::StrCat(where, ".", key, ": not a setting kvledger knows (",
                                    absl::StrJoin(known, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TlsServerConfig> TlsFrom(const YAML::Node& node, const std::string& path) {
  if (auto s = OnlyKnown(node, path, "tls_server_config",
                         {"cert_file", "key_file", "client_ca_file", "client_auth_type"});
      !s.ok()) {
    return s;
  }
  TlsServerConfig tls;
  if (node["cert_file"]) tls.cert_file = node["cert_file"].as<std::string>();
  if (node["key_file"]) tls.key_file = node["key_file"].as<std::string>();
  if (node["client_ca_file"]) tls.client_ca_file = node["client_ca_file"].as<std::string>();
  if (node["client_auth_type"]) tls.client_auth_type = node["client_auth_type"].as<std::string>();
  if (tls.cert_file.empty() || tls.key_file.empty()) {
    return Bad(path, "tls_server_config: needs both cert_file and key_file");
  }
  static const std::set<std::string> kTypes = {"NoClientCert", "RequestClientCert", "RequireAnyClientCert",
                                               "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"};
  if (kTypes.count(tls.client_auth_type) == 0) {
    return Bad(path, absl::StrCat("tls_server_config.client_auth_type = \"", tls.client_auth_type, "\": must be ",
                                  absl::StrJoin(kTypes, ", ")));
  }
  const bool verifies = absl::StrContains(tls.client_auth_type, "Verify");
  if (verifies && tls.client_ca_file.empty()) {
    return Bad(path, absl::StrCat("tls_server_config.client_auth_type = ", tls.client_auth_type,
                                  ": needs client_ca_file to verify client certificates with"));
  }
  return tls;
}

absl::Status UsersFrom(const YAML::Node& node, const std::string& path, WebConfig& config) {
  if (!node.IsMap()) return Bad(path, "basic_auth_users: must be a mapping of user names to bcrypt hashes");
  for (const auto& item : node) {
    const std::string user = item.first.as<std::string>();
    const std::string hash = item.second.as<std::string>();
    if (!(absl::StartsWith(hash, "$2a$") || absl::StartsWith(hash, "$2b$") || absl::StartsWith(hash, "$2y$"))) {
      return Bad(path, absl::StrCat("basic_auth_users.", user, ": must be a bcrypt hash ($2a$, $2b$ or $2y$...)"));
    }
    config.basic_auth_users[user] = hash;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WebConfig> LoadWebConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Bad(path, "cannot read the file");
  std::string text(kMaxWebConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return ParseWebConfig(text, path);
}

absl::StatusOr<WebConfig> ParseWebConfig(absl::string_view text, const std::string& path) {
  if (text.size() > kMaxWebConfigBytes) return Bad(path, absl::StrCat("larger than ", kMaxWebConfigBytes, " bytes"));
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Bad(path, absl::StrCat("not YAML: ", e.what()));
  }
  WebConfig config;
  if (root.IsNull()) return config;
  try {
    if (auto s = OnlyKnown(root, path, "the file", {"tls_server_config", "basic_auth_users"}); !s.ok()) return s;
    if (root["tls_server_config"]) {
      auto tls = TlsFrom(root["tls_server_config"], path);
      if (!tls.ok()) return tls.status();
      config.tls = *std::move(tls);
    }
    if (root["basic_auth_users"]) {
      if (auto s = UsersFrom(root["basic_auth_users"], path, config); !s.ok()) return s;
    }
  } catch (const YAML::Exception& e) {
    return Bad(path, absl::StrCat("a value is not of its kind: ", e.what()));
  }
  return config;
}

namespace {

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  char text[256] = "";
  if (code != 0) ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return text;
}

// Every client certificate is accepted (RequireAnyClientCert, RequestClientCert): present, not verified.
int AcceptAny(int, X509_STORE_CTX*) { return 1; }

}  // namespace

absl::StatusOr<std::shared_ptr<TlsContext>> TlsContext::Make(const TlsServerConfig& config) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError("cannot create a TLS context: " + OpenSslError());
  std::shared_ptr<TlsContext> made(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Idle connections give their TLS buffers back (34 KiB each otherwise).
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  auto bad = [](absl::string_view key, const std::string& file, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("tls_server_config.", key, " = \"", file, "\": ", what, ": ",
                                                   OpenSslError()));
  };
  if (SSL_CTX_use_certificate_chain_file(ctx, config.cert_file.c_str()) != 1) {
    return bad("cert_file", config.cert_file, "not a PEM certificate chain");
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, config.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return bad("key_file", config.key_file, "not a PEM private key");
  }
  if (SSL_CTX_check_private_key(ctx) != 1) return bad("key_file", config.key_file, "does not match cert_file");
  if (!config.client_ca_file.empty() && SSL_CTX_load_verify_locations(ctx, config.client_ca_file.c_str(), nullptr) != 1) {
    return bad("client_ca_file", config.client_ca_file, "not a PEM CA bundle");
  }
  const std::string& type = config.client_auth_type;
  if (type == "RequestClientCert") SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, AcceptAny);
  if (type == "RequireAnyClientCert") SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, AcceptAny);
  if (type == "VerifyClientCertIfGiven") SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (type == "RequireAndVerifyClientCert") {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return made;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

BasicAuthenticator::BasicAuthenticator(LoginThrottle::Limits limits, HttpClockSource clock)
    : clock_(clock), throttle_(limits, clock) {}

namespace {

bool SameBytes(absl::string_view a, absl::string_view b) {  // constant time for equal lengths
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string Sha256(absl::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

// bcrypt reads a C string of at most 72 bytes: a password past either can never be compared whole.
constexpr size_t kBcryptMaxPasswordBytes = 72;

// A bcrypt hash of a random password at `cost` (of "$2b$NN$..."), for unknown users to be checked
// against at the same cost as known ones.
std::string HashAtCost(int cost) {
  unsigned char random[16];
  RAND_bytes(random, sizeof(random));
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", static_cast<unsigned long>(cost), reinterpret_cast<const char*>(random),
                       sizeof(random), salt, sizeof(salt)) == nullptr) {
    return "$2b$10$HOofK8AZFZ5d/EPC9n3Ke.KPwV6QsRLAP23hhm2QplGrnaioJitUy";
  }
  crypt_data data{};
  const char* hash = crypt_r(absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(random), 16)).c_str(),
                             salt, &data);
  return hash != nullptr ? hash : "";
}

int BcryptCost(const std::string& hash) {  // "$2b$NN$...": NN
  int cost = 0;
  return hash.size() > 7 && absl::SimpleAtoi(hash.substr(4, 2), &cost) ? cost : 10;
}

}  // namespace

std::shared_ptr<BasicAuthenticator> BasicAuthenticator::FromHashes(std::map<std::string, std::string> users,
                                                                   LoginThrottle::Limits limits, HttpClockSource clock) {
  std::shared_ptr<BasicAuthenticator> a(new BasicAuthenticator(limits, std::move(clock)));
  int cost = 4;
  for (const auto& [user, hash] : users) cost = std::max(cost, BcryptCost(hash));
  a->unknown_user_hash_ = HashAtCost(cost);
  a->hashes_ = std::move(users);
  return a;
}

std::shared_ptr<BasicAuthenticator> BasicAuthenticator::FromPassword(std::string user, std::string password,
                                                                     LoginThrottle::Limits limits,
                                                                     HttpClockSource clock) {
  std::shared_ptr<BasicAuthenticator> a(new BasicAuthenticator(limits, std::move(clock)));
  a->passwords_[std::move(user)] = std::move(password);
  return a;
}

bool BasicAuthenticator::Verify(const std::string& user, const std::string& password) const {
  if (auto it = passwords_.find(user); it != passwords_.end()) return SameBytes(Sha256(password), Sha256(it->second));
  auto it = hashes_.find(user);
  const std::string& hash = it != hashes_.end() ? it->second : unknown_user_hash_;
  crypt_data data{};
  const char* computed = crypt_r(password.c_str(), hash.c_str(), &data);
  return it != hashes_.end() && computed != nullptr && SameBytes(computed, hash);
}

BasicAuthenticator::Verdict BasicAuthenticator::Check(absl::string_view authorization, const std::string& peer,
                                                      std::string* why) {
  std::string decoded;
  const bool readable = absl::StartsWithIgnoreCase(authorization, "Basic ") &&
                        absl::Base64Unescape(authorization.substr(6), &decoded) &&
                        decoded.find(':') != std::string::npos;
  const size_t colon = readable ? decoded.find(':') : 0;
  // Bytes bcrypt would not compare can never match: refused without a hash.
  const bool comparable = readable && decoded.find('\0') == std::string::npos &&
                          decoded.size() - colon - 1 <= kBcryptMaxPasswordBytes;
  const std::string digest = readable ? Sha256(decoded) : std::string();
  auto throttled = [&](const absl::Status& s) {
    if (why != nullptr) *why = std::string(s.message());
    return Verdict::kThrottled;
  };
  {
    MutexLock lock(&mu_);
    if (comparable && accepted_.contains(digest)) return Verdict::kAllowed;  // known good: never throttled
    const absl::Status may = comparable ? throttle_.MayHash(peer) : throttle_.MayTry(peer);
    if (!may.ok()) return throttled(may);
    if (!comparable) {
      throttle_.Failed(peer);
      return Verdict::kDenied;
    }
  }
  const auto started = clock_();
  const bool ok = Verify(decoded.substr(0, colon), decoded.substr(colon + 1));
  const auto spent = clock_() - started;
  MutexLock lock(&mu_);
  throttle_.Hashed(std::chrono::duration_cast<std::chrono::nanoseconds>(spent));
  if (!ok) {
    throttle_.Failed(peer);
    return Verdict::kDenied;
  }
  if (accepted_.size() > 64) accepted_.clear();
  accepted_[digest] = 1;
  return Verdict::kAllowed;
}

}  // namespace kvledger
