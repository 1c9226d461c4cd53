// The CUDA code generator's lowering of one module into kernels and a launch plan: the driver
// that walks each computation, inlines calls and fuses elementwise chains, and the core ops.
// Internal to compiler/cuda: the driver is in cuda_lowering.cc, the core ops in cuda_core_*.cc
// (elementwise, data movement, contractions); cuda_codegen.h is the interface.
//
// Thread safety: a CudaLowering lowers one module, on one thread.
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <span>

#include "compiler/codegen/cpu_source.h"
#include "compiler/codegen/fusion.h"
#include "compiler/cuda/cuda_codegen.h"
#include "compiler/cuda/cuda_prelude.h"
#include "compiler/semantics/constant.h"
#include "compiler/semantics/core_ops.h"
#include "compiler/semantics/literal.h"
#include "compiler/semantics/shape_context.h"
#include "compiler/semantics/shape_rules.h"

namespace hlocache::compiler::cuda_lowering_internal {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// Threads per block of the one-element-per-thread kernels, and the most blocks one launch
// asks for (the threads loop over the rest).
inline constexpr int64_t kBlock = 256;
inline constexpr int64_t kMaxBlocks = int64_t{1} << 15;
// The edge of a dot's tile of results, and of its shared-memory tiles of operands.
inline constexpr int64_t kTile = 16;
// A fused elementwise chain longer than this is cut by a buffer (NVRTC's compile time grows
// with expression depth).
inline constexpr int kMaxFusionDepth = 24;
// Calls and fusions nested deeper than this are refused (each level is inlined).
inline constexpr int kMaxInlineDepth = 64;

// Element i of a value computed where it is read: CUDA source in terms of `i`, and the buffers
// it reads (kernel arguments).
struct Expr {
  std::string code;
  std::set<int64_t> buffers;
  int depth = 0;
};

// One array leaf of a value: in a device buffer, in a constant of the module, or fused.
struct Val {
  const Shape* shape = nullptr;
  int64_t buffer = -1;
  std::string constant;  // The constant's device array, already cast to its element type.
  std::optional<Expr> fused;
};
using Value = std::vector<Val>;

// The values of one inlined computation.
struct Frame {
  const Computation* comp = nullptr;
  std::vector<Value> values;
  std::vector<int> uses;
  std::vector<std::pair<int32_t, size_t>> user;  // The (last) user and its operand slot.
  std::vector<bool> live;
};

inline std::string Num(int64_t v) { return std::to_string(v) + "LL"; }

// The C type of an element in device code: the device prelude's types are pred, the integers of
// 8 to 64 bits, f16, bf16, f32 and f64 (8-bit floats and sub-byte integers not yet); nullptr for
// the rest.
inline const char* DeviceType(PrimitiveType t) {
  if (hlo::IsFloat(t) && hlo::PrimitiveTypeBits(t) < 16) return nullptr;
  if (IsSubByteInteger(t)) return nullptr;
  return CType(t);
}

class CudaLowering {
 public:
  CudaLowering(const hlo::Module& m, std::string arch) : m_(m) { plan_.arch = std::move(arch); }

  Result<CudaProgram> Run();

 private:
  // ---- Errors and checks -------------------------------------------------------------------

  Status Unsupported(const Instruction& inst, const std::string& what) const;
  Status Malformed(const Instruction& inst, const std::string& why) const;
  Status CheckShape(const Instruction& inst, const Shape& s) const;

  // ---- Buffers and kernels -----------------------------------------------------------------

  int64_t NewBuffer(const Shape& s);
  static std::string B(int64_t buffer) { return "b" + std::to_string(buffer); }

  // A kernel of `threads` threads' worth of work in a grid-stride loop over `i` (or, with
  // `raw_body`, a body that does its own indexing), writing `outs` and reading `reads`.
  void Launch(const std::vector<int64_t>& outs, std::set<int64_t> reads, int64_t threads,
              const std::string& body) {
    if (threads == 0) return;  // Nothing to compute: the buffers stay as they are.
    const std::string name = "k" + std::to_string(kernel_count_++);
    for (int64_t o : outs) reads.erase(o);
    CudaStep step;
    step.kernel = name;
    std::string sig;
    for (int64_t o : outs) {
      sig += std::string(sig.empty() ? "" : ", ") + buffer_types_[static_cast<size_t>(o)] +
             "* __restrict__ " + B(o);
      step.args.push_back(o);
    }
    for (int64_t r : reads) {
      sig += ", const " + buffer_types_[static_cast<size_t>(r)] + "* __restrict__ " + B(r);
      step.args.push_back(r);
    }
    step.block = {kBlock, 1, 1};
    step.grid = {std::min(kMaxBlocks, (threads + kBlock - 1) / kBlock), 1, 1};
    kernels_ += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kBlock) + ") " +
                name + "(" + sig + ") {\n  for (int64_t i = hc_first(); i < " + Num(threads) +
                "; i += hc_stride()) {\n" + body + "  }\n}\n\n";
    plan_.steps.push_back(std::move(step));
  }

  // Element i of a leaf, and its element 0.
  static Expr Read(const Val& v);
  static Expr At(const Val& v, const std::string& index);

