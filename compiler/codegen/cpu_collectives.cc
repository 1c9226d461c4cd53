// Collectives of a one-participant program (see compiler/interp/eval_collectives.cc for their
// meaning): they hand their operands' buffers on without a copy, collective-permute with no
// pair to participant 0 writes zeros, partition-id and replica-id are 0.
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Instruction;
using hlo::Opcode;

bool NotElementwise(Opcode) { return false; }

bool SendsToItself(const hlo::Module& m, const Instruction& inst) {
  const hlo::Attribute* a = inst.FindAttribute("source_target_pairs");
  if (a == nullptr) return false;
  std::string text;
  for (uint32_t t = a->value.begin; t < a->value.end; ++t) text += m.TokenText(t);
  return text.find("{0,0}") != std::string::npos;
}

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const Opcode op = inst.opcode.opcode;
  if (op == Opcode::kPartitionId || op == Opcode::kReplicaId) {
    e.Emit("  " + e.Materialize(index, inst) + "[0] = 0;\n");
    return Status::Ok();
  }
  std::vector<Leaf> passed;
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    const auto& leaves = e.OperandLeaves(inst, k);
    passed.insert(passed.end(), leaves.begin(), leaves.end());
  }
  const bool done = op == Opcode::kAllReduceDone || op == Opcode::kAllGatherDone ||
                    op == Opcode::kCollectivePermuteDone;
  if (done) {
    // The -start's value itself, or element 1 of its (operand, result, ...) tuple.
    const hlo::Shape& started = e.OperandShape(inst, 0);
    if (!hlo::SameValues(started, inst.shape)) {
      std::vector<const hlo::Shape*> skip, mine;
      hlo::AppendLeafShapes(started.tuple_elements[0], skip);
      hlo::AppendLeafShapes(inst.shape, mine);
      passed =
          std::vector<Leaf>(passed.begin() + static_cast<ptrdiff_t>(skip.size()),
                            passed.begin() + static_cast<ptrdiff_t>(skip.size() + mine.size()));
    }
    e.Bind(index, std::move(passed));
    return Status::Ok();
  }
  const bool permute = op == Opcode::kCollectivePermute || op == Opcode::kCollectivePermuteStart;
  std::vector<Leaf> result = passed;
  if (permute && !SendsToItself(e.module(), inst)) {
    // Nobody sends to participant 0: zeros, in a buffer of their own.
    const std::string zeros = e.Fresh("zeros");
    e.Declare(zeros, e.OperandShape(inst, 0));
    e.Emit("  std::memset(" + zeros + ", 0, " + Int(ByteCount(e.OperandShape(inst, 0))) + ");\n");
    result = {{zeros, passed[0].shape}};
  }
  std::vector<const hlo::Shape*> all;
  hlo::AppendLeafShapes(inst.shape, all);
  if (all.size() == result.size()) {
    e.Bind(index, std::move(result));
    return Status::Ok();
  }
  // A -start returning (operands, results, contexts...): contexts get zeroed scalars.
  std::vector<Leaf> leaves = passed;
  leaves.insert(leaves.end(), result.begin(), result.end());
  for (size_t j = leaves.size(); j < all.size(); ++j) {
    const std::string context = e.Fresh("context");
    e.Declare(context, *all[j]);
    e.Emit("  std::memset(" + context + ", 0, " + Int(ByteCount(*all[j])) + ");\n");
    leaves.push_back({context, all[j]});
  }
  e.Bind(index, std::move(leaves));
  return Status::Ok();
}

}  // namespace

CpuOpFamily CpuCollectiveOps() { return {interp::CollectiveRules().takes, NotElementwise, Lower}; }

}  // namespace hlocache::compiler
