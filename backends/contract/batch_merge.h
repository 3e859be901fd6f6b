// The array arithmetic the families' merges share (families.h BatchCase): a batch's arrays built
// from its cases' arrays, call by call, each case's rows after the earlier cases' rows.
//
// Where it sits: under each family's merge (fa_plan_batch.cc, flashinfer_plan_batch.cc,
// triton_plan_batch.cc, mla_plan_batch.cc), which picks, per array, what moves it: a token
// offset (query tokens), a pool offset (slots, or pages of the call's page size), or the earlier
// cases' entries (an indptr rebuilt over all rows).
//
//   const auto plans = plans_of<TritonPlan>(cases);
//   Buffer<int32_t> q = moved_offsets("qo_indptr", each(plans, field(&TritonPlan::qo_indptr)), rows,
//                                     token_offsets(cases));
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/common/checked_buffer.h"
#include "backends/common/kv_pools.h"
#include "backends/contract/families.h"

namespace kvfuzz::batch {

// The cases' plans as the family's plan type.
template <class P>
std::vector<const P*> plans_of(const std::vector<BatchCase>& cases) {
  std::vector<const P*> plans;
  for (const BatchCase& c : cases) plans.push_back(&dynamic_cast<const P&>(*c.plan));
  return plans;
}

// get(plan) of every plan: one array (or any member) per case.
template <class P, class Get>
auto each(const std::vector<const P*>& plans, Get get) {
  std::vector<const std::remove_reference_t<decltype(get(*plans.front()))>*> parts;
  for (const P* p : plans) parts.push_back(&get(*p));
  return parts;
}

// Entries [from, from + counts[i]) of each case's buffer, entry e of case i written as e + add[i],
// after `from` leading zeros.
template <class T>
Buffer<T> joined(const std::string& name, const std::vector<const Buffer<T>*>& parts, int64_t from,
                 const std::vector<int64_t>& counts, const std::vector<int64_t>& add) {
  int64_t total = from;
  for (int64_t n : counts) total += n;
  Buffer<T> m(name, total);
  int64_t at = from;
  for (size_t i = 0; i < parts.size(); ++i)
    for (int64_t e = from; e < from + counts[i]; ++e) m.set(at++, static_cast<T>((*parts[i])[e] + add[i]));
  return m;
}

// The accessor of a plan's member, as each() takes it: each(plans, field(&MlaPlan::positions)).
template <class P, class T>
auto field(T P::*member) {
  return [member](const P& p) -> const T& { return p.*member; };
}

// The first counts[i] entries of each case's buffer, entry e of case i written as e + add[i].
template <class T>
Buffer<T> concat(const std::string& name, const std::vector<const Buffer<T>*>& parts,
                 const std::vector<int64_t>& counts, const std::vector<int64_t>& add) {
  return joined(name, parts, 0, counts, add);
}

// Offsets [rows_i + 1] of each case (each from 0) as one offset array over all rows, from 0:
// case i's entries 1..rows_i, each + add[i].
template <class T>
Buffer<T> moved_offsets(const std::string& name, const std::vector<const Buffer<T>*>& parts,
                        const std::vector<int64_t>& rows, const std::vector<int64_t>& add) {
  return joined(name, parts, 1, rows, add);
}

// Where each case's entries start in the batch's array: the sum of the earlier cases' counts.
std::vector<int64_t> starts(const std::vector<int64_t>& counts);

// Each case's last offset (*parts[i])[rows[i]]: the entries its rows address.
template <class T>
std::vector<int64_t> ends(const std::vector<const Buffer<T>*>& parts, const std::vector<int64_t>& rows) {
  std::vector<int64_t> e;
  for (size_t i = 0; i < parts.size(); ++i) e.push_back((*parts[i])[rows[i]]);
  return e;
}

// An indptr over all rows: each case's offsets past the earlier cases' entries.
template <class T>
Buffer<T> indptr(const std::string& name, const std::vector<const Buffer<T>*>& parts,
                 const std::vector<int64_t>& rows) {
  return moved_offsets(name, parts, rows, starts(ends(parts, rows)));
}

// Whether `b` is an offset array [rows + 1] from 0 (what moved_offsets and indptr take).
template <class T>
bool from_zero(const Buffer<T>& b, int64_t rows) {
  return b.capacity() == rows + 1 && b[0] == 0;
}

// Per case: its token offset; its offset in `pool`, in slots; the same in pages of `page_size`.
std::vector<int64_t> token_offsets(const std::vector<BatchCase>& cases);
std::vector<int64_t> slot_offsets(const std::vector<BatchCase>& cases, PoolKind pool);
std::vector<int64_t> page_offsets(const std::vector<BatchCase>& cases, PoolKind pool, int32_t page_size);

// A row of a case's page table (page ids from entry `from`, `width` of them) as the batch's
// table's row at entry `at` (`batch_width` columns), each page id + add; the columns past the
// case's width get its dummy page, page 0 + add (no row reads them).
void copy_table_row(Buffer<int32_t>& batch_table, int64_t at, int32_t batch_width, const Buffer<int32_t>& table,
                    int64_t from, int32_t width, int64_t add);

// The attention sinks a call is handed, in a batch shape: "" when none, else their exact values
// (cases of one model variant may have other sinks; a batch's call is handed one set).
std::string sinks_shape(const std::vector<double>& sinks);

// A layer's attention rule in a batch shape: "kind/window/chunk".
std::string layer_shape(const Layer& l);

// The pool the layers l with in_group(l) read: "full", "swa", "none" (no such layer) or "mixed".
template <class InGroup>
std::string pool_of_layers(const Scenario& s, InGroup in_group) {
  std::string pool = "none";
  for (int32_t l = 0; l < static_cast<int32_t>(s.model.layers.size()); ++l) {
    if (!in_group(l)) continue;
    const std::string mine = pool_of(s, l) == PoolKind::swa ? "swa" : "full";
    pool = pool == "none" || pool == mine ? mine : "mixed";
  }
  return pool;
}

}  // namespace kvfuzz::batch
