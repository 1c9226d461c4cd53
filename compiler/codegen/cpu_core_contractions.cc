// The contractions lowered: dot (its loops are the prelude's hc_dot, in the interpreter's order
// of sums) and reduce (the reduced dimensions folded in row-major order, as the interpreter does;
// f32 rows in vectorized lanes, as schema/numerics.tsv allows).
#include <algorithm>

#include "compiler/codegen/cpu_lowering.h"
#include "compiler/semantics/numerics.h"

namespace hlocache::compiler::lowering_internal {

// ---- Reductions and contractions ------------------------------------------------------------

// dot: the result's dimensions are the batch ones, lhs's free ones, then rhs's free ones.
// Floats accumulate in double over the contracting dimensions in row-major order and are
// rounded once, as the interpreter does; the blocked loops are the prelude's hc_dot.
Status Lowering::Dot(int32_t index, const Instruction& inst) {
  return EmitDot(index, inst, Leaves(inst.operands[0])[0], Leaves(inst.operands[1])[0]);
}

// reduce (variadic): for each result element, folds the reduced dimensions in row-major order
// from the inits, as the interpreter does, with the reduction computation (parameters: the n
// accumulators, then the n elements).
Status Lowering::Reduce(int32_t index, const Instruction& inst) {
  const size_t n = inst.operands.size() / 2;
  const Computation& f = m_.computations[static_cast<size_t>(inst.callees[0])];
  if (f.parameters.size() != 2 * n || f.root < 0) {
    return Malformed(inst, "the reduction computation does not take 2 scalars per operand");
  }
  for (size_t k = 0; k < 2 * n; ++k) {
    const Shape& p = Inst(f, f.parameters[k]).shape;
    if (!p.IsArray() || !p.dims.empty() || p.type != OperandShape(inst, k % n).type) {
      return Malformed(inst, "the reduction computation's parameter " + std::to_string(k) +
                                 " is not a scalar of its operand's type");
    }
  }
  const Shape& fr = Inst(f, f.root).shape;
  Shape want_root;
  for (size_t k = 0; k < n; ++k) {
    Shape s;
    s.type = OperandShape(inst, k).type;
    want_root.tuple_elements.push_back(s);
  }
  if (!SameValues(fr, n == 1 ? want_root.tuple_elements[0] : want_root)) {
    return Malformed(inst, "the reduction computation does not return one scalar per operand");
  }
  HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, IntList(inst, "dimensions"));
  const auto& id = OperandShape(inst, 0).dims;
  const auto is = hlo::RowMajorStrides(id);
  std::vector<bool> reduced(id.size(), false);
  for (int64_t x : d) reduced[static_cast<size_t>(x)] = true;
  std::vector<int64_t> kd, ks, rd, rs;
  for (size_t k = 0; k < id.size(); ++k) {
    (reduced[k] ? rd : kd).push_back(id[k]);
    (reduced[k] ? rs : ks).push_back(is[k]);
  }
  std::vector<const Shape*> leaves;
  AppendLeafShapes(inst.shape, leaves);
  std::vector<Leaf>& out = values_[static_cast<size_t>(index)];
  for (size_t k = 0; k < n; ++k) {
    const std::string name = Var(index) + "_" + std::to_string(k);
    Declare(name, *leaves[k]);
    out.push_back({name, leaves[k]});
  }
  // Results are computed a tile at a time: the reduced dimensions run in the outer loops, in
  // row-major order, and the tile's accumulators in the inner one. Each result still folds
  // its elements in the interpreter's order, but the tile's independent folds keep the CPU
  // busy (one fold is a chain of dependent adds), and vectorize when the results are
  // contiguous in the input. Results far apart in the input (a row reduction) take small
  // tiles: 64 rows a power of two apart share one set of the L1 cache and evict each other
  // (measured on f32[4096,4096] rows: 111 ms with tiles of 64, 19 ms with 8, 36 ms one row at
  // a time).
  const int64_t kept = Product(kd);
  // When the kept dimensions are laid out in order with nothing reduced between them, result
  // q starts at q * stride; otherwise each result's start is computed once, into base[].
  bool linear = true;
  for (size_t k = 0; k + 1 < kd.size(); ++k) linear = linear && ks[k] == ks[k + 1] * kd[k + 1];
  const int64_t stride = ks.empty() ? 0 : ks.back();
  const int64_t kTile = linear && stride == 1 ? 64 : 8;
  bool swapped = false;
  const char* helper = n == 1 ? OneOpCombiner(f, OperandShape(inst, 0).type, swapped) : nullptr;
  // Tiles are independent: with a one-op combiner (no call that can fail, so no early return)
  // and enough work, they are split across threads (prelude/hc_cpu_threads.h), each result
  // still folded in the interpreter's order on one thread.
  const int64_t tiles = (kept + kTile - 1) / kTile;
  const int64_t folded = Product(rd);
  if (ReducesRowsInLanes(inst, d, helper, folded)) {
    return ReduceRowsInLanes(index, inst, helper, kept, folded);
  }
  const bool split = helper != nullptr && tiles >= 2 && kept * folded >= kParallelElements;
  // The tiles' loop: over all of them, or over tiles [lo, hi) when split.
  std::string code = "  {\n";
  if (!linear) code += IntArray("kd", kd) + IntArray("ks", ks);
  if (split) {
    code += "    for (int64_t t0 = lo * " + Int(kTile) + "; t0 < hi * " + Int(kTile) +
            "; t0 += " + Int(kTile) + ") {\n";
  } else {
    code += "    for (int64_t t0 = 0; t0 < " + Int(kept) + "; t0 += " + Int(kTile) + ") {\n";
  }
  code += "      const int64_t tn = " + Int(kept) + " - t0 < " + Int(kTile) + " ? " + Int(kept) +
          " - t0 : " + Int(kTile) + ";\n";
  std::string start = "(t0 + j) * " + Int(stride);
  if (!linear) {
    code += "      int64_t base[" + Int(kTile) +
            "];\n      for (int64_t j = 0; j < tn; ++j) {\n        base[j] = 0;\n" +
            Digits("t0 + j", "kd", kd.size(), {{"base[j]", "ks"}}) + "      }\n";
    start = "base[j]";
  }
  for (size_t k = 0; k < n; ++k) {
    const std::string t = CType(OperandShape(inst, k).type);
    code += "      " + t + " acc" + std::to_string(k) + "[" + Int(kTile) + "];\n";
    code += "      for (int64_t j = 0; j < tn; ++j) acc" + std::to_string(k) +
            "[j] = " + Buffer(inst, n + k) + "[0];\n";
  }
  // One step of every result of the tile: element i of each operand (loaded, or its fused
  // expression) folded into the accumulators.
  std::string step = "{\n";
  for (size_t k = 0; k < n; ++k) {
    step += "const " + std::string(CType(OperandShape(inst, k).type)) + " x" + std::to_string(k) +
            " = " + Read(inst, k) + "; ";
  }
  if (helper != nullptr) {
    const std::string t = CType(OperandShape(inst, 0).type);
    step += "acc0[j] = " + std::string(helper) + "<" + t + ">(" +
            (swapped ? "x0, acc0[j]" : "acc0[j], x0") + ");";
  } else {
    std::string args;
    for (size_t k = 0; k < n; ++k)
      args += (k ? ", " : "") + std::string("&acc") + std::to_string(k) + "[j]";
    for (size_t k = 0; k < n; ++k) args += ", &x" + std::to_string(k);
    for (size_t k = 0; k < n; ++k) {
      step +=
          std::string(CType(OperandShape(inst, k).type)) + " next" + std::to_string(k) + "[1]; ";
      args += ", next" + std::to_string(k);
    }
    step += "if (" + FunctionName(inst.callees[0]) + "(" + args + ") != 0) return 1; ";
    for (size_t k = 0; k < n; ++k) {
      step += "acc" + std::to_string(k) + "[j] = next" + std::to_string(k) + "[0]; ";
    }
  }
  step += "}";
  code += NestedLoops(rd,
                      "{\n          const int64_t roff = " + Affine("0", rs) +
                          ";\n          for (int64_t j = 0; j < tn; ++j) {\n" +
                          "            const int64_t i = " + start + " + roff;\n" + "            " +
                          step + "\n          }\n        }",
                      6);
  for (size_t k = 0; k < n; ++k) {
    code += "      for (int64_t j = 0; j < tn; ++j) " + out[k].ptr + "[t0 + j] = acc" +
            std::to_string(k) + "[j];\n";
  }
  code += "    }\n  }\n";
  if (split) {
    SplitLoop(tiles, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, kTile * folded)),
              code);
  } else {
    Body() += code;
  }
  return Status::Ok();
}

