// See descales.h.
#include "backends/descales.h"

#include <tuple>

#include "backends/common/violation.h"
#include "backends/metadata_checker.h"

namespace kvfuzz {

const CallDescales* descales_of(const std::vector<LayerDescales>& descales, int32_t layer, size_t part) {
  if (descales.empty()) return nullptr;
  const auto l = static_cast<size_t>(layer);
  if (l >= descales.size() || part >= descales[l].parts.size())
    throw Violation("descales",
                    "the plan's descales hold no entry for call " + std::to_string(part) + " of layer " +
                        std::to_string(layer) + " (" + std::to_string(descales.size()) + " layers)",
                    {layer, -1, -1});
  return &descales[l].parts[part];
}

RowDescale row_descale(const CallDescales& d, const std::string& call, int32_t rows, int32_t b, int32_t kv_heads,
                       int32_t layer) {
  const auto n = static_cast<size_t>(rows) * static_cast<size_t>(kv_heads);
  if (d.k.size() != n || d.v.size() != n || (!d.q.empty() && d.q.size() != n))
    throw Violation("descales",
                    call + "'s descales hold " + std::to_string(d.k.size()) + " / " + std::to_string(d.v.size()) +
                        " values (k / v), the kernel reads [" + std::to_string(rows) + "][" + std::to_string(kv_heads) +
                        "]",
                    {layer, b, -1});
  const size_t at = static_cast<size_t>(b) * static_cast<size_t>(kv_heads), h = static_cast<size_t>(kv_heads);
  return {d.q.empty() ? std::span<const double>() : std::span<const double>(d.q).subspan(at, h),
          std::span<const double>(d.k).subspan(at, h), std::span<const double>(d.v).subspan(at, h)};
}

void check_descales(MetadataChecker& check, const std::vector<LayerDescales>& descales, int32_t layer,
                    const std::vector<CallShape>& calls) {
  if (descales.empty()) return;
  const std::string at = "layer " + std::to_string(layer) + ": ";
  if (static_cast<size_t>(layer) >= descales.size() ||
      descales[static_cast<size_t>(layer)].parts.size() != calls.size()) {
    check.fail(at + "the plan's descales do not give each of its " + std::to_string(calls.size()) + " calls one entry",
               layer);
    return;
  }
  const Model& m = check.scenario().model;
  const Layer& l = m.layers[static_cast<size_t>(layer)];
  const auto heads = static_cast<size_t>(m.kv_heads);
  for (size_t j = 0; j < calls.size(); ++j) {
    const CallDescales& d = descales[static_cast<size_t>(layer)].parts[j];
    const size_t n = static_cast<size_t>(calls[j].rows) * heads;
    for (const auto& [name, values, want] :
         {std::tuple{"q_descale", &d.q, 1.0}, std::tuple{"k_descale", &d.k, double{l.k_scale}},
          std::tuple{"v_descale", &d.v, double{l.v_scale}}}) {
      if (values->empty() && std::string(name) == "q_descale") continue;
      if (values->size() != n) {
        check.fail(at + "call " + calls[j].name + " is handed " + name + " of " + std::to_string(values->size()) +
                       " values, the kernel reads [" + std::to_string(calls[j].rows) + "][" + std::to_string(heads) +
                       "]",
                   layer);
        continue;
      }
      for (size_t i = 0; i < n; ++i) {
        if ((*values)[i] == want) continue;
        check.fail(at + "call " + calls[j].name + " is handed " + name + "[" + std::to_string(i / heads) + "][" +
                       std::to_string(i % heads) + "] = " + std::to_string((*values)[i]) + ", the layer's scale is " +
                       std::to_string(want),
                   layer);
        break;
      }
    }
  }
}

}  // namespace kvfuzz
