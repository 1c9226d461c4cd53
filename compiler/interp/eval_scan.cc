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
#include "compiler/semantics/rules/families.h"
#include "compiler/semantics/signature.h"

namespace hlocache::interp {
namespace {

using hlo::Instruction;
using hlo::Opcode;
using hlo::Shape;

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
  HLOCACHE_ASSIGN_OR_RETURN(ScanForm form, ReadScanForm(ctx, inst, shapes));
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
      args.emplace_back(ShapeWithoutDimension(in.shape(), form.dim));
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

OpFamily ScanOps() { return {ScanRules().takes, Eval}; }

}  // namespace hlocache::interp