// ---- Rows folded in lanes ------------------------------------------------------------------
//
// An f32 sum, maximum or minimum over the trailing dimensions (each result a contiguous row of
// the input) is folded in kLanes interleaved partial results, element k of the row into lane k
// mod kLanes, which the C++ compiler vectorizes (a row of 4096 is 128 steps of 32 lanes rather
// than a chain of 4096 dependent scalar adds); the lanes are then combined in order with the
// init, and the row's last elements after them. Another order than the interpreter's:
// schema/numerics.tsv states that f32 reduces reassociate, and when it stops saying so, rows fold
// in order again.
constexpr int64_t kLanes = 32;
// Row reductions are computed in their consumers' loops (PendingRows) from this many bytes of
// input: past what stays in cache, where a pass over memory is the cost (a row program over
// 64 MB: 17% faster on one thread). Below it the separate loops were as fast or faster (a
// softmax of 4 MB: 0.73 to 0.76 ms against 0.77 to 0.84 ms fused, exp being its cost).
constexpr int64_t kRowFusionMinBytes = int64_t{16} << 20;

bool Lowering::ReducesRowsInLanes(const Instruction& inst, std::span<const int64_t> dims,
                                  const char* helper, int64_t folded) const {
  if (helper == nullptr || inst.operands.size() != 2) return false;
  const std::string_view h(helper);
  if (h != "hc_add" && h != "hc_max" && h != "hc_min") return false;
  const Shape& in = OperandShape(inst, 0);
  if (in.type != PrimitiveType::kF32 || !interp::Reassociates(Opcode::kReduce, in.type)) {
    return false;
  }
  // The reduced dimensions are the trailing ones, in any order of listing.
  std::vector<int64_t> sorted(dims.begin(), dims.end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 0; k < sorted.size(); ++k) {
    if (sorted[k] != static_cast<int64_t>(in.dims.size() - sorted.size() + k)) return false;
  }
  return folded >= 2 * kLanes;
}

