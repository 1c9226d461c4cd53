// reduce-window and select-and-scatter (see compiler/interp/eval_window.cc for their meaning,
// which this code reproduces step for step).
//
// Both walk the window placements in row-major order and, inside, the window's elements in
// row-major order. Along each dimension the elements that land inside the dilated base form one
// range of the window, computed per placement (hc_window_lo/hi in the prelude), so the loops
// never test for padding; a base dilation above 1 leaves holes, skipped with one test. A
// dimension the window does not slide along (size 1, stride 1, no padding or dilation) reads
// the placement's own index, with no loop. A reducer or scatter computation that is one add,
// multiply, maximum or minimum is inlined; any other is called.
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/hlo/window.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;
using hlo::WindowDimension;

bool NotElementwise(Opcode) { return false; }

bool Trivial(const WindowDimension& w) {
  return w.size == 1 && w.stride == 1 && w.pad_low == 0 && w.pad_high == 0 &&
         w.base_dilation == 1 && w.window_dilation == 1;
}

// Loops over the placements (o0, o1, ...; `j` counts them) around the window's loops (k0,
// k1, ...) around `body`, which reads the base element at offset `i`. `before` runs at each
// placement before its window, `after` after it. Returns the whole block of statements.
std::string WindowLoops(const std::vector<WindowDimension>& window, std::span<const int64_t> base,
                        std::span<const int64_t> placements, const std::string& before,
                        const std::string& body, const std::string& after) {
  const size_t rank = base.size();
  const std::vector<int64_t> strides = hlo::RowMajorStrides(base);
  std::string out = "  {\n    int64_t j = 0;\n";
  std::string pad = "    ";
  for (size_t d = 0; d < rank; ++d) {
    const std::string o = "o" + std::to_string(d);
    out += pad + "for (int64_t " + o + " = 0; " + o + " < " + Int(placements[d]) + "; ++" + o +
           ") {\n";
    pad += "  ";
  }
  out += pad + before + "\n";
  const std::string outer = pad;
  std::string offset = "0";
  for (size_t d = 0; d < rank; ++d) {
    const WindowDimension& w = window[d];
    const std::string o = "o" + std::to_string(d), k = "k" + std::to_string(d);
    const std::string b = "b" + std::to_string(d);
    if (Trivial(w)) {
      out += pad + "const int64_t " + b + " = " + o + ";\n";
    } else {
      const std::string last = Int((base[d] - 1) * w.base_dilation);
      out += pad + "for (int64_t " + k + " = hc_window_lo(" + o + ", " + Int(w.stride) + ", " +
             Int(w.window_dilation) + ", " + Int(w.pad_low) + "), " + k + "_end = hc_window_hi(" +
             o + ", " + Int(w.stride) + ", " + Int(w.window_dilation) + ", " + Int(w.pad_low) +
             ", " + last + ", " + Int(w.size) + "); " + k + " < " + k + "_end; ++" + k + ") {\n";
      pad += "  ";
      const std::string at = o + " * " + Int(w.stride) + " + " + k + " * " +
                             Int(w.window_dilation) + " - " + Int(w.pad_low);
      if (w.base_dilation == 1) {
        out += pad + "const int64_t " + b + " = " + at + ";\n";
      } else {
        out += pad + "const int64_t " + b + "_at = " + at + ";\n" + pad + "if (" + b + "_at % " +
               Int(w.base_dilation) + " != 0) continue;\n" + pad + "const int64_t " + b + " = " +
               b + "_at / " + Int(w.base_dilation) + ";\n";
      }
    }
    offset += " + " + b + " * " + Int(strides[d]);
  }
  out += pad + "const int64_t i = " + offset + ";\n";
  for (size_t at = 0; at < body.size();) {
    size_t end = body.find('\n', at);
    if (end == std::string::npos) end = body.size();
    out += pad + body.substr(at, end - at) + "\n";
    at = end + 1;
  }
  for (size_t d = rank; d-- > 0;) {
    if (Trivial(window[d])) continue;
    pad.resize(pad.size() - 2);
    out += pad + "}\n";
  }
  out += outer + after + "\n" + outer + "++j;\n";
  for (size_t d = rank; d-- > 0;) {
    pad.resize(pad.size() - 2);
    out += pad + "}\n";
  }
  return out + "  }\n";
}

// The placements along each dimension (the shapes were checked, so the window reads).
std::vector<int64_t> Placements(const std::vector<WindowDimension>& window,
                                std::span<const int64_t> base) {
  std::vector<int64_t> p;
  for (size_t d = 0; d < base.size(); ++d) p.push_back(*hlo::WindowPlacements(window[d], base[d]));
  return p;
}

bool Empty(std::span<const int64_t> dims) {
  for (int64_t d : dims) {
    if (d == 0) return true;
  }
  return false;
}

