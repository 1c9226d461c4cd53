// while, conditional and map (see compiler/interp/eval_control.cc for their meaning), as calls
// of the functions of their computations.
//
// while: how the state is held. Each leaf j of the state is a pointer `cur_j` to its current
// value; the loop calls the condition on the cur leaves, then the body, whose results it
// writes. Two kinds of leaves:
//  - A leaf the body passes through (leaf j of the body's root is leaf j of its parameter,
//    handed on only by tuple, get-tuple-element, opt-barrier, domain or add-dependency) never
//    changes: cur_j stays the initial value's buffer for the whole loop, and the body is given
//    cur_j itself as its result pointer j. A function whose result pointer is the parameter leaf
//    its root returns there copies nothing (cpu_codegen.cc), so the leaf is never copied, nor
//    written: a transformer's weights carried through a decode loop cost nothing per step.
//  - Any other leaf has two buffers of its own, A and B. The body reads cur_j and writes the
//    one of A and B that cur_j is not (the initial value's buffer, which the loop must not
//    write, is never a target), then cur_j points at what it wrote: buffers swap, the state is
//    never copied as a whole. The body's own copy of its root into its results is the only
//    copy of a changed leaf per step.
// The while's value is the cur pointers after the loop: nothing is copied out either.
//
// conditional: the selected branch's function writes the result's buffers. map: the mapped
// computation's function is called once per element (a static function g++ inlines).
#include <string>

#include "compiler/codegen/cpu_calls.h"
#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool NotElementwise(Opcode) { return false; }

Status LowerWhile(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const hlo::Module& m = e.module();
  const int32_t condition = m.CalleesOf(inst, "condition")[0];
  const int32_t body = m.CalleesOf(inst, "body")[0];
  const std::vector<Leaf>& init = e.OperandLeaves(inst, 0);
  std::vector<const Shape*> shapes;
  hlo::AppendLeafShapes(inst.shape, shapes);
  const std::vector<bool> passed = PassedThroughLeaves(m, body, shapes.size());
  const std::string w = e.Fresh("loop");
  std::vector<Leaf> state;
  std::string cond_args, body_args, pick, advance;
  for (size_t j = 0; j < shapes.size(); ++j) {
    const std::string t = CType(shapes[j]->type);
    const std::string cur = w + "_" + std::to_string(j);
    state.push_back({cur, shapes[j]});
    cond_args += cur + ", ";
    body_args += cur + ", ";
    if (passed[j]) {
      e.DeclarePointer(cur, *shapes[j], {init[j].ptr});
      e.Emit("  " + cur + " = " + init[j].ptr + ";\n");
      continue;
    }
    e.Declare(cur + "_a", *shapes[j]);
    e.Declare(cur + "_b", *shapes[j]);
    e.DeclarePointer(cur, *shapes[j], {init[j].ptr, cur + "_a", cur + "_b"});
    e.Emit("  " + cur + " = " + init[j].ptr + ";\n");
    pick += "    " + t + "* const " + cur + "_next = " + cur + " == " + cur + "_a ? " + cur +
            "_b : " + cur + "_a;\n";
    advance += "    " + cur + " = " + cur + "_next;\n";
  }
  for (size_t j = 0; j < shapes.size(); ++j) {
    const std::string cur = w + "_" + std::to_string(j);
    // The body leaves a passed-through leaf as it is (see the top of this file).
    body_args +=
        (j ? ", " : "") +
        (passed[j] ? "const_cast<" + std::string(CType(shapes[j]->type)) + "*>(" + cur + ")"
                   : cur + "_next");
  }
  e.Emit("  for (;;) {\n    bool " + w + "_go[1];\n    if (" + e.FunctionName(condition) + "(" +
         cond_args + w + "_go) != 0) return 1;\n    if (!" + w + "_go[0]) break;\n" + pick +
         "    if (" + e.FunctionName(body) + "(" + body_args + ") != 0) return 1;\n" + advance +
         "  }\n");
  e.Bind(index, std::move(state));
  return Status::Ok();
}

Status LowerConditional(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const hlo::Module& m = e.module();
  std::vector<int32_t> branches = m.CalleesOf(inst, "branch_computations");
  if (branches.empty()) {
    branches = {m.CalleesOf(inst, "true_computation")[0],
                m.CalleesOf(inst, "false_computation")[0]};
  }
  const std::vector<Leaf>& out = e.MaterializeLeaves(index, inst);
  std::string results;
  for (const Leaf& l : out) results += ", " + l.ptr;
  const std::string selector = e.Buffer(inst, 0) + "[0]";
  const bool is_pred = e.OperandShape(inst, 0).type == hlo::PrimitiveType::kPred;
  // pred picks branch 0 (true) or 1; an index outside the branches picks the last one.
  e.Emit("  switch (" + (is_pred ? "(" + selector + " ? 0 : 1)" : selector) + ") {\n");
  for (size_t b = 0; b < branches.size(); ++b) {
    std::string args = LeafList(e.OperandLeaves(inst, b + 1)) + results;
    if (args.starts_with(", ")) args.erase(0, 2);
    e.Emit(std::string(b + 1 == branches.size() ? "    default:"
                                                : "    case " + std::to_string(b) + ":") +
           "\n      if (" + e.FunctionName(branches[b]) + "(" + args +
           ") != 0) return 1;\n      break;\n");
  }
  e.Emit("  }\n");
  return Status::Ok();
}

Status LowerMap(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const int32_t f = e.module().CalleesOf(inst, "to_apply")[0];
  const std::string out = e.Materialize(index, inst);
  std::string args;
  for (size_t k = 0; k < inst.operands.size(); ++k) args += e.Buffer(inst, k) + " + i, ";
  e.Emit("  for (int64_t i = 0; i < " + Int(ElementCount(inst.shape)) + "; ++i) {\n    if (" +
         e.FunctionName(f) + "(" + args + out + " + i) != 0) return 1;\n  }\n");
  return Status::Ok();
}

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  switch (inst.opcode.opcode) {
    case Opcode::kWhile:
      return LowerWhile(e, index, inst);
    case Opcode::kConditional:
      return LowerConditional(e, index, inst);
    default:
      return LowerMap(e, index, inst);
  }
}

}  // namespace

CpuOpFamily CpuControlOps() { return {interp::ControlRules().takes, NotElementwise, Lower}; }

}  // namespace hlocache::compiler