  // Puts a fused leaf (and, with `constants`, a constant) into a buffer of its own.
  Status Materialize(Val& v, bool constants = false);

  // A constant as bytes in the cubin's global memory.
  Result<std::string> Constant(const Instruction& inst);

  // ---- Computations, inlined ---------------------------------------------------------------

  Result<Value> Inline(int32_t c, std::vector<Value> args, int depth);

  static const Instruction& Inst(const Frame& f, int32_t i);
  static const Shape& OperandShape(const Frame& f, const Instruction& inst, size_t k);
  static Val& Operand(Frame& f, const Instruction& inst, size_t k);

  // ---- Fusion --------------------------------------------------------------------------------

  static bool IsElementwise(const Instruction& inst);
  static bool IsScalarBroadcast(const Frame& f, const Instruction& inst);
  static bool ReadsAtIndex(const Frame& f, const Instruction& user, size_t k);
  static bool Fusible(const Frame& f, int32_t i);

  // Defines instruction `index` by its element expression: fused into its user, or a kernel.
  void DefineElementwise(Frame& f, int32_t index, const Instruction& inst, Expr e);

  // ---- Instructions --------------------------------------------------------------------------

  Status Lower(Frame& f, int32_t index, int depth);

  Status Tuple(Frame& f, int32_t index, const Instruction& inst);

  Status GetTupleElement(Frame& f, int32_t index, const Instruction& inst);

  Status Call(Frame& f, int32_t index, const Instruction& inst, int depth);

  // ---- Elementwise expressions --------------------------------------------------------------

  // The element expression of an elementwise op whose operands' elements are `in`.
  Result<std::string> ElementExpr(const Instruction& inst, const std::vector<std::string>& in,
                                  const std::vector<const Shape*>& operand_shapes) const;

  // ---- Data movement -------------------------------------------------------------------------

  Result<std::vector<int64_t>> IntList(const Instruction& inst, const char* name) const;

  // Statements declaring d0, d1, ... as the row-major digits of `linear` over `dims`.
  static std::string DigitsOf(const std::string& linear, std::span<const int64_t> dims);
  static std::string AffineOf(const std::string& base, std::span<const int64_t> coef);

  // Start indices of a dynamic slice or update from operand `first` on, clamped so the window
  // stays inside operand 0: statements declaring s0, s1, ...
  std::string DynamicStarts(Frame& f, const Instruction& inst, size_t first,
                            std::span<const int64_t> window, std::set<int64_t>& reads) {
    const auto& in = OperandShape(f, inst, 0).dims;
    std::string out;
    for (size_t d = 0; d < in.size(); ++d) {
      const Expr e = At(Operand(f, inst, first + d), "0");
      reads.insert(e.buffers.begin(), e.buffers.end());
      const int64_t hi = std::max<int64_t>(0, in[d] - window[d]);
      out += "    int64_t s" + std::to_string(d) + " = (int64_t)" + e.code + ";\n    s" +
             std::to_string(d) + " = s" + std::to_string(d) + " < 0 ? 0 : s" + std::to_string(d) +
             " > " + Num(hi) + " ? " + Num(hi) + " : s" + std::to_string(d) + ";\n";
    }
    return out;
  }

  Val NewArray(const Instruction& inst);

  // broadcast, transpose, slice, reverse, dynamic-slice: result element d reads the operand at
  // base + sum(d_k * coefficient_k).
  Status AffineCopy(Frame& f, int32_t index, const Instruction& inst);

  Status Pad(Frame& f, int32_t index, const Instruction& inst);

  Status Concatenate(Frame& f, int32_t index, const Instruction& inst);

  Status DynamicUpdateSlice(Frame& f, int32_t index, const Instruction& inst);

  // ---- Reductions and contractions ------------------------------------------------------------

  // The row-major offsets of every index over `group` (sizes and strides), as a device table.
  std::string OffsetTable(std::span<const int64_t> sizes, std::span<const int64_t> strides);

  // dot: one block computes a 16 x 16 tile of results of one batch index, stepping through the
  // contracting indices 16 at a time through shared memory, summing in k order in double (in
  // 64-bit wrapping integers for integer results), rounded once: the interpreter's sums.
  Status Dot(Frame& f, int32_t index, const Instruction& inst);

  // A scalar computation (a reducer) as a device function `void NAME(const T0 a0, ...,
  // T0* r0, ...)`, made of elementwise ops on scalars.
  Result<std::string> ScalarFunction(int32_t c);

  // reduce (variadic): one thread per result element folds the reduced dimensions in row-major
  // order from the inits, as the interpreter does.
  Status Reduce(Frame& f, int32_t index, const Instruction& inst);

  const hlo::Module& m_;
  CudaPlan plan_;
  std::vector<std::string> buffer_types_;
  std::string constants_, functions_, kernels_;
  std::map<int32_t, std::string> scalar_functions_;
  std::vector<int32_t> active_;  // The computations being inlined, outermost first.
  int kernel_count_ = 0, constant_count_ = 0, table_count_ = 0;
};

}  // namespace hlocache::compiler::cuda_lowering_internal