Status LowerReduceWindow(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const size_t n = inst.operands.size() / 2;
  const auto& base = e.OperandShape(inst, 0).dims;
  auto window = hlo::ReadWindow(e.module(), inst, base.size());
  if (!window) return e.Malformed(inst, window.error().message());
  const std::vector<int64_t> placements = Placements(*window, base);
  const std::vector<Leaf> results = e.MaterializeLeaves(index, inst);
  if (Empty(placements)) return Status::Ok();
  const int32_t f = e.module().CalleesOf(inst, "to_apply")[0];
  const Computation& fc = e.module().computations[static_cast<size_t>(f)];
  std::string before, body, after;
  for (size_t k = 0; k < n; ++k) {
    const std::string acc = "acc" + std::to_string(k);
    before += std::string(CType(e.OperandShape(inst, n + k).type)) + " " + acc + " = " +
              e.Buffer(inst, n + k) + "[0]; ";
    after += results[k].ptr + "[j] = " + acc + "; ";
  }
  bool swapped = false;
  const hlo::PrimitiveType type = e.OperandShape(inst, 0).type;
  const char* helper =
      n == 1 && e.OperandShape(inst, 1).type == type ? OneOpCombiner(fc, type, swapped) : nullptr;
  if (helper != nullptr) {
    const std::string x = e.Buffer(inst, 0) + "[i]";
    body = "acc0 = " + std::string(helper) + "<" + CType(type) + ">(" +
           (swapped ? x + ", acc0" : "acc0, " + x) + ");";
  } else {
    std::string args, next, copies;
    for (size_t k = 0; k < n; ++k)
      args += (k ? ", " : "") + std::string("&acc") + std::to_string(k);
    for (size_t k = 0; k < n; ++k) args += ", " + e.Buffer(inst, k) + " + i";
    for (size_t k = 0; k < n; ++k) {
      const std::string r = "next" + std::to_string(k);
      next += std::string(CType(e.OperandShape(inst, n + k).type)) + " " + r + "[1]; ";
      args += ", " + r;
      copies += " acc" + std::to_string(k) + " = " + r + "[0];";
    }
    body = next + "if (" + e.FunctionName(f) + "(" + args + ") != 0) return 1;" + copies;
  }
  // A base with no elements gives every placement its inits.
  if (Empty(base)) body = "(void)i;";
  e.Emit(WindowLoops(*window, base, placements, before, body, after));
  return Status::Ok();
}

Status LowerSelectAndScatter(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const Shape& operand = e.OperandShape(inst, 0);
  auto window = hlo::ReadWindow(e.module(), inst, operand.dims.size());
  if (!window) return e.Malformed(inst, window.error().message());
  const std::vector<int64_t> placements = Placements(*window, operand.dims);
  const std::string out = e.Materialize(index, inst);
  const std::string x = e.Buffer(inst, 0), source = e.Buffer(inst, 1);
  e.Emit("  for (int64_t i = 0; i < " + Int(ElementCount(operand)) + "; ++i) " + out +
         "[i] = " + e.Buffer(inst, 2) + "[0];\n");
  if (Empty(placements) || Empty(operand.dims)) return Status::Ok();
  const hlo::Module& m = e.module();
  const int32_t select = m.CalleesOf(inst, "select")[0];
  const int32_t scatter = m.CalleesOf(inst, "scatter")[0];
  const std::string t = CType(operand.type);
  const std::string body =
      "if (selected < 0) {\n  selected = i;\n} else {\n  bool keep[1];\n  if (" +
      e.FunctionName(select) + "(" + x + " + selected, " + x +
      " + i, keep) != 0) return 1;\n  if (!keep[0]) selected = i;\n}";
  bool swapped = false;
  const char* helper =
      OneOpCombiner(m.computations[static_cast<size_t>(scatter)], operand.type, swapped);
  std::string combine;
  if (helper != nullptr) {
    const std::string a = source + "[j]", b = out + "[selected]";
    combine = b + " = " + helper + "<" + t + ">(" + (swapped ? b + ", " + a : a + ", " + b) + ");";
  } else {
    combine = t + " r[1]; if (" + e.FunctionName(scatter) + "(" + source + " + j, " + out +
              " + selected, r) != 0) return 1; " + out + "[selected] = r[0];";
  }
  e.Emit(WindowLoops(*window, operand.dims, placements, "int64_t selected = -1;", body,
                     "if (selected >= 0) { " + combine + " }"));
  return Status::Ok();
}

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  return inst.opcode.opcode == Opcode::kReduceWindow ? LowerReduceWindow(e, index, inst)
                                                     : LowerSelectAndScatter(e, index, inst);
}

}  // namespace

CpuOpFamily CpuWindowOps() { return {interp::WindowRules().takes, NotElementwise, Lower}; }

}  // namespace hlocache::compiler
