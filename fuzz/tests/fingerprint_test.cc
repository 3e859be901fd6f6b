// Fingerprints name mechanisms: one planted bug keeps its name across seeds, page sizes and sizes,
// and two different bugs on the same backend never share one.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "backends/registry.h"
#include "fuzz/campaign.h"
#include "fuzz/case_check.h"
#include "properties/fingerprint.h"
#include "reference/generate.h"
#include "reference/validate.h"

namespace kvfuzz {
namespace {

// fingerprint key -> the page sizes it was seen at, over the first `cases` cases of campaign seed 5.
std::map<std::string, std::set<int32_t>> keys_of(const char* backend, const char* fault, int cases) {
  std::map<std::string, std::set<int32_t>> keys;
  const Backend* b = find_backend(backend);
  for (int64_t i = 0; i < cases; ++i) {
    const Scenario s = generate(campaign_case_seed(5, i), i % 2 ? Profile::small : Profile::tiny);
    for (const Finding& f : check_all(s, {b}, {{fault}, false, 0}).findings)
      keys[fingerprint_of(s, f).key()].insert(s.cache.page_size);
  }
  return keys;
}

TEST(Fingerprint, OneMechanismKeepsItsNameAcrossSeedsAndPageSizes) {
  // The decode window one key short: the oldest in-window key is missing (a window holding one
  // key loses it: missing-all), at every page size.
  const auto keys = keys_of("flashinfer", "flashinfer_swa_decode_window_short", 200);
  std::set<int32_t> page_sizes;
  for (const auto& [key, ps] : keys) {
    if (key.rfind("cache-extent/", 0) != 0) continue;
    EXPECT_TRUE(key.ends_with("/sliding_window: missing-oldest") || key.ends_with("/sliding_window: missing-all")) << key;
    if (key == "cache-extent/flashinfer/decode/sliding_window: missing-oldest") page_sizes = ps;
  }
  EXPECT_GE(page_sizes.size(), 3u) << "seen at too few page sizes to show the name does not depend on them";
}

TEST(Fingerprint, DifferentMechanismsOnOneBackendNeverShareAName) {
  const auto short_window = keys_of("flashinfer", "flashinfer_swa_decode_window_short", 200);
  const auto untranslated = keys_of("flashinfer", "flashinfer_swa_untranslated", 200);
  const auto lse_base = keys_of("flashinfer", "flashinfer_lse_base_mismatch", 200);
  ASSERT_FALSE(short_window.empty());
  ASSERT_FALSE(untranslated.empty());
  ASSERT_FALSE(lse_base.empty());
  for (const auto& [key, ps] : untranslated) {
    EXPECT_FALSE(short_window.count(key)) << key;
    EXPECT_FALSE(lse_base.count(key)) << key;
  }
  for (const auto& [key, ps] : lse_base) EXPECT_FALSE(short_window.count(key)) << key;
}

TEST(Fingerprint, TheReleaseLeavesTheKeyAndTheContextRidesAlong) {
  Scenario s = generate(3, Profile::tiny);
  s.model.layers = {{LayerKind::full, 0, 0}, {LayerKind::sliding_window, 7, 0}};
  Finding f{"cache-extent", "sglang_fa_0_5_10_post1_det:fa", "layer 1 ...", 1, 0, 0};
  f.mechanism = "missing-oldest";
  const Fingerprint a = fingerprint_of(s, f);
  EXPECT_EQ(a.release, "0.5.10.post1");
  EXPECT_EQ(a.backend, "sglang_fa_det:fa");
  EXPECT_TRUE(a.deterministic);
  EXPECT_EQ(a.layer_kind, "sliding_window");
  EXPECT_EQ(a.window, 7);
  f.backend = "sglang_fa_0_5_23_det:fa";
  EXPECT_EQ(fingerprint_of(s, f).key(), a.key());
  EXPECT_EQ(fingerprint_of(s, f).release, "0.5.23");
  f.layer = 0;  // the failing layer's own kind, not the model's
  EXPECT_NE(fingerprint_of(s, f).key(), a.key());
  // ... but whether the model has a window layer rides along (a full-layer bug can need one).
  EXPECT_TRUE(fingerprint_of(s, f).sliding_layers);
  EXPECT_EQ(fingerprint_of(s, f).to_json()["context"]["sliding_layers"], true);
  s.model.layers = {{LayerKind::full, 0, 0}, {LayerKind::chunked, 0, 8}};
  EXPECT_FALSE(fingerprint_of(s, f).sliding_layers);
}

TEST(Fingerprint, DraftDecodeSaysWhetherItsTargetStepWasAVerify) {
  // vllm#29845 (drafting after a rejection) needs one; a draft after a prefill has none.
  Scenario s;
  s.model.layers = {{LayerKind::full, 0, 0}};
  auto op = [](OpKind kind, int32_t len = 0, std::vector<int32_t> parents = {}, std::vector<int32_t> path = {}) {
    Op o;
    o.kind = kind;
    o.request = 1;
    o.len = len;
    o.parents = std::move(parents);
    o.path = std::move(path);
    return o;
  };
  s.history = {op(OpKind::admit), op(OpKind::extend, 3)};
  s.batch.mode = Mode::draft_decode;
  s.batch.entries.resize(1);
  s.batch.entries[0].request = 1;
  Finding f{"metadata", "vllm_fa_0_28_0:fa", "layer 0 ...", 0, 0, 0};
  EXPECT_FALSE(fingerprint_of(s, f).after_verify);
  s.history.push_back(op(OpKind::draft, 0, {-1, 0}));
  s.history.push_back(op(OpKind::accept, 0, {}, {0, 1}));
  EXPECT_TRUE(fingerprint_of(s, f).after_verify);
  EXPECT_EQ(fingerprint_of(s, f).to_json()["context"]["after_verify"], true);
  s.history.push_back(op(OpKind::decode));  // a decode after the verify: the drafter's target step
  EXPECT_FALSE(fingerprint_of(s, f).after_verify);
  s.history.pop_back();
  s.batch.mode = Mode::decode;  // only a drafting step has a target step
  EXPECT_FALSE(fingerprint_of(s, f).after_verify);
}

TEST(Fingerprint, ItsContextSaysTheDecodeContextParallelRanksOnlyUnderDcp) {
  // A fingerprint without DCP reads as before the field existed; under DCP its context says R.
  Scenario s;
  s.model.layers = {{LayerKind::full, 0, 0}};
  s.batch.mode = Mode::mixed;
  Finding f{"cache-extent", "vllm_fa_0_33_0:fa", "layer 0 ...", 0, 0, 0};
  f.mechanism = "missing-oldest";
  const Fingerprint one = fingerprint_of(s, f);
  EXPECT_EQ(one.dcp, 1);
  EXPECT_FALSE(one.to_json()["context"].contains("dcp"));
  f.dcp_world = 2;
  const Fingerprint two = fingerprint_of(s, f);
  EXPECT_EQ(two.to_json()["context"]["dcp"], 2);
  EXPECT_EQ(two.key(), one.key());  // context, not key: one mechanism, one key
}

TEST(Fingerprint, FailuresAreNamedByExceptionAndInnermostFunction) {
  const std::string traceback =
      "sglang_fa_0_5_23:fa failed: Traceback (most recent call last):\n"
      "  File \"/x/sglang/srt/layers/attention/flashattention_backend.py\", line 1221, in init_forward_metadata\n"
      "    self._init_local(...)\n"
      "  File \"/x/sglang/srt/layers/attention/utils.py\", line 88, in make_local_attention_virtual_batches\n"
      "    x = seqlens[17]\n"
      "IndexError: index 17 is out of bounds for axis 0 with size 3\n";
  EXPECT_EQ(failure_mechanism(traceback),
            "IndexError: index N is out of bounds for axis N with size N @ make_local_attention_virtual_batches");
  // A CUDA error's advice lines come after the exception's: the exception names it.
  EXPECT_EQ(failure_mechanism("flashinfer_paged_csr failed: Traceback (most recent call last):\n"
                              "  File \"/x/flashinfer/prefill.py\", line 1607, in plan\n    y = f(x)\n"
                              "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
                              "CUDA kernel errors might be asynchronously reported at some other API call.\n"
                              "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"),
            "torch.AcceleratorError: CUDA error: an illegal memory access was encountered @ plan");
  EXPECT_EQ(failure_mechanism("adapter 'python3 /tmp/a b.py' gave no answer within 60 s"),
            "adapter Q gave no answer within N s");
  // One hang, one key: with or without the adapter's last output, in the case's run or the probes'.
  EXPECT_EQ(failure_mechanism("adapter 'python3 /tmp/a b.py' gave no answer within 60 s; its last output:\nstep 3\n"),
            "adapter Q gave no answer within N s");
  EXPECT_EQ(failure_mechanism("probe runs failed: adapter 'python3 /tmp/a b.py' gave no answer within 2 s"),
            "adapter Q gave no answer within N s");
  // A crash's traceback in the last output still names it.
  EXPECT_EQ(
      failure_mechanism("adapter 'x' exited with status 1; its last output:\nTraceback (most recent call last):\n"
                        "  File \"/x/a.py\", line 3, in run\n    y = x[9]\nIndexError: list index out of range\n"),
      "IndexError: list index out of range @ run");
  EXPECT_EQ(bounds_mechanism("custom_mask", "write at index 96, outside its capacity 64"), "custom_mask:write-above");
  EXPECT_EQ(bounds_mechanism("kv_indptr", "read at index -1, outside its capacity 9"), "kv_indptr:read-below");
  EXPECT_EQ(normalize_message("layer 2 (chunked), row 1 (request 4), query position 9 (column 9): kv[3] is 5, expected 7"),
            "kv[N] is N, expected N");
}

}  // namespace
}  // namespace kvfuzz
