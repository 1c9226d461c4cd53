// The CUDA targets end to end without a GPU: HLO -> CUDA C++ kernels and a launch plan -> NVRTC
// -> a cubin for sm_80 and sm_90 (checked by its ELF header) -> the artifact. The kernels'
// arithmetic is checked against the interpreter by running them on the host (cuda_emulation.h);
// running them on a GPU is `hlocache run --target cuda-sm_90 --check` where there is one.
#include "compiler/cuda/cuda_codegen.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/artifact/container.h"
#include "compiler/artifact/execute.h"
#include "compiler/build.h"
#include "compiler/codegen/cpu_codegen.h"
#include "compiler/cuda/cuda_runtime.h"
#include "compiler/cuda/nvrtc.h"
#include "compiler/hlo/parser.h"
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/arguments.h"
#include "compiler/target.h"
#include "tests/unit/compiler/cuda_emulation.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// One module per op family of the core set, small enough to run on the host emulation, with
// shapes that leave partial tiles and blocks.
const std::vector<std::pair<const char*, const char*>>& OpModules() {
  static const auto* modules = new std::vector<std::pair<const char*, const char*>>{
      {"float elementwise chain", R"(HloModule m
ENTRY e {
  a = f32[300] parameter(0)
  b = f32[300] parameter(1)
  s = f32[300] add(a, b)
  m = f32[300] multiply(s, a)
  x = f32[300] exponential(m)
  t = f32[300] tanh(x)
  d = f32[300] divide(t, b)
  q = f32[300] sqrt(a)
  l = f32[300] log-plus-one(b)
  mx = f32[300] maximum(q, l)
  mn = f32[300] minimum(d, mx)
  r = f32[300] power(mn, a)
  n = f32[300] negate(r)
  ab = f32[300] abs(n)
  sg = f32[300] sign(d)
  fl = f32[300] floor(ab)
  rn = f32[300] round-nearest-even(d)
  at = f32[300] atan2(a, b)
  lg = f32[300] logistic(at)
  rs = f32[300] rsqrt(ab)
  ROOT out = (f32[300], f32[300], f32[300], f32[300], f32[300]) tuple(fl, rn, sg, lg, rs)
})"},
      {"half types and conversions", R"(HloModule m
ENTRY e {
  a = bf16[7,33] parameter(0)
  b = f16[7,33] parameter(1)
  c = f32[7,33] convert(a)
  d = f32[7,33] convert(b)
  s = f32[7,33] subtract(c, d)
  h = bf16[7,33] convert(s)
  i = s32[7,33] convert(s)
  u = u8[7,33] convert(d)
  f = f64[7,33] convert(b)
  g = f64[7,33] cosine(f)
  p = pred[7,33] compare(c, d), direction=LT
  k = pred[7,33] is-finite(g)
  ROOT out = (bf16[7,33], s32[7,33], u8[7,33], f64[7,33], pred[7,33], pred[7,33]) tuple(h, i, u, g, p, k)
})"},
      {"integer semantics", R"(HloModule m
ENTRY e {
  a = s32[97] parameter(0)
  b = s32[97] parameter(1)
  d = s32[97] divide(a, b)
  r = s32[97] remainder(a, b)
  l = s32[97] shift-left(a, b)
  sr = s32[97] shift-right-arithmetic(a, b)
  lr = s32[97] shift-right-logical(a, b)
  x = s32[97] xor(a, b)
  o = s32[97] or(l, sr)
  n = s32[97] not(o)
  m = s32[97] multiply(n, lr)
  p = s32[97] power(a, b)
  c = s32[97] clamp(b, a, d)
  u = u16[97] convert(m)
  sh = u16[97] shift-right-arithmetic(u, u)
  ROOT out = (s32[97], s32[97], s32[97], s32[97], u16[97], s32[97]) tuple(d, r, m, p, sh, c)
})"},
      {"select, compare orders, iota", R"(HloModule m
ENTRY e {
  a = f32[5,40] parameter(0)
  b = f32[5,40] parameter(1)
  z = f32[] constant(0)
  zb = f32[5,40] broadcast(z), dimensions={}
  q = f32[5,40] divide(a, zb)
  t = pred[5,40] compare(q, b), direction=GE, type=TOTALORDER
  g = pred[5,40] compare(q, b), direction=NE
  s = f32[5,40] select(t, q, b)
  sp = pred[] constant(true)
  s2 = f32[5,40] select(sp, s, a)
  io = s32[5,40] iota(), iota_dimension=1
  i2 = f32[5,40] iota(), iota_dimension=0
  ROOT out = (pred[5,40], pred[5,40], f32[5,40], s32[5,40], f32[5,40]) tuple(t, g, s2, io, i2)
})"},
      {"data movement", R"(HloModule m
ENTRY e {
  a = f32[6,10,4] parameter(0)
  i = s32[] parameter(1)
  t = f32[4,6,10] transpose(a), dimensions={2,0,1}
  b = f32[3,6,10,4] broadcast(a), dimensions={1,2,3}
  s = f32[3,4,2] slice(a), slice={[1:6:2], [2:10:2], [0:4:2]}
  r = f32[6,10,4] reverse(a), dimensions={0,2}
  p0 = f32[] constant(-1.5)
  p = f32[9,30,4] pad(a, p0), padding=1_2x-1_3_2x0_0
  s2 = f32[6,5,4] slice(a), slice={[0:6], [3:8], [0:4]}
  c = f32[6,25,4] concatenate(a, s2, a), dimensions={1}
  ds = f32[2,3,4] dynamic-slice(a, i, i, i), dynamic_slice_sizes={2,3,4}
  u = f32[2,3,4] negate(ds)
  dus = f32[6,10,4] dynamic-update-slice(a, u, i, i, i)
  rs = f32[60,4] reshape(dus)
  ROOT out = (f32[4,6,10], f32[3,6,10,4], f32[6,10,4], f32[9,30,4], f32[60,4], f32[2,3,4], f32[6,25,4], f32[3,4,2]) tuple(t, b, r, p, rs, ds, c, s)
})"},
      {"reductions", R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v1, v0), direction=GT
  v = f32[] select(gt, v1, v0)
  i = s32[] select(gt, i1, i0)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
smax {
  a = s64[] parameter(0)
  b = s64[] parameter(1)
  ROOT m = s64[] maximum(b, a)
}
ENTRY e {
  a = f32[9,37,5] parameter(0)
  z = f32[] constant(0)
  e = f32[9,37,5] exponential(a)
  r1 = f32[9,5] reduce(e, z), dimensions={1}, to_apply=add
  r2 = f32[] reduce(a, z), dimensions={0,1,2}, to_apply=add
  io = s32[9,37,5] iota(), iota_dimension=1
  m = f32[] constant(-inf)
  k = s32[] constant(0)
  am = (f32[9,5], s32[9,5]) reduce(a, io, m, k), dimensions={1}, to_apply=argmax
  l = s64[9,37,5] convert(a)
  lm = s64[] constant(-100)
  r3 = s64[37] reduce(l, lm), dimensions={0,2}, to_apply=smax
  v = f32[9,5] get-tuple-element(am), index=0
  ix = s32[9,5] get-tuple-element(am), index=1
  ROOT out = (f32[9,5], f32[], f32[9,5], s32[9,5], s64[37]) tuple(r1, r2, v, ix, r3)
})"},
      {"dots", R"(HloModule m
ENTRY e {
  a = f32[37,53] parameter(0)
  b = f32[53,19] parameter(1)
  d = f32[37,19] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  x = bf16[3,17,5,9] parameter(2)
  y = bf16[3,9,5,21] parameter(3)
  bd = f32[3,5,17,21] dot(x, y), lhs_batch_dims={0,2}, rhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_contracting_dims={1}
  i = s32[20,33] parameter(4)
  j = s8[33] parameter(5)
  id = s32[20] dot(i, j), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  v = f64[40] parameter(6)
  vd = f64[] dot(v, v), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  o = f32[37,19,6] parameter(7)
  od = f32[37,6] dot(d, o), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_contracting_dims={1}
  ROOT out = (f32[37,19], f32[3,5,17,21], s32[20], f64[], f32[37,6]) tuple(d, bd, id, vd, od)
})"},
      {"calls, fusions, tuples and parameters passed through", R"(HloModule m
fused {
  p0 = f32[8,16] parameter(0)
  p1 = f32[16] parameter(1)
  b = f32[8,16] broadcast(p1), dimensions={1}
  m = f32[8,16] multiply(p0, b)
  ROOT t = (f32[8,16], f32[16]) tuple(m, p1)
}
helper {
  x = f32[8,16] parameter(0)
  ROOT n = f32[8,16] negate(x)
}
ENTRY e {
  a = f32[8,16] parameter(0)
  v = f32[16] parameter(1)
  f = (f32[8,16], f32[16]) fusion(a, v), kind=kLoop, calls=fused
  g = f32[8,16] get-tuple-element(f), index=0
  c = f32[8,16] call(g), to_apply=helper
  c2 = f32[8,16] call(a), to_apply=helper
  k = f32[3] constant({1, 2.5, -3})
  ROOT out = (f32[8,16], f32[8,16], f32[16], f32[8,16], f32[3], f32[16]) tuple(c, c2, v, a, k, v)
})"},
      {"zero-sized arrays", R"(HloModule m
ENTRY e {
  a = f32[0,4] parameter(0)
  b = f32[4,3] parameter(1)
  d = f32[0,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  e = f32[0,4] exponential(a)
  ROOT out = (f32[0,3], f32[0,4], f32[4,3]) tuple(d, e, b)
})"},
  };
  return *modules;
}

