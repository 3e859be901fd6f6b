#include "backends/flashinfer/csr_rows.h"

#include <algorithm>

namespace kvfuzz::flashinfer {

int32_t CsrWriter::page_of(const CsrRowKeys& keys, int64_t key0) const {
  int64_t slot = 0;
  if (key0 < keys.branch_start) {
    slot = cache_.r2t(keys.req_row, static_cast<int32_t>(key0));
  } else {
    // Page q of a branch region starts at region offset q * ps; its first draft step is
    // q * ps - tail (the first page begins with the tail copies, then step 0).
    const int64_t step = std::max<int64_t>(0, key0 - keys.branch_start - keys.branch_tail);
    slot = keys.branch_slots[step];
  }
  if (translate_) slot = cache_.full_to_swa.at(static_cast<size_t>(slot));
  return static_cast<int32_t>(slot / ps_);
}

int64_t CsrWriter::append_row(WrapperDraft& d, const CsrRowKeys& keys, int64_t begin, int64_t end) const {
  const int64_t first = begin / ps_ * ps_;
  int64_t pages = 0;
  int32_t last = 1;  // sglang's kv_last_page_len buffer is torch.ones; empty rows keep it
  if (begin < end) {
    pages = (end - first + ps_ - 1) / ps_;
    for (int64_t p = 0; p < pages; ++p) d.kv_indices.push_back(page_of(keys, first + p * ps_));
    last = static_cast<int32_t>(end - first - (pages - 1) * ps_);
    // flashinfer_last_page_len_overflow: every row claims a full last page (FlashInfer #320: a
    // last_page_len the kernel never checks), so the kernel reads the page's unwritten tail.
    if (overflow_) last = ps_;
  }
  d.kv_indptr.push_back(static_cast<int32_t>(d.kv_indptr.back() + pages));
  d.kv_last_page_len.push_back(last);
  return first;
}

namespace {

template <class T>
Buffer<T> fill_buffer(const std::string& name, const std::vector<T>& values, int64_t capacity, T fill) {
  Buffer<T> b(name, capacity, fill);
  for (size_t i = 0; i < values.size(); ++i) b.set(static_cast<int64_t>(i), values[i]);
  return b;
}

}  // namespace

WrapperPlan commit(WrapperDraft&& d, int32_t page_size, const std::string& name, std::optional<GraphCapacity> graph) {
  WrapperPlan w;
  w.role = d.role;
  w.page_size = page_size;
  w.rows = d.rows();
  w.rows_per_batch_row = d.rows_per_batch_row;
  w.causal = d.causal;
  w.window_left = d.window_left;
  w.has_mask = d.has_mask;
  const auto size = [](const auto& v) { return static_cast<int64_t>(v.size()); };
  const int64_t indices_cap = graph ? graph->kv_indices : size(d.kv_indices);
  const int64_t mask_cap = graph ? graph->custom_mask : size(d.custom_mask);
  w.qo_indptr = fill_buffer(name + ".qo_indptr", d.qo_indptr, size(d.qo_indptr), 0);
  w.kv_indptr = fill_buffer(name + ".kv_indptr", d.kv_indptr, size(d.kv_indptr), 0);
  const bool paged = d.role != Role::ragged;
  w.kv_indices = fill_buffer(name + ".kv_indices", d.kv_indices, paged ? indices_cap : 0, 0);
  w.kv_last_page_len =
      fill_buffer(name + ".kv_last_page_len", d.kv_last_page_len, paged ? size(d.kv_last_page_len) : 0, 1);
  if (d.has_mask) {
    w.custom_mask = fill_buffer<uint8_t>(name + ".custom_mask", d.custom_mask, mask_cap, 0);
    w.mask_indptr = fill_buffer(name + ".mask_indptr", d.mask_indptr, size(d.mask_indptr), 0);
  } else {
    w.custom_mask = Buffer<uint8_t>(name + ".custom_mask", 0);
    w.mask_indptr = Buffer<int32_t>(name + ".mask_indptr", 0);
  }
  return w;
}

}  // namespace kvfuzz::flashinfer
