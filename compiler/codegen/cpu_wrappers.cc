// Ops that hand values on, and the asynchronous wrappers (see compiler/interp/eval_wrappers.cc
// for their meaning). Values are never written after they are defined, so everything that only
// hands a value on binds the operand's buffers instead of copying them: add-dependency,
// opt-barrier, domain, copy-start (whose copy is the operand's buffers), copy-done,
// async-update and async-done. A token is one byte that holds no data: after-all binds a
// constant zero byte. async-start calls the wrapped computation's function into buffers of its
// own; contexts are constant zeros.
#include <algorithm>
#include <string>

#include "compiler/codegen/cpu_calls.h"
#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool NotElementwise(Opcode) { return false; }

// A buffer of zeros of array shape `s`: a token's byte, or a context.
Leaf Zeros(CpuEmitter& e, const Shape& s) {
  const std::string name = e.Fresh("zeros");
  e.Declare(name, s);
  e.Emit("  std::memset(" + name + ", 0, " + Int(ByteCount(s)) + ");\n");
  return {name, &s};
}

// The leaves of element `k` of a tuple value of shape `tuple` whose leaves are `leaves`.
std::vector<Leaf> ElementLeaves(const std::vector<Leaf>& leaves, const Shape& tuple, size_t k) {
  size_t first = 0;
  for (size_t e = 0; e < k; ++e) {
    std::vector<const Shape*> skip;
    hlo::AppendLeafShapes(tuple.tuple_elements[e], skip);
    first += skip.size();
  }
  std::vector<const Shape*> mine;
  hlo::AppendLeafShapes(tuple.tuple_elements[k], mine);
  return std::vector<Leaf>(leaves.begin() + static_cast<ptrdiff_t>(first),
                           leaves.begin() + static_cast<ptrdiff_t>(first + mine.size()));
}

Status LowerAsyncStart(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const int32_t f = e.module().CalleesOf(inst, "calls")[0];
  std::vector<Leaf> leaves;
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    const auto& operand = e.OperandLeaves(inst, k);
    leaves.insert(leaves.end(), operand.begin(), operand.end());
  }
  std::string args = LeafList(leaves);
  std::vector<const Shape*> results, contexts;
  hlo::AppendLeafShapes(inst.shape.tuple_elements[1], results);
  for (size_t k = 2; k < inst.shape.tuple_elements.size(); ++k) {
    hlo::AppendLeafShapes(inst.shape.tuple_elements[k], contexts);
  }
  for (const Shape* s : results) {
    const std::string name = e.Fresh("async");
    e.Declare(name, *s);
    leaves.push_back({name, s});
    args += (args.empty() ? "" : ", ") + name;
  }
  e.Emit("  if (" + e.FunctionName(f) + "(" + args + ") != 0) return 1;\n");
  for (const Shape* s : contexts) leaves.push_back(Zeros(e, *s));
  e.Bind(index, std::move(leaves));
  return Status::Ok();
}

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  switch (inst.opcode.opcode) {
    case Opcode::kAfterAll:
      e.Bind(index, {Zeros(e, inst.shape)});
      return Status::Ok();
    case Opcode::kCopyStart: {
      std::vector<Leaf> leaves = e.OperandLeaves(inst, 0);
      const auto& copy = e.OperandLeaves(inst, 0);
      leaves.insert(leaves.end(), copy.begin(), copy.end());
      leaves.push_back(Zeros(e, inst.shape.tuple_elements[2]));
      e.Bind(index, std::move(leaves));
      return Status::Ok();
    }
    case Opcode::kCopyDone:
    case Opcode::kAsyncDone:
      e.Bind(index, ElementLeaves(e.OperandLeaves(inst, 0), e.OperandShape(inst, 0), 1));
      return Status::Ok();
    case Opcode::kAsyncStart:
      return LowerAsyncStart(e, index, inst);
    default:  // add-dependency, opt-barrier, domain, async-update: operand 0 itself.
      e.Bind(index, e.OperandLeaves(inst, 0));
      return Status::Ok();
  }
}

}  // namespace

CpuOpFamily CpuWrapperOps() { return {interp::WrapperRules().takes, NotElementwise, Lower}; }

}  // namespace hlocache::compiler
