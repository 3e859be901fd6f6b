// The token_csr family's schema: TritonPlan's fields as the contract carries them (plan_io.h).
// FAMILIES.md documents units and pools.
#include "backends/contract/families.h"
#include "backends/contract/plan_io.h"
#include "backends/triton/triton_plan.h"

namespace kvfuzz::triton {
namespace {

constexpr EnumNames<TritonKernel, 3> kKernelNames{
    {{TritonKernel::none, "none"}, {TritonKernel::decode, "decode"}, {TritonKernel::extend, "extend"}}};
constexpr EnumNames<Mode, 7> kModeNames{{{Mode::idle, "idle"},
                                         {Mode::decode, "decode"},
                                         {Mode::extend, "extend"},
                                         {Mode::mixed, "mixed"},
                                         {Mode::target_verify, "target_verify"},
                                         {Mode::draft_extend_v2, "draft_extend_v2"},
                                         {Mode::draft_decode, "draft_decode"}}};

void io_csr(PlanIo& io, KvCsr& c) {
  io.enumeration("kind", c.kind, kLayerKindNames);
  io.field("window_or_chunk", c.window_or_chunk);
  io.enumeration("pool", c.pool, kPoolKindNames);
  io.buffer("kv_indptr", c.kv_indptr);
  io.buffer("kv_indices", c.kv_indices);
  io.buffer("kv_offsets", c.kv_offsets);
  io.buffer("num_kv_splits", c.num_kv_splits);
}

void io_plan(PlanIo& io, TritonPlan& p) {
  io.enumeration("mode", p.mode, kModeNames);
  io.enumeration("kernel", p.kernel, kKernelNames);
  io.field("graph", p.graph);
  io.field("bs", p.bs);
  io.field("padded_bs", p.padded_bs);
  io.field("rows", p.rows);
  io.field("queries_per_request", p.queries_per_request);
  io.field("max_kv_splits", p.max_kv_splits);
  io.field("use_custom_mask", p.use_custom_mask);
  io.optional_field("sinks", p.sinks);
  io.list("csrs", p.csrs, io_csr);
  io.field("layer_csr", p.layer_csr);
  io.buffer("qo_indptr", p.qo_indptr);
  io.buffer("positions", p.positions);
  io.buffer("mask_indptr", p.mask_indptr);
  io.buffer("custom_mask", p.custom_mask);
}

}  // namespace

void write_plan(const Plan& plan, ArraySet& set) { write_plan_as<TritonPlan>(plan, set, io_plan); }

std::unique_ptr<Plan> read_plan(const ArraySet& set) { return read_plan_as<TritonPlan>(set, io_plan); }

}  // namespace kvfuzz::triton
