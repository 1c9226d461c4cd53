#include "tests/unit/compiler/compile_check.h"

#include <gtest/gtest.h>

#include "compiler/artifact/execute.h"
#include "compiler/artifact/loader.h"
#include "compiler/build.h"
#include "compiler/codegen/cpu_codegen.h"
#include "compiler/hlo/parser.h"
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/arguments.h"
#include "compiler/semantics/numerics.h"
#include "compiler/target.h"
#include "compiler/toolchain.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler {

using hlo::PrimitiveType;
using interp::Literal;

Literal Array(PrimitiveType type, std::vector<int64_t> dims, const std::vector<double>& values) {
  hlo::Shape s;
  s.type = type;
  s.dims = std::move(dims);
  Literal l(s);
  for (size_t i = 0; i < l.size(); ++i) {
    if (l.is_float()) {
      l.SetFloat(i, values[i]);
    } else {
      l.SetInt(i, static_cast<int64_t>(values[i]));
    }
  }
  return l;
}

// Compiles `text`, runs it on `args`, and checks the result against the interpreter's, bit for
// bit. Returns the generated source.
namespace {

// The key the test artifacts are built under (the artifact only carries it).
constexpr const char* kPlaceholderKey = "v1-00000000000000000000000000000000";

// The seed of the hosts the interpreter and the executable transfer with.
constexpr uint64_t kHostSeed = 7;

// Bit for bit where every op of the module is exact; within the module tolerance of
// schema/numerics.tsv where some op is not (each op's own bound in ulp is the accuracy test's).
void ExpectWithinStatedNumerics(const std::vector<const Literal*>& leaves,
                                const std::vector<std::string>& results,
                                const hlo::Module& module) {
  auto compared = interp::CompareWithInterpreter(leaves, results, module);
  ASSERT_THAT(compared, IsOk());
  EXPECT_EQ(compared->mismatched, 0u) << compared->first_mismatch;
  if (!interp::HasInexactOps(module)) {
    EXPECT_EQ(compared->identical, compared->elements)
        << "not bit for bit; largest error " << compared->max_ulps << " ulp";
  }
}

// The same check through compiler::Execute, for a program that transfers with the host (a host
// of the interpreter's seed, the values it sent compared with the interpreter's) or has dynamic
// shapes at its entry (Execute lays those out and reads them back).
void CheckThroughExecute(const LoadedExecutable& loaded, const hlo::Module& module,
                         const std::vector<Literal>& args, const Literal& expected,
                         const interp::RecordingHost& interpreter_host) {
  auto abi = EntryLeavesOf(module);
  ASSERT_THAT(abi, IsOk());
  interp::RecordingHost host(kHostSeed);
  auto ran = Execute(loaded, *abi, args, &host);
  ASSERT_THAT(ran, IsOk());
  std::vector<const Literal*> leaves;
  interp::FlattenLeaves(expected, leaves);
  ExpectWithinStatedNumerics(leaves, *ran, module);
  EXPECT_EQ(interp::CompareSent(interpreter_host, host), "");
  EXPECT_EQ(host.received().size(), interpreter_host.received().size());
}

// Loads `artifact`, runs it on `args` and compares each result with `expected`.
void CheckArtifact(const std::string& artifact, const hlo::Module& module,
                   const std::vector<Literal>& args, const Literal& expected,
                   const interp::RecordingHost& interpreter_host) {
  auto loaded = LoadedExecutable::Load(artifact);
  EXPECT_THAT(loaded, IsOk());
  if (!loaded) return;
  auto abi = EntryLeavesOf(module);
  EXPECT_THAT(abi, IsOk());
  if (!abi) return;
  bool dynamic = false;
  for (const auto* shapes : {&abi->parameters, &abi->results}) {
    for (const hlo::Shape& shape : *shapes) dynamic = dynamic || shape.IsDynamic();
  }
  if (dynamic || !interpreter_host.received().empty() || !interpreter_host.sent().empty()) {
    CheckThroughExecute(**loaded, module, args, expected, interpreter_host);
    return;
  }
  std::vector<const Literal*> in_leaves, leaves;
  for (const Literal& a : args) interp::FlattenLeaves(a, in_leaves);
  interp::FlattenLeaves(expected, leaves);
  EXPECT_EQ(abi->parameters.size(), in_leaves.size());
  EXPECT_EQ(abi->results.size(), leaves.size());
  std::vector<std::string> in_bytes;
  std::vector<const void*> params;
  for (const Literal* a : in_leaves) in_bytes.push_back(interp::ToBytes(*a));
  for (const std::string& b : in_bytes) params.push_back(b.data());
  std::vector<std::string> out_bytes;
  std::vector<void*> results;
  for (const Literal* leaf : leaves) {
    out_bytes.push_back(std::string(interp::ToBytes(*leaf).size(), '\x55'));
  }
  for (std::string& b : out_bytes) results.push_back(b.data());
  auto entry = reinterpret_cast<int (*)(const void* const*, void* const*)>((*loaded)->entry());
  EXPECT_EQ(entry(params.data(), results.data()), 0);
  ExpectWithinStatedNumerics(leaves, out_bytes, module);
  // Integers and pred byte for byte too.
  for (size_t k = 0; k < leaves.size(); ++k) {
    if (!leaves[k]->is_float()) {
      EXPECT_EQ(out_bytes[k], interp::ToBytes(*leaves[k])) << "result " << k;
    }
  }
}

}  // namespace

