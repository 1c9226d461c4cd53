// sort (see compiler/interp/eval_sort.cc for its meaning): per run of elements along the
// sorted dimension, a permutation of positions sorted by hc_merge_sort (the interpreter's merge
// sort, step for step) with the comparator's function called on pointers into the operands,
// then each operand's elements copied in that order; a run of one operand's values ordered by
// < or > with no NaN in it, by a stable sort of the values (hc_sort_run: the same order).
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool NotElementwise(Opcode) { return false; }

// "<" or ">" when a sort of one operand of `type` orders by that comparison of its element
// types' values: the comparator is compare(a, b) (or compare(b, a)) LT or GT, on a type whose
// C++ comparison is HLO's default one. nullptr for any other sort.
const char* PlainOrder(const hlo::Module& m, const Instruction& sort, int32_t less,
                       hlo::PrimitiveType type) {
  using hlo::PrimitiveType;
  if (sort.operands.size() != 1) return nullptr;
  if (type != PrimitiveType::kF32 && type != PrimitiveType::kF64 && type != PrimitiveType::kS32 &&
      type != PrimitiveType::kS64 && type != PrimitiveType::kU32 && type != PrimitiveType::kU64) {
    return nullptr;
  }
  const hlo::Computation& f = m.computations[static_cast<size_t>(less)];
  if (f.root < 0 || f.instructions.size() != 3 || f.parameters.size() != 2) return nullptr;
  const Instruction& root = f.instructions[static_cast<size_t>(f.root)];
  const hlo::Attribute* direction = root.FindAttribute("direction");
  if (root.opcode.opcode != Opcode::kCompare || root.operands.size() != 2 || direction == nullptr ||
      root.FindAttribute("type") != nullptr) {
    return nullptr;
  }
  const Instruction& first = f.instructions[static_cast<size_t>(root.operands[0])];
  const Instruction& second = f.instructions[static_cast<size_t>(root.operands[1])];
  if (first.opcode.opcode != Opcode::kParameter || second.opcode.opcode != Opcode::kParameter ||
      first.parameter_number == second.parameter_number) {
    return nullptr;
  }
  const std::string_view dir = m.TokenText(direction->value.begin);
  if (dir != "LT" && dir != "GT") return nullptr;
  const bool ascending = (dir == "LT") == (first.parameter_number == 0);
  return ascending ? "<" : ">";
}

// Comparisons (about) of a sort worth splitting across threads: each calls the comparator's
// function.
constexpr int64_t kSplitCompares = int64_t{1} << 17;

Status LowerSort(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const hlo::Module& m = e.module();
  const int32_t less = m.CalleesOf(inst, "to_apply")[0];
  const auto d = static_cast<size_t>((*m.IntList(*inst.FindAttribute("dimensions")))[0]);
  const auto& dims = e.OperandShape(inst, 0).dims;
  const int64_t length = dims[d];
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < d; ++k) outer *= dims[k];
  for (size_t k = d + 1; k < dims.size(); ++k) inner *= dims[k];
  const std::vector<Leaf>& out = e.MaterializeLeaves(index, inst);
  // The comparator's arguments (elements a and b of each operand's run starting at `base`),
  // and the statements copying each operand's run into the result in sorted order.
  std::string args;
  auto copy = [&](const std::string& indent) {
    std::string code;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      code += indent + out[k].ptr + "[base + j * " + Int(inner) + "] = " + e.Buffer(inst, k) +
              "[base + order[j] * " + Int(inner) + "];\n";
    }
    return code;
  };
  for (size_t k = 0; k < inst.operands.size(); ++k) {
    const std::string x = e.Buffer(inst, k);
    args += x + " + base + a * " + Int(inner) + ", " + x + " + base + b * " + Int(inner) + ", ";
  }
  // A sort of values by < or > runs without the comparator where it can (hc_sort_run).
  std::string plain;
  if (const char* order = PlainOrder(m, inst, less, e.OperandShape(inst, 0).type)) {
    plain = "if (hc_sort_run(" + e.Buffer(inst, 0) + " + base, " + out[0].ptr + " + base, " +
            Int(length) + ", " + Int(inner) + ", " + (order[0] == '>' ? "true" : "false") +
            ")) continue;\n";
  }

  // Many rows with enough comparisons between them are sorted on the executable's threads,
  // each row on one (pieces of rows: their own positions, sorted as on one thread).
  const int64_t rows = outer * inner;
  int64_t log_length = 1;
  while ((int64_t{1} << log_length) < length) ++log_length;
  const int64_t compares = std::max<int64_t>(1, length * log_length);  // A row's, about.
  if (rows >= 2 && length >= 2 && rows * compares >= kSplitCompares) {
    e.SplitLoop(
        rows, std::max<int64_t>(1, kSplitCompares / 4 / compares),
        "  std::unique_ptr<int64_t[]> positions(new (std::nothrow) int64_t[" + Int(2 * length) +
            "]);\n  if (!positions) return 1;\n  bool failed = false;\n"
            "  for (int64_t row = lo; row < hi; ++row) {\n"
            "    const int64_t base = row / " +
            Int(inner) + " * " + Int(length * inner) + " + row % " + Int(inner) + ";\n" +
            (plain.empty() ? "" : "    " + plain) + "    for (int64_t j = 0; j < " + Int(length) +
            "; ++j) positions[j] = j;\n"
            "    const int64_t* order = hc_merge_sort(positions.get(), positions.get() + " +
            Int(length) + ", " + Int(length) +
            ", [&](int64_t a, int64_t b) {\n      bool r[1] = {false};\n      if (" +
            e.FunctionName(less) + "(" + args +
            "r) != 0) failed = true;\n      return r[0];\n    });\n"
            "    for (int64_t j = 0; j < " +
            Int(length) + "; ++j) {\n" + copy("      ") + "    }\n  }\n  if (failed) return 1;\n");
    return Status::Ok();
  }

  const std::string s = e.Fresh("sort");
  Shape positions;
  positions.type = hlo::PrimitiveType::kS64;
  positions.dims = {std::max<int64_t>(length, 1)};
  e.Declare(s + "_order", positions);
  e.Declare(s + "_scratch", positions);
  e.Emit("  {\n    bool " + s + "_failed = false;\n    for (int64_t o = 0; o < " + Int(outer) +
         "; ++o) {\n      for (int64_t in = 0; in < " + Int(inner) +
         "; ++in) {\n        const int64_t base = o * " + Int(length * inner) + " + in;\n" +
         (plain.empty() ? "" : "        " + plain) + "        for (int64_t j = 0; j < " +
         Int(length) + "; ++j) " + s +
         "_order[j] = j;\n        const int64_t* order = hc_merge_sort(" + s + "_order, " + s +
         "_scratch, " + Int(length) +
         ", [&](int64_t a, int64_t b) {\n          bool r[1] = {false};\n          if (" +
         e.FunctionName(less) + "(" + args + "r) != 0) " + s +
         "_failed = true;\n          return r[0];\n        });\n        for (int64_t j = 0; j < " +
         Int(length) + "; ++j) {\n" + copy("        ") + "        }\n      }\n    }\n    if (" + s +
         "_failed) return 1;\n  }\n");
  return Status::Ok();
}

