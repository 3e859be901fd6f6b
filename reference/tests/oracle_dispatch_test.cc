// Tests of the oracle's run-time ISA choice (reference/oracle_dispatch.h): every ISA this CPU runs
// gives the oracle's results bit for bit the same as the portable kernels, on generated cases of
// every shape (dot and packed forms, streamed and stored K/V, GQA, MLA, softcap, head widths that
// are not whole vectors), and the choice itself (names, the best runnable ISA by default).
#include "reference/oracle_dispatch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "reference/generate.h"
#include "reference/logical.h"
#include "reference/oracle.h"
#include "reference/tests/test_level.h"

namespace kvfuzz {
namespace {

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

// The oracle of `s` by `isa`'s kernels.
OracleResult oracle_on(Isa isa, const Scenario& s) {
  use_oracle_isa(isa);
  return run_oracle(s, derive_logical(s), ValueSource(s), 2);
}

// Restores the ISA in use when a test ends.
struct KeepIsa {
  Isa isa = oracle_kernels().isa;
  ~KeepIsa() { use_oracle_isa(isa); }
};

// A prefill whose units take the packed form, with head widths of 36 and 20 (padded to 40 and 24).
Scenario packed_case() {
  Scenario s;
  s.model.q_heads = 8;
  s.model.kv_heads = 2;
  s.model.head_dim = 36;
  s.model.v_head_dim = 20;
  s.model.sm_scale = 0.17;
  s.model.softcap = 10.0;
  s.model.layers = {Layer{LayerKind::full, 0, 0}, Layer{LayerKind::sliding_window, 50, 0}};
  s.values.seed = 5;
  s.batch.mode = Mode::extend;
  s.history = {Op{OpKind::admit, 1, 0, {}, {}}, Op{OpKind::extend, 1, 300, {}, {}}, Op{OpKind::admit, 2, 0, {}, {}}};
  s.batch.entries = {BatchEntry{1, 150, {}}, BatchEntry{2, 70, {}}};
  return s;
}

TEST(OracleDispatch, EveryIsaGivesThePortableBits) {
  const std::vector<Isa> isas = runnable_isas();
  if (isas.size() < 2) GTEST_SKIP() << "this CPU runs only the portable kernels";
  const KeepIsa keep;
  std::vector<Scenario> cases = {packed_case()};
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(testing::test_cases(40)); ++seed)
    cases.push_back(generate(seed, seed % 4 == 0 ? Profile::medium : Profile::small));
  for (size_t c = 0; c < cases.size(); ++c) {
    const OracleResult want = oracle_on(Isa::portable, cases[c]);
    for (Isa isa : isas) {
      if (isa == Isa::portable) continue;
      SCOPED_TRACE("case " + std::to_string(c) + ", " + std::string(isa_name(isa)));
      const OracleResult got = oracle_on(isa, cases[c]);
      EXPECT_TRUE(same_bits(want.out, got.out));
      EXPECT_TRUE(same_bits(want.lse, got.lse));
      EXPECT_TRUE(same_bits(want.abs_out, got.abs_out));
      EXPECT_TRUE(same_bits(want.qk_norm, got.qk_norm));
    }
  }
}

TEST(OracleDispatch, UsesTheForcedIsa) {
  const KeepIsa keep;
  for (Isa isa : runnable_isas()) {
    use_oracle_isa(isa);
    EXPECT_EQ(oracle_kernels().isa, isa);
    EXPECT_EQ(oracle_kernels().lanes, isa == Isa::avx512 ? 8 : isa == Isa::avx2 ? 4 : 2);
  }
}

TEST(OracleDispatch, NamesRoundTripAndPortableAlwaysRuns) {
  for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512}) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_FALSE(parse_isa("sse2").has_value());
  EXPECT_FALSE(parse_isa("").has_value());
  ASSERT_FALSE(runnable_isas().empty());
  EXPECT_EQ(runnable_isas().front(), Isa::portable);
  EXPECT_TRUE(cpu_runs(Isa::portable));
  EXPECT_TRUE(!cpu_runs(Isa::avx512) || cpu_runs(Isa::avx2));
}

}  // namespace
}  // namespace kvfuzz
