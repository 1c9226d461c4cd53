// gather and scatter (see compiler/interp/eval_gather_scatter.cc for their meaning, which this
// code reproduces bit for bit).
//
// Both first turn every position of the index array into an operand offset, in a buffer of
// their own: gather clamps each start, scatter marks a window that is not wholly inside the
// operand with -1. Then one loop nest walks the result (gather) or the updates (scatter) in
// row-major order, reading the position's offset once, as soon as the loops of the position
// dimensions are open. The innermost dimensions that are contiguous in the operand as well
// (an embedding row, a window of whole trailing dimensions) are copied with one memcpy per
// run. Scatter combines with its update computation's function, or with the prelude's helper
// when that computation is one add, multiply, maximum or minimum, or with a plain store when
// it returns the update.
#include <algorithm>
#include <string>

#include "compiler/codegen/cpu_families.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/hlo/gather_scatter_dims.h"
#include "compiler/semantics/rules/families.h"

namespace hlocache::compiler {
namespace {

// Gathers of this many result bytes or more are split across the executable's threads, in
// pieces of at least kGatherPieceBytes: below, waking a worker costs more than the copy.
constexpr int64_t kSplitGatherBytes = int64_t{1} << 20;
constexpr int64_t kGatherPieceBytes = int64_t{128} << 10;

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;
using hlo::SliceAddressing;

bool NotElementwise(Opcode) { return false; }

// Appends each line of `text` to `out`, indented by `pad`.
void AddLines(std::string& out, const std::string& pad, const std::string& text) {
  for (size_t at = 0; at <= text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    out += pad + text.substr(at, end - at) + "\n";
    at = end + 1;
  }
}

// Loops d0 .. d<levels-1> over `extents`, `body` innermost (each may span several lines).
// `open` goes right inside loop `hook` - 1 (before every loop when `hook` is 0), and `close`
// after the loops it encloses; what follows an `open` ending in '{' is indented one more step.
std::string Loops(std::span<const int64_t> extents, size_t levels, size_t hook,
                  const std::string& open, const std::string& close, const std::string& body) {
  std::string out, pad(4, ' ');
  for (size_t l = 0; l <= levels; ++l) {
    if (l == hook && !open.empty()) {
      AddLines(out, pad, open);
      if (open.back() == '{') pad += "  ";
    }
    if (l == levels) break;
    const std::string d = "d" + std::to_string(l);
    out +=
        pad + "for (int64_t " + d + " = 0; " + d + " < " + Int(extents[l]) + "; ++" + d + ") {\n";
    pad += "  ";
  }
  AddLines(out, pad, body);
  for (size_t l = levels + 1; l-- > 0;) {
    if (l == hook && !close.empty()) {
      if (open.back() == '{') pad.resize(pad.size() - 2);
      AddLines(out, pad, close);
    }
    if (l == 0) break;
    pad.resize(pad.size() - 2);
    out += pad + "}\n";
  }
  return out;
}

// An index element as the int64_t it denotes (u64 past int64's range saturates, which is past
// any extent).
std::string IndexValue(const std::string& element, PrimitiveType t) {
  if (t == PrimitiveType::kU64) {
    return "static_cast<int64_t>(std::min<uint64_t>(" + element + ", 9223372036854775807ULL))";
  }
  return "static_cast<int64_t>(" + element + ")";
}

std::vector<int64_t> PositionExtents(const SliceAddressing& a, const Shape& indices) {
  std::vector<int64_t> extents;
  for (int64_t d : a.index_position_dims) extents.push_back(indices.dims[static_cast<size_t>(d)]);
  return extents;
}

// Declares `starts`, one int64_t per position, and opens a block (which the caller closes)
// that fills it with each position's operand offset: clamped (gather) or -1 when the window
// leaves the operand (scatter).
void EmitStarts(CpuEmitter& e, const SliceAddressing& a, const Shape& operand, const Shape& indices,
                const std::string& index_buffer, const std::string& starts, bool clamp) {
  Shape positions;
  positions.type = PrimitiveType::kS64;
  positions.dims = {a.PositionCount(indices)};
  e.Declare(starts, positions);
  e.Emit("  {\n");
  const auto istrides = hlo::RowMajorStrides(indices.dims);
  const auto ostrides = hlo::RowMajorStrides(operand.dims);
  const std::vector<int64_t> extents = PositionExtents(a, indices);
  std::vector<int64_t> digit_strides;
  for (int64_t d : a.index_position_dims) digit_strides.push_back(istrides[static_cast<size_t>(d)]);
  const int64_t entry_stride =
      a.index_vector_dim < indices.rank() ? istrides[static_cast<size_t>(a.index_vector_dim)] : 0;
  std::string body = "const int64_t at = " + Affine("0", digit_strides) + ";\n";
  body += clamp ? "int64_t off = 0;\n" : "int64_t off = 0;\nbool inside = true;\n";
  for (size_t k = 0; k < a.start_operand_dims.size(); ++k) {
    const auto d = static_cast<size_t>(a.start_operand_dims[k]);
    const std::string value = IndexValue(
        index_buffer + "[at + " + Int(static_cast<int64_t>(k) * entry_stride) + "]", indices.type);
    const std::string hi = Int(operand.dims[d] - a.window_sizes[d]);
    if (clamp) {
      body += "off += std::min<int64_t>(std::max<int64_t>(" + value + ", 0), " + hi + ") * " +
              Int(ostrides[d]) + ";\n";
    } else {
      // Checked before it is scaled: a huge start must not overflow the offset.
      body += "{\n  const int64_t s = " + value + ";\n  if (s < 0 || s > " + hi +
              ") inside = false;\n  else off += s * " + Int(ostrides[d]) + ";\n}\n";
    }
  }
  for (size_t j = 0; j < a.batching_operand_dims.size(); ++j) {
    body += "off += d" + std::to_string(a.batching_digits[j]) + " * " +
            Int(ostrides[static_cast<size_t>(a.batching_operand_dims[j])]) + ";\n";
  }
  body += clamp ? starts + "[p++] = off;" : starts + "[p++] = inside ? off : -1;";
  e.Emit("    int64_t p = 0;\n" + Loops(extents, extents.size(), extents.size(), "", "", body));
}

// Where the loops over `dims` (of a result or updates) read the position's offset: right
// inside the loop of the last position dimension.
size_t Hook(const SliceAddressing& a) {
  return a.position_dims.empty() ? 0 : static_cast<size_t>(a.position_dims.back()) + 1;
}

// "const int64_t b = STARTS[linear position];"
std::string ReadStart(const SliceAddressing& a, const std::string& starts, size_t levels,
                      const Shape& indices) {
  const auto strides = hlo::RowMajorStrides(PositionExtents(a, indices));
  std::vector<int64_t> coef(levels, 0);
  for (size_t k = 0; k < a.position_dims.size(); ++k) {
    coef[static_cast<size_t>(a.position_dims[k])] = strides[k];
  }
  return "const int64_t b = " + starts + "[" + Affine("0", coef) + "];";
}

// The operand offset of the window element at the loop indices, from b.
std::string WindowOffset(const SliceAddressing& a, const Shape& operand, size_t levels) {
  const auto ostrides = hlo::RowMajorStrides(operand.dims);
  std::vector<int64_t> coef(levels, 0);
  for (size_t k = 0; k < a.window_dims.size(); ++k) {
    const auto d = static_cast<size_t>(a.window_dims[k]);
    if (d < levels) coef[d] = ostrides[static_cast<size_t>(a.window_operand_dims[k])];
  }
  return Affine("b", coef);
}

// How many innermost dimensions of `dims` (the result's or the updates') are window dimensions
// whose elements are also consecutive in the operand, and how many elements they span.
std::pair<size_t, int64_t> ContiguousRun(const SliceAddressing& a, const Shape& operand,
                                         std::span<const int64_t> dims) {
  const auto ostrides = hlo::RowMajorStrides(operand.dims);
  size_t run = 0;
  int64_t length = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    const auto w = std::find(a.window_dims.begin(), a.window_dims.end(), static_cast<int64_t>(d));
    if (w == a.window_dims.end()) break;
    const auto od =
        static_cast<size_t>(a.window_operand_dims[static_cast<size_t>(w - a.window_dims.begin())]);
    if (ostrides[od] != length) break;
    length *= dims[d];
    ++run;
  }
  return {run, length};
}

Status LowerGather(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const Shape& operand = e.OperandShape(inst, 0);
  const Shape& indices = e.OperandShape(inst, 1);
  auto a = hlo::GatherAddressing(e.module(), inst, operand, indices);
  if (!a) return e.Malformed(inst, a.error().message());
  const std::string out = e.Materialize(index, inst);
  if (ElementCount(inst.shape) == 0) return Status::Ok();
  const std::string starts = e.Fresh("starts");
  EmitStarts(e, *a, operand, indices, e.Buffer(inst, 1), starts, /*clamp=*/true);
  const auto& dims = inst.shape.dims;
  const auto [run, length] = ContiguousRun(*a, operand, dims);
  const size_t levels = dims.size() - run;
  const std::string source = e.Buffer(inst, 0) + " + " + WindowOffset(*a, operand, levels);
  const std::string body = run > 0 ? "std::memcpy(" + out + " + o, " + source + ", " +
                                         Int(length * hlo::BufferElementBytes(inst.shape.type)) +
                                         ");\no += " + Int(length) + ";"
                                   : out + "[o++] = *(" + source + ");";
  std::string loops =
      Loops(dims, levels, Hook(*a), ReadStart(*a, starts, levels, indices), "", body);
  const int64_t bytes = ElementCount(inst.shape) * hlo::BufferElementBytes(inst.shape.type);
  if (levels == 0 || dims[0] < 2 || bytes < kSplitGatherBytes) {
    e.Emit("    int64_t o = 0;\n" + loops);
    e.Emit("  }\n");
    return Status::Ok();
  }
  // Large results are copied on the executable's threads, pieces of the outermost dimension,
  // each starting at its first index's output offset: a gather moves memory, and one core reads
  // at a fraction of what two do.
  const std::string outer = "for (int64_t d0 = 0; d0 < " + Int(dims[0]) + "; ++d0) {\n";
  const size_t at = loops.find(outer);
  if (at == std::string::npos) return e.Malformed(inst, "internal: no outer gather loop");
  const int64_t per_index = ElementCount(inst.shape) / dims[0];
  loops.replace(
      at, outer.size(),
      "for (int64_t d0 = lo; d0 < hi; ++d0) {\n      int64_t o = d0 * " + Int(per_index) + ";\n");
  e.Emit("  }\n");
  e.SplitLoop(dims[0], std::max<int64_t>(1, kGatherPieceBytes / (bytes / dims[0])), loops);
  return Status::Ok();
}

// How the update computation combines one element.
struct Combiner {
  enum Kind { kCall, kHelper, kReplace } kind = kCall;
  const char* helper = nullptr;
  bool swapped = false;  // The helper takes the update first.
};

Combiner CombinerOf(const Computation& f, size_t n) {
  Combiner c;
  if (n != 1 || f.root < 0 || f.parameters.size() != 2) return c;
  const Instruction& root = f.instructions[static_cast<size_t>(f.root)];
  if (root.opcode.opcode == Opcode::kParameter && root.parameter_number == 1) {
    c.kind = Combiner::kReplace;
    return c;
  }
  c.helper = OneOpCombiner(f, root.shape.type, c.swapped);
  if (c.helper != nullptr) c.kind = Combiner::kHelper;
  return c;
}

Status LowerScatter(CpuEmitter& e, int32_t index, const Instruction& inst) {
  const size_t n = (inst.operands.size() - 1) / 2;
  const Shape& operand = e.OperandShape(inst, 0);
  const Shape& indices = e.OperandShape(inst, n);
  const Shape& updates = e.OperandShape(inst, n + 1);
  auto a = hlo::ScatterAddressing(e.module(), inst, operand, indices, updates);
  if (!a) return e.Malformed(inst, a.error().message());
  const std::vector<int32_t> callees = e.module().CalleesOf(inst, "to_apply");
  if (callees.size() != 1) return e.Malformed(inst, "does not name one update computation");
  const Computation& f = e.module().computations[static_cast<size_t>(callees[0])];
  const std::vector<Leaf> results = e.MaterializeLeaves(index, inst);
  for (size_t k = 0; k < n && ElementCount(operand) > 0; ++k) {
    e.Emit("  std::memcpy(" + results[k].ptr + ", " + e.Buffer(inst, k) + ", " +
           Int(ByteCount(e.OperandShape(inst, k))) + ");\n");
  }
  if (ElementCount(updates) == 0) return Status::Ok();
  const std::string starts = e.Fresh("starts");
  EmitStarts(e, *a, operand, indices, e.Buffer(inst, n), starts, /*clamp=*/false);
  const auto& dims = updates.dims;
  const Combiner c = CombinerOf(f, n);
  size_t run = 0;
  int64_t length = 1;
  if (c.kind == Combiner::kReplace) std::tie(run, length) = ContiguousRun(*a, operand, dims);
  const size_t levels = dims.size() - run;
  const auto ustrides = hlo::RowMajorStrides(dims);
  std::string body =
      "const int64_t at = " + WindowOffset(*a, operand, levels) + ";\nconst int64_t ua = " +
      Affine("0", std::vector<int64_t>(ustrides.begin(),
                                       ustrides.begin() + static_cast<ptrdiff_t>(levels))) +
      ";\n";
  const std::string r0 = results[0].ptr, u0 = e.Buffer(inst, n + 1);
  switch (c.kind) {
    case Combiner::kReplace:
      body += run > 0 ? "std::memcpy(" + r0 + " + at, " + u0 + " + ua, " +
                            Int(length * hlo::BufferElementBytes(updates.type)) + ");"
                      : r0 + "[at] = " + u0 + "[ua];";
      break;
    case Combiner::kHelper: {
      const std::string t = CType(updates.type);
      const std::string x = r0 + "[at]", y = u0 + "[ua]";
      body +=
          x + " = " + c.helper + "<" + t + ">(" + (c.swapped ? y + ", " + x : x + ", " + y) + ");";
      break;
    }
    case Combiner::kCall: {
      std::string args, copies;
      for (size_t k = 0; k < n; ++k) args += (k ? ", " : "") + results[k].ptr + " + at";
      for (size_t k = 0; k < n; ++k) args += ", " + e.Buffer(inst, n + 1 + k) + " + ua";
      for (size_t k = 0; k < n; ++k) {
        const std::string next = "next" + std::to_string(k);
        body += std::string(CType(e.OperandShape(inst, k).type)) + " " + next + "[1];\n";
        args += ", " + next;
        copies += "\n" + results[k].ptr + "[at] = " + next + "[0];";
      }
      body += "if (" + e.FunctionName(callees[0]) + "(" + args + ") != 0) return 1;" + copies;
      break;
    }
  }
  e.Emit(Loops(dims, levels, Hook(*a), ReadStart(*a, starts, levels, indices) + "\nif (b >= 0) {",
               "}", body));
  e.Emit("  }\n");
  return Status::Ok();
}

Status Lower(CpuEmitter& e, int32_t index, const Instruction& inst) {
  return inst.opcode.opcode == Opcode::kGather ? LowerGather(e, index, inst)
                                               : LowerScatter(e, index, inst);
}

}  // namespace

CpuOpFamily CpuGatherScatterOps() {
  return {interp::GatherScatterRules().takes, NotElementwise, Lower};
}

}  // namespace hlocache::compiler