std::vector<std::string> Archs() { return {"sm_80", "sm_90"}; }

// Whether NVRTC loads here; when it does not, the tests that need it are skipped and the
// missing library is said (the CLI test checks the message a user gets).
bool HaveNvrtc() { return Nvrtc::Get().has_value(); }

struct Run {
  std::vector<interp::Literal> args;
  std::vector<std::string> in;
  EntryLeaves leaves;
  interp::Literal expected;
  const hlo::Module* module = nullptr;  // Outlives the run.
};

Result<Run> Prepare(const hlo::Module& module) {
  Run r;
  r.module = &module;
  HLOCACHE_ASSIGN_OR_RETURN(r.args,
                            interp::MakeArguments(module, interp::ArgumentFill::kRandom, 7));
  HLOCACHE_ASSIGN_OR_RETURN(r.leaves, EntryLeavesOf(module));
  HLOCACHE_ASSIGN_OR_RETURN(r.in, ArgumentBytes(r.leaves, r.args));
  HLOCACHE_ASSIGN_OR_RETURN(r.expected, interp::Evaluate(module, r.args));
  return r;
}

void ExpectMatches(const Run& r, const std::vector<std::string>& got, const std::string& what) {
  std::vector<const interp::Literal*> want;
  interp::FlattenLeaves(r.expected, want);
  auto compared = interp::CompareWithInterpreter(want, got, *r.module);
  ASSERT_THAT(compared, IsOk()) << what;
  EXPECT_EQ(compared->mismatched, 0u) << what << ": " << compared->first_mismatch;
  EXPECT_EQ(compared->identical, compared->elements) << what << ": not bit for bit";
}

