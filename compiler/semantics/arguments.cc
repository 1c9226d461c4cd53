#include "compiler/semantics/arguments.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "compiler/semantics/dynamic_shapes.h"
#include "compiler/semantics/numerics.h"

namespace hlocache::interp {

Result<std::vector<Literal>> MakeArguments(const hlo::Module& module, ArgumentFill fill,
                                           uint64_t seed) {
  if (module.entry < 0) return Error(InvalidArgument(module.filename() + ": no entry computation"));
  const hlo::Computation& entry = module.computations[static_cast<size_t>(module.entry)];
  std::mt19937_64 rng(seed);
  std::vector<Literal> out;
  for (int32_t p : entry.parameters) {
    if (p < 0) return Error(InvalidArgument(module.filename() + ": a missing parameter"));
    // A dynamic parameter takes sizes inside its bounds (dynamic_shapes.h).
    HLOCACHE_ASSIGN_OR_RETURN(
        Literal l,
        Literal::MakeZeros(ArgumentShape(entry.instructions[static_cast<size_t>(p)].shape)));
    if (fill == ArgumentFill::kRandom) FillRandom(l, rng);
    out.push_back(std::move(l));
  }
  return out;
}

void FillRandom(Literal& literal, std::mt19937_64& rng) {
  std::vector<Literal*> pending{&literal};
  while (!pending.empty()) {
    Literal* leaf = pending.back();
    pending.pop_back();
    if (leaf->is_tuple()) {
      for (auto it = leaf->elements().rbegin(); it != leaf->elements().rend(); ++it) {
        pending.push_back(&*it);
      }
      continue;
    }
    for (size_t e = 0; e < leaf->size(); ++e) {
      const uint64_t r = rng();
      if (leaf->is_float()) {
        leaf->SetFloat(e, static_cast<double>(r >> 11) * 0x1p-52 - 1.0);
      } else if (leaf->type() == hlo::PrimitiveType::kPred) {
        leaf->SetInt(e, static_cast<int64_t>(r & 1));
      } else if (hlo::IsUnsignedInt(leaf->type())) {
        leaf->SetInt(e, static_cast<int64_t>(r % 17));
      } else {
        leaf->SetInt(e, static_cast<int64_t>(r % 17) - 8);
      }
    }
  }
}

void FlattenLeaves(const Literal& literal, std::vector<const Literal*>& out) {
  if (literal.is_tuple()) {
    for (const Literal& e : literal.elements()) FlattenLeaves(e, out);
  } else {
    out.push_back(&literal);
  }
}

namespace {

std::string Value(const Literal& l, size_t e) {
  return l.is_float() ? std::to_string(l.GetFloat(e)) : std::to_string(l.GetInt(e));
}

}  // namespace

Result<Comparison> CompareWithInterpreter(std::span<const Literal* const> expected,
                                          std::span<const std::string> buffers,
                                          const hlo::Module& module) {
  if (expected.size() != buffers.size()) {
    return Error(InvalidArgument(std::to_string(buffers.size()) + " result buffers for " +
                                 std::to_string(expected.size()) + " results"));
  }
  const bool inexact = HasInexactOps(module);
  Comparison c;
  for (size_t k = 0; k < expected.size(); ++k) {
    const Literal& want = *expected[k];
    HLOCACHE_ASSIGN_OR_RETURN(Literal got, FromBytes(want.shape(), buffers[k]));
    double scale = 0;
    if (inexact && want.is_float()) {
      for (size_t e = 0; e < want.size(); ++e) {
        if (const double v = std::fabs(want.GetFloat(e)); std::isfinite(v))
          scale = std::max(scale, v);
      }
    }
    for (size_t e = 0; e < got.size(); ++e, ++c.elements) {
      bool same = false, identical = false;
      if (got.is_float()) {
        const double a = got.GetFloat(e), b = want.GetFloat(e);
        identical =
            (a == b && std::signbit(a) == std::signbit(b)) || (std::isnan(a) && std::isnan(b));
        same = identical || WithinModuleTolerance(a, b, scale);
        c.max_ulps = std::max(c.max_ulps, UlpDistance(a, b, want.shape().type));
      } else {
        identical = same = got.GetInt(e) == want.GetInt(e);
      }
      c.identical += identical;
      if (!same && c.mismatched++ == 0) {
        c.first_mismatch = "result " + std::to_string(k) + " element " + std::to_string(e) +
                           ": executable " + Value(got, e) + ", interpreter " + Value(want, e);
      }
    }
  }
  return c;
}

}  // namespace hlocache::interp
