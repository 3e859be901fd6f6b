#include "fuzz/cli/options.h"

#include "backends/registry.h"
#include "reference/case_error.h"

namespace kvfuzz::cli {

std::vector<const Backend*> select_backends(const std::string& name) {
  if (name == "all") return all_backends();
  if (const Backend* b = find_backend(name)) return {b};
  std::string known;
  for (const Backend* b : all_backends()) known += (known.empty() ? "" : ", ") + std::string(b->name());
  throw InvalidCase("--backend: unknown backend '" + name + "' (known: " + known + ", all)");
}

CLI::Validator seed_check() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos ||
            (s.size() == 20 && s > "18446744073709551615"))
          return "must be an integer in [0, 2^64), got '" + s + "'";
        return "";
      },
      "UINT64");
}

namespace {

CLI::Validator bounded_below(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& s) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(s, v) || !(allow_zero ? v >= 0 : v > 0))
          return std::string(allow_zero ? "must be a number >= 0" : "must be a number > 0") + ", got '" + s + "'";
        return "";
      },
      allow_zero ? "NUMBER >= 0" : "NUMBER > 0");
}

}  // namespace

CLI::Validator non_negative() { return bounded_below(true); }
CLI::Validator positive() { return bounded_below(false); }

void check_faults(const std::vector<std::string>& faults, const std::vector<const Backend*>& backends) {
  for (const std::string& f : faults) {
    bool known = false;
    std::string names;
    for (const Backend* b : backends) {
      for (const FaultInfo& info : b->faults()) {
        known |= info.name == f;
        // Backends of one family share fault names: list each once.
        if ((", " + names + ", ").find(", " + info.name + ", ") == std::string::npos)
          names += (names.empty() ? "" : ", ") + info.name;
      }
    }
    if (!known) throw InvalidCase("--fault: no selected backend has a fault named '" + f + "' (faults: " + names + ")");
  }
}

}  // namespace kvfuzz::cli