TEST(CudaCodegenTest, KernelsComputeWhatTheInterpreterComputes) {
  for (const auto& [name, text] : OpModules()) {
    SCOPED_TRACE(name);
    auto module = hlo::ParseModule(text, std::string(name) + ".hlo");
    ASSERT_THAT(module, IsOk());
    auto run = Prepare(*module);
    ASSERT_THAT(run, IsOk());
    auto program = LowerToCuda(*module, "sm_90");
    ASSERT_THAT(program, IsOk());
    // The same module gives the same source, byte for byte (keys name executables).
    auto again = LowerToCuda(*module, "sm_90");
    ASSERT_THAT(again, IsOk());
    EXPECT_EQ(program->source, again->source);
    auto got = EmulateCudaProgram(*program, run->in, run->leaves.results);
    ASSERT_THAT(got, IsOk());
    ExpectMatches(*run, *got, name);
  }
}

TEST(CudaCodegenTest, NvrtcBuildsACubinForEachArchitecture) {
  if (!HaveNvrtc()) GTEST_SKIP() << Nvrtc::Get().error().message();
  for (const auto& [name, text] : OpModules()) {
    SCOPED_TRACE(name);
    auto module = hlo::ParseModule(text, std::string(name) + ".hlo");
    ASSERT_THAT(module, IsOk());
    for (const std::string& arch : Archs()) {
      auto program = LowerToCuda(*module, arch);
      ASSERT_THAT(program, IsOk());
      EXPECT_EQ(program->plan.arch, arch);
      auto cubin = (*Nvrtc::Get())->CompileToCubin(program->source, arch, "m.cu");
      ASSERT_THAT(cubin, IsOk()) << program->source;
      auto built_for = CubinArch(*cubin);
      ASSERT_THAT(built_for, IsOk());
      EXPECT_EQ(*built_for, arch);
    }
  }
}

