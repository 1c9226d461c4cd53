// The shape rules of the collectives of one participant (all-reduce, all-gather, reduce-scatter,
// all-to-all, collective-permute and -broadcast, their -start/-done forms, partition-id,
// replica-id); their evaluation is compiler/interp/eval_collectives.cc.
#include <string>

#include "compiler/hlo/collectives.h"
#include "compiler/semantics/rules/families.h"

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

bool IsStart(Opcode op) {
  return op == Opcode::kAllReduceStart || op == Opcode::kAllGatherStart ||
         op == Opcode::kCollectivePermuteStart;
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
  if (IsCollectiveDone(op)) {
    if (operands.size() != 1) return ctx.Malformed(inst, "takes one operand, its -start");
    if (auto from = CollectiveDoneSource(ctx, inst, *operands[0]); !from) return from.error();
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
  const Shape passed = CollectiveResult(operands);
  if (hlo::SameValues(passed, inst.shape)) return Status::Ok();
  // -start forms that return (operands, results[, contexts]).
  if (IsStart(op) && inst.shape.IsTuple() && inst.shape.tuple_elements.size() >= 2 &&
      hlo::SameValues(inst.shape.tuple_elements[0], passed) &&
      hlo::SameValues(inst.shape.tuple_elements[1], passed)) {
    return Status::Ok();
  }
  return ctx.Malformed(inst, "with one participant the result must have the operands' shapes");
}

}  // namespace

// The shape a collective of these operands returns with one participant: the operand's, or the
// tuple of them when there are several.
Shape CollectiveResult(std::span<const Shape* const> operands) {
  if (operands.size() == 1) return *operands[0];
  Shape t;
  for (const Shape* s : operands) t.tuple_elements.push_back(*s);
  return t;
}

bool IsCollectiveDone(Opcode op) {
  return op == Opcode::kAllReduceDone || op == Opcode::kAllGatherDone ||
         op == Opcode::kCollectivePermuteDone;
}

Result<CollectiveDoneFrom> CollectiveDoneSource(const ShapeContext& ctx, const Instruction& inst,
                                                const Shape& started) {
  if (hlo::SameValues(started, inst.shape)) return CollectiveDoneFrom::kItself;
  if (started.IsTuple() && started.tuple_elements.size() >= 2 &&
      hlo::SameValues(started.tuple_elements[1], inst.shape)) {
    return CollectiveDoneFrom::kElementOne;
  }
  return Error(ctx.Malformed(inst, "the result is not what its -start computes"));
}

ShapeRules CollectiveRules() { return {Takes, Check}; }

}  // namespace hlocache::interp
