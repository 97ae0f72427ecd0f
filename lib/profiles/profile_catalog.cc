#include "lib/profiles/profile_catalog.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "lib/profiles/builtin_catalog.h"

namespace kvledger {
namespace {

class CollectingErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat("line ", line + 1, " column ", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace

absl::StatusOr<ProfileCatalog> ProfileCatalog::Make(const v1::ProfileCatalog& overrides) {
  std::map<std::string, v1::ModelProfile, std::less<>> definitions;
  const v1::ProfileCatalog builtin = BuiltinCatalog();
  for (const auto& p : builtin.profiles()) definitions[p.name()] = p;
  for (const auto& p : overrides.profiles()) {
    auto it = definitions.find(p.name());
    if (p.layer_groups_size() == 0) {
      if (it == definitions.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "profile '", p.name(), "': layer_groups: empty, and no built-in profile of that name to override"));
      }
      // Serving-settings override: merge only the fields that are set.
      it->second.mutable_serving()->MergeFrom(p.serving());
    } else {
      definitions[p.name()] = p;
    }
  }
  ProfileCatalog catalog;
  for (const auto& [name, definition] : definitions) {
    auto profile = Profile::Make(definition);
    if (!profile.ok()) return profile.status();
    catalog.profiles_[name] = std::make_shared<const Profile>(*std::move(profile));
  }
  return catalog;
}

absl::StatusOr<ProfileCatalog> ProfileCatalog::LoadFile(const std::string& path) {
  if (path.empty()) return Builtin();
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("profiles file '", path, "': cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  v1::ProfileCatalog overrides;
  if (absl::EndsWith(path, ".json")) {
    auto status = google::protobuf::util::JsonStringToMessage(text.str(), &overrides);
    if (!status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("profiles file '", path, "': ", std::string(status.message())));
    }
  } else {
    CollectingErrors errors;
    google::protobuf::TextFormat::Parser parser;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(text.str(), &overrides)) {
      return absl::InvalidArgumentError(absl::StrCat("profiles file '", path, "': ", errors.first()));
    }
  }
  auto catalog = Make(overrides);
  if (!catalog.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profiles file '", path, "': ", catalog.status().message()));
  }
  return catalog;
}

ProfileCatalog ProfileCatalog::Builtin() {
  auto catalog = Make(v1::ProfileCatalog());
  if (!catalog.ok()) {
    std::cerr << "kvledger: built-in catalog invalid: " << catalog.status() << "\n";
    std::abort();
  }
  return *std::move(catalog);
}

const Profile* ProfileCatalog::Find(absl::string_view name) const {
  auto it = profiles_.find(name);
  return it == profiles_.end() ? nullptr : it->second.get();
}

std::vector<std::string> ProfileCatalog::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, profile] : profiles_) names.push_back(name);
  return names;
}

}  // namespace kvledger
