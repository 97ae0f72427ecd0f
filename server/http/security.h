// Who may use the HTTP port and how it is encrypted, configured as Prometheus exporters are: a web
// configuration file in the exporter-toolkit format (--web_config_file), e.g.
//
//   tls_server_config:
//     cert_file: /etc/kvledger/tls/tls.crt
//     key_file: /etc/kvledger/tls/tls.key
//     client_ca_file: /etc/kvledger/tls/ca.crt          # optional
//     client_auth_type: RequireAndVerifyClientCert     # optional, default NoClientCert
//   basic_auth_users:
//     prometheus: $2b$10$...                            # bcrypt hashes
//
// so the file a platform team already has for node_exporter works unchanged. docs/security.md.
#ifndef KVLEDGER_SERVER_HTTP_SECURITY_H_
#define KVLEDGER_SERVER_HTTP_SECURITY_H_

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/base/mutex.h"
#include "server/http/clock.h"
#include "server/http/login_throttle.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace kvledger {

struct TlsServerConfig {
  std::string cert_file, key_file, client_ca_file;
  std::string client_auth_type = "NoClientCert";  // the exporter-toolkit names
};

struct WebConfig {
  std::optional<TlsServerConfig> tls;
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash ($2a$, $2b$, $2y$)
};

// Reads and checks a web configuration file: INVALID_ARGUMENT naming the file, the key and the
// rule (an unknown key is an error, as in the exporter toolkit).
absl::StatusOr<WebConfig> LoadWebConfig(const std::string& path);
// The same from the file's text (`path` names it in messages); a text over kMaxWebConfigBytes is
// refused before it is parsed.
inline constexpr size_t kMaxWebConfigBytes = 1 << 20;
absl::StatusOr<WebConfig> ParseWebConfig(absl::string_view text, const std::string& path);

// An OpenSSL server context from the TLS settings: certificate chain, key, and the client
// certificate policy. INVALID_ARGUMENT naming the file or setting that does not work.
class TlsContext {
 public:
  static absl::StatusOr<std::shared_ptr<TlsContext>> Make(const TlsServerConfig& config);
  ~TlsContext();
  SSL_CTX* get() const { return ctx_; }

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

// HTTP basic auth: users with bcrypt hashes (or, from the older flags, one plaintext password),
// compared in constant time and whole (a password with a NUL byte, or longer than bcrypt's 72 bytes,
// never matches). An unknown user costs a bcrypt of the configured users' highest cost, so timing
// does not tell users apart. A correct pair is remembered (its SHA-256), so a scrape every few
// seconds costs one bcrypt, not one each; failures and hashing are limited by a LoginThrottle.
// Thread-safe.
class BasicAuthenticator {
 public:
  enum class Verdict { kAllowed, kDenied, kThrottled };

  static std::shared_ptr<BasicAuthenticator> FromHashes(std::map<std::string, std::string> users,
                                                        LoginThrottle::Limits limits = {},
                                                        HttpClockSource clock = SystemHttpClock());
  static std::shared_ptr<BasicAuthenticator> FromPassword(std::string user, std::string password,
                                                          LoginThrottle::Limits limits = {},
                                                          HttpClockSource clock = SystemHttpClock());

  // `authorization`: the Authorization header as sent ("Basic base64(user:password)"). With
  // kThrottled, `why` (when given) says which rule refused.
  Verdict Check(absl::string_view authorization, const std::string& peer, std::string* why = nullptr);

 private:
  BasicAuthenticator(LoginThrottle::Limits limits, HttpClockSource clock);
  bool Verify(const std::string& user, const std::string& password) const;

  std::map<std::string, std::string> hashes_;      // bcrypt
  std::map<std::string, std::string> passwords_;   // plaintext (the older flags)
  std::string unknown_user_hash_;                  // bcrypt at the users' highest cost
  const HttpClockSource clock_;
  Mutex mu_;
  absl::flat_hash_map<std::string, int> accepted_ ABSL_GUARDED_BY(mu_);  // SHA-256 of "user:password"
  LoginThrottle throttle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kvledger

#endif  // KVLEDGER_SERVER_HTTP_SECURITY_H_
