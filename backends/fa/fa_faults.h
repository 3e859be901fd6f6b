// The planted planner bugs of the fa backend: each reproduces a real sglang bug and is switched on
// by name inside the planner (PlanInput::fault), never by a copy of it.
//
// Where it sits: fa_backend.cc lists them (Backend::faults); fa_planner.cc, fa_local.cc,
// fa_spec_verify.cc and fa_spec_draft.cc test them where the production code went wrong.
//
//   if (in.fault(kFaultDraftExtendDouble)) k_len += fb.extend_lens[b];
#pragma once

#include <string_view>
#include <vector>

#include "backends/backend.h"

namespace kvfuzz::fa {

inline constexpr std::string_view kFaultLocalTokenTable = "fa_local_token_table";
inline constexpr std::string_view kFaultLocalChunkShrink = "fa_local_chunk_shrink";
inline constexpr std::string_view kFaultSwaSpecUntranslated = "fa_swa_spec_untranslated";
inline constexpr std::string_view kFaultDraftExtendDouble = "fa_draft_extend_v2_double";
inline constexpr std::string_view kFaultDraftExtendPrefix = "fa_draft_extend_v2_prefix";
inline constexpr std::string_view kFaultSwaPageIdTranslate = "fa_swa_page_id_translate";
inline constexpr std::string_view kFaultExpandPagedView = "fa_expand_paged_view";
inline constexpr std::string_view kFaultSinkEveryPart = "fa_sink_every_part";

inline std::vector<FaultInfo> fault_list() {
  return {
      {std::string(kFaultLocalTokenTable),
       "chunked local attention slices the token-granular req_to_token rows (slots) instead of the page table and "
       "reads them as page ids (sglang #23757 on XPU, #32902 names the same root cause in "
       "FlashAttentionBackend._maybe_init_local_attn_metadata)"},
      {std::string(kFaultLocalChunkShrink),
       "make_local_attention_virtual_batches first shrinks the chunk to min(chunk, max seq_len) floored to the page "
       "size, which moves chunk boundaries when the longest sequence ends inside a page (#32902 class)"},
      {std::string(kFaultSwaSpecUntranslated),
       "sliding-window layers of a topk>1 target_verify read rows prefix ++ visible drafts built from full-pool slots "
       "without the full->SWA translation (sglang #24617)"},
      {std::string(kFaultDraftExtendDouble),
       "DRAFT_EXTEND_V2 cache_seqlens = seq_lens + extend_lens: the extend counted twice, since seq_lens already "
       "includes it (sglang #26512, reverted by #26628)"},
      {std::string(kFaultDraftExtendPrefix),
       "DRAFT_EXTEND_V2 cache_seqlens = extend_prefix_lens: the new tokens are left out (the bug #26512 believed "
       "it fixed)"},
      {std::string(kFaultSwaPageIdTranslate),
       "the SWA page table translates page ids through full_to_swa instead of translating token slots and then "
       "dividing by the page size (sglang #16267; the replay path again in #38187)"},
      {std::string(kFaultExpandPagedView),
       "the topk>1 target_verify expand table, which holds token slots, is read with the paged K/V view (page size "
       "ps) as older FlashAttention backends did; only correct at page size 1"},
      {std::string(kFaultSinkEveryPart),
       "attention sinks handed to every call of a cascade (main and expand), so the LSE merge counts the sink "
       "twice; sglang 0.5.23's topk>1 verify passes its **kwargs, sinks included, to both calls (read, not run: "
       "flashattention_backend.py:1597-1598, :1839-1863, merged at :1864)",
       "gpt-oss"},
  };
}

}  // namespace kvfuzz::fa
