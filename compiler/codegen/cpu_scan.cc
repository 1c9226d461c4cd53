// scan (see compiler/interp/eval_scan.cc for its meaning): one loop over the scanned positions.
// Each step gathers the inputs' slices at position t into buffers, calls the scanned
// computation's function, and scatters its outputs into the result arrays at t (memcpy of the
// contiguous runs after the scanned dimension). Carries swap between two buffers as a while
// loop's state does (cpu_control.cc): the initial carries are read in place, never copied, and
// the result's carries are the last buffers written.
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/shape_context.h"

namespace hlocache::compiler {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool NotElementwise(Opcode) { return false; }

// Statements that copy, for each run of `inner` elements before dimension d, between a whole
// array (`whole`, `length` long in d) at position t and its slice (`part`).
std::string MoveSlices(const std::string& whole, const std::string& part, const Shape& s, int64_t d,
                       int64_t length, bool to_part) {
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < s.rank(); ++k) {
    (k < d ? outer : inner) *= k == d ? 1 : s.dims[static_cast<size_t>(k)];
  }
  const std::string at_whole = whole + " + (o * " + Int(length) + " + t) * " + Int(inner);
  const std::string at_part = part + " + o * " + Int(inner);
  const std::string bytes = Int(inner * hlo::BufferElementBytes(s.type));
  return "    for (int64_t o = 0; o < " + Int(outer) + "; ++o) std::memcpy(" +
         (to_part ? at_part + ", " + at_whole : at_whole + ", " + at_part) + ", " + bytes + ");\n";
}

Shape WithoutDim(const Shape& s, int64_t d) {
  Shape out;
  out.type = s.type;
  out.dims = s.dims;
  out.dims.erase(out.dims.begin() + d);
  return out;
}

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const hlo::Module& m = e.module();
  const int64_t d = (*m.IntList(*inst.FindAttribute("dimensions")))[0];
  const hlo::Attribute* carries_attr = inst.FindAttribute("num_carries");
  const auto carries = static_cast<size_t>(carries_attr ? *m.Int(*carries_attr) : 0);
  const bool reverse = interp::ShapeContext(m).AttributeText(inst, "is_reverse") == "true";
  const int32_t f = m.CalleesOf(inst, "to_apply")[0];
  const size_t inputs = inst.operands.size() - carries;
  const int64_t length = e.OperandShape(inst, 0).dims[static_cast<size_t>(d)];
  std::vector<const Shape*> results;
  hlo::AppendLeafShapes(inst.shape, results);
  const size_t outputs = results.size() - carries;

  const std::string s = e.Fresh("scan");
  std::vector<Leaf> value;
  std::string args, gather, scatter, pick, advance, carry_args, out_args;
  for (size_t k = 0; k < inputs; ++k) {
    const std::string slice = s + "_in" + std::to_string(k);
    e.Declare(slice, WithoutDim(e.OperandShape(inst, k), d));
    gather += MoveSlices(e.Buffer(inst, k), slice, e.OperandShape(inst, k), d, length, true);
    args += slice + ", ";
  }
  for (size_t k = 0; k < outputs; ++k) {
    const std::string whole = s + "_out" + std::to_string(k), slice = whole + "_at";
    e.Declare(whole, *results[k]);
    e.Declare(slice, WithoutDim(*results[k], d));
    scatter += MoveSlices(whole, slice, *results[k], d, length, false);
    out_args += slice + ", ";
    value.push_back({whole, results[k]});
  }
  for (size_t k = 0; k < carries; ++k) {
    const Shape& shape = *results[outputs + k];
    const std::string t = CType(shape.type);
    const std::string cur = s + "_carry" + std::to_string(k);
    e.Declare(cur + "_a", shape);
    e.Declare(cur + "_b", shape);
    e.DeclarePointer(cur, shape, {e.Buffer(inst, inputs + k), cur + "_a", cur + "_b"});
    e.Emit("  " + cur + " = " + e.Buffer(inst, inputs + k) + ";\n");
    pick += "    " + t + "* const " + cur + "_next = " + cur + " == " + cur + "_a ? " + cur +
            "_b : " + cur + "_a;\n";
    advance += "    " + cur + " = " + cur + "_next;\n";
    carry_args += cur + ", ";
    out_args += cur + "_next, ";
    value.push_back({cur, &shape});
  }
  std::string call = args + carry_args + out_args;
  call.resize(call.size() - 2);  // The last ", ": a scan has at least one input.
  e.Emit("  for (int64_t step = 0; step < " + Int(length) + "; ++step) {\n    const int64_t t = " +
         (reverse ? Int(length - 1) + " - step" : std::string("step")) + ";\n" + gather + pick +
         "    if (" + e.FunctionName(f) + "(" + call + ") != 0) return 1;\n" + scatter + advance +
         "  }\n");
  e.Bind(index, std::move(value));
  return Status::Ok();
}

}  // namespace

CpuOpFamily CpuScanOps() { return {interp::ScanRules().takes, NotElementwise, Lower}; }

}  // namespace hlocache::compiler
