// scan(inputs..., inits...), dimensions={d}, num_carries=c, is_reverse=..., to_apply=f: a loop
// over the L positions of dimension d of the inputs (all of the same length there). The last c
// operands are the initial carries. At each position t (L-1 down to 0 when is_reverse=true),
// f(slices of the inputs at t (dimension d removed)..., carries...) returns (outputs...,
// carries...); each output is written at position t of dimension d of its result array, and the
// carries are handed to the next step. The result is (output arrays..., final carries...), or
// its one element when it is not a tuple. is_associative only allows a compiler to reorder the
// steps; the definition (and this interpreter) applies them in order. These are the semantics
// of XLA's ScanExpander, which rewrites a scan into exactly this loop.
#include <string>

#include "compiler/interp/eval_families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

bool Takes(Opcode op) { return op == Opcode::kScan; }

// An array shape without dimension `d`.
Shape WithoutDim(const Shape& s, int64_t d) {
  Shape out = ArrayShape(s.type, s.dims);
  out.dims.erase(out.dims.begin() + d);
  return out;
}

// What a scan's attributes and shapes say, once checked.
struct ScanForm {
  int64_t dim = 0;
  int64_t length = 0;  // L: the inputs' (and outputs') size along `dim`.
  size_t inputs = 0;
  size_t carries = 0;
  size_t outputs = 0;
  bool reverse = false;
  bool tuple_result = false;
  std::vector<Shape> output_arrays;  // The result's output arrays, in order.
};

Result<ScanForm> Form(const ShapeContext& ctx, const Instruction& inst,
                      std::span<const Shape* const> operands) {
  ScanForm form;
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.Ints(inst, "dimensions"));
  if (dims.size() != 1) return Error(ctx.Malformed(inst, "dimensions={...} names one dimension"));
  form.dim = dims[0];
  HLOCACHE_ASSIGN_OR_RETURN(int64_t carries, ctx.IntOr(inst, "num_carries", 0));
  if (carries < 0 || static_cast<size_t>(carries) >= operands.size()) {
    return Error(ctx.Malformed(inst, "num_carries=" + std::to_string(carries) +
                                         " leaves no input among " +
                                         std::to_string(operands.size()) + " operands"));
  }
  form.carries = static_cast<size_t>(carries);
  form.inputs = operands.size() - form.carries;
  const std::string reverse = ctx.AttributeText(inst, "is_reverse");
  if (!reverse.empty() && reverse != "true" && reverse != "false") {
    return Error(ctx.Malformed(inst, "is_reverse is neither true nor false"));
  }
  form.reverse = reverse == "true";
  for (size_t k = 0; k < operands.size(); ++k) {
    if (!operands[k]->IsArray()) {
      return Error(ctx.Unsupported(inst, "scan operands that are tuples"));
    }
  }
  for (size_t k = 0; k < form.inputs; ++k) {
    const Shape& in = *operands[k];
    if (form.dim < 0 || form.dim >= in.rank()) {
      return Error(ctx.Malformed(inst, "input " + std::to_string(k) + " " +
                                           hlo::CanonicalShapeText(in) + " has no dimension " +
                                           std::to_string(form.dim)));
    }
    const int64_t length = in.dims[static_cast<size_t>(form.dim)];
    if (k == 0) form.length = length;
    if (length != form.length) {
      return Error(ctx.Malformed(inst, "the inputs differ in length along the scanned dimension"));
    }
  }
  form.tuple_result = inst.shape.IsTuple();
  const size_t results = form.tuple_result ? inst.shape.tuple_elements.size() : 1;
  if (results < form.carries) {
    return Error(ctx.Malformed(inst, "the result has fewer elements than num_carries"));
  }
  form.outputs = results - form.carries;
  for (size_t k = 0; k < results; ++k) {
    const Shape& r = form.tuple_result ? inst.shape.tuple_elements[k] : inst.shape;
    if (k >= form.outputs) {
      const Shape& init = *operands[form.inputs + (k - form.outputs)];
      if (!hlo::SameValues(r, init)) {
        return Error(
            ctx.Malformed(inst, "result " + std::to_string(k) + " " + hlo::CanonicalShapeText(r) +
                                    " is not its carry's shape " + hlo::CanonicalShapeText(init)));
      }
      continue;
    }
    if (!r.IsArray() || form.dim >= r.rank() ||
        r.dims[static_cast<size_t>(form.dim)] != form.length) {
      return Error(ctx.Malformed(inst, "output " + std::to_string(k) + " " +
                                           hlo::CanonicalShapeText(r) + " is not " +
                                           std::to_string(form.length) + " long in dimension " +
                                           std::to_string(form.dim)));
    }
    form.output_arrays.push_back(r);
  }
  return form;
}

