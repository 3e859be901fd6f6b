#include "fuzz/coverage.h"

#include <sstream>

namespace kvfuzz {
namespace {

int page_class(int32_t ps) {
  if (ps == 1) return 0;
  if ((ps & (ps - 1)) != 0) return 3;  // odd sizes: 3, 5, 7
  return ps <= 16 ? 1 : 2;
}

}  // namespace

const std::vector<std::string>& case_feature_names() {
  static const std::vector<std::string> names = {"hybrid",    "graph",        "tree",           "mla", "softcap", "gqa",
                                                 "swa-evict", "spec-history", "adaptive-splits"};
  return names;
}

std::vector<std::string> case_features(const Scenario& s) {
  std::vector<std::string> f;
  if (s.cache.swa_pages > 0) f.push_back("hybrid");
  if (s.batch.graph_bs > 0) f.push_back("graph");
  if (s.batch.topk > 1) f.push_back("tree");
  if (s.model.mla) f.push_back("mla");
  if (s.model.softcap > 0) f.push_back("softcap");
  if (s.model.q_heads > s.model.kv_heads) f.push_back("gqa");
  bool evict = false, spec = false;
  for (const Op& op : s.history) {
    evict |= op.kind == OpKind::swa_evict;
    spec |= op.kind == OpKind::accept;
  }
  if (evict) f.push_back("swa-evict");
  if (spec) f.push_back("spec-history");
  if (s.batch.device_sms > 0 && s.batch.kv_splits > 1) f.push_back("adaptive-splits");
  return f;
}

void Coverage::add(const Scenario& s) {
  modes_.insert(static_cast<int>(s.batch.mode));
  uint32_t kinds = 0;
  for (const Layer& l : s.model.layers) {
    kinds |= 1u << static_cast<int>(l.kind);
    layer_kinds_.insert(static_cast<int>(l.kind));
  }
  page_sizes_.insert(s.cache.page_size);
  const bool hybrid = s.cache.swa_pages > 0, graph = s.batch.graph_bs > 0, tree = s.batch.topk > 1, mla = s.model.mla;
  for (std::string& f : case_features(s)) features_.insert(std::move(f));
  const uint32_t cell = static_cast<uint32_t>(s.batch.mode) | kinds << 3 | static_cast<uint32_t>(page_class(s.cache.page_size)) << 6 |
                        uint32_t{hybrid} << 8 | uint32_t{graph} << 9 | uint32_t{tree} << 10 | uint32_t{mla} << 11;
  cells_.insert(cell);
}

void Coverage::merge(const Coverage& o) {
  cells_.insert(o.cells_.begin(), o.cells_.end());
  modes_.insert(o.modes_.begin(), o.modes_.end());
  layer_kinds_.insert(o.layer_kinds_.begin(), o.layer_kinds_.end());
  page_sizes_.insert(o.page_sizes_.begin(), o.page_sizes_.end());
  features_.insert(o.features_.begin(), o.features_.end());
}

nlohmann::json Coverage::to_json() const {
  return {{"cells", cells_},
          {"modes", modes_},
          {"layer_kinds", layer_kinds_},
          {"page_sizes", page_sizes_},
          {"features", features_}};
}

Coverage Coverage::from_json(const nlohmann::json& j) {
  Coverage c;
  c.cells_ = j.at("cells").get<std::set<uint32_t>>();
  c.modes_ = j.at("modes").get<std::set<int>>();
  c.layer_kinds_ = j.at("layer_kinds").get<std::set<int>>();
  c.page_sizes_ = j.at("page_sizes").get<std::set<int>>();
  c.features_ = j.at("features").get<std::set<std::string>>();
  return c;
}

std::string Coverage::line() const {
  std::ostringstream os;
  os << "modes " << modes_.size() << "/8, layer kinds " << layer_kinds_.size() << "/3, page sizes "
     << page_sizes_.size() << ", features " << features_.size() << "/" << case_feature_names().size() << ", cells "
     << cells_.size();
  return os.str();
}

}  // namespace kvfuzz
