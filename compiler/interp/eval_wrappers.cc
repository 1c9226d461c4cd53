// Ops that hand values on, and the asynchronous wrappers, for a program that runs on one
// thread in program order:
//   after-all(tokens...) -> token[]: a token. Tokens order side effects; they hold no data (the
//     literal of token[] is one element, always 0; compiled code gives it one byte).
//   add-dependency(x, token) -> x; opt-barrier(x) -> x; domain(x) -> x: the operand itself.
//   copy-start(x) -> (x, copy of x, u32[] context 0); copy-done(started) -> the copy.
//   async-start(operands...), calls=f -> ((operands...), f(operands...), contexts...): the
//     wrapped computation runs at the start (contexts, whose meaning belongs to the runtime,
//     are zeros); async-update hands the tuple on; async-done returns its element 1, f's result.
#include <string>

#include "compiler/interp/eval_families.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  switch (inst.opcode.opcode) {
    case Opcode::kAfterAll:
      return Literal(inst.shape);
    case Opcode::kCopyStart: {
      Literal out(inst.shape);
      out.elements()[0] = *operands[0];
      out.elements()[1] = *operands[0];
      return out;
    }
    case Opcode::kCopyDone:
    case Opcode::kAsyncDone:
      return operands[0]->elements()[1];
    case Opcode::kAsyncStart: {
      HLOCACHE_ASSIGN_OR_RETURN(int32_t f, ctx.Callee(inst, "calls"));
      std::vector<Literal> args;
      for (const Literal* x : operands) args.push_back(*x);
      HLOCACHE_ASSIGN_OR_RETURN(Literal result, ctx.Call(f, args));
      HLOCACHE_ASSIGN_OR_RETURN(Literal out, Literal::MakeZeros(inst.shape));
      for (size_t k = 0; k < args.size(); ++k) out.elements()[0].elements()[k] = std::move(args[k]);
      out.elements()[1] = std::move(result);
      return out;
    }
    default:  // add-dependency, opt-barrier, domain, async-update.
      return *operands[0];
  }
}

}  // namespace

OpFamily WrapperOps() { return {WrapperRules().takes, Eval}; }

}  // namespace hlocache::interp
