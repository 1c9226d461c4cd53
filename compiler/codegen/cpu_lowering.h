// The CPU code generator's lowering of one module: the driver that walks each computation,
// fuses elementwise chains and materializes values, and the core ops. Internal to
// compiler/codegen: the driver is in cpu_lowering.cc, the core ops in cpu_core_*.cc
// (elementwise, data movement, dot, reduce), the other op families in cpu_*.cc behind
// cpu_extended_ops.h; cpu_codegen.h is the interface.
//
// Thread safety: a Lowering lowers one module, on one thread.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <span>

#include "compiler/codegen/cpu_codegen.h"
#include "compiler/codegen/cpu_emitter.h"
#include "compiler/codegen/cpu_extended_ops.h"
#include "compiler/codegen/cpu_prelude.h"
#include "compiler/codegen/cpu_source.h"
#include "compiler/codegen/cpu_units.h"
#include "compiler/codegen/fusion.h"
#include "compiler/semantics/constant.h"
#include "compiler/semantics/core_ops.h"
#include "compiler/semantics/dynamic_dims.h"
#include "compiler/semantics/dynamic_shapes.h"
#include "compiler/semantics/half.h"
#include "compiler/semantics/linalg.h"
#include "compiler/semantics/prng.h"
#include "compiler/semantics/shape_rules.h"

namespace hlocache::compiler::lowering_internal {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// Intermediate values up to this size live on the stack; bigger ones on the heap.
inline constexpr int64_t kStackBufferBytes = 512;
// Constants of up to this many elements are defined in every translation unit (the compiler
// folds them into the code that reads them); larger ones once.
inline constexpr size_t kSmallConstantElements = 64;
// A chain of fused elementwise ops longer than this is cut by a buffer, so that no expression
// grows deep enough to slow the C++ compiler down.
inline constexpr int kMaxFusionDepth = 24;
// Elementwise loops of at least this many elements are split across threads
// (prelude/hc_cpu_threads.h), in pieces of at least kParallelGrain: below that a loop takes less
// time than waking the workers.
inline constexpr int64_t kParallelElements = int64_t{1} << 17;
inline constexpr int64_t kParallelGrain = int64_t{1} << 15;

using hlo::AppendLeafShapes;
using hlo::SameValues;

class Lowering : public CpuEmitter {
 public:
  Lowering(const hlo::Module& m, const CpuLoweringOptions& options) : m_(m), options_(options) {}

  // ---- CpuEmitter ------------------------------------------------------------------------------

  const hlo::Module& module() const override { return m_; }
  const Computation& computation() const override { return *comp_; }
  const std::vector<Leaf>& Leaves(int32_t i) const override;
  void Emit(std::string_view code) override { Body() += code; }
  const std::vector<Leaf>& MaterializeLeaves(int32_t index, const Instruction& inst) override;
  void Bind(int32_t index, std::vector<Leaf> leaves) override;
  std::string FunctionName(int32_t c) const override { return "hc_comp" + std::to_string(c); }
  std::string Fresh(std::string_view prefix) override;

  // The module's translation units (cpu_units.h): each starts with the prelude and every
  // declaration; the functions and large constants are spread over them.
  Result<std::vector<std::string>> Run();

 private:
  // The entry point: leaves of the parameters in, leaves of the result out.
  std::string EntryPoint() const;

  // Whether an instruction of the module transfers with the host.
  bool HasHostTransfers() const;
  bool CallsBlas() const;

  static const Instruction& Inst(const Computation& c, int32_t i) {
    return c.instructions[static_cast<size_t>(i)];
  }
  static std::string Var(int32_t i) { return "v" + std::to_string(i); }

  Status Unsupported(const Instruction& inst, const std::string& what) const override;
  Status Malformed(const Instruction& inst, const std::string& what) const override;

  // Marks the computations the entry reaches (2 = reached and finished); a cycle is refused.
  Status Reach(int32_t c, std::vector<int>& state);

  Status CheckLeaf(const Instruction& inst, const Shape& s) const;
  Status CheckShape(const Instruction& inst, const Shape& s) const;

  // ---- One computation as one static function -------------------------------------------

