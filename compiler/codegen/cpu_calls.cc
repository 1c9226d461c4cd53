#include "compiler/codegen/cpu_calls.h"

namespace hlocache::compiler {
namespace {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

size_t LeafCount(const Shape& s) {
  if (!s.IsTuple()) return 1;
  size_t n = 0;
  for (const Shape& e : s.tuple_elements) n += LeafCount(e);
  return n;
}

// The leaf of parameter 0 that leaf `leaf` of instruction `i`'s value is, following only ops
// that hand buffers on; -1 when it is anything else. Operands come before their users (the code
// generator refuses other orders), so the walk ends.
int64_t SourceLeaf(const hlo::Module& m, const Computation& c, int32_t i, size_t leaf) {
  for (;;) {
    if (i < 0 || static_cast<size_t>(i) >= c.instructions.size()) return -1;
    const Instruction& inst = c.instructions[static_cast<size_t>(i)];
    auto operand = [&](size_t k) -> int32_t {
      return k < inst.operands.size() && inst.operands[k] < i ? inst.operands[k] : -1;
    };
    switch (inst.opcode.opcode) {
      case Opcode::kParameter:
        return inst.parameter_number == 0 ? static_cast<int64_t>(leaf) : -1;
      case Opcode::kOptimizationBarrier:
      case Opcode::kDomain:
      case Opcode::kAddDependency:
        i = operand(0);
        break;
      case Opcode::kTuple: {
        size_t k = 0;
        for (; k < inst.operands.size(); ++k) {
          const int32_t o = operand(k);
          if (o < 0) return -1;
          const size_t n = LeafCount(c.instructions[static_cast<size_t>(o)].shape);
          if (leaf < n) break;
          leaf -= n;
        }
        if (k == inst.operands.size()) return -1;
        i = operand(k);
        break;
      }
      case Opcode::kGetTupleElement: {
        const int32_t o = operand(0);
        const hlo::Attribute* a = inst.FindAttribute("index");
        if (o < 0 || a == nullptr) return -1;
        auto n = m.Int(*a);
        const Shape& t = c.instructions[static_cast<size_t>(o)].shape;
        if (!n || !t.IsTuple() || *n < 0 || static_cast<size_t>(*n) >= t.tuple_elements.size()) {
          return -1;
        }
        for (size_t e = 0; e < static_cast<size_t>(*n); ++e) leaf += LeafCount(t.tuple_elements[e]);
        i = o;
        break;
      }
      default:
        return -1;
    }
  }
}

}  // namespace

std::string LeafList(const std::vector<Leaf>& leaves) {
  std::string out;
  for (const Leaf& l : leaves) out += (out.empty() ? "" : ", ") + l.ptr;
  return out;
}

std::vector<bool> PassedThroughLeaves(const hlo::Module& m, int32_t c, size_t count) {
  std::vector<bool> passed(count, false);
  if (c < 0 || static_cast<size_t>(c) >= m.computations.size()) return passed;
  const Computation& comp = m.computations[static_cast<size_t>(c)];
  if (comp.parameters.empty() || comp.root < 0 ||
      static_cast<size_t>(comp.root) >= comp.instructions.size() ||
      LeafCount(comp.instructions[static_cast<size_t>(comp.root)].shape) != count) {
    return passed;
  }
  for (size_t j = 0; j < count; ++j) {
    passed[j] = SourceLeaf(m, comp, comp.root, j) == static_cast<int64_t>(j);
  }
  return passed;
}

}  // namespace hlocache::compiler
