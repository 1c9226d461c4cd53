// convolution (see compiler/interp/eval_convolution.cc for its meaning): one call of the
// prelude's hc_conv with the geometry as a constant table (the dimension numbers resolved to
// strides, the window to per-dimension steps), summing in the interpreter's order.
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/hlo/convolution_dims.h"
#include "compiler/hlo/window.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool NotElementwise(Opcode) { return false; }

int64_t IntOr(const hlo::Module& m, const Instruction& inst, const char* name, int64_t fallback) {
  const hlo::Attribute* a = inst.FindAttribute(name);
  if (a == nullptr) return fallback;
  auto v = m.Int(*a);
  return v ? *v : fallback;
}

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const hlo::Module& m = e.module();
  const Shape& input = e.OperandShape(inst, 0);
  const Shape& kernel = e.OperandShape(inst, 1);
  const size_t rank = input.dims.size();
  // The shapes were checked (interp::CheckShapes), so both read.
  auto dims = hlo::ReadConvolutionDims(m, inst, rank);
  auto window = hlo::ReadWindow(m, inst, rank - 2);
  if (!dims || !window) return e.Malformed(inst, "unreadable dimension numbers or window");
  const int64_t feature_groups = IntOr(m, inst, "feature_group_count", 1);
  const int64_t batch_groups = IntOr(m, inst, "batch_group_count", 1);
  const int64_t groups = std::max(feature_groups, batch_groups);
  const auto is = hlo::RowMajorStrides(input.dims);
  const auto ks = hlo::RowMajorStrides(kernel.dims);
  const auto os = hlo::RowMajorStrides(inst.shape.dims);
  auto at = [](std::span<const int64_t> v, int64_t k) { return v[static_cast<size_t>(k)]; };
  const int64_t out_features = at(kernel.dims, dims->kernel_output_feature);

  const std::string out = e.Materialize(index, inst);
  const std::string name = e.Fresh("conv");
  std::string table = "    static const hc_conv_dim " + name + "_dims[] = {";
  for (size_t k = 0; k < window->size(); ++k) {
    const hlo::WindowDimension& w = (*window)[k];
    const int64_t values[] = {at(input.dims, dims->input_spatial[k]),
                              at(is, dims->input_spatial[k]),
                              w.size,
                              at(ks, dims->kernel_spatial[k]),
                              at(inst.shape.dims, dims->output_spatial[k]),
                              at(os, dims->output_spatial[k]),
                              w.stride,
                              w.pad_low,
                              w.base_dilation,
                              w.window_dilation,
                              w.reversal ? 1 : 0};
    table += k ? ", {" : "{";
    for (size_t v = 0; v < std::size(values); ++v) table += (v ? ", " : "") + Int(values[v]);
    table += "}";
  }
  if (window->empty()) table += "{}";  // C++ allows no empty arrays.
  table += "};\n";
  const int64_t spec[] = {static_cast<int64_t>(window->size()),
                          at(input.dims, dims->input_batch) / batch_groups,
                          groups,
                          feature_groups > 1 ? 1 : 0,
                          batch_groups > 1 ? 1 : 0,
                          at(kernel.dims, dims->kernel_input_feature),
                          out_features / groups,
                          at(is, dims->input_batch),
                          at(is, dims->input_feature),
                          at(ks, dims->kernel_input_feature),
                          at(ks, dims->kernel_output_feature),
                          at(os, dims->output_batch),
                          at(os, dims->output_feature)};
  table += "    static const hc_conv_spec " + name + " = {";
  for (int64_t v : spec) table += Int(v) + ", ";
  table += name + "_dims};\n";
  e.Emit("  {\n" + table + "    if (!hc_conv<" + CType(inst.shape.type) + ", " + CType(input.type) +
         ", " + CType(kernel.type) + ">(" + e.Buffer(inst, 0) + ", " + e.Buffer(inst, 1) + ", " +
         out + ", " + name + ")) return 1;\n  }\n" + WrapSubBytes(out, inst.shape));
  return Status::Ok();
}

}  // namespace

CpuOpFamily CpuConvolutionOps() {
  return {interp::ConvolutionRules().takes, NotElementwise, Lower};
}

}  // namespace hlocache::compiler
