// The mla family's schema: MlaPlan's fields as the contract carries them (plan_io.h).
// FAMILIES.md documents units and pools.
#include "backends/contract/families.h"
#include "backends/contract/plan_io.h"
#include "backends/mla/mla_plan.h"

namespace kvfuzz::mla {
namespace {

constexpr EnumNames<MlaPath, 2> kPathNames{{{MlaPath::latent_decode, "latent_decode"}, {MlaPath::prefill, "prefill"}}};

void io_decode(PlanIo& io, LatentDecodeMeta& m) {
  io.field("rows", m.rows);
  io.field("row_capacity", m.row_capacity);
  io.field("width", m.width);
  io.field("steps", m.steps);
  io.field("step", m.step);
  io.field("rows_per_request", m.rows_per_request);
  io.field("max_seqlen_q", m.max_seqlen_q);
  io.field("max_seqlen_k", m.max_seqlen_k);
  io.field("num_splits", m.num_splits);
  io.field("tree_mask", m.tree_mask);
  io.optional_field("empty_padded_rows", m.empty_padded_rows);
  io.buffer("block_table", m.block_table);
  io.buffer("swa_block_table", m.swa_block_table);
  io.buffer("cache_seqlens", m.cache_seqlens);
  io.buffer("cu_seqlens_q", m.cu_seqlens_q);
  io.buffer("mask_indptr", m.mask_indptr);
  io.buffer("custom_mask", m.custom_mask);
}

void io_prefill(PlanIo& io, PrefillMeta& m) {
  io.field("max_seqlen_q", m.max_seqlen_q);
  io.field("max_seqlen_k", m.max_seqlen_k);
  io.field("block_size", m.block_size);
  io.optional_field("empty_padded_rows", m.empty_padded_rows);
  io.buffer("qo_indptr", m.qo_indptr);
  io.buffer("kv_lens", m.kv_lens);
  io.buffer("kv_indptr", m.kv_indptr);
  io.buffer("kv_indices", m.kv_indices);
  io.buffer("swa_kv_indices", m.swa_kv_indices);
  io.buffer("linear_kv_indptr", m.linear_kv_indptr);
  io.buffer("linear_kv_indices", m.linear_kv_indices);
}

void io_plan(PlanIo& io, MlaPlan& p) {
  io.enumeration("path", p.path, kPathNames);
  io.field("page_size", p.page_size);
  io.field("hybrid", p.hybrid);
  io.enum_list("layer_pools", p.layer_pools, kPoolKindNames);
  io.buffer("positions", p.positions);
  io.object("decode", p.decode, io_decode);
  io.object("prefill", p.prefill, io_prefill);
}

}  // namespace

void write_plan(const Plan& plan, ArraySet& set) { write_plan_as<MlaPlan>(plan, set, io_plan); }

std::unique_ptr<Plan> read_plan(const ArraySet& set) { return read_plan_as<MlaPlan>(set, io_plan); }

}  // namespace kvfuzz::mla
