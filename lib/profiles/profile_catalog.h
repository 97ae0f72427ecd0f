// The set of model profiles a process uses: the built-in catalog, optionally extended or
// overridden by a profile file. Immutable after Load; thread-safe to read.
#ifndef KVLEDGER_LIB_PROFILES_PROFILE_CATALOG_H_
#define KVLEDGER_LIB_PROFILES_PROFILE_CATALOG_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kvledger/v1/profile.pb.h"
#include "lib/profiles/profile.h"

namespace kvledger {

class ProfileCatalog {
 public:
  // The built-in catalog merged with `overrides` (see ProfileCatalog in profile.proto for the
  // rules). INVALID_ARGUMENT names the profile and field that failed validation.
  static absl::StatusOr<ProfileCatalog> Make(const v1::ProfileCatalog& overrides);

  // Make() with the profiles of a file: JSON when the name ends in ".json", text proto otherwise;
  // the built-in catalog alone when `path` is empty. NOT_FOUND when the file cannot be read;
  // INVALID_ARGUMENT with the parser's or the validator's message.
  static absl::StatusOr<ProfileCatalog> LoadFile(const std::string& path);

  // The built-in catalog alone.
  static ProfileCatalog Builtin();

  // nullptr when no profile has this name.
  const Profile* Find(absl::string_view name) const;
  // Sorted names of every profile, for error messages and listings.
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, std::shared_ptr<const Profile>, std::less<>> profiles_;
};

}  // namespace kvledger

#endif  // KVLEDGER_LIB_PROFILES_PROFILE_CATALOG_H_
