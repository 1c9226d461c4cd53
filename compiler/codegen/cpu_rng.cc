// rng-bit-generator, rng-get-and-update-state and rng (see compiler/interp/eval_rng.cc for
// their meaning): calls of the generators every prelude carries (compiler/semantics/prng.h), the
// same code the interpreter runs. The stateful ops keep their 128-bit counter in a static of
// their own block, with a lock: one counter per instruction per loaded executable.
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/semantics/prng.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool NotElementwise(Opcode) { return false; }

std::string Attribute(const hlo::Module& m, const Instruction& inst, const char* name) {
  const hlo::Attribute* a = inst.FindAttribute(name);
  std::string text;
  if (a == nullptr) return text;
  for (uint32_t t = a->value.begin; t < a->value.end; ++t) text += m.TokenText(t);
  return text;
}

// The words' buffer, released when the block ends: "w".
std::string Words(int64_t count) {
  return "    std::unique_ptr<uint64_t[]> w(new (std::nothrow) uint64_t[" +
         Int(count > 0 ? count : 1) + "]);\n    if (!w) return 1;\n";
}

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const hlo::Module& m = e.module();
  const Shape& r = inst.shape;
  if (inst.opcode.opcode == Opcode::kRngGetAndUpdateState) {
    const std::string out = e.Materialize(index, inst);
    e.Emit(
        "  {\n    static uint64_t state[2];\n    static bool lock;\n    hc_rng_advance(state, "
        "&lock, " +
        Int(*m.Int(*inst.FindAttribute("delta"))) + ", " + out + ");\n  }\n");
    return Status::Ok();
  }
  if (inst.opcode.opcode == Opcode::kRngBitGenerator) {
    const std::vector<Leaf>& out = e.MaterializeLeaves(index, inst);
    const Shape& bits = r.tuple_elements[1];
    const int64_t n = ElementCount(bits);
    e.Emit("  {\n" + IntArray("dims", bits.dims) + Words(n) + "    hc_rng_bits(" +
           Int(RngAlgorithm(Attribute(m, inst, "algorithm"))) + ", " + e.Buffer(inst, 0) + ", " +
           Int(e.OperandShape(inst, 0).dims[0]) + ", " + out[0].ptr + ", " +
           std::to_string(8 * hlo::BufferElementBytes(bits.type)) + ", dims, " +
           Int(static_cast<int64_t>(bits.dims.size())) +
           ", w.get());\n    for (int64_t i = 0; i < " + Int(n) + "; ++i) " + out[1].ptr +
           "[i] = static_cast<" + CType(bits.type) + ">(w[i]);\n  }\n");
    return Status::Ok();
  }
  // rng.
  int bits = 0, mantissa = 0;
  RngWords(r.type, bits, mantissa);
  const bool normal = Attribute(m, inst, "distribution") == "rng_normal";
  const std::string out = e.Materialize(index, inst);
  const int64_t n = ElementCount(r);
  const int64_t count = normal ? (n + 1) / 2 * 2 : n;
  const int64_t blocks = ((bits == 64 ? 2 * count : count) + 3) / 4;
  const std::string a = e.Buffer(inst, 0), b = e.Buffer(inst, 1), t = CType(r.type);
  const std::string unit = ", " + std::to_string(bits) + ", " + std::to_string(mantissa) + ")";
  std::string element;
  if (normal) {
    element = "double z[2];\n      hc_rng_normal(hc_rng_unit(w[i & ~int64_t{1}]" + unit +
              ", hc_rng_unit(w[i | 1]" + unit + ", z[0], z[1]);\n      " + out + "[i] = hc_store<" +
              t + ">(z[i % 2] * hc_load(" + b + "[0]) + hc_load(" + a + "[0]));";
  } else if (mantissa > 0) {
    element = out + "[i] = hc_store<" + t + ">(hc_rng_unit(w[i]" + unit + " * (hc_load(" + b +
              "[0]) - hc_load(" + a + "[0])) + hc_load(" + a + "[0]));";
  } else {
    const std::string mask =
        bits == 64 ? "~uint64_t{0}" : "(uint64_t{1} << " + std::to_string(bits) + ") - 1";
    element = "const uint64_t mask = " + mask + ", lo = static_cast<uint64_t>(" + a +
              "[0]) & mask;\n      const uint64_t range = (static_cast<uint64_t>(" + b +
              "[0]) - lo) & mask;\n      " + out + "[i] = static_cast<" + t +
              ">(lo + (range == 0 ? w[i] : w[i] % range));";
  }
  e.Emit(
      "  {\n    static uint64_t counter[2];\n    static bool lock;\n    uint64_t state[3] = "
      "{0, 0, 0}, next[3];\n    hc_rng_advance(counter, &lock, " +
      Int(blocks) + ", state + 1);\n" + Words(count) + "    const int64_t count = " + Int(count) +
      ";\n    hc_rng_bits(2, state, 3, next, " + std::to_string(bits) +
      ", &count, 1, w.get());\n    for (int64_t i = 0; i < " + Int(n) + "; ++i) {\n      " +
      element + "\n    }\n  }\n");
  return Status::Ok();
}

}  // namespace

CpuOpFamily CpuRngOps() { return {interp::RngRules().takes, NotElementwise, Lower}; }

}  // namespace hlocache::compiler
