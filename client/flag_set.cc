#include "client/flag_set.h"
#include "lib/base/quote.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "lib/cost_model/number_format.h"

namespace kvledger::cli {
namespace {

absl::Status BadValue(const std::string& name, const std::string& value, const char* want) {
  return absl::InvalidArgumentError(absl::StrCat("--", name, " = ", Quoted(value), ": ", want));
}

}  // namespace

FlagSet::FlagSet(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void FlagSet::String(const char* name, std::string* out, const char* help, bool required) {
  flags_.push_back({name, help, required, true, false, [out](const std::string& v) {
                      *out = v;
                      return absl::OkStatus();
                    }});
}

void FlagSet::CheckedString(const char* name, std::string* out, const char* help,
                            std::function<absl::Status(const std::string&)> check) {
  flags_.push_back({name, help, false, true, false, [out, check = std::move(check)](const std::string& v) {
                      if (absl::Status s = check(v); !s.ok()) return s;
                      *out = v;
                      return absl::OkStatus();
                    }});
}

void FlagSet::Choice(const char* name, std::string* out, std::vector<std::string> choices, const char* help) {
  flags_.push_back({name, help, false, true, false,
                    [out, n = std::string(name), choices = std::move(choices)](const std::string& v) {
                      if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
                        return absl::InvalidArgumentError(absl::StrCat("--", n, " = \"", v, "\": must be ",
                                                                       absl::StrJoin(choices, " or ")));
                      }
                      *out = v;
                      return absl::OkStatus();
                    }});
}

// A numeric flag: `parse` converts the text, `want` says what a bad value should have been.
template <typename T, typename Parse>
std::function<absl::Status(const std::string&)> NumberSetter(const char* name, std::optional<T>* out,
                                                             Parse parse, const char* want) {
  return [out, n = std::string(name), parse, want](const std::string& v) {
    T value;
    if (!parse(v, &value)) return BadValue(n, v, want);
    *out = value;
    return absl::OkStatus();
  };
}

void FlagSet::Double(const char* name, std::optional<double>* out, const char* help, bool required) {
  auto parse = [](absl::string_view v, double* d) { return absl::SimpleAtod(v, d); };
  flags_.push_back({name, help, required, true, false, NumberSetter(name, out, parse, "must be a number")});
}

// A whole-number flag: the value as typed, or the rule it broke (lib/cost_model/number_format.h).
template <typename T>
std::function<absl::Status(const std::string&)> WholeSetter(const char* name, std::optional<T>* out) {
  return [out, n = std::string(name)](const std::string& v) {
    T value;
    if (auto rule = ParseWholeNumber(v, &value)) return BadValue(n, v, rule->c_str());
    *out = value;
    return absl::OkStatus();
  };
}

void FlagSet::Uint64(const char* name, std::optional<uint64_t>* out, const char* help, bool required) {
  flags_.push_back({name, help, required, true, false, WholeSetter(name, out)});
}

void FlagSet::Int64(const char* name, std::optional<int64_t>* out, const char* help, bool required) {
  flags_.push_back({name, help, required, true, false, WholeSetter(name, out)});
}

void FlagSet::Switch(const char* name, bool* out, const char* help) {
  flags_.push_back({name, help, false, false, false, [out](const std::string&) {
                      *out = true;
                      return absl::OkStatus();
                    }});
}

void FlagSet::Repeated(const char* name, std::vector<std::string>* out, const char* help) {
  flags_.push_back({name, help, false, true, false,
                    [out](const std::string& v) {
                      out->push_back(v);
                      return absl::OkStatus();
                    },
                    /*repeatable=*/true});
}

FlagSet::Flag* FlagSet::Find(const std::string& name) {
  for (auto& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args, std::vector<std::string>* positional,
                            bool* help_requested) {
  *help_requested = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      *help_requested = true;
      return absl::OkStatus();
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      positional->push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    Flag* flag = Find(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see kvledger ", command_, " --help)"));
    }
    if (flag->takes_value && !value) {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat("--", name, ": needs a value"));
      value = args[++i];
    }
    if (!flag->takes_value && value) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": takes no value"));
    }
    if (flag->seen && !flag->repeatable) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": given more than once (each flag takes one value)"));
    }
    if (auto s = flag->set(value.value_or("")); !s.ok()) return s;
    flag->seen = true;
  }
  for (const auto& f : flags_) {
    if (f.required && !f.seen) return absl::InvalidArgumentError(absl::StrCat("--", f.name, ": required"));
  }
  return absl::OkStatus();
}

std::string FlagSet::Usage() const {
  std::string out = absl::StrCat("usage: kvledger ", command_, " [flags]\n", summary_, "\n\nflags:\n");
  for (const auto& f : flags_) {
    absl::StrAppendFormat(&out, "  --%-26s %s%s\n", f.name + (f.takes_value ? " V" : ""), f.help,
                          f.required ? " (required)" : "");
  }
  return out;
}

int ParseOrExit(FlagSet& flags, const std::vector<std::string>& args, const char* command,
                std::vector<std::string>* positional) {
  std::vector<std::string> rest;
  bool help = false;
  if (auto s = flags.Parse(args, &rest, &help); !s.ok()) {
    std::cerr << "kvledger " << command << ": " << s.message() << "\n";
    return 2;
  }
  if (help) {
    std::cout << flags.Usage();
    return 0;
  }
  if (positional != nullptr) {
    *positional = std::move(rest);
  } else if (!rest.empty()) {
    std::cerr << "kvledger " << command << ": unexpected argument '" << rest[0] << "'\n";
    return 2;
  }
  return -1;
}

}  // namespace kvledger::cli