TEST(CudaCodegenTest, ArtifactsCarryTheCubinAndItsPlan) {
  if (!HaveNvrtc()) GTEST_SKIP() << Nvrtc::Get().error().message();
  auto toolchain = Toolchain::Probe({});
  ASSERT_THAT(toolchain, IsOk());
  auto module = hlo::ParseModule(OpModules()[6].second, "dots.hlo");
  ASSERT_THAT(module, IsOk());
  for (const std::string target : {"cuda-sm_80", "cuda-sm_90"}) {
    auto artifact =
        BuildArtifact(*module, *toolchain, {"v1-00000000000000000000000000000000", target});
    ASSERT_THAT(artifact, IsOk());
    auto decoded = DecodeArtifact(*artifact);
    ASSERT_THAT(decoded, IsOk());
    EXPECT_EQ(decoded->header.target, target);
    EXPECT_EQ(decoded->header.payload_kind, kPayloadCubinPlan);
    EXPECT_EQ(decoded->header.compiler_id, CudaCompilerId());
    EXPECT_THAT(decoded->header.compiler_id,
                StartsWith("nvrtc-" + (*Nvrtc::Get())->version() + "/hlocache-cuda-"));
    auto payload = DecodeCudaPayload(decoded->payload);
    ASSERT_THAT(payload, IsOk());
    EXPECT_EQ(payload->plan.arch, CudaTargetArch(target));
    EXPECT_EQ(*CubinArch(payload->cubin), CudaTargetArch(target));
    EXPECT_EQ(payload->plan.parameters.size(), 8u);
    EXPECT_EQ(payload->plan.results.size(), 5u);
    // One launch per dot; the plan's launches name kernels of the cubin's source.
    int launches = 0;
    for (const CudaStep& s : payload->plan.steps) launches += s.kernel.empty() ? 0 : 1;
    EXPECT_EQ(launches, 5);
  }
}

