// Collectives with one participant. In a program of replica_count=1 and num_partitions=1 whose
// groups name participant 0 alone, every collective has a one-participant meaning: all-reduce,
// all-gather, reduce-scatter, all-to-all and collective-broadcast return their operands (the
// reduction, gather, scatter or exchange of one value is that value); collective-permute returns
// its operand when the pairs send 0 to itself and zeros when nothing is sent to 0;
// partition-id and replica-id are 0. The -start forms compute the result, the -done forms
// hand it on. Anything that names another participant is refused as unsupported.
#include <string>

#include "compiler/hlo/collectives.h"
#include "compiler/interp/eval_families.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

// True when source_target_pairs sends participant 0's value to itself.
bool SendsToItself(const ShapeContext& ctx, const Instruction& inst) {
  const std::string pairs = ctx.AttributeText(inst, "source_target_pairs");
  return pairs.find("{0,0}") != std::string::npos;
}

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  const Opcode op = inst.opcode.opcode;
  if (op == Opcode::kPartitionId || op == Opcode::kReplicaId) return Literal(inst.shape);
  if (IsCollectiveDone(op)) {
    HLOCACHE_ASSIGN_OR_RETURN(CollectiveDoneFrom from,
                              CollectiveDoneSource(ctx, inst, operands[0]->shape()));
    return from == CollectiveDoneFrom::kItself ? *operands[0] : operands[0]->elements()[1];
  }
  Literal passed;
  if (operands.size() == 1) {
    passed = *operands[0];
  } else {
    std::vector<const Shape*> shapes;
    for (const Literal* l : operands) shapes.push_back(&l->shape());
    passed = Literal(CollectiveResult(shapes));
    for (size_t k = 0; k < operands.size(); ++k) passed.elements()[k] = *operands[k];
  }
  if ((op == Opcode::kCollectivePermute || op == Opcode::kCollectivePermuteStart) &&
      !SendsToItself(ctx, inst)) {
    passed = Literal(passed.shape());  // Nobody sends to participant 0: zeros.
  }
  if (!inst.shape.IsTuple() || hlo::SameValues(passed.shape(), inst.shape)) return passed;
  // (operands, results, ...) of a -start: both hold the value; contexts are zeros.
  Literal out(inst.shape);
  out.elements()[0] = operands.size() == 1 ? *operands[0] : passed;
  out.elements()[1] = passed;
  return out;
}

}  // namespace

OpFamily CollectiveOps() { return {CollectiveRules().takes, Eval}; }

}  // namespace hlocache::interp