Status Lowering::ReduceRowsInLanes(int32_t index, const Instruction& inst, const char* helper,
                                   int64_t kept, int64_t folded) {
  const std::string op = std::string(helper) + "<float>";
  const std::string x = Read(inst, 0);  // Element i of the input, loaded or computed.
  const std::string lanes = Int(kLanes);
  const std::string out = values_[static_cast<size_t>(index)][0].ptr;
  const bool split = kept >= 2 && kept * folded >= kParallelElements;
  // The fold of row q (a variable of the loop around it) into out[q].
  auto row = [&](const std::string& q) {
    std::string code = "      const int64_t b = " + q + " * " + Int(folded) + ";\n";
    code += "      float lane[" + lanes + "];\n";
    code += "      #pragma omp simd\n      for (int64_t k = 0; k < " + lanes +
            "; ++k) {\n        const int64_t i = b + k;\n        lane[k] = " + x + ";\n      }\n";
    code += "      for (int64_t c = " + lanes + "; c + " + lanes + " <= " + Int(folded) +
            "; c += " + lanes + ") {\n        #pragma omp simd\n        for (int64_t k = 0; k < " +
            lanes + "; ++k) {\n          const int64_t i = b + c + k;\n          lane[k] = " + op +
            "(lane[k], " + x + ");\n        }\n      }\n";
    code += "      float acc = " + Buffer(inst, 1) + "[0];\n";
    code += "      for (int64_t k = 0; k < " + lanes + "; ++k) acc = " + op + "(acc, lane[k]);\n";
    code += "      for (int64_t i = b + " + Int(folded / kLanes * kLanes) + "; i < b + " +
            Int(folded) + "; ++i) acc = " + op + "(acc, " + x + ");\n";
    return code + "      " + out + "[" + q + "] = acc;\n";
  };
  std::string code = "  {\n";
  code += split ? "    for (int64_t q = lo; q < hi; ++q) {\n"
                : "    for (int64_t q = 0; q < " + Int(kept) + "; ++q) {\n";
  code += row("q") + "    }\n  }\n";
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / folded);
  if (defer_rows_ && kept * folded * 4 >= kRowFusionMinBytes && MayFuseRowsIntoConsumer(index)) {
    FlushPendingRows();
    // The row's result also in a local: a load of out[r] after its store in the same iteration
    // keeps GCC from vectorizing the consumer's loop.
    const std::string row_code =
        "    float hc_row;\n    {\n" + row("r") + "      hc_row = acc;\n    }\n";
    pending_rows_ = PendingRows{index, function_, out, kept, row_code, code, split, grain};
    return Status::Ok();
  }
  if (split) {
    SplitLoop(kept, grain, code);
  } else {
    Body() += code;
  }
  return Status::Ok();
}

bool Lowering::MayFuseRowsIntoConsumer(int32_t index) const {
  const auto slot = static_cast<size_t>(index);
  if (uses_[slot] != 1 || index == comp_->root || values_[slot].size() != 1) return false;
  const int32_t b = user_[slot].first;
  if (b < 0) return false;
  const Instruction& broadcast = Inst(*comp_, b);
  return IsIndexedBroadcast(broadcast) && Fusible(b);
}

std::optional<std::string> Lowering::ClaimPendingRows(int64_t rows, std::string& expr) {
  if (!pending_rows_ || pending_rows_->function != function_ || pending_rows_->rows != rows) {
    return std::nullopt;
  }
  // Every read of the buffer must be of row r; each becomes a read of the row's local.
  std::optional<std::string> rewritten =
      ReplaceSubscripted(expr, pending_rows_->buffer, "[r]", "hc_row");
  if (!rewritten) return std::nullopt;
  expr = std::move(*rewritten);
  std::string code = std::move(pending_rows_->row_code);
  pending_rows_.reset();
  return code;
}

void Lowering::FlushPendingRows() {
  if (!pending_rows_ || pending_rows_->function != function_) return;
  PendingRows p = std::move(*pending_rows_);
  pending_rows_.reset();
  // Before the code the current instruction has written so far.
  std::string later = std::move(Body());
  Body().clear();
  if (p.split) {
    SplitLoop(p.rows, p.grain, p.loop_code);
  } else {
    Body() += p.loop_code;
  }
  Body() += later;
}

}  // namespace hlocache::compiler::lowering_internal
