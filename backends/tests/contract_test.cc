// The backend contract: .npy arrays, every family's schema round trip, adapter declarations.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "backends/contract/families.h"
#include "backends/contract/npy.h"
#include "backends/external/adapter_spec.h"
#include "backends/external/batch_request.h"
#include "backends/external/exchange.h"
#include "backends/registry.h"
#include "properties/case_context.h"
#include "properties/check.h"
#include "reference/generate.h"
#include "reference/io.h"
#include "reference/tests/test_level.h"

namespace kvfuzz {
namespace {

TEST(Npy, RoundTripsEveryContractDtype) {
  const std::vector<int32_t> a{1, -2, 3, 2147483647, -2147483647 - 1, 0};
  const NpyArray x = decode_npy(encode_npy(NpyArray::of<int32_t>({2, 3}, a)), "x");
  EXPECT_EQ(x.descr, "<i4");
  EXPECT_EQ(x.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(x.as<int32_t>("x"), a);
  const std::vector<int64_t> b{int64_t{1} << 40, -5};
  EXPECT_EQ(decode_npy(encode_npy(NpyArray::of<int64_t>({2}, b)), "b").as<int64_t>("b"), b);
  const std::vector<uint8_t> c{0, 1, 255};
  EXPECT_EQ(decode_npy(encode_npy(NpyArray::of<uint8_t>({3}, c)), "c").as<uint8_t>("c"), c);
  const std::vector<float> d{1.5f, -0.0f, 3e38f};
  EXPECT_EQ(decode_npy(encode_npy(NpyArray::of<float>({1, 3}, d)), "d").as_float("d"), d);
  const NpyArray empty = decode_npy(encode_npy(NpyArray::of<int32_t>({0}, std::vector<int32_t>{})), "e");
  EXPECT_EQ(empty.elements(), 0);
}

TEST(Npy, ReadsHalfFloats) {
  // 1.0, -2.0, 0.5 and 65504 in IEEE half precision, as numpy writes float16.
  NpyArray h{"<f2", {4}, {0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38, 0xff, 0x7b}};
  EXPECT_EQ(decode_npy(encode_npy(h), "h").as_float("h"), (std::vector<float>{1.0f, -2.0f, 0.5f, 65504.0f}));
}

TEST(Npy, RejectsWhatIsNotAContractArray) {
  auto message = [](const std::string& bytes) {
    try {
      decode_npy(bytes, "arr.npy");
    } catch (const ContractError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("not numpy").find("not a .npy file"), std::string::npos);
  std::string big_endian = encode_npy(NpyArray::of<int32_t>({1}, std::vector<int32_t>{7}));
  big_endian.replace(big_endian.find("<i4"), 3, ">i4");
  EXPECT_NE(message(big_endian).find(">i4"), std::string::npos);
  std::string truncated = encode_npy(NpyArray::of<int32_t>({4}, std::vector<int32_t>{1, 2, 3, 4}));
  truncated.resize(truncated.size() - 4);
  EXPECT_NE(message(truncated).find("needs 16 bytes"), std::string::npos);
  EXPECT_THROW(NpyArray::of<int64_t>({1}, std::vector<int64_t>{1}).as<int32_t>("x"), ContractError);
}

// NpyWriter (the exchange's pools and tokens, kvfuzz-worker's outputs): pieces of every size,
// small ones after the header, large ones as they lie, give the file write_npy gives; a longer file
// there is written over and cut; a wrong payload size is refused.
TEST(Npy, WriterGivesWhatWriteNpyGivesOverAnyEarlierFile) {
  const std::string path = ::testing::TempDir() + "kvfuzz-npy-writer-test.npy";
  std::vector<float> v(3 * NpyWriter::kBuffer / sizeof(float));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f - 7.0f;
  write_npy(path,
            NpyArray::of<float>({static_cast<int64_t>(v.size() + 1000)}, std::vector<float>(v.size() + 1000, 1.0f)));
  // 10 floats, then a piece of half the buffer (buffered header and floats go first), then pieces
  // that cross the buffer's end, then the rest
  const size_t half = NpyWriter::kBuffer / 2 / sizeof(float), cross = NpyWriter::kBuffer / 3 / sizeof(float);
  const std::vector<size_t> pieces{10, half, cross, cross, 1, cross};
  {
    NpyWriter w(path, "<f4", {static_cast<int64_t>(v.size())});
    size_t at = 0;
    for (size_t n : pieces) {
      w.append(v.data() + at, n * sizeof(float));
      at += n;
    }
    w.append(v.data() + at, (v.size() - at) * sizeof(float));
    w.finish();
  }
  const NpyArray back = read_npy(path);
  EXPECT_EQ(back.as_float("back"), v);
  EXPECT_EQ(std::filesystem::file_size(path), encode_npy(back).size());  // the longer file's tail cut
  NpyWriter short_one(path, "<f4", {4});
  short_one.append(v.data(), 3 * sizeof(float));
  EXPECT_THROW(short_one.finish(), std::logic_error);
  std::filesystem::remove(path);
}

// A reused request folder's earlier answer, marked, reads as not written; a missing one stays missing.
TEST(Npy, MarkedUnwrittenFilesAreNotRead) {
  const std::string path = ::testing::TempDir() + "kvfuzz-npy-unwritten-test.npy";
  write_npy(path, NpyArray::of<float>({3}, std::vector<float>{1, 2, 3}));
  mark_npy_unwritten(path);
  try {
    read_npy(path);
    ADD_FAILURE() << "a marked file was read";
  } catch (const ContractError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": not written"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
  mark_npy_unwritten(path);
  EXPECT_FALSE(std::filesystem::exists(path));
}

// An execute request written into a folder an earlier (larger) request used holds, file for file,
// what a fresh folder holds, and the earlier answer is marked unwritten (adapter.cc reuses folders).
TEST(Exchange, AReusedRequestFolderHoldsWhatAFreshOneHolds) {
  const CaseContext big(generate(3, Profile::small)), small(generate(4, Profile::tiny));
  const Backend& b = *find_backend("fa");
  const std::string root = ::testing::TempDir() + "kvfuzz-exchange-reuse-test";
  std::filesystem::remove_all(root);
  auto write = [&](const CaseContext& ctx, const std::string& dir) {
    const BackendRun run = run_backend(ctx, b);
    ASSERT_TRUE(run.ran);
    const Prepared& p = ctx.prepared();
    KvPools pools(ctx.scenario(), p.cache, value_fn(ctx.values()), nan_poison());
    const std::vector<RunInput> inputs{{ctx.scenario(), p.cache, p.batch, pools, ctx.tensors()}};
    std::filesystem::create_directories(dir);
    write_execute_request(dir, *find_family(b.family()), *run.plan, inputs, {"main"});
  };
  write(small, root + "/fresh");
  write(big, root + "/reused");
  write_npy(root + "/reused/main/out.npy", NpyArray::of<float>({1}, std::vector<float>{0}));
  write(small, root + "/reused");
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root + "/fresh")) {
    if (!e.is_regular_file()) continue;
    const std::string rel = std::filesystem::relative(e.path(), root + "/fresh").string();
    EXPECT_EQ(read_input(e.path().string(), size_t{1} << 30), read_input(root + "/reused/" + rel, size_t{1} << 30))
        << rel;
    ++files;
  }
  EXPECT_GT(files, 5);
  EXPECT_THROW(read_npy(root + "/reused/main/out.npy"), ContractError);
  std::filesystem::remove_all(root);
}

// Writing a plan and reading it back loses nothing: the re-written arrays and description are
// identical, and the family's executor gives bitwise the same outputs from the copy.
TEST(Contract, EveryFamilyRoundTripsItsPlans) {
  int checked = 0;
  for (uint64_t seed = 0; seed < static_cast<uint64_t>(testing::test_cases(80)); ++seed) {
    const CaseContext ctx(generate(seed, seed % 2 ? Profile::small : Profile::tiny));
    for (const Backend* b : builtin_backends()) {
      if (!b->supports(ctx.scenario()).ok) continue;
      const Family& family = *find_family(b->family());
      const BackendRun run = run_backend(ctx, *b);
      if (!run.ran) continue;
      ArraySet first, second;
      family.write(*run.plan, first);
      const std::unique_ptr<Plan> copy = family.read(first);
      family.write(*copy, second);
      ASSERT_EQ(first.meta, second.meta) << b->name() << " seed " << seed;
      ASSERT_EQ(first.arrays.size(), second.arrays.size());
      for (const auto& [name, a] : first.arrays) {
        ASSERT_TRUE(second.arrays.count(name)) << name;
        EXPECT_EQ(a.bytes, second.arrays.at(name).bytes) << b->name() << " " << name;
      }
      const Prepared& p = ctx.prepared();
      KvPools pools(ctx.scenario(), p.cache, ctx.values());
      RunOutput out(ctx.scenario(), p.batch);
      family.executor().run(*copy, {ctx.scenario(), p.cache, p.batch, pools, ctx.tensors()}, out);
      EXPECT_EQ(0, std::memcmp(out.out.data(), run.out.out.data(), out.out.size() * sizeof(float)))
          << b->name() << " seed " << seed;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

// Pools above the threshold go out as slots + rows + fill, below it dense; kvfuzz_adapter's Case
// reads both to the same dense array (adapters/tests/sparse_pool_test.py, run from here).
TEST(Exchange, WritesSparsePoolsAboveTheThresholdAndDenseBelow) {
  const CaseContext ctx(generate(3, Profile::small));
  const Backend& b = *find_backend("fa");
  const BackendRun run = run_backend(ctx, b);
  ASSERT_TRUE(run.ran);
  const Prepared& p = ctx.prepared();
  KvPools pools(ctx.scenario(), p.cache, value_fn(ctx.values()), finite_poison(ctx.scenario().values.dtype));
  const std::vector<RunInput> inputs{{ctx.scenario(), p.cache, p.batch, pools, ctx.tensors()}};
  const std::string root = ::testing::TempDir() + "kvfuzz-exchange-test";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root + "/dense");
  std::filesystem::create_directories(root + "/sparse");
  const Family& family = *find_family(b.family());
  write_execute_request(root + "/dense", family, *run.plan, inputs, {"main"}, kSparsePoolElements);
  write_execute_request(root + "/sparse", family, *run.plan, inputs, {"main"}, 0);
  EXPECT_TRUE(std::filesystem::exists(root + "/dense/main/k_cache.0.npy"));
  EXPECT_FALSE(std::filesystem::exists(root + "/dense/main/k_cache.0.slots.npy"));
  EXPECT_FALSE(std::filesystem::exists(root + "/sparse/main/k_cache.0.npy"));
  for (const char* part : {"slots", "rows", "fill"})
    EXPECT_TRUE(std::filesystem::exists(root + "/sparse/main/k_cache.0." + part + ".npy")) << part;
  const NpyArray slots = read_npy(root + "/sparse/main/k_cache.0.slots.npy");
  EXPECT_EQ(slots.descr, "<i8");
  EXPECT_LT(slots.shape[0], pools.layer(0).num_slots + 1);
  const std::string script = std::string(KVFUZZ_SOURCE_DIR) + "/adapters/tests/sparse_pool_test.py";
  EXPECT_EQ(0, std::system(("python3 '" + script + "' '" + root + "/dense' '" + root + "/sparse'").c_str()));
  std::filesystem::remove_all(root);
}

// A batch is one kernel call: every member's every value set a run of the request's one value set,
// in order, tokens and pool slots end to end; the outputs go back run by run (batch_request.h).
TEST(Exchange, ABatchRunsEveryMembersValueSetsInOneSet) {
  for (uint64_t seed = 0;; ++seed) {
    ASSERT_LT(seed, 50u) << "no tiny case the fa family batches";
    const CaseContext ctx(generate(seed, Profile::tiny));
    const Backend& b = *find_backend("fa");
    if (!b.supports(ctx.scenario()).ok) continue;
    const BackendRun run = run_backend(ctx, b);
    if (!run.ran) continue;
    const Family& family = *find_family(b.family());
    const Prepared& p = ctx.prepared();
    KvPools pools(ctx.scenario(), p.cache, ctx.values());
    const RunInput in{ctx.scenario(), p.cache, p.batch, pools, ctx.tensors()};
    const std::vector<RunInput> two{in, in}, one{in};
    if (batch_key(family, *run.plan, two, "v").empty()) continue;
    std::vector<RunOutput> out_two(2, RunOutput(ctx.scenario(), p.batch)), out_one(1, RunOutput(ctx.scenario(), p.batch));
    BatchMember a, c;
    a.plan = c.plan = run.plan.get();
    a.inputs = &two, a.outputs = &out_two;
    c.inputs = &one, c.outputs = &out_one;
    const std::vector<BatchSlot*> members{&a, &c};
    const std::string dir = ::testing::TempDir() + "kvfuzz-batch-runs-test";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    write_batch(dir, family, members);
    const nlohmann::json manifest = nlohmann::json::parse(read_input(dir + "/manifest.json", size_t{1} << 20));
    ASSERT_EQ(manifest["sets"].size(), 1u) << manifest["sets"].dump();
    const int64_t T = p.batch.num_tokens();
    EXPECT_EQ(manifest["case"]["num_tokens"], 3 * T);
    EXPECT_EQ(manifest["case"]["pools"]["full_slots"], 3 * p.cache.full_slots);
    EXPECT_EQ(read_npy(dir + "/main/k_cache.0.npy").shape[0], 3 * pools.layer(0).num_slots);
    // An answer whose every value is its row: run r's rows are [r T, (r + 1) T) of each layer.
    const Model& m = ctx.scenario().model;
    const auto L = static_cast<int64_t>(m.layers.size());
    std::vector<float> o(static_cast<size_t>(L * 3 * T * m.q_heads * m.v_head_dim)), lse(static_cast<size_t>(L * 3 * T * m.q_heads));
    for (size_t i = 0; i < o.size(); ++i) o[i] = static_cast<float>(i / (m.q_heads * m.v_head_dim) % (3 * T));
    for (size_t i = 0; i < lse.size(); ++i) lse[i] = static_cast<float>(i / m.q_heads % (3 * T));
    write_npy(dir + "/main/out.npy", NpyArray::of<float>({L, 3 * T, m.q_heads, m.v_head_dim}, o));
    write_npy(dir + "/main/lse.npy", NpyArray::of<float>({L, 3 * T, m.q_heads}, lse));
    read_batch(dir, members);
    const std::vector<const RunOutput*> runs{&out_two[0], &out_two[1], &out_one[0]};
    for (size_t r = 0; r < runs.size(); ++r) {
      ASSERT_EQ(runs[r]->out.size(), static_cast<size_t>(L * T * m.q_heads * m.v_head_dim));
      EXPECT_EQ(runs[r]->out.front(), static_cast<float>(r * T)) << "run " << r;
      EXPECT_EQ(runs[r]->out.back(), static_cast<float>((r + 1) * T - 1)) << "run " << r;
      EXPECT_EQ(runs[r]->lse.back(), static_cast<float>((r + 1) * T - 1)) << "run " << r;
    }
    std::filesystem::remove_all(dir);
    return;
  }
}

// A planner's plan_run list (PROTOCOL.md) becomes the plan's disagreements; a malformed entry is a
// contract error; no list, none.
TEST(Contract, PlanRunDisagreementsAreReadOrRejected) {
  EXPECT_TRUE(read_plan_run({{"id", 1}, {"ok", true}}).empty());
  const auto read = read_plan_run(nlohmann::json::parse(
      R"({"plan_run": [{"argument": "window_left", "layer": 2, "message": "-1 at plan, 3 at run"},
                       {"argument": "causal", "message": "m"}]})"));
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].argument, "window_left");
  EXPECT_EQ(read[0].layer, 2);
  EXPECT_EQ(read[0].message, "-1 at plan, 3 at run");
  EXPECT_EQ(read[1].layer, -1);
  for (const char* bad : {R"({"plan_run": {"argument": "x", "message": "m"}})", R"({"plan_run": [{"message": "m"}]})",
                          R"({"plan_run": [{"argument": "", "message": "m"}]})",
                          R"({"plan_run": [{"argument": "x", "message": "m", "layer": "0"}]})"})
    EXPECT_THROW(read_plan_run(nlohmann::json::parse(bad)), ContractError) << bad;
}

// Each disagreement a plan carries is a plan-run finding on its layer, named by the argument.
TEST(Contract, PlanRunDisagreementsAreFindings) {
  class Disagreeing : public Backend {
   public:
    explicit Disagreeing(const Backend& inner) : inner_(inner) {}
    std::string_view name() const override { return "disagreeing"; }
    std::string_view summary() const override { return "fa, reporting a plan-run disagreement"; }
    std::string_view family() const override { return inner_.family(); }
    KernelRounding rounding() const override { return inner_.rounding(); }
    Support supports(const Scenario& s) const override { return inner_.supports(s); }
    std::unique_ptr<Plan> plan(const PlanInput& in) const override {
      auto plan = inner_.plan(in);
      plan->plan_run.push_back({"window_left", 0, "window_left is -1 at the plan step, 3 at the run step"});
      return plan;
    }
    void run(const Plan& plan, const RunInput& in, RunOutput& out) const override { inner_.run(plan, in, out); }

   private:
    const Backend& inner_;
  };
  const CaseContext ctx(generate(3, Profile::small));
  const Disagreeing backend(*find_backend("fa"));
  const BackendRun run = run_backend(ctx, backend);
  ASSERT_TRUE(run.ran);
  ASSERT_EQ(run.findings.size(), 1u);
  EXPECT_EQ(run.findings[0].property, "plan-run");
  EXPECT_EQ(run.findings[0].mechanism, "plan-run:window_left");
  EXPECT_EQ(run.findings[0].layer, 0);
  EXPECT_TRUE(run_backend(ctx, *find_backend("fa")).findings.empty());
}

TEST(Contract, AMissingArrayOrWrongTypeNamesIt) {
  const CaseContext ctx(generate(3, Profile::small));
  const Backend& fa = *find_backend("fa");
  const BackendRun run = run_backend(ctx, fa);
  ASSERT_TRUE(run.ran);
  ArraySet set;
  fa::write_plan(*run.plan, set);
  ArraySet missing = set;
  missing.arrays.erase("full.parts.0.page_table");
  try {
    fa::read_plan(missing);
    FAIL() << "a plan without its page table was accepted";
  } catch (const ContractError& e) {
    EXPECT_NE(std::string(e.what()).find("full.parts.0.page_table is missing"), std::string::npos) << e.what();
  }
  ArraySet wrong = set;
  wrong.meta["full"]["parts"][0]["rows"] = "three";
  EXPECT_THROW(fa::read_plan(wrong), ContractError);
  ArraySet widened = set;
  widened.arrays["full.parts.0.cache_seqlens"] = NpyArray::of<int64_t>({1}, std::vector<int64_t>{1});
  try {
    fa::read_plan(widened);
    FAIL() << "int64 cache_seqlens accepted";
  } catch (const ContractError& e) {
    EXPECT_NE(std::string(e.what()).find("expected <i4"), std::string::npos) << e.what();
  }
}

nlohmann::json hello() {
  return {{"kvfuzz_adapter", 1}, {"name", "k"}, {"role", "executor"}, {"family", "page_table"},
          {"supports", {{"modes", {"decode"}}, {"page_sizes", {1, 16}}, {"dtypes", {"bf16"}}}}};
}

TEST(AdapterSpec, ChecksCasesAgainstTheDeclaration) {
  const AdapterSpec spec = parse_spec(hello(), "cmd");
  Scenario s = generate(1, Profile::small);
  s.batch.mode = Mode::extend;
  s.values.dtype = DType::bf16;
  EXPECT_NE(spec.supports(s, 16).why.find("mode extend"), std::string::npos);
  s.batch.mode = Mode::decode;
  EXPECT_TRUE(spec.supports(s, 16).ok);
  EXPECT_NE(spec.supports(s, 8).why.find("kernel page size 8"), std::string::npos);
  s.values.dtype = DType::fp32;
  EXPECT_NE(spec.supports(s, 1).why.find("dtype fp32"), std::string::npos);
  // Attention sinks only where declared: a kernel that ignores them would be wrong, not unsupported.
  s.values.dtype = DType::bf16;
  s.model.sinks.assign(static_cast<size_t>(s.model.q_heads), 0.5);
  EXPECT_NE(spec.supports(s, 16).why.find("attention sinks"), std::string::npos);
  nlohmann::json with = hello();
  with["supports"]["sinks"] = true;
  EXPECT_TRUE(parse_spec(with, "cmd").supports(s, 16).ok);
}

// fp8 scales only where an executor declares them (it must read stored * scale); a planner never
// sees values, so it is not asked.
TEST(AdapterSpec, ScaledFp8CachesOnlyWhereDeclared) {
  nlohmann::json decl = hello();
  decl["supports"]["dtypes"] = {"fp8_e4m3"};
  Scenario s = generate(1, Profile::small);
  s.batch.mode = Mode::decode;
  s.values.dtype = DType::fp8_e4m3;
  EXPECT_TRUE(parse_spec(decl, "cmd").supports(s, 16).ok);
  s.model.layers.back().v_scale = 0.375f;
  EXPECT_NE(parse_spec(decl, "cmd").supports(s, 16).why.find("fp8 KV-cache scales"), std::string::npos);
  nlohmann::json planner = decl;
  planner["role"] = "planner";
  EXPECT_TRUE(parse_spec(planner, "cmd").supports(s, 16).ok);
  decl["supports"]["kv_scales"] = true;
  EXPECT_TRUE(parse_spec(decl, "cmd").supports(s, 16).ok);
}

// What an executor declares of its arithmetic reaches the oracle's bound (properties/tolerance.h).
TEST(AdapterSpec, PrecisionDeclarationReachesTheBound) {
  nlohmann::json j = hello();
  EXPECT_EQ(parse_spec(j, "cmd").tile_keys, 1);
  EXPECT_FALSE(parse_spec(j, "cmd").row_sum_rounded);
  EXPECT_EQ(parse_spec(j, "cmd").qk_products, QkProducts::fp32);
  EXPECT_EQ(parse_spec(j, "cmd").split_keys, 0);
  j["precision"] = {{"tile_keys", 16}, {"row_sum", "p"}, {"qk_products", "cache_mha"}, {"split_keys", 64}};
  const AdapterSpec spec = parse_spec(j, "cmd");
  EXPECT_EQ(spec.tile_keys, 16);
  EXPECT_EQ(spec.split_keys, 64);
  EXPECT_TRUE(spec.row_sum_rounded);
  EXPECT_EQ(spec.qk_products, QkProducts::cache_mha);
  EXPECT_EQ(spec.out_dtype, "fp32");
  j["precision"] = {{"qk_products", "bf16"}};
  EXPECT_THROW(parse_spec(j, "cmd"), ContractError);
  j["precision"] = {{"out_dtype", "cache"}};
  EXPECT_EQ(parse_spec(j, "cmd").out_dtype, "cache");
  j["precision"] = {{"out_dtype", "fp8"}};
  EXPECT_THROW(parse_spec(j, "cmd"), ContractError);
}

// An answer's per-case precision replaces the declared tiling figures and nothing else.
TEST(AdapterSpec, AnsweredPrecisionReplacesTheDeclaredTiling) {
  KernelRounding declared;
  declared.tile_keys = 3;
  declared.split_keys = 64;
  declared.extra_merges = 34;
  declared.row_sum_rounded = true;
  const KernelRounding r = answered_rounding({{"tile_keys", 32}, {"split_keys", 128}}, declared, "x");
  EXPECT_EQ(r.tile_keys, 32);
  EXPECT_EQ(r.split_keys, 128);
  EXPECT_EQ(r.extra_merges, 34);
  EXPECT_TRUE(r.row_sum_rounded);
  EXPECT_EQ(answered_rounding({{"max_merges", 0}}, declared, "x").extra_merges, 0);
  auto why = [&](const nlohmann::json& p) {
    try {
      answered_rounding(p, declared, "adapter 'a'");
    } catch (const ContractError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(why({{"p_dtype", "fp32"}}).find("'p_dtype' cannot be answered per request"), std::string::npos);
  EXPECT_NE(why({{"tile_keys", 0}}).find("'tile_keys' must be an integer in [1, 4096]"), std::string::npos);
  EXPECT_NE(why({{"split_keys", 1.5}}).find("'split_keys'"), std::string::npos);
  EXPECT_NE(why(nlohmann::json::array()).find("'precision' must be an object"), std::string::npos);
}

TEST(AdapterSpec, RejectsMalformedDeclarationsNamingTheField) {
  auto why = [](nlohmann::json j) {
    try {
      parse_spec(j, "python3 x.py");
    } catch (const ContractError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  nlohmann::json j = hello();
  j["family"] = "paged";
  EXPECT_NE(why(j).find("'family' is \"paged\", not a known family"), std::string::npos);
  j = hello();
  j["role"] = "kernel";
  EXPECT_NE(why(j).find("'role'"), std::string::npos);
  j = hello();
  j["supports"]["modes"] = {"decode", "prefill"};
  EXPECT_NE(why(j).find("\"prefill\""), std::string::npos);
  j = hello();
  j["supports"]["page_sizes"] = {0};
  EXPECT_NE(why(j).find("page_sizes"), std::string::npos);
  j = hello();
  j["name"] = "has space";
  EXPECT_NE(why(j).find("'name'"), std::string::npos);
  j = hello();
  j["precision"] = {{"tile_keys", 0}};
  EXPECT_NE(why(j).find("'tile_keys'"), std::string::npos);
  j = hello();
  j["precision"] = {{"split_keys", "64"}};
  EXPECT_NE(why(j).find("'split_keys'"), std::string::npos);
  j = hello();
  j["precision"] = {{"row_sum", "bf16"}};
  EXPECT_NE(why(j).find("'row_sum'"), std::string::npos);
  EXPECT_NE(why({{"hello", 1}}).find("first message must be the declaration"), std::string::npos);
  EXPECT_NE(why(hello()).find("accepted"), std::string::npos);
}

}  // namespace
}  // namespace kvfuzz