TEST(CudaCodegenTest, ElementwiseChainsFuseIntoOneKernel) {
  auto module = hlo::ParseModule(OpModules()[0].second, "chain.hlo");
  ASSERT_THAT(module, IsOk());
  auto program = LowerToCuda(*module, "sm_90");
  ASSERT_THAT(program, IsOk());
  // Five results, each its own kernel; everything between them is fused into those. Values
  // with several users (s, d, ab, at, ...) are the buffers the five kernels share.
  int launches = 0;
  for (const CudaStep& s : program->plan.steps) launches += s.kernel.empty() ? 0 : 1;
  EXPECT_LE(launches, 9);
  EXPECT_GE(launches, 5);

  auto fused = hlo::ParseModule(R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[64,64] parameter(0)
  b = f32[64,64] parameter(1)
  m = f32[64,64] multiply(a, b)
  x = f32[64,64] exponential(m)
  z = f32[] constant(0)
  ROOT r = f32[64] reduce(x, z), dimensions={1}, to_apply=add
})",
                                "fused.hlo");
  ASSERT_THAT(fused, IsOk());
  auto one = LowerToCuda(*fused, "sm_80");
  ASSERT_THAT(one, IsOk());
  ASSERT_EQ(one->plan.steps.size(), 1u) << one->source;  // Multiply and exp inside the reduce.
  EXPECT_EQ(one->plan.steps[0].args.size(), 3u);         // The result, a and b.
}

TEST(CudaCodegenTest, UnsupportedOpsAreNamedWithTheirLine) {
  auto module = hlo::ParseModule(
      "HloModule m\nlt {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
      "  ROOT c = pred[] compare(x, y), direction=LT\n}\nENTRY e {\n  a = f32[4] parameter(0)\n"
      "  ROOT s = f32[4] sort(a), dimensions={0}, to_apply=lt\n}\n",
      "s.hlo");
  ASSERT_THAT(module, IsOk());
  EXPECT_THAT(LowerToCuda(*module, "sm_90"),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("s.hlo:9: the CUDA code generator does not support 'sort'")));
  auto wrong = hlo::ParseModule(
      "ENTRY e {\n  a = f32[2] parameter(0)\n  ROOT f = f32[3] add(a, a)\n}", "g.hlo");
  ASSERT_THAT(wrong, IsOk());
  EXPECT_THAT(LowerToCuda(*wrong, "sm_90"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("g.hlo:")));
  auto ok = hlo::ParseModule("ENTRY e {\n  ROOT a = f32[2] parameter(0)\n}", "g.hlo");
  ASSERT_THAT(ok, IsOk());
  EXPECT_THAT(LowerToCuda(*ok, "sm_75"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(CudaTargetArch("cuda-sm_90"), "sm_90");
  EXPECT_EQ(CudaTargetArch("cpu-x86-64-v3"), "");
}

// A custom call acts outside the executable: the root not using its value does not make it
// safe to leave out, so a module that holds one is refused, as the CPU target refuses it.
TEST(CudaCodegenTest, OpsWithEffectsAreNotDroppedWhenTheRootIgnoresThem) {
  auto module = hlo::ParseModule(
      "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n"
      "  c = f32[2] custom-call(a), custom_call_target=\"Pin\"\n"
      "  ROOT n = f32[2] negate(a)\n}\n",
      "fx.hlo");
  ASSERT_THAT(module, IsOk());
  EXPECT_THAT(LowerToCuda(*module, "sm_90"),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("fx.hlo:4: the CUDA code generator does not support "
                                 "'custom-call'")));
  auto pure = hlo::ParseModule(
      "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  unused = f32[2] exponential(a)\n"
      "  ROOT n = f32[2] negate(a)\n}\n",
      "pure.hlo");
  ASSERT_THAT(pure, IsOk());
  EXPECT_THAT(LowerToCuda(*pure, "sm_90"), IsOk());
}