Status Check(const ShapeContext& ctx, const Instruction& inst,
             std::span<const Shape* const> operands) {
  HLOCACHE_ASSIGN_OR_RETURN(ScanForm form, Form(ctx, inst, operands));
  std::vector<Shape> params, results;
  for (size_t k = 0; k < form.inputs; ++k) params.push_back(WithoutDim(*operands[k], form.dim));
  for (size_t k = 0; k < form.carries; ++k) params.push_back(*operands[form.inputs + k]);
  for (const Shape& out : form.output_arrays) results.push_back(WithoutDim(out, form.dim));
  for (size_t k = 0; k < form.carries; ++k) results.push_back(*operands[form.inputs + k]);
  Shape result;
  if (form.tuple_result) {
    result.tuple_elements = results;
  } else {
    result = results[0];
  }
  std::vector<const Shape*> param_ptrs;
  for (const Shape& s : params) param_ptrs.push_back(&s);
  HLOCACHE_ASSIGN_OR_RETURN(int32_t f, ctx.Callee(inst, "to_apply"));
  return CheckSignature(ctx, inst, f, param_ptrs, result, "the scanned computation");
}

// The row-major extents around dimension d: (product before d, product after d).
std::pair<size_t, size_t> OuterInner(const Shape& s, int64_t d) {
  size_t outer = 1, inner = 1;
  for (int64_t k = 0; k < s.rank(); ++k) {
    const auto n = static_cast<size_t>(s.dims[static_cast<size_t>(k)]);
    if (k < d) outer *= n;
    if (k > d) inner *= n;
  }
  return {outer, inner};
}

void CopyElement(const Literal& from, size_t i, Literal& to, size_t j) {
  if (from.is_float()) {
    to.SetFloat(j, from.GetFloat(i));
  } else {
    to.SetInt(j, from.GetInt(i));
  }
}

// Copies position t of dimension d of `whole` into `part` (to_part), or `part` into it.
void MoveSlice(Literal& whole, Literal& part, int64_t d, size_t length, size_t t, bool to_part) {
  const auto [outer, inner] = OuterInner(whole.shape(), d);
  for (size_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < inner; ++i) {
      const size_t w = (o * length + t) * inner + i, p = o * inner + i;
      if (to_part) {
        CopyElement(whole, w, part, p);
      } else {
        CopyElement(part, p, whole, w);
      }
    }
  }
}

Result<Literal> Eval(EvalContext& ctx, const Instruction& inst,
                     std::span<const Literal* const> operands) {
  std::vector<const Shape*> shapes;
  for (const Literal* l : operands) shapes.push_back(&l->shape());
  HLOCACHE_ASSIGN_OR_RETURN(ScanForm form, Form(ctx, inst, shapes));
  HLOCACHE_ASSIGN_OR_RETURN(int32_t f, ctx.Callee(inst, "to_apply"));
  const auto length = static_cast<size_t>(form.length);
  std::vector<Literal> inputs, outputs, carries;
  for (size_t k = 0; k < form.inputs; ++k) inputs.push_back(*operands[k]);
  for (const Shape& s : form.output_arrays) {
    HLOCACHE_ASSIGN_OR_RETURN(Literal zeros, Literal::MakeZeros(s));
    outputs.push_back(std::move(zeros));
  }
  for (size_t k = 0; k < form.carries; ++k) carries.push_back(*operands[form.inputs + k]);
  for (size_t step = 0; step < length; ++step) {
    const size_t t = form.reverse ? length - 1 - step : step;
    std::vector<Literal> args;
    for (Literal& in : inputs) {
      args.emplace_back(WithoutDim(in.shape(), form.dim));
      MoveSlice(in, args.back(), form.dim, length, t, /*to_part=*/true);
    }
    for (const Literal& c : carries) args.push_back(c);
    HLOCACHE_ASSIGN_OR_RETURN(Literal r, ctx.Call(f, args));
    std::vector<Literal> parts;
    if (form.tuple_result) {
      parts = std::move(r.elements());
    } else {
      parts.push_back(std::move(r));
    }
    for (size_t k = 0; k < form.outputs; ++k) {
      MoveSlice(outputs[k], parts[k], form.dim, length, t, /*to_part=*/false);
    }
    for (size_t k = 0; k < form.carries; ++k) carries[k] = std::move(parts[form.outputs + k]);
  }
  std::vector<Literal> results = std::move(outputs);
  for (Literal& c : carries) results.push_back(std::move(c));
  if (!form.tuple_result) return std::move(results[0]);
  Literal out(inst.shape);
  for (size_t k = 0; k < results.size(); ++k) out.elements()[k] = std::move(results[k]);
  return out;
}

}  // namespace

OpFamily ScanOps() { return {Takes, Check, Eval}; }

}  // namespace hlocache::interp
