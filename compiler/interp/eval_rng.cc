// Random numbers (the generators are compiler/semantics/prng.h, shared with generated code).
//
// rng-bit-generator(state), algorithm=A: state is u64[N], N >= 2; the result is (the new state,
// an array of random bits) exactly as XLA's RngBitGeneratorExpander makes them, for integer
// arrays of 8 to 64 bits. rng_default is Philox, as on XLA's CPU and GPU backends.
//
// rng-get-and-update-state(), delta=D: the instruction's 128-bit state as u64[2] (low word
// first), then the state advanced by D.
//
// rng(a, b), distribution=rng_uniform: uniform on [a, b): floats from the top mantissa bits of
// one random word each (f16 and bf16 from 16-bit words, f32 from 32-bit, f64 from 64-bit),
// u * (b - a) + a in double, rounded once; 32- and 64-bit integers as a + bits mod (b - a),
// all of it XLA's prng library's conversions. rng(mu, sigma), distribution=rng_normal:
// floats, pairs of uniform values through the Box-Muller transform, times sigma plus mu. The
// words come from Philox under key 0 from the instruction's own 128-bit counter, which
// advances by the words used; XLA leaves rng's values to each backend, and here they are
// the same in the interpreter and the generated code. rng may carry a third operand, the result's
// dimensions as a rank-1 integer array (mhlo.rng's form, which XLA's HLO importer keeps); XLA's
// RngExpander reads only the first two and the instruction's shape, and so does this.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "compiler/interp/eval_families.h"
#include "compiler/semantics/prng.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace prng {
HLOCACHE_PRNG_CODE
}  // namespace prng
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  const Shape& r = inst.shape;
  if (inst.opcode.opcode == Opcode::kRngGetAndUpdateState) {
    HLOCACHE_ASSIGN_OR_RETURN(int64_t delta, ctx.IntOr(inst, "delta", 0));
    bool lock = false;
    uint64_t old[2];
    prng::hc_rng_advance(ctx.RngState(inst), &lock, static_cast<uint64_t>(delta), old);
    Literal out(r);
    out.SetInt(0, static_cast<int64_t>(old[0]));
    out.SetInt(1, static_cast<int64_t>(old[1]));
    return out;
  }
  if (inst.opcode.opcode == Opcode::kRngBitGenerator) {
    const Literal& in = *operands[0];
    std::vector<uint64_t> state(in.size()), next(in.size());
    for (size_t k = 0; k < in.size(); ++k) state[k] = static_cast<uint64_t>(in.GetInt(k));
    const Shape& bits_shape = r.tuple_elements[1];
    Literal bits(bits_shape);
    std::vector<uint64_t> words(bits.size());
    prng::hc_rng_bits(compiler::RngAlgorithm(ctx.AttributeText(inst, "algorithm")), state.data(),
                      static_cast<int64_t>(state.size()), next.data(),
                      8 * hlo::BufferElementBytes(bits_shape.type), bits_shape.dims.data(),
                      static_cast<int64_t>(bits_shape.dims.size()), words.data());
    Literal new_state(in.shape());
    for (size_t k = 0; k < next.size(); ++k) new_state.SetInt(k, static_cast<int64_t>(next[k]));
    for (size_t k = 0; k < words.size(); ++k) bits.SetInt(k, static_cast<int64_t>(words[k]));
    Literal tuple(r);
    tuple.elements()[0] = std::move(new_state);
    tuple.elements()[1] = std::move(bits);
    return tuple;
  }
  // rng.
  int bits = 0, mantissa = 0;
  compiler::RngWords(r.type, bits, mantissa);
  const bool normal = ctx.AttributeText(inst, "distribution") == "rng_normal";
  Literal out(r);
  const auto n = static_cast<int64_t>(out.size());
  const int64_t count = normal ? (n + 1) / 2 * 2 : n;
  // The counter advances by the Philox blocks the words take.
  const int64_t blocks = ((bits == 64 ? 2 * count : count) + 3) / 4;
  bool lock = false;
  uint64_t state[3] = {0, 0, 0}, next[3];
  prng::hc_rng_advance(ctx.RngState(inst), &lock, static_cast<uint64_t>(blocks), state + 1);
  std::vector<uint64_t> words(static_cast<size_t>(count));
  prng::hc_rng_bits(2, state, 3, next, bits, &count, 1, words.data());
  for (int64_t i = 0; i < n; ++i) {
    const auto at = static_cast<size_t>(i);
    if (normal) {
      double z[2];
      prng::hc_rng_normal(prng::hc_rng_unit(words[at & ~size_t{1}], bits, mantissa),
                          prng::hc_rng_unit(words[at | 1], bits, mantissa), z[0], z[1]);
      out.SetFloat(at, z[i % 2] * operands[1]->GetFloat(0) + operands[0]->GetFloat(0));
    } else if (mantissa > 0) {
      const double a = operands[0]->GetFloat(0), b = operands[1]->GetFloat(0);
      out.SetFloat(at, prng::hc_rng_unit(words[at], bits, mantissa) * (b - a) + a);
    } else {
      const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
      const auto a = static_cast<uint64_t>(operands[0]->GetInt(0)) & mask;
      const uint64_t range = (static_cast<uint64_t>(operands[1]->GetInt(0)) - a) & mask;
      out.SetInt(at, static_cast<int64_t>(a + (range == 0 ? words[at] : words[at] % range)));
    }
  }
  return out;
}

}  // namespace

OpFamily RngOps() { return {RngRules().takes, Eval}; }

}  // namespace hlocache::interp
