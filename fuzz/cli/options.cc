#include "fuzz/cli/options.h"

#include "backends/registry.h"
#include "reference/case_error.h"
#include "reference/generate.h"

namespace kvfuzz::cli {

std::vector<const Backend*> select_backends(const std::string& name) {
  if (name == "all") return all_backends();
  if (const Backend* b = find_backend(name)) return {b};
  std::vector<const Backend*> of_adapter;
  for (const Backend* b : all_backends()) {
    const std::string n(b->name());
    const size_t colon = n.find(':');
    if (colon != std::string::npos && (n.substr(0, colon) == name || n.substr(colon + 1) == name)) of_adapter.push_back(b);
  }
  if (!of_adapter.empty()) return of_adapter;
  std::string known;
  bool adapters = false;
  for (const Backend* b : all_backends()) {
    known += (known.empty() ? "" : ", ") + std::string(b->name());
    adapters |= !b->replay_flags().empty();
  }
  // Without --adapter only the built-in backends exist: an executor's or planner's name comes
  // from its adapter's declaration.
  const std::string hint = adapters ? ""
                                    : "; an executor or planner of your own is named by its adapter: add --adapter "
                                      "'COMMAND' (e.g. --adapter 'python3 adapters/examples/numpy_page_table.py', "
                                      "docs/adapters.md)";
  throw InvalidCase("--backend: unknown backend '" + name + "' (known: " + known + ", all)" + hint);
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

CLI::Validator profile_check() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (parse_profile(s)) return "";
        std::string known;
        for (Profile p : kProfiles) known += (known.empty() ? "" : ", ") + std::string(to_string(p));
        return "unknown profile '" + s + "' (known: " + known + ")";
      },
      "PROFILE");
}

CLI::Validator non_negative() { return bounded_below(true); }
CLI::Validator positive() { return bounded_below(false); }

void add_adapter_options(CLI::App* cmd, AdapterOptions& options) {
  cmd->add_option("--adapter", options.commands,
                   "External planner or executor: a shell command that speaks kvfuzz's worker protocol (repeatable)");
  cmd->add_option("--adapter-timeout", options.timeout, "Seconds an adapter may take to answer one request")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option(
         "--adapter-servers", options.servers,
         "Executor servers: 0 runs one adapter worker per job; N runs N long-lived adapter processes that every "
         "job shares (a CUDA context each), taking the visible GPUs in turn; 'gpus' one per visible GPU "
         "(CUDA_VISIBLE_DEVICES, else nvidia-smi; none: per-job workers), 'gpus:K' K per visible GPU")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            const std::string n = s.rfind("gpus:", 0) == 0 ? s.substr(5) : s == "gpus" ? "1" : s;
            if (!n.empty() && n.size() < 4 && n.find_first_not_of("0123456789") == std::string::npos) return "";
            return "must be a number of servers (0-999), 'gpus' or 'gpus:K' (K per GPU), got '" + s + "'";
          },
          "N|gpus|gpus:K"))
      ->capture_default_str();
  cmd->add_option("--server-lanes", options.lanes,
                  "Servers: requests each server process may work on at once, each on its own thread (and CUDA "
                  "stream), in one CUDA context. An adapter that does not declare \"lanes\" works "
                  "on one at a time (PROTOCOL.md)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            if (!s.empty() && s.size() < 4 && s.find_first_not_of("0123456789") == std::string::npos &&
                std::stoi(s) >= 1)
              return "";
            return "must be a number of lanes from 1 to 999, got '" + s + "'";
          },
          "K"))
      ->capture_default_str();
  cmd->add_flag("--no-batch", options.no_batch,
                "Servers: send each case as its own request, even to an executor that declared \"batch\": true (by "
                "default cases of one shape waiting for a server go as one kernel call)");
}

AdapterLayout adapter_layout(const std::string& servers, bool batch, int lanes) {
  AdapterLayout layout;
  layout.batch = batch;
  layout.lanes = lanes;
  if (servers == "0") return layout;  // per-job workers: no GPU to look for
  layout.gpus = visible_gpus();
  const int gpus = static_cast<int>(layout.gpus.size());
  if (servers == "gpus") layout.servers = gpus;
  else if (servers.rfind("gpus:", 0) == 0) layout.servers = gpus * std::stoi(servers.substr(5));
  else layout.servers = std::stoi(servers);
  return layout;
}

void register_adapters(const AdapterOptions& options) {
  const AdapterLayout layout = adapter_layout(options.servers, !options.no_batch, options.lanes);
  for (const std::string& command : options.commands) {
    try {
      register_adapter(command, options.timeout, layout);
    } catch (const std::exception& e) {
      throw InvalidCase(std::string("--adapter: ") + e.what());
    }
  }
}

std::vector<std::string> adapter_flags(const AdapterOptions& options) {
  std::vector<std::string> flags;
  for (const std::string& c : options.commands) flags.insert(flags.end(), {"--adapter", c});
  return flags;
}

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
