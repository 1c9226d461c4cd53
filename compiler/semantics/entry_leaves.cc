#include "compiler/semantics/entry_leaves.h"

namespace hlocache::compiler {

using hlo::AppendLeafShapes;
using hlo::Computation;
using hlo::Shape;

Result<EntryLeaves> EntryLeavesOf(const hlo::Module& module) {
  if (module.entry < 0) return Error(InvalidArgument(module.filename() + ": no entry computation"));
  const Computation& entry = module.computations[static_cast<size_t>(module.entry)];
  std::vector<const Shape*> parameters, results;
  for (int32_t p : entry.parameters) {
    if (p < 0) return Error(InvalidArgument(module.filename() + ": a missing parameter"));
    AppendLeafShapes(entry.instructions[static_cast<size_t>(p)].shape, parameters);
  }
  if (entry.root < 0) return Error(InvalidArgument(module.filename() + ": no root"));
  AppendLeafShapes(entry.instructions[static_cast<size_t>(entry.root)].shape, results);
  EntryLeaves leaves;
  for (const Shape* s : parameters) leaves.parameters.push_back(*s);
  for (const Shape* s : results) leaves.results.push_back(*s);
  return leaves;
}

}  // namespace hlocache::compiler
