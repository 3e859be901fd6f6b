// Helpers shared by the backend tests (fa_test.cc, flashinfer_test.cc, triton_test.cc,
// mla_test.cc): history op builders for hand-built cases, a plan's metadata findings, and
// "this backend passes every property on this case".
//
// Where it sits: test-only, on top of properties/check.h, as the tests are.
//
//   s.history = {admit(0), extend(0, 9), release(0)};
//   s.batch = draft_decode_batch(/*topk=*/2, /*steps=*/2, /*step=*/1);
//   EXPECT_TRUE(metadata_findings(ctx, *plan).empty());
//   expect_passes(CaseContext(s), fa_backend());
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "properties/check.h"

namespace kvfuzz::testing {

inline Op admit(int32_t request) { return {OpKind::admit, request, 0, {}, {}}; }
inline Op extend(int32_t request, int32_t len) { return {OpKind::extend, request, len, {}, {}}; }
inline Op release(int32_t request) { return {OpKind::free, request, 0, {}, {}}; }
inline Op swa_evict(int32_t request) { return {OpKind::swa_evict, request, 0, {}, {}}; }

// Request 0 alone verifying a spec tree (parents[0] = -1) with `topk` branches per node.
inline Batch tree_verify_batch(int32_t topk, std::vector<int32_t> parents) {
  Batch b;
  b.mode = Mode::target_verify;
  b.draft_tokens = static_cast<int32_t>(parents.size());
  b.topk = topk;
  b.entries = {{0, 0, std::move(parents)}};
  return b;
}

// Request 0 alone in multi-step drafting: `topk` branches, `steps` steps, this batch at `step`.
inline Batch draft_decode_batch(int32_t topk, int32_t steps, int32_t step) {
  Batch b;
  b.mode = Mode::draft_decode;
  b.topk = topk;
  b.draft_steps = steps;
  b.draft_step = step;
  b.entries = {{0, 0, {}}};
  return b;
}

// What the plan's own check_metadata finds, with the harness's visibility rule.
inline std::vector<MetadataChecker::Item> metadata_findings(const CaseContext& ctx, const Plan& plan) {
  MetadataChecker check(ctx.scenario(), ctx.prepared().cache, ctx.batch(),
                        [&ctx](int32_t l, int32_t r, int32_t c) { return ctx.visible_to_row(l, r, c); });
  plan.check_metadata(check);
  return check.findings();
}

// The first `most` findings, one a line: "[property] message".
inline std::string describe(const std::vector<Finding>& findings, size_t most = 8) {
  std::string out;
  for (size_t i = 0; i < findings.size() && i < most; ++i)
    out += "[" + findings[i].property + "] " + findings[i].message + "\n";
  return out;
}

// The backend supports the case and every single-case property holds.
inline void expect_passes(const CaseContext& ctx, const Backend& backend) {
  const CheckResult r = check_case(ctx, backend);
  ASSERT_TRUE(r.support.ok) << r.support.why;
  EXPECT_TRUE(r.findings.empty()) << describe(r.findings);
}

}  // namespace kvfuzz::testing
