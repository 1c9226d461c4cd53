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

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool Takes(Opcode op) {
  switch (op) {
    case Opcode::kAllReduce:
    case Opcode::kAllReduceStart:
    case Opcode::kAllReduceDone:
    case Opcode::kAllGather:
    case Opcode::kAllGatherStart:
    case Opcode::kAllGatherDone:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
    case Opcode::kCollectiveBroadcast:
    case Opcode::kCollectivePermute:
    case Opcode::kCollectivePermuteStart:
    case Opcode::kCollectivePermuteDone:
    case Opcode::kPartitionId:
    case Opcode::kReplicaId:
      return true;
    default:
      return false;
  }
}

// The shape a collective of these operands returns with one participant: the operand's, or the
// tuple of them when there are several.
Shape Passed(std::span<const Shape* const> operands) {
  if (operands.size() == 1) return *operands[0];
  Shape t;
  for (const Shape* s : operands) t.tuple_elements.push_back(*s);
  return t;
}

bool IsDone(Opcode op) {
  return op == Opcode::kAllReduceDone || op == Opcode::kAllGatherDone ||
         op == Opcode::kCollectivePermuteDone;
}
bool IsStart(Opcode op) {
  return op == Opcode::kAllReduceStart || op == Opcode::kAllGatherStart ||
         op == Opcode::kCollectivePermuteStart;
}

// Where a -done finds its result in its operand, the -start's value: the value itself, or
// element 1 of the (operand, result, ...) tuple that older -start forms return.
enum class DoneFrom { kItself, kElementOne };

Result<DoneFrom> DoneSource(const ShapeContext& ctx, const Instruction& inst,
                            const Shape& started) {
  if (hlo::SameValues(started, inst.shape)) return DoneFrom::kItself;
  if (started.IsTuple() && started.tuple_elements.size() >= 2 &&
      hlo::SameValues(started.tuple_elements[1], inst.shape)) {
    return DoneFrom::kElementOne;
  }
  return Error(ctx.Malformed(inst, "the result is not what its -start computes"));
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  const Opcode op = inst.opcode.opcode;
  if (std::string why = hlo::WhyNotSingleParticipant(ctx.module(), inst); !why.empty()) {
    return ctx.Unsupported(inst, "a collective of more than one participant: " + why);
  }
  if (op == Opcode::kPartitionId || op == Opcode::kReplicaId) {
    if (!operands.empty()) return ctx.Malformed(inst, "takes no operands");
    if (!inst.shape.IsArray() || inst.shape.type != hlo::PrimitiveType::kU32 ||
        !inst.shape.dims.empty()) {
      return ctx.Malformed(inst, "the result is not u32[]");
    }
    return Status::Ok();
  }
  if (operands.empty()) return ctx.Malformed(inst, "has no operands");
  if (IsDone(op)) {
    if (operands.size() != 1) return ctx.Malformed(inst, "takes one operand, its -start");
    if (auto from = DoneSource(ctx, inst, *operands[0]); !from) return from.error();
    return Status::Ok();
  }
  for (size_t k = 0; k < operands.size(); ++k) {
    if (!operands[k]->IsArray()) {
      return ctx.Malformed(inst, "operand " + std::to_string(k) + " is not an array");
    }
  }
  if (op == Opcode::kCollectivePermute || op == Opcode::kCollectivePermuteStart) {
    if (operands.size() != 1) {
      return ctx.Unsupported(inst, "collective-permute with in-place buffers");
    }
  }
  if (op == Opcode::kAllReduce || op == Opcode::kAllReduceStart) {
    if (auto reducer = ctx.Callee(inst, "to_apply"); !reducer) return reducer.error();
  }
  for (const char* name : {"dimensions", "split_dimension", "concat_dimension"}) {
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.IntsOr(inst, name, {}));
    for (int64_t d : dims) {
      if (d < 0 || d >= operands[0]->rank()) {
        return ctx.Malformed(inst, std::string(name) + " names no dimension of the operand");
      }
    }
  }
  const Shape passed = Passed(operands);
  if (hlo::SameValues(passed, inst.shape)) return Status::Ok();
  // -start forms that return (operands, results[, contexts]).
  if (IsStart(op) && inst.shape.IsTuple() && inst.shape.tuple_elements.size() >= 2 &&
      hlo::SameValues(inst.shape.tuple_elements[0], passed) &&
      hlo::SameValues(inst.shape.tuple_elements[1], passed)) {
    return Status::Ok();
  }
  return ctx.Malformed(inst, "with one participant the result must have the operands' shapes");
}

// True when source_target_pairs sends participant 0's value to itself.
bool SendsToItself(const ShapeContext& ctx, const Instruction& inst) {
  const std::string pairs = ctx.AttributeText(inst, "source_target_pairs");
  return pairs.find("{0,0}") != std::string::npos;
}

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  const Opcode op = inst.opcode.opcode;
  if (op == Opcode::kPartitionId || op == Opcode::kReplicaId) return Literal(inst.shape);
  if (IsDone(op)) {
    HLOCACHE_ASSIGN_OR_RETURN(DoneFrom from, DoneSource(ctx, inst, operands[0]->shape()));
    return from == DoneFrom::kItself ? *operands[0] : operands[0]->elements()[1];
  }
  Literal passed;
  if (operands.size() == 1) {
    passed = *operands[0];
  } else {
    std::vector<const Shape*> shapes;
    for (const Literal* l : operands) shapes.push_back(&l->shape());
    passed = Literal(Passed(shapes));
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

OpFamily CollectiveOps() { return {Takes, Check, Eval}; }

}  // namespace hlocache::interp
