// The paged_csr family's schema: FlashInferPlan's fields as the contract carries them
// (plan_io.h). FAMILIES.md documents units and pools.
#include "backends/contract/families.h"
#include "backends/contract/plan_io.h"
#include "backends/flashinfer/flashinfer_plan.h"

namespace kvfuzz::flashinfer {
namespace {

constexpr EnumNames<Role, 6> kRoleNames{{{Role::decode, "decode"},
                                         {Role::draft, "draft"},
                                         {Role::verify, "verify"},
                                         {Role::prefix, "prefix"},
                                         {Role::ragged, "ragged"},
                                         {Role::full_extend, "full_extend"}}};
constexpr EnumNames<MergeKernel, 2> kMergeNames{
    {{MergeKernel::flashinfer_base2, "flashinfer_base2"}, {MergeKernel::natural_exp, "natural_exp"}}};

void io_call(PlanIo& io, WrapperPlan& w) {
  io.enumeration("role", w.role, kRoleNames);
  io.field("page_size", w.page_size);
  io.field("rows", w.rows);
  io.field("rows_per_batch_row", w.rows_per_batch_row);
  io.field("causal", w.causal);
  io.field("window_left", w.window_left);
  io.field("has_mask", w.has_mask);
  io.optional_field("empty_padded_rows", w.empty_padded_rows);
  io.buffer("qo_indptr", w.qo_indptr);
  io.buffer("kv_indptr", w.kv_indptr);
  io.buffer("kv_indices", w.kv_indices);
  io.buffer("kv_last_page_len", w.kv_last_page_len);
  io.buffer("custom_mask", w.custom_mask);
  io.buffer("mask_indptr", w.mask_indptr);
}

void io_group(PlanIo& io, LayerGroupPlan& g) {
  io.object("layer", g.layer, io_layer<PlanIo>);
  io.list("calls", g.calls, io_call);
}

void io_plan(PlanIo& io, FlashInferPlan& p) {
  io.field("page_size", p.page_size);
  io.enumeration("merge", p.merge, kMergeNames);
  io.list("groups", p.groups, io_group);
  io.field("group_of_layer", p.group_of_layer);
  io.optional_list("descales", p.descales, io_layer_descales<PlanIo>);
}

}  // namespace

void write_plan(const Plan& plan, ArraySet& set) { write_plan_as<FlashInferPlan>(plan, set, io_plan); }

std::unique_ptr<Plan> read_plan(const ArraySet& set) { return read_plan_as<FlashInferPlan>(set, io_plan); }

}  // namespace kvfuzz::flashinfer
