// The page_table family's schema: FaPlan's fields as the contract carries them (plan_io.h).
// FAMILIES.md documents units and pools.
#include "backends/contract/families.h"
#include "backends/contract/plan_io.h"
#include "backends/fa/fa_plan.h"

namespace kvfuzz::fa {
namespace {

constexpr EnumNames<GroupKind, 3> kGroupKindNames{
    {{GroupKind::full, "full"}, {GroupKind::sliding, "sliding"}, {GroupKind::local, "local"}}};

void io_call(PlanIo& io, FaCall& c) {
  io.field("name", c.name);
  io.field("rows", c.rows);
  io.field("width", c.width);
  io.field("view_page_size", c.view_page_size);
  io.field("causal", c.causal);
  io.field("max_seqlen_q", c.max_seqlen_q);
  io.field("max_seqlen_k", c.max_seqlen_k);
  io.buffer("cu_seqlens_q", c.cu_seqlens_q);
  io.buffer("cu_seqlens_k", c.cu_seqlens_k);
  io.buffer("cache_seqlens", c.cache_seqlens);
  io.buffer("page_table", c.page_table);
  io.optional_field("empty_padded_rows", c.empty_padded_rows);
  io.optional_field("max_seqlen_k_upper_bound", c.max_seqlen_k_upper_bound);
  io.optional_field("sinks", c.sinks);
  io.optional_buffer("rank_slots", c.rank_slots);
}

void io_group(PlanIo& io, FaGroup& g) {
  io.enumeration("kind", g.kind, kGroupKindNames);
  io.field("chunk", g.chunk);
  io.list("parts", g.parts, io_call);
  io.optional_field("common_prefix_len", g.common_prefix_len);
  io.optional_field("dcp_world", g.dcp_world);
  io.optional_field("dcp_interleave", g.dcp_interleave);
}

void io_plan(PlanIo& io, FaPlan& p) {
  io.list("layers", p.layers, io_layer<PlanIo>);
  io.object("full", p.full, io_group);
  io.field("has_sliding", p.has_sliding);
  io.object("sliding", p.sliding, io_group);
  io.list("local", p.local, io_group);
  io.optional_list("descales", p.descales, io_layer_descales<PlanIo>);
}

// Which group each layer reads ("full", "sliding", "local.<i>") and its window_left: derived
// fields for adapters, written only.
void add_layer_routes(const FaPlan& p, nlohmann::json& meta) {
  meta["layer_group"] = nlohmann::json::array();
  meta["window_left"] = nlohmann::json::array();
  for (int32_t l = 0; l < static_cast<int32_t>(p.layers.size()); ++l) {
    const FaGroup* g = &p.group_of(l);
    std::string name = g == &p.full ? "full" : g == &p.sliding ? "sliding" : "";
    for (size_t i = 0; i < p.local.size() && name.empty(); ++i)
      if (g == &p.local[i]) name = "local." + std::to_string(i);
    meta["layer_group"].push_back(name);
    const Layer& layer = p.layers[static_cast<size_t>(l)];
    meta["window_left"].push_back(layer.kind == LayerKind::sliding_window ? layer.window : -1);
  }
}

}  // namespace

void write_plan(const Plan& plan, ArraySet& set) {
  write_plan_as<FaPlan>(plan, set, io_plan);
  add_layer_routes(dynamic_cast<const FaPlan&>(plan), set.meta);
}

std::unique_ptr<Plan> read_plan(const ArraySet& set) { return read_plan_as<FaPlan>(set, io_plan); }

}  // namespace kvfuzz::fa
