// The accuracy of compiled float ops against a float64 reference: every op schema/numerics.tsv
// states a bound for, and the exact arithmetic beside them, in each float type the table has a
// column for, over random inputs spread over their whole domain (magnitudes log-uniform) and
// the edge values. Prints the table the README shows; fails when an op is beyond its bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compiler/hlo/parser.h"
#include "compiler/semantics/literal.h"
#include "compiler/semantics/numerics.h"
#include "tests/unit/compiler/compile_check.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::compiler {
namespace {

using hlo::PrimitiveType;
using interp::Literal;

constexpr size_t kInputs = 1 << 16;

// An op measured: its HLO name, its float64 reference, and the inputs that make sense for it
// (sign, and the range of binary exponents of their magnitudes).
struct Measured {
  std::string op;
  int operands;
  std::function<double(double, double)> reference;
  bool negative;  // Inputs of both signs.
  int min_exponent, max_exponent;
};

const std::vector<Measured>& MeasuredOps() {
  static const std::vector<Measured> kOps = {
      {"exponential", 1, [](double x, double) { return std::exp(x); }, true, -30, 7},
      {"exponential-minus-one", 1, [](double x, double) { return std::expm1(x); }, true, -30, 7},
      {"log", 1, [](double x, double) { return std::log(x); }, false, -140, 127},
      {"log-plus-one", 1, [](double x, double) { return std::log1p(x); }, false, -30, 100},
      {"tanh", 1, [](double x, double) { return std::tanh(x); }, true, -30, 5},
      {"sine", 1, [](double x, double) { return std::sin(x); }, true, -30, 16},
      {"cosine", 1, [](double x, double) { return std::cos(x); }, true, -30, 16},
      {"logistic", 1, [](double x, double) { return 1 / (1 + std::exp(-x)); }, true, -30, 7},
      {"rsqrt", 1, [](double x, double) { return 1 / std::sqrt(x); }, false, -140, 127},
      {"sqrt", 1, [](double x, double) { return std::sqrt(x); }, false, -140, 127},
      {"add", 2, [](double x, double y) { return x + y; }, true, -30, 30},
      {"multiply", 2, [](double x, double y) { return x * y; }, true, -60, 60},
      {"divide", 2, [](double x, double y) { return x / y; }, true, -60, 60},
  };
  return kOps;
}

// Random inputs of `type`: magnitudes 2^U(min, max), the edge values first.
Literal Inputs(PrimitiveType type, const Measured& m, std::mt19937_64& rng) {
  hlo::Shape shape;
  shape.type = type;
  shape.dims = {static_cast<int64_t>(kInputs)};
  Literal l(shape);
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> edges = {0.0, -0.0, 1.0, -1.0, inf, -inf, std::nan(""), 0.5, 2.0};
  std::uniform_real_distribution<double> exponent(m.min_exponent, m.max_exponent);
  for (size_t i = 0; i < kInputs; ++i) {
    double v = i < edges.size() ? edges[i] : std::exp2(exponent(rng));
    if (i >= edges.size() && m.negative && (rng() & 1)) v = -v;
    // log1p's negative domain, (-1, 0): a quarter of its inputs.
    if (i >= edges.size() && m.op == "log-plus-one" && (rng() & 3) == 0)
      v = -std::exp2(-std::fabs(exponent(rng)) / 4 - 1e-9);
    l.SetFloat(i, v);
  }
  return l;
}

// |got - exact| in ulp of `type`; 0 where `got` is the exact value rounded to the type, as an
// exact op's always is (which also covers an overflow to infinity, an underflow to 0, NaN).
double Error(double got, double exact, PrimitiveType type) {
  const double rounded = interp::RoundToType(exact, type);
  if (got == rounded || (std::isnan(got) && std::isnan(rounded))) return 0;
  return interp::UlpDistance(got, exact, type);
}

double StatedBound(const std::string& op, PrimitiveType type) {
  const auto opcode = hlo::OpcodeFromName(op);
  return opcode ? interp::UlpBound(*opcode, type) : -1;
}

TEST(NumericsTest, EveryOpIsWithinItsStatedBoundAgainstAFloat64Reference) {
  // Every op the table states a bound for is measured here.
  for (const interp::StatedBound& b : interp::StatedBounds()) {
    bool measured = false;
    for (const Measured& m : MeasuredOps()) measured = measured || m.op == b.op;
    EXPECT_TRUE(measured) << b.op << " has a stated bound but no reference in this test";
  }
  std::printf(
      "| op | type | stated bound, ulp | largest error, ulp (0: rounded exactly) | at input |\n");
  std::printf("|---|---|---:|---:|---|\n");
  for (const PrimitiveType type :
       {PrimitiveType::kF32, PrimitiveType::kF16, PrimitiveType::kBF16, PrimitiveType::kF64}) {
    const std::string t(hlo::PrimitiveTypeName(type));
    const std::string shape = t + "[" + std::to_string(kInputs) + "]";
    std::mt19937_64 rng(1);
    std::vector<Literal> args;
    std::string text = "HloModule accuracy\n\nENTRY e {\n", results;
    for (size_t k = 0; k < MeasuredOps().size(); ++k) {
      const Measured& m = MeasuredOps()[k];
      std::string operands;
      for (int j = 0; j < m.operands; ++j) {
        const std::string p = "p" + std::to_string(args.size());
        text += "  " + p + " = " + shape + " parameter(" + std::to_string(args.size()) + ")\n";
        operands += (j == 0 ? "" : ", ") + p;
        args.push_back(Inputs(type, m, rng));
      }
      text += "  r" + std::to_string(k) + " = " + shape + " " + m.op + "(" + operands + ")\n";
      results += (k == 0 ? "" : ", ") + std::string("r") + std::to_string(k);
    }
    std::string tuple;
    for (size_t k = 0; k < MeasuredOps().size(); ++k) tuple += (k == 0 ? "" : ", ") + shape;
    text += "  ROOT t = (" + tuple + ") tuple(" + results + ")\n}\n";
    auto module = hlo::ParseModule(text, "accuracy.hlo");
    ASSERT_THAT(module, IsOk());
    auto loaded = BuildAndLoad(*module);
    ASSERT_NE(loaded, nullptr);

    std::vector<std::string> in_bytes, out_bytes(MeasuredOps().size());
    std::vector<const void*> params;
    std::vector<void*> outs;
    for (const Literal& a : args) in_bytes.push_back(interp::ToBytes(a));
    for (const std::string& b : in_bytes) params.push_back(b.data());
    for (std::string& b : out_bytes) {
      b.assign(in_bytes[0].size(), '\0');
      outs.push_back(b.data());
    }
    auto entry = reinterpret_cast<int (*)(const void* const*, void* const*)>(loaded->entry());
    ASSERT_EQ(entry(params.data(), outs.data()), 0);

    size_t first_arg = 0;
    for (size_t k = 0; k < MeasuredOps().size(); ++k) {
      const Measured& m = MeasuredOps()[k];
      auto got = interp::FromBytes(args[first_arg].shape(), out_bytes[k]);
      ASSERT_THAT(got, IsOk());
      double worst = 0;
      std::string at = "-";
      for (size_t i = 0; i < kInputs; ++i) {
        const double x = args[first_arg].GetFloat(i);
        const double y = m.operands == 2 ? args[first_arg + 1].GetFloat(i) : 0;
        const double error = Error(got->GetFloat(i), m.reference(x, y), type);
        if (error > worst) {
          worst = error;
          char text_at[96];
          std::snprintf(text_at, sizeof text_at, m.operands == 2 ? "%.9g, %.9g" : "%.9g", x, y);
          at = text_at;
        }
      }
      first_arg += static_cast<size_t>(m.operands);
      // An exact op's result is the reference rounded to the type: an error of 0.
      const double stated = StatedBound(m.op, type);
      const double allowed = std::max(stated, 0.0);
      std::printf("| %s | %s | %s | %.3f | %s |\n", m.op.c_str(), t.c_str(),
                  stated > 0 ? std::to_string(static_cast<int>(stated)).c_str() : "exact", worst,
                  at.c_str());
      EXPECT_LE(worst, allowed) << m.op << " on " << t << " at " << at;
    }
  }
}

TEST(NumericsTest, ReassociatedSumsAreWithinTheStatedBound) {
  // f32 row sums may be folded in another order (schema/numerics.tsv: reassociates reduce
  // f32); any order of n terms is within (n - 1) u sum|x_i| of the exact sum. Measured in units
  // of u sum|x_i| (u = 2^-24), against a sum in double, on rows of both signs.
  constexpr int64_t kRows = 64, kLength = 4096;
  ASSERT_TRUE(interp::Reassociates(hlo::Opcode::kReduce, PrimitiveType::kF32));
  auto module = hlo::ParseModule(R"(
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[64,4096] parameter(0)
  z = f32[] constant(0)
  ROOT s = f32[64] reduce(x, z), dimensions={1}, to_apply=add
})",
                                 "sums.hlo");
  ASSERT_THAT(module, IsOk());
  auto loaded = BuildAndLoad(*module);
  ASSERT_NE(loaded, nullptr);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> exponent(-10, 10);
  hlo::Shape shape;
  shape.type = PrimitiveType::kF32;
  shape.dims = {kRows, kLength};
  Literal x(shape);
  for (size_t i = 0; i < x.size(); ++i)
    x.SetFloat(i, (rng() & 1 ? 1 : -1) * std::exp2(exponent(rng)));
  const std::string in = interp::ToBytes(x);
  std::string out(kRows * sizeof(float), '\0');
  const void* params[] = {in.data()};
  void* results[] = {out.data()};
  auto entry = reinterpret_cast<int (*)(const void* const*, void* const*)>(loaded->entry());
  ASSERT_EQ(entry(params, results), 0);
  double worst = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    double exact = 0, magnitude = 0;
    for (int64_t c = 0; c < kLength; ++c) {
      exact += x.GetFloat(static_cast<size_t>(r * kLength + c));
      magnitude += std::fabs(x.GetFloat(static_cast<size_t>(r * kLength + c)));
    }
    float got = 0;
    std::memcpy(&got, out.data() + r * sizeof(float), sizeof got);
    worst = std::max(worst, std::fabs(got - exact) / (std::exp2(-24) * magnitude));
  }
  std::printf(
      "| reduce (row sums of %lld) | f32 | (n - 1) u sum(abs x) = %lld u sum(abs x) | %.3f u "
      "sum(abs x) | - |\n",
      static_cast<long long>(kLength), static_cast<long long>(kLength - 1), worst);
  EXPECT_LE(worst, static_cast<double>(kLength - 1));
  EXPECT_GT(worst, 0) << "every row summed exactly: the check measured nothing";
}

}  // namespace
}  // namespace hlocache::compiler