std::unique_ptr<LoadedExecutable> BuildAndLoad(const hlo::Module& module) {
  auto toolchain = Toolchain::Probe(ToolchainOptions());
  EXPECT_THAT(toolchain, IsOk());
  if (!toolchain) return nullptr;
  auto artifact = BuildArtifact(module, *toolchain, {kPlaceholderKey, HostCpuTarget()});
  EXPECT_THAT(artifact, IsOk());
  if (!artifact) return nullptr;
  auto loaded = LoadedExecutable::Load(*artifact);
  EXPECT_THAT(loaded, IsOk());
  return loaded ? std::move(*loaded) : nullptr;
}

std::string ExpectCompiledMatchesInterpreter(const std::string& text,
                                             const std::vector<Literal>& args) {
  auto module = hlo::ParseModule(text, "g.hlo");
  EXPECT_THAT(module, IsOk());
  if (!module) return "";
  interp::RecordingHost host(kHostSeed);
  auto expected = interp::Evaluate(*module, args, &host);
  EXPECT_THAT(expected, IsOk());
  if (!expected) return "";

  auto source = LowerToCpp(*module);
  EXPECT_THAT(source, IsOk());
  if (!source) return "";
  auto again = LowerToCpp(*module);
  EXPECT_THAT(again, IsOk());
  EXPECT_EQ(*source, *again) << "the generated source is not deterministic";
  auto toolchain = Toolchain::Probe(ToolchainOptions());
  EXPECT_THAT(toolchain, IsOk());
  if (!toolchain) return "";
  // Once as built for real, once cut as finely as possible (every instruction's code in a
  // segment of its own, every function in a translation unit of its own, up to four): every
  // op's code must stand alone, and the results must not change.
  CpuLoweringOptions finest;
  finest.segment_bytes = 0;
  finest.unit_bytes = 0;
  finest.max_units = 4;
  for (const CpuLoweringOptions& lowering : {CpuLoweringOptions(), finest}) {
    SCOPED_TRACE(lowering.segment_bytes == 0 ? "cut finest" : "cut as built");
    auto artifact =
        BuildArtifact(*module, *toolchain, {kPlaceholderKey, HostCpuTarget(), lowering});
    EXPECT_THAT(artifact, IsOk()) << *source;
    if (!artifact) return "";
    CheckArtifact(*artifact, *module, args, *expected, host);
  }
  return *source;
}

std::string ExpectCompiledMatchesInterpreterOnRandomInputs(const std::string& text, uint64_t seed) {
  auto module = hlo::ParseModule(text, "g.hlo");
  EXPECT_THAT(module, IsOk());
  if (!module) return "";
  auto args = interp::MakeArguments(*module, interp::ArgumentFill::kRandom, seed);
  EXPECT_THAT(args, IsOk());
  if (!args) return "";
  return ExpectCompiledMatchesInterpreter(text, *args);
}

}  // namespace hlocache::compiler