  Status LowerComputation(int32_t c);

  // ---- Loop-invariant values of loop bodies and conditions (cpu_hoisting.cc) ----------------
  //
  // A while's body and condition run once per step. Their values that depend on no parameter
  // (and on nothing with effects or randomness) are the same at every step and in every run:
  // they are computed once, by a function of their own, into static buffers of the executable,
  // and the step reads them there (XLA's while-loop invariant code motion, without rewriting
  // the module). Invariant values a step reads are "hoisted"; what only they need is computed
  // with them.

  // Which computations are a while's body or condition, from the reached ones.
  void MarkLoopComputations(const std::vector<int>& reached);
  // Whether computation `c` (and what it calls) has no effects, randomness or collectives.
  bool PureComputation(int32_t c);
  // For the computation being lowered: `invariant` per instruction, and the hoisted ones (in
  // order). Empty when nothing is worth hoisting.
  std::vector<int32_t> PlanHoisting(int32_t c, std::vector<bool>& invariant);
  // Writes the function computing the hoisted values into its results, then, as the first
  // code of `step` (the computation's own function), computes them once into static buffers
  // and points at them. Binds the hoisted instructions' values to those pointers.
  Status LowerInvariants(int32_t c, const std::vector<int32_t>& hoisted,
                         const std::vector<bool>& invariant, SegmentedFunction& step);

  bool TouchesDynamicShapes(const Instruction& inst) const;

  // The ops of dynamic shapes are those of interp/dynamic_shapes.h.
  Status CheckDynamicShapes(const Instruction& inst) const;

  // The code of the function being written.
  std::string& Body() { return function_->body(); }

  // The loop becomes a function of the module, one per distinct text, its pointers as
  // unaliased as in the function that calls it.
  void SplitLoop(int64_t count, int64_t grain, const std::string& loop) override;
  // Which of computation c's buffers are its results (result_buffers_), for its `function`.
  void PlanResultBuffers(int32_t c, SegmentedFunction& function);

  static int64_t Count(const Shape& s) { return ElementCount(s); }
  static int64_t Bytes(const Shape& s) { return ByteCount(s); }

  // Declares a fresh buffer for an array of shape `s` named `name`, owned by the function.
  void Declare(const std::string& name, const Shape& s) override;

  void DeclarePointer(const std::string& name, const Shape& s,
                      std::vector<std::string> may_point_to) override {
    function_->DeclarePointer({name, CType(s.type), std::move(may_point_to)});
  }

  // ---- Fusion of elementwise chains ---------------------------------------------------------
  //
  // An elementwise op computes element i from element i of its operands. When such an op has
  // exactly one use, and that use reads it at the same index i, its value is never stored: its
  // expression is substituted into its user's loop. Chains of them become one loop.

  static bool IsElementwise(const Instruction& inst);

  // Whether `user` reads its operand `k` at the index of the element it computes.
  bool ReadsAtIndex(const Instruction& user, size_t k) const;

  // A broadcast of a scalar is one load per element: as cheap to fuse as any elementwise op.
  bool IsScalarBroadcast(const Instruction& inst) const;
  // A broadcast of static shapes: fused into its one elementwise user as a load at an index
  // computed from the user's (one division and remainder per mapped run of dimensions),
  // instead of a pass writing the whole result and another reading it back.
  bool IsIndexedBroadcast(const Instruction& inst) const;
  // broadcast: the operand's element read at the result's element i, as an index expression.
  Result<std::string> BroadcastIndex(const Instruction& inst) const;

  bool Fusible(int32_t i) const;

  // Element i of operand k: the fused expression, or a load from its buffer.
  std::string Read(const Instruction& inst, size_t k) const override;
  // Operand k at element i, or its one element when it is a scalar next to a bigger result.
  std::string ReadOrScalar(const Instruction& inst, size_t k) const;

  // Defines instruction `index` elementwise by `expr` (in terms of i): fused into its user, or
  // one loop writing its buffer.
  void Elementwise(int32_t index, const Instruction& inst, const std::string& unwrapped) override;
  // Elementwise's loops: the `#pragma omp simd` line for a loop computing `expr` (or none),
  // and `expr` rewritten for a loop over rows where it reads broadcasts (cpu_lowering.cc).
  static std::string Simd(const std::string& expr);
  std::optional<std::string> ByRows(const Instruction& inst, const std::string& expr) const;