TEST(CudaCodegenTest, PayloadsThatDoNotHoldTogetherAreRefused) {
  CudaPlan plan;
  plan.arch = "sm_90";
  plan.buffer_bytes = {16, 16};
  plan.parameters = {0};
  plan.results = {1};
  CudaStep launch;
  launch.kernel = "k0";
  launch.grid = {1, 1, 1};
  launch.block = {256, 1, 1};
  launch.args = {1, 0};
  plan.steps = {launch};
  auto good = DecodeCudaPayload(EncodeCudaPayload(plan, "cubin"));
  ASSERT_THAT(good, IsOk());
  EXPECT_EQ(good->cubin, "cubin");
  EXPECT_EQ(good->plan.steps[0].args, (std::vector<int64_t>{1, 0}));

  CudaPlan bad = plan;
  bad.steps[0].args = {2};  // No such buffer.
  EXPECT_THAT(DecodeCudaPayload(EncodeCudaPayload(bad, "x")), StatusIs(StatusCode::kDataLoss));
  bad = plan;
  bad.steps[0].kernel = "k0; system";
  EXPECT_THAT(DecodeCudaPayload(EncodeCudaPayload(bad, "x")), StatusIs(StatusCode::kDataLoss));
  bad = plan;
  CudaStep copy;
  copy.from = 0;
  copy.to = 1;
  copy.bytes = 17;  // Past both buffers.
  bad.steps = {copy};
  EXPECT_THAT(DecodeCudaPayload(EncodeCudaPayload(bad, "x")), StatusIs(StatusCode::kDataLoss));
  const std::string encoded = EncodeCudaPayload(plan, "cubin");
  EXPECT_THAT(DecodeCudaPayload(encoded.substr(0, 20)), StatusIs(StatusCode::kDataLoss));
  EXPECT_THAT(DecodeCudaPayload("not a payload at all"), StatusIs(StatusCode::kDataLoss));
  // A plan's fields of another type are refused, not thrown on: a version written as a string
  // threw out of DecodeCudaPayload (`hlocache run` of such an artifact ended in "internal
  // error"; cuda_payload_fuzz now tries such plans).
  for (const std::string json :
       {R"({"version":"1","arch":"sm_90","buffers":[],"parameters":[],"results":[],"steps":[]})",
        R"({"version":1.5,"arch":"sm_90","buffers":[],"parameters":[],"results":[],"steps":[]})",
        R"([1])", R"("version")"}) {
    std::string payload = "HLOCUBIN";
    for (int b = 0; b < 8; ++b)
      payload.push_back(static_cast<char>((json.size() >> (8 * b)) & 0xff));
    EXPECT_THAT(DecodeCudaPayload(payload + json), StatusIs(StatusCode::kDataLoss)) << json;
  }
  EXPECT_THAT(CubinArch("\x7f"
                        "ELF but not really a cubin"),
              StatusIs(StatusCode::kDataLoss));
}

// Running needs a GPU: without one, the runtime says what is missing; with one, the results
// are the interpreter's.
TEST(CudaCodegenTest, RunningWithoutAGpuSaysSo) {
  if (!HaveNvrtc()) GTEST_SKIP() << Nvrtc::Get().error().message();
  auto module = hlo::ParseModule(OpModules()[6].second, "dots.hlo");
  ASSERT_THAT(module, IsOk());
  auto run = Prepare(*module);
  ASSERT_THAT(run, IsOk());
  auto program = LowerToCuda(*module, "sm_90");
  ASSERT_THAT(program, IsOk());
  auto cubin = (*Nvrtc::Get())->CompileToCubin(program->source, "sm_90", "dots.cu");
  ASSERT_THAT(cubin, IsOk());
  CudaPayload payload{program->plan, *cubin};
  auto ran = RunCudaPlan(payload, run->in, run->leaves.results);
  if (ran.has_value()) {
    ExpectMatches(*run, ran->results, "on " + ran->device);
  } else {
    EXPECT_THAT(ran, StatusIs(StatusCode::kFailedPrecondition, HasSubstr("GPU")));
  }
  // Inputs that do not fit the plan are refused before the driver is asked anything.
  std::vector<std::string> short_inputs(run->in.begin(), run->in.end() - 1);
  EXPECT_THAT(RunCudaPlan(payload, short_inputs, run->leaves.results),
              StatusIs(StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace hlocache::compiler