// topk: per row, the positions stable-sorted by the prelude's merge sort on each element's key
// (hc_total_key for floats), then the first k.
Status LowerTopK(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const hlo::Module& m = e.module();
  const int64_t k = *m.Int(*inst.FindAttribute("k"));
  const hlo::Attribute* l = inst.FindAttribute("largest");
  const bool largest = l == nullptr || m.TokenText(l->value.begin) != "false";
  const Shape& x = e.OperandShape(inst, 0);
  const int64_t n = x.dims.back();
  const int64_t rows = n == 0 ? 0 : ElementCount(x) / n;
  const std::vector<Leaf>& out = e.MaterializeLeaves(index, inst);
  if (rows == 0 || k == 0) return Status::Ok();
  const std::string s = e.Fresh("topk");
  Shape positions;
  positions.type = hlo::PrimitiveType::kS64;
  positions.dims = {n};
  e.Declare(s + "_order", positions);
  e.Declare(s + "_scratch", positions);
  const std::string in = e.Buffer(inst, 0);
  const std::string key =
      hlo::IsFloat(x.type) ? "hc_total_key(hc_load(" + in + "[row + p]))" : in + "[row + p]";
  const std::string cmp = largest ? "key(b) < key(a)" : "key(a) < key(b)";
  e.Emit("  for (int64_t r = 0; r < " + Int(rows) + "; ++r) {\n" + "    const int64_t row = r * " +
         Int(n) + ";\n" + "    auto key = [&](int64_t p) { return " + key + "; };\n" +
         "    for (int64_t j = 0; j < " + Int(n) + "; ++j) " + s + "_order[j] = j;\n" +
         "    const int64_t* order = hc_merge_sort(" + s + "_order, " + s + "_scratch, " + Int(n) +
         ", [&](int64_t a, int64_t b) { return " + cmp + "; });\n" +
         "    for (int64_t j = 0; j < " + Int(k) + "; ++j) {\n" + "      " + out[0].ptr + "[r * " +
         Int(k) + " + j] = " + in + "[row + order[j]];\n" + "      " + out[1].ptr + "[r * " +
         Int(k) + " + j] = static_cast<int32_t>(order[j]);\n" + "    }\n  }\n");
  return Status::Ok();
}

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  return inst.opcode.opcode == Opcode::kSort ? LowerSort(e, index, inst)
                                             : LowerTopK(e, index, inst);
}

}  // namespace

CpuOpFamily CpuSortOps() { return {interp::SortRules().takes, NotElementwise, Lower}; }

}  // namespace hlocache::compiler