  std::vector<const Shape*> OperandShapes(const Instruction& inst) const;

  // Code storing the sizes of a dynamic result in `out`: each dimension's from the operand
  // dimension `sources` names (interp::SizeSources), or its bound.
  void ResultSizes(const Instruction& inst, const std::vector<interp::SizeSource>& sources,
                   const std::string& out) {
    const Shape& r = inst.shape;
    std::string code = "  {\n    int64_t dims[] = {";
    for (size_t i = 0; i < r.dims.size(); ++i) code += (i ? ", " : "") + Int(r.dims[i]);
    code += "};\n";
    std::vector<bool> read(inst.operands.size(), false);
    for (size_t i = 0; i < r.dims.size(); ++i) {
      const interp::SizeSource& from = sources[i];
      if (from.operand < 0) continue;
      const auto k = static_cast<size_t>(from.operand);
      const std::string var = "in" + std::to_string(k);
      if (!read[k]) code += DeclareDims(var, Buffer(inst, k), OperandShape(inst, k));
      read[k] = true;
      code +=
          "    dims[" + std::to_string(i) + "] = " + var + "[" + std::to_string(from.dim) + "];\n";
    }
    Body() += code + SetDims(out, r, "dims") + "  }\n";
  }

  // ---- Instructions --------------------------------------------------------------------------

  Status Lower(int32_t index);

  // An op of one of the families of cpu_extended_ops.h, once its shapes are known to follow
  // the interpreter's rules.
  Status LowerExtended(int32_t index, const Instruction& inst);

  Status Tuple(int32_t index, const Instruction& inst);

  Status GetTupleElement(int32_t index, const Instruction& inst);

  Status Call(int32_t index, const Instruction& inst);

  // A constant is an array at namespace scope, so that every segment of its computation (see
  // cpu_units.h) can read it: a small one is defined in every unit, a large one in one.
  Status Constant(int32_t index, const Instruction& inst);

  Status Compare(int32_t index, const Instruction& inst);

  Status ElementwiseMath(int32_t index, const Instruction& inst);

  // ---- Data movement -----------------------------------------------------------------------

  Result<std::vector<int64_t>> IntList(const Instruction& inst, const char* name) const;

  // Start indices of a dynamic slice or update, clamped so the window stays inside the operand:
  // declares s0, s1, ... and returns the offset expression of the window's first element.
  std::string DynamicStarts(const Instruction& inst, size_t first,
                            std::span<const int64_t> window) {
    const auto& in = OperandShape(inst, 0).dims;
    const auto strides = hlo::RowMajorStrides(in);
    std::string offset = "0";
    for (size_t d = 0; d < in.size(); ++d) {
      const std::string s = "s" + std::to_string(d);
      Body() += "    const int64_t " + s +
                " = std::min<int64_t>(std::max<int64_t>(static_cast<int64_t>(" +
                Buffer(inst, first + d) + "[0]), 0), " +
                Int(std::max<int64_t>(0, in[d] - window[d])) + ");\n";
      offset += " + " + s + " * " + Int(strides[d]);
    }
    return offset;
  }

  // broadcast, transpose, slice, reverse, dynamic-slice: element d of the result reads the
  // operand at base + sum(d_k * coefficient_k).
  Status AffineCopy(int32_t index, const Instruction& inst);

  // hc_relayout's index arrays.
  static constexpr size_t kMaxRelayoutRank = 64;

  // A reshape from or to a dynamic shape: the operand's elements at their sizes, in row-major
  // order, relaid in the result's sizes (dynamic_dims.h's rule), zeros past the operand's end.
  Status DynamicReshape(int32_t index, const Instruction& inst);

  Status Pad(int32_t index, const Instruction& inst);

  Status Concatenate(int32_t index, const Instruction& inst);

  Status DynamicUpdateSlice(int32_t index, const Instruction& inst);

  // ---- Reductions and contractions ------------------------------------------------------------

