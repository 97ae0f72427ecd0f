// A small per-subcommand flag parser for the kvledger CLI: `--name value` or `--name=value`,
// typed destinations, required flags, `--help`. Each subcommand accepts only its own flags, each
// once (but Repeated ones).
#ifndef KVLEDGER_CLIENT_FLAG_SET_H_
#define KVLEDGER_CLIENT_FLAG_SET_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kvledger::cli {

class FlagSet {
 public:
  FlagSet(std::string command, std::string summary);

  void String(const char* name, std::string* out, const char* help, bool required = false);
  // A string flag whose value `check` accepts (its message names the flag and the rule).
  void CheckedString(const char* name, std::string* out, const char* help,
                     std::function<absl::Status(const std::string&)> check);
  void Double(const char* name, std::optional<double>* out, const char* help, bool required = false);
  void Uint64(const char* name, std::optional<uint64_t>* out, const char* help, bool required = false);
  void Int64(const char* name, std::optional<int64_t>* out, const char* help, bool required = false);
  void Switch(const char* name, bool* out, const char* help);
  void Repeated(const char* name, std::vector<std::string>* out, const char* help);
  // A string flag whose value must be one of `choices`.
  void Choice(const char* name, std::string* out, std::vector<std::string> choices, const char* help);

  // INVALID_ARGUMENT with a one-line message naming the flag. `help_requested` is set for --help.
  absl::Status Parse(const std::vector<std::string>& args, std::vector<std::string>* positional,
                     bool* help_requested);
  std::string Usage() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    bool required = false;
    bool takes_value = true;
    bool seen = false;
    std::function<absl::Status(const std::string&)> set;
    bool repeatable = false;  // Repeated(): every occurrence is kept; any other flag may appear once
  };
  Flag* Find(const std::string& name);

  std::string command_;
  std::string summary_;
  std::vector<Flag> flags_;
};

// Parses `args` into `flags` for `kvledger <command>`. Returns -1 to go on, or the exit code to
// return now: 0 after printing --help, 2 after printing a one-line error.
int ParseOrExit(FlagSet& flags, const std::vector<std::string>& args, const char* command,
                std::vector<std::string>* positional = nullptr);

}  // namespace kvledger::cli

#endif  // KVLEDGER_CLIENT_FLAG_SET_H_