  // dot: the result's dimensions are the batch ones, lhs's free ones, then rhs's free ones.
  // Floats accumulate in double over the contracting dimensions in row-major order and are
  // rounded once, as the interpreter does; the blocked loops are the prelude's hc_dot.
  Status Dot(int32_t index, const Instruction& inst);

  Status EmitDot(int32_t index, const Instruction& inst, const Leaf& lhs_leaf,
                 const Leaf& rhs_leaf) override {
    const Shape& lhs = *lhs_leaf.shape;
    const Shape& rhs = *rhs_leaf.shape;
    auto list = [&](const char* name) -> std::vector<int64_t> {
      const hlo::Attribute* a = inst.FindAttribute(name);
      if (a == nullptr) return {};
      auto v = m_.IntList(*a);
      return v ? *v : std::vector<int64_t>();
    };
    if (inst.shape.type == PrimitiveType::kPred) return Unsupported(inst, "dot of pred");
    const auto lb = list("lhs_batch_dims"), rb = list("rhs_batch_dims");
    const auto lc = list("lhs_contracting_dims"), rc = list("rhs_contracting_dims");
    const auto& ld = lhs.dims;
    const auto& rd = rhs.dims;
    std::vector<int64_t> lall = lb, rall = rb;
    lall.insert(lall.end(), lc.begin(), lc.end());
    rall.insert(rall.end(), rc.begin(), rc.end());
    const auto ls = hlo::RowMajorStrides(ld), rs = hlo::RowMajorStrides(rd);
    // Each group of dimensions (batch, free, contracting) as sizes and strides; the prelude's
    // hc_offsets turns each into the offsets of its indices, and hc_dot does the rest.
    struct Group {
      std::vector<int64_t> sizes, strides;
      int64_t count = 1;
      void Add(int64_t size, int64_t stride) {
        sizes.push_back(size);
        strides.push_back(stride);
        count *= size;
      }
    };
    Group l_batch, r_batch, l_free, r_free, l_con, r_con;
    for (size_t k = 0; k < lb.size(); ++k) {
      const auto l = static_cast<size_t>(lb[k]), r = static_cast<size_t>(rb[k]);
      l_batch.Add(ld[l], ls[l]);
      r_batch.Add(rd[r], rs[r]);
    }
    for (size_t k = 0; k < lc.size(); ++k) {
      const auto l = static_cast<size_t>(lc[k]), r = static_cast<size_t>(rc[k]);
      l_con.Add(ld[l], ls[l]);
      r_con.Add(rd[r], rs[r]);
    }
    for (size_t d = 0; d < ld.size(); ++d) {
      if (std::find(lall.begin(), lall.end(), static_cast<int64_t>(d)) == lall.end()) {
        l_free.Add(ld[d], ls[d]);
      }
    }
    for (size_t d = 0; d < rd.size(); ++d) {
      if (std::find(rall.begin(), rall.end(), static_cast<int64_t>(d)) == rall.end()) {
        r_free.Add(rd[d], rs[d]);
      }
    }
    const std::string out = Materialize(index, inst);
    Body() += "  {\n";
    auto offsets = [&](const char* name, const Group& g) {
      Body() += IntArray(std::string(name) + "_sizes", g.sizes);
      Body() += IntArray(std::string(name) + "_strides", g.strides);
      Body() += "    const auto " + std::string(name) + " = hc_offsets(" +
                std::to_string(g.sizes.size()) + ", " + name + "_sizes, " + name + "_strides);\n";
      Body() += "    if (!" + std::string(name) + ") return 1;  // Out of memory.\n";
    };
    offsets("lb", l_batch);
    offsets("lf", l_free);
    offsets("lc", l_con);
    offsets("rb", r_batch);
    offsets("rf", r_free);
    offsets("rc", r_con);
    Body() += "    if (!hc_dot(" + lhs_leaf.ptr + ", " + rhs_leaf.ptr + ", " + out + ", " +
              Int(l_batch.count) + ", " + Int(l_free.count) + ", " + Int(r_free.count) + ", " +
              Int(l_con.count) +
              ", lb.get(), lf.get(), lc.get(), rb.get(), rf.get(), rc.get())) {\n"
              "      return 1;  // Out of memory.\n    }\n  }\n";
    Body() += WrapSubBytes(out, inst.shape);
    return Status::Ok();
  }

  // reduce (variadic): for each result element, folds the reduced dimensions in row-major order
  // from the inits, as the interpreter does, with the reduction computation (parameters: the n
  // accumulators, then the n elements).
  Status Reduce(int32_t index, const Instruction& inst);
  // An f32 sum, maximum or minimum of contiguous rows, folded in vectorized lanes
  // (cpu_core_contractions.cc).
  bool ReducesRowsInLanes(const Instruction& inst, std::span<const int64_t> dims,
                          const char* helper, int64_t folded) const;
  Status ReduceRowsInLanes(int32_t index, const Instruction& inst, const char* helper, int64_t kept,
                           int64_t folded);

  // A row reduction (ReduceRowsInLanes) whose result only a broadcast reads may be computed by
  // its consumer instead: the elementwise loop that reads the broadcast row by row (ByRows)
  // computes row r's result first, while the row it reads again is in cache (a softmax's max
  // and sum then take no pass of their own). Until then its code waits here; the first
  // instruction after it that writes code of its own other than its consumer's row loop gets
  // that code first (FlushPendingRows), so it still runs before anything that follows it.
  struct PendingRows {
    int32_t index = -1;
    SegmentedFunction* function = nullptr;
    std::string buffer;  // Its result's buffer, read by the consumer as buffer[r].
    int64_t rows = 0;
    std::string row_code;   // Computes buffer[r] and hc_row for row r of the consumer's loop.
    std::string loop_code;  // Its own loop, as it would have been emitted,
    bool split = false;     // split across threads (SplitLoop) or not,
    int64_t grain = 0;      // in rows of this many.
  };
  std::optional<PendingRows> pending_rows_;
  bool defer_rows_ = false;  // Set while lowering a computation's own instructions in order.
  // Whether instruction `index` (a row reduction) is read only by a broadcast that one
  // elementwise op reads: the shape that may fuse it into its consumer.
  bool MayFuseRowsIntoConsumer(int32_t index) const;
  // Row code of the pending reduction for a loop over `rows` rows computing `expr`, whose reads
  // of the reduction's row it rewrites to the row code's local (hc_row); nullopt, and `expr`
  // unchanged, when it does not fit (another count of rows, or a read at another index than r).
  std::optional<std::string> ClaimPendingRows(int64_t rows, std::string& expr);
  // Emits the pending reduction's own loop at the start of the current instruction's code (or
  // alone, at the end of the computation).
  void FlushPendingRows();

  const hlo::Module& m_;
  const Computation* comp_ = nullptr;
  std::vector<std::vector<Leaf>> values_;          // Leaves of each materialized instruction.
  std::vector<std::optional<std::string>> fused_;  // Element-i expression of fused ones.
  std::vector<int> depth_;                         // Fused chain length ending here.
  std::vector<int> uses_;
  std::vector<bool> live_;  // Whether the root depends on the instruction (or it has effects).
  std::vector<std::pair<int32_t, size_t>> user_;  // The (last) user and its operand slot.
  int fresh_ = 0;                                 // For Fresh().
  const CpuLoweringOptions& options_;
  SegmentedFunction* function_ = nullptr;  // The function being written.
  std::vector<CodePiece> pieces_;          // The module's functions and large constants.
  std::string small_constants_;            // Defined in every unit.
  std::map<std::string, std::string> constant_types_;  // Constant name -> "const T*".
  std::map<std::string, std::string> split_loops_;     // SplitLoop's functions: text -> name.
  // The entry's buffers that are its results (PlanResultBuffers): buffer name -> "r<k>".
  std::map<std::string, std::string> result_buffers_;
  const SegmentedFunction* entry_function_ = nullptr;  // The entry's own function.
  std::vector<bool> loop_computation_;  // A while's body or condition (MarkLoopComputations).
  std::vector<int> pure_;               // PureComputation's answers: 0 unknown, 1 yes, 2 no.
};

}  // namespace hlocache::compiler::lowering_internal
