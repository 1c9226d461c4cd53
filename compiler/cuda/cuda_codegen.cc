#include "compiler/cuda/cuda_codegen.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "compiler/codegen/cpu_source.h"
#include "compiler/cuda/cuda_prelude.h"
#include "compiler/interp/interpreter.h"
#include "compiler/semantics/literal.h"

namespace hlocache::compiler {
namespace {

using hlo::Computation;
using hlo::Instruction;
using hlo::Opcode;
using hlo::PrimitiveType;
using hlo::Shape;

// Threads per block of the one-element-per-thread kernels, and the most blocks one launch
// asks for (the threads loop over the rest).
constexpr int64_t kBlock = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 15;
// The edge of a dot's tile of results, and of its shared-memory tiles of operands.
constexpr int64_t kTile = 16;
// A fused elementwise chain longer than this is cut by a buffer (NVRTC's compile time grows
// with expression depth).
constexpr int kMaxFusionDepth = 24;
// Calls and fusions nested deeper than this are refused (each level is inlined).
constexpr int kMaxInlineDepth = 64;

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

std::string Num(int64_t v) { return std::to_string(v) + "LL"; }

// The C type of an element in device code: the device prelude's types are pred, the integers of
// 8 to 64 bits, f16, bf16, f32 and f64 (8-bit floats and sub-byte integers not yet); nullptr for
// the rest.
const char* DeviceType(PrimitiveType t) {
  if (hlo::IsFloat(t) && hlo::PrimitiveTypeBits(t) < 16) return nullptr;
  if (IsSubByteInteger(t)) return nullptr;
  return CType(t);
}

class CudaLowering {
 public:
  CudaLowering(const hlo::Module& m, std::string arch) : m_(m) { plan_.arch = std::move(arch); }

  Result<CudaProgram> Run() {
    if (m_.entry < 0) return Error(InvalidArgument(m_.filename() + ": no entry computation"));
    const Computation& entry = m_.computations[static_cast<size_t>(m_.entry)];
    std::vector<Value> args;
    for (int32_t p : entry.parameters) {
      if (p < 0) return Error(InvalidArgument(m_.filename() + ": a missing parameter"));
      const Instruction& param = entry.instructions[static_cast<size_t>(p)];
      HLOCACHE_RETURN_IF_ERROR(CheckShape(param, param.shape));
      std::vector<const Shape*> leaves;
      hlo::AppendLeafShapes(param.shape, leaves);
      Value v;
      for (const Shape* s : leaves) {
        Val leaf;
        leaf.shape = s;
        leaf.buffer = NewBuffer(*s);
        plan_.parameters.push_back(leaf.buffer);
        v.push_back(std::move(leaf));
      }
      args.push_back(std::move(v));
    }
    HLOCACHE_ASSIGN_OR_RETURN(Value root, Inline(m_.entry, std::move(args), 0));
    // Each result gets a buffer of its own: not a parameter's, not another result's.
    std::set<int64_t> taken(plan_.parameters.begin(), plan_.parameters.end());
    for (Val& v : root) {
      HLOCACHE_RETURN_IF_ERROR(Materialize(v, /*constants=*/true));
      if (taken.count(v.buffer) != 0) {
        const int64_t copy = NewBuffer(*v.shape);
        CudaStep step;
        step.from = v.buffer;
        step.to = copy;
        step.bytes = ByteCount(*v.shape);
        if (step.bytes > 0) plan_.steps.push_back(step);
        v.buffer = copy;
      }
      taken.insert(v.buffer);
      plan_.results.push_back(v.buffer);
    }
    CudaProgram out;
    out.source =
        std::string(kCudaPrelude) + "\n" + constants_ + "\n" + functions_ + "\n" + kernels_;
    out.plan = std::move(plan_);
    return out;
  }

 private:
  // ---- Errors and checks -------------------------------------------------------------------

  Status Unsupported(const Instruction& inst, const std::string& what) const {
    return FailedPrecondition(m_.filename() + ":" + std::to_string(m_.LineOf(inst.offset)) +
                              ": the CUDA code generator does not support " + what +
                              " (instruction '" + std::string(inst.name) + "')");
  }
  Status Malformed(const Instruction& inst, const std::string& why) const {
    return InvalidArgument(m_.filename() + ":" + std::to_string(m_.LineOf(inst.offset)) + ": '" +
                           std::string(inst.name) + "' (" +
                           std::string(hlo::OpcodeName(inst.opcode.opcode)) + "): " + why);
  }
  Status CheckShape(const Instruction& inst, const Shape& s) const {
    if (s.IsTuple()) {
      for (const Shape& e : s.tuple_elements) HLOCACHE_RETURN_IF_ERROR(CheckShape(inst, e));
      return Status::Ok();
    }
    if (DeviceType(s.type) == nullptr) {
      return Unsupported(inst, "the element type " + hlo::CanonicalShapeText(s));
    }
    if (!s.ElementCount()) return Unsupported(inst, "dynamic dimensions");
    return Status::Ok();
  }

  // ---- Buffers and kernels -----------------------------------------------------------------

  int64_t NewBuffer(const Shape& s) {
    plan_.buffer_bytes.push_back(std::max<int64_t>(ByteCount(s), 1));
    buffer_types_.emplace_back(CType(s.type));
    return static_cast<int64_t>(plan_.buffer_bytes.size()) - 1;
  }
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
  static Expr Read(const Val& v) {
    if (v.fused) return {"(" + v.fused->code + ")", v.fused->buffers, v.fused->depth};
    return At(v, "i");
  }
  static Expr At(const Val& v, const std::string& index) {
    if (!v.constant.empty()) return {v.constant + "[" + index + "]", {}, 0};
    return {B(v.buffer) + "[" + index + "]", {v.buffer}, 0};
  }

  // Puts a fused leaf (and, with `constants`, a constant) into a buffer of its own.
  Status Materialize(Val& v, bool constants = false) {
    if (!v.fused && (v.constant.empty() || !constants)) return Status::Ok();
    const Expr e = Read(v);
    const int64_t out = NewBuffer(*v.shape);
    Launch({out}, e.buffers, ElementCount(*v.shape), "    " + B(out) + "[i] = " + e.code + ";\n");
    v.fused.reset();
    v.constant.clear();
    v.buffer = out;
    return Status::Ok();
  }

  // A constant as bytes in the cubin's global memory.
  Result<std::string> Constant(const Instruction& inst) {
    HLOCACHE_ASSIGN_OR_RETURN(interp::Literal value, interp::ConstantValue(m_, inst));
    if (value.is_tuple()) return Error(Unsupported(inst, "tuple constants"));
    const std::string bytes = interp::ToBytes(value);
    const std::string name = "c" + std::to_string(constant_count_++);
    constants_ += "__device__ __align__(16) const unsigned char " + name + "[] =\n    \"";
    char esc[8];
    for (size_t k = 0; k < bytes.size(); ++k) {
      if (k != 0 && k % 32 == 0) constants_ += "\"\n    \"";
      std::snprintf(esc, sizeof esc, "\\%03o", static_cast<unsigned char>(bytes[k]));
      constants_ += esc;
    }
    constants_ += "\";\n";
    return "((const " + std::string(CType(inst.shape.type)) + "*)" + name + ")";
  }

  // ---- Computations, inlined ---------------------------------------------------------------

  Result<Value> Inline(int32_t c, std::vector<Value> args, int depth) {
    if (c < 0 || static_cast<size_t>(c) >= m_.computations.size()) {
      return Error(
          InvalidArgument(m_.filename() + ": a call to a computation that does not exist"));
    }
    const Computation& comp = m_.computations[static_cast<size_t>(c)];
    if (depth > kMaxInlineDepth || std::find(active_.begin(), active_.end(), c) != active_.end()) {
      return Error(InvalidArgument(m_.filename() + ": computation '" + std::string(comp.name) +
                                   "' calls itself, or calls nest too deep"));
    }
    if (comp.root < 0)
      return Error(InvalidArgument(m_.filename() + ": a computation without a root"));
    if (args.size() != comp.parameters.size()) {
      return Error(InvalidArgument(m_.filename() + ": computation '" + std::string(comp.name) +
                                   "' called with the wrong number of arguments"));
    }
    active_.push_back(c);
    Frame f;
    f.comp = &comp;
    const size_t n = comp.instructions.size();
    f.values.assign(n, {});
    f.uses.assign(n, 0);
    f.user.assign(n, {-1, 0});
    f.live.assign(n, false);
    for (size_t i = 0; i < n; ++i) {
      for (int32_t o : comp.instructions[i].operands) {
        if (o < 0 || static_cast<size_t>(o) >= i) {
          return Error(Unsupported(comp.instructions[i], "operands defined after their use"));
        }
      }
    }
    // What the root does not use is not lowered, except the ops with effects outside the
    // executable: those must run, or the module is refused (as the CPU target does).
    f.live[static_cast<size_t>(comp.root)] = true;
    for (size_t i = n; i-- > 0;) {
      if (!f.live[i] && !hlo::HasEffects(comp.instructions[i].opcode.opcode)) continue;
      f.live[i] = true;
      for (int32_t o : comp.instructions[i].operands) f.live[static_cast<size_t>(o)] = true;
    }
    for (size_t i = 0; i < n; ++i) {
      if (!f.live[i]) continue;
      const Instruction& inst = comp.instructions[i];
      for (size_t k = 0; k < inst.operands.size(); ++k) {
        const auto o = static_cast<size_t>(inst.operands[k]);
        ++f.uses[o];
        f.user[o] = {static_cast<int32_t>(i), k};
      }
    }
    ++f.uses[static_cast<size_t>(comp.root)];
    for (size_t p = 0; p < comp.parameters.size(); ++p) {
      const int32_t at = comp.parameters[p];
      if (at < 0) return Error(InvalidArgument(m_.filename() + ": a missing parameter"));
      f.values[static_cast<size_t>(at)] = std::move(args[p]);
    }
    for (size_t i = 0; i < n; ++i) {
      if (!f.live[i]) continue;
      HLOCACHE_RETURN_IF_ERROR(Lower(f, static_cast<int32_t>(i), depth));
    }
    active_.pop_back();
    Value root = f.values[static_cast<size_t>(comp.root)];
    std::vector<const Shape*> leaves;
    hlo::AppendLeafShapes(comp.instructions[static_cast<size_t>(comp.root)].shape, leaves);
    if (root.size() != leaves.size()) {
      return Error(Malformed(comp.instructions[static_cast<size_t>(comp.root)],
                             "the root's value does not have the root's shape"));
    }
    return root;
  }

  static const Instruction& Inst(const Frame& f, int32_t i) {
    return f.comp->instructions[static_cast<size_t>(i)];
  }
  static const Shape& OperandShape(const Frame& f, const Instruction& inst, size_t k) {
    return Inst(f, inst.operands[k]).shape;
  }
  static Val& Operand(Frame& f, const Instruction& inst, size_t k) {
    return f.values[static_cast<size_t>(inst.operands[k])][0];
  }

  // ---- Fusion --------------------------------------------------------------------------------

  static bool IsElementwise(const Instruction& inst) {
    switch (inst.opcode.opcode) {
      case Opcode::kParameter:
      case Opcode::kConstant:
      case Opcode::kTuple:
      case Opcode::kGetTupleElement:
      case Opcode::kCall:
      case Opcode::kFusion:
      case Opcode::kBroadcast:
      case Opcode::kTranspose:
      case Opcode::kSlice:
      case Opcode::kReverse:
      case Opcode::kPad:
      case Opcode::kConcatenate:
      case Opcode::kDynamicSlice:
      case Opcode::kDynamicUpdateSlice:
      case Opcode::kReduce:
      case Opcode::kDot:
        return false;
      default:
        return inst.opcode.phase == hlo::AsyncPhase::kNone && inst.callees.empty() &&
               inst.shape.IsArray() && interp::IsCoreOp(inst.opcode.opcode);
    }
  }
  static bool IsScalarBroadcast(const Frame& f, const Instruction& inst) {
    return inst.opcode.opcode == Opcode::kBroadcast && inst.operands.size() == 1 &&
           inst.shape.IsArray() && OperandShape(f, inst, 0).IsArray() &&
           ElementCount(OperandShape(f, inst, 0)) == 1;
  }
  static bool ReadsAtIndex(const Frame& f, const Instruction& user, size_t k) {
    if (user.opcode.opcode == Opcode::kReduce) return k < user.operands.size() / 2;
    if (!IsElementwise(user)) return false;
    const int64_t n = ElementCount(user.shape);
    if (user.opcode.opcode == Opcode::kSelect && k == 0) {
      return ElementCount(OperandShape(f, user, 0)) == n;
    }
    if (user.opcode.opcode == Opcode::kClamp && k != 1) {
      return ElementCount(OperandShape(f, user, k)) == n;
    }
    return true;
  }
  static bool Fusible(const Frame& f, int32_t i) {
    const Instruction& inst = Inst(f, i);
    if (!(IsElementwise(inst) || IsScalarBroadcast(f, inst)) ||
        f.uses[static_cast<size_t>(i)] != 1 || i == f.comp->root) {
      return false;
    }
    const auto [user, slot] = f.user[static_cast<size_t>(i)];
    if (user < 0) return false;
    const Instruction& u = Inst(f, user);
    return ReadsAtIndex(f, u, slot) && (u.opcode.opcode == Opcode::kReduce ||
                                        ElementCount(u.shape) == ElementCount(inst.shape));
  }

  // Defines instruction `index` by its element expression: fused into its user, or a kernel.
  void DefineElementwise(Frame& f, int32_t index, const Instruction& inst, Expr e) {
    Val v;
    v.shape = &inst.shape;
    e.depth += 1;
    if (Fusible(f, index) && e.depth <= kMaxFusionDepth) {
      v.fused = std::move(e);
    } else {
      v.buffer = NewBuffer(inst.shape);
      Launch({v.buffer}, e.buffers, ElementCount(inst.shape),
             "    " + B(v.buffer) + "[i] = " + e.code + ";\n");
    }
    f.values[static_cast<size_t>(index)] = {std::move(v)};
  }

  // ---- Instructions --------------------------------------------------------------------------

  Status Lower(Frame& f, int32_t index, int depth) {
    const Instruction& inst = Inst(f, index);
    const Opcode op = inst.opcode.opcode;
    if (op == Opcode::kParameter) return Status::Ok();  // Bound to the caller's value.
    if (inst.opcode.phase != hlo::AsyncPhase::kNone) return Unsupported(inst, "asynchronous ops");
    if (!interp::IsCoreOp(op))
      return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'");
    HLOCACHE_RETURN_IF_ERROR(interp::CheckOperandCount(m_, inst));
    if (!inst.has_shape()) return Unsupported(inst, "instructions without a shape");
    HLOCACHE_RETURN_IF_ERROR(CheckShape(inst, inst.shape));
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      HLOCACHE_RETURN_IF_ERROR(CheckShape(inst, OperandShape(f, inst, k)));
    }
    switch (op) {
      case Opcode::kTuple:
        return Tuple(f, index, inst);
      case Opcode::kGetTupleElement:
        return GetTupleElement(f, index, inst);
      case Opcode::kCall:
      case Opcode::kFusion:
        return Call(f, index, inst, depth);
      default:
        break;
    }
    std::vector<const Shape*> operand_shapes;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      operand_shapes.push_back(&OperandShape(f, inst, k));
    }
    HLOCACHE_RETURN_IF_ERROR(interp::CheckShapes(m_, inst, operand_shapes));
    if (op == Opcode::kReduce) return Reduce(f, index, inst);
    if (!inst.shape.IsArray()) return Unsupported(inst, "a tuple result");
    if (op == Opcode::kConstant) {
      HLOCACHE_ASSIGN_OR_RETURN(std::string c, Constant(inst));
      Val v;
      v.shape = &inst.shape;
      v.constant = std::move(c);
      f.values[static_cast<size_t>(index)] = {std::move(v)};
      return Status::Ok();
    }
    if (IsElementwise(inst) || IsScalarBroadcast(f, inst)) {
      std::vector<std::string> in;
      std::set<int64_t> reads;
      int depth_in = 0;
      const int64_t n = ElementCount(inst.shape);
      for (size_t k = 0; k < inst.operands.size(); ++k) {
        Val& v = Operand(f, inst, k);
        Expr e;
        if (ElementCount(*v.shape) == 1 && n != 1) {
          HLOCACHE_RETURN_IF_ERROR(Materialize(v));  // Read as element 0, never fused.
          e = At(v, "0");
        } else {
          e = Read(v);
        }
        in.push_back(e.code);
        reads.insert(e.buffers.begin(), e.buffers.end());
        depth_in = std::max(depth_in, e.depth);
      }
      HLOCACHE_ASSIGN_OR_RETURN(std::string code, ElementExpr(inst, in, operand_shapes));
      DefineElementwise(f, index, inst, {std::move(code), std::move(reads), depth_in});
      return Status::Ok();
    }
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      HLOCACHE_RETURN_IF_ERROR(Materialize(Operand(f, inst, k)));
    }
    switch (op) {
      case Opcode::kBroadcast:
      case Opcode::kTranspose:
      case Opcode::kSlice:
      case Opcode::kReverse:
      case Opcode::kDynamicSlice:
        return AffineCopy(f, index, inst);
      case Opcode::kPad:
        return Pad(f, index, inst);
      case Opcode::kConcatenate:
        return Concatenate(f, index, inst);
      case Opcode::kDynamicUpdateSlice:
        return DynamicUpdateSlice(f, index, inst);
      case Opcode::kDot:
        return Dot(f, index, inst);
      default:
        return Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'");
    }
  }

  Status Tuple(Frame& f, int32_t index, const Instruction& inst) {
    Shape expected;
    Value leaves;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      expected.tuple_elements.push_back(OperandShape(f, inst, k));
      const Value& v = f.values[static_cast<size_t>(inst.operands[k])];
      leaves.insert(leaves.end(), v.begin(), v.end());
    }
    if (!hlo::SameValues(expected, inst.shape)) {
      return Malformed(inst, "the tuple's shape is not that of its operands");
    }
    f.values[static_cast<size_t>(index)] = std::move(leaves);
    return Status::Ok();
  }

  Status GetTupleElement(Frame& f, int32_t index, const Instruction& inst) {
    const hlo::Attribute* a = inst.FindAttribute("index");
    if (a == nullptr) return Malformed(inst, "no index");
    HLOCACHE_ASSIGN_OR_RETURN(int64_t n, m_.Int(*a));
    const Shape& t = OperandShape(f, inst, 0);
    if (!t.IsTuple() || n < 0 || static_cast<size_t>(n) >= t.tuple_elements.size()) {
      return Malformed(inst, "index out of range");
    }
    if (!hlo::SameValues(t.tuple_elements[static_cast<size_t>(n)], inst.shape)) {
      return Malformed(inst, "the element's shape is not the result's");
    }
    size_t first = 0;
    for (size_t e = 0; e < static_cast<size_t>(n); ++e) {
      std::vector<const Shape*> skip;
      hlo::AppendLeafShapes(t.tuple_elements[e], skip);
      first += skip.size();
    }
    std::vector<const Shape*> mine;
    hlo::AppendLeafShapes(inst.shape, mine);
    const Value& all = f.values[static_cast<size_t>(inst.operands[0])];
    if (first + mine.size() > all.size()) return Malformed(inst, "index out of range");
    f.values[static_cast<size_t>(index)].assign(
        all.begin() + static_cast<ptrdiff_t>(first),
        all.begin() + static_cast<ptrdiff_t>(first + mine.size()));
    return Status::Ok();
  }

  Status Call(Frame& f, int32_t index, const Instruction& inst, int depth) {
    if (inst.callees.size() != 1) return Unsupported(inst, "a call without one computation");
    const Computation& callee = m_.computations[static_cast<size_t>(inst.callees[0])];
    if (callee.parameters.size() != inst.operands.size()) {
      return Malformed(inst, "the operands do not match the called computation's parameters");
    }
    std::vector<Value> args;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      const int32_t p = callee.parameters[k];
      if (p < 0 || !hlo::SameValues(callee.instructions[static_cast<size_t>(p)].shape,
                                    OperandShape(f, inst, k))) {
        return Malformed(inst, "operand " + std::to_string(k) +
                                   " is not of the called computation's parameter shape");
      }
      Value v = f.values[static_cast<size_t>(inst.operands[k])];
      for (Val& leaf : v) HLOCACHE_RETURN_IF_ERROR(Materialize(leaf));
      args.push_back(std::move(v));
    }
    if (callee.root < 0 ||
        !hlo::SameValues(callee.instructions[static_cast<size_t>(callee.root)].shape, inst.shape)) {
      return Malformed(inst, "the result is not of the called computation's root shape");
    }
    HLOCACHE_ASSIGN_OR_RETURN(Value out, Inline(inst.callees[0], std::move(args), depth + 1));
    // The leaves keep the callee's shapes, which are the same values as this instruction's.
    f.values[static_cast<size_t>(index)] = std::move(out);
    return Status::Ok();
  }

  // ---- Elementwise expressions --------------------------------------------------------------

  // The element expression of an elementwise op whose operands' elements are `in`.
  Result<std::string> ElementExpr(const Instruction& inst, const std::vector<std::string>& in,
                                  const std::vector<const Shape*>& operand_shapes) const {
    const Opcode op = inst.opcode.opcode;
    const std::string t = CType(inst.shape.type);
    const bool is_float = hlo::IsFloat(inst.shape.type);
    switch (op) {
      case Opcode::kIota: {
        const hlo::Attribute* a = inst.FindAttribute("iota_dimension");
        if (a == nullptr) return Error(Malformed(inst, "no iota_dimension"));
        HLOCACHE_ASSIGN_OR_RETURN(int64_t d, m_.Int(*a));
        const auto& dims = inst.shape.dims;
        if (d < 0 || static_cast<size_t>(d) >= dims.size()) {
          return Error(Malformed(inst, "bad dimension"));
        }
        int64_t inner = 1;
        for (size_t k = static_cast<size_t>(d) + 1; k < dims.size(); ++k) inner *= dims[k];
        return "hc_cvt<" + t + ", int64_t>((i / " + Num(inner) + ") % " +
               Num(dims[static_cast<size_t>(d)]) + ")";
      }
      case Opcode::kBroadcast:  // Of one element.
        return in[0];
      case Opcode::kBitcast:
        if (!inst.shape.HasDefaultLayout() || !operand_shapes[0]->HasDefaultLayout()) {
          return Error(Unsupported(inst, "bitcast between non-default layouts"));
        }
        [[fallthrough]];
      case Opcode::kReshape:
      case Opcode::kCopy:
        if (operand_shapes[0]->type != inst.shape.type) {
          return Error(Unsupported(inst, "a change of element type"));
        }
        return in[0];
      case Opcode::kConvert:
        return "hc_cvt<" + t + ", " + CType(operand_shapes[0]->type) + ">(" + in[0] + ")";
      case Opcode::kSelect:
        return "(" + in[0] + " ? " + in[1] + " : " + in[2] + ")";
      case Opcode::kClamp:
        return "hc_clamp<" + t + ">(" + in[0] + ", " + in[1] + ", " + in[2] + ")";
      case Opcode::kCompare: {
        const hlo::Attribute* a = inst.FindAttribute("direction");
        if (a == nullptr) return Error(Malformed(inst, "no direction"));
        const std::string_view dir = m_.TokenText(a->value.begin);
        const char* c = CompareOperator(dir);
        if (c == nullptr) return Error(Unsupported(inst, "direction " + std::string(dir)));
        const std::string key = CompareKey(m_, inst, operand_shapes[0]->type);
        return "(" + key + in[0] + ")) " + c + " " + key + in[1] + ")))";
      }
      default:
        break;
    }
    const bool logical =
        op == Opcode::kAnd || op == Opcode::kOr || op == Opcode::kXor || op == Opcode::kNot;
    if (op != Opcode::kIsFinite && inst.shape.type == PrimitiveType::kPred && !logical) {
      return Error(Unsupported(inst, "arithmetic on pred"));
    }
    if (is_float && logical) return Error(Unsupported(inst, "bitwise ops on floats"));
    auto call = [&](const char* fn) {
      std::string e = std::string(fn) + "<" + t + ">(" + in[0];
      if (in.size() == 2) e += ", " + in[1];
      return e + ")";
    };
    auto math = [&](const std::string& fn) -> Result<std::string> {
      if (!is_float) {
        return Error(Unsupported(inst, std::string(hlo::OpcodeName(op)) + " on integers"));
      }
      return "hc_store<" + t + ">(" + fn + "(hc_load(" + in[0] + ")))";
    };
    if (in.size() == 1) {
      switch (op) {
        case Opcode::kNegate:
          return call("hc_neg");
        case Opcode::kAbs:
          return call("hc_abs");
        case Opcode::kSign:
          return call("hc_sign");
        case Opcode::kNot:
          return call("hc_not");
        case Opcode::kExp:
          return math("exp");
        case Opcode::kExpm1:
          return math("expm1");
        case Opcode::kLog:
          return math("log");
        case Opcode::kLog1p:
          return math("log1p");
        case Opcode::kSqrt:
          return math("sqrt");
        case Opcode::kRsqrt:
          return math("1.0 / sqrt");
        case Opcode::kTanh:
          return math("tanh");
        case Opcode::kCos:
          return math("cos");
        case Opcode::kSin:
          return math("sin");
        case Opcode::kFloor:
          return math("floor");
        case Opcode::kCeil:
          return math("ceil");
        case Opcode::kRoundNearestAfz:
          return math("round");
        case Opcode::kRoundNearestEven:
          return math("rint");
        case Opcode::kLogistic:
          return math("hc_logistic");
        case Opcode::kIsFinite:
          if (!hlo::IsFloat(operand_shapes[0]->type)) {
            return Error(Unsupported(inst, "is-finite on integers"));
          }
          return "(bool)isfinite(hc_load(" + in[0] + "))";
        default:
          break;
      }
    } else if (in.size() == 2) {
      switch (op) {
        case Opcode::kAdd:
          return call("hc_add");
        case Opcode::kSubtract:
          return call("hc_sub");
        case Opcode::kMultiply:
          return call("hc_mul");
        case Opcode::kDivide:
          return call("hc_div");
        case Opcode::kRemainder:
          return call("hc_rem");
        case Opcode::kMaximum:
          return call("hc_max");
        case Opcode::kMinimum:
          return call("hc_min");
        case Opcode::kPower:
          return call("hc_pow");
        case Opcode::kShiftLeft:
        case Opcode::kShiftRightLogical:
        case Opcode::kShiftRightArithmetic:
          if (is_float || inst.shape.type == PrimitiveType::kPred) {
            return Error(Unsupported(inst, "shifts of other than integers"));
          }
          return call(op == Opcode::kShiftLeft           ? "hc_shl"
                      : op == Opcode::kShiftRightLogical ? "hc_shrl"
                                                         : "hc_shra");
        case Opcode::kAnd:
        case Opcode::kOr:
        case Opcode::kXor: {
          const char* c = op == Opcode::kAnd ? "&" : op == Opcode::kOr ? "|" : "^";
          return "(" + t + ")(" + in[0] + " " + c + " " + in[1] + ")";
        }
        case Opcode::kAtan2:
          if (!is_float) return Error(Unsupported(inst, "atan2 on integers"));
          return "hc_store<" + t + ">(atan2(hc_load(" + in[0] + "), hc_load(" + in[1] + ")))";
        default:
          break;
      }
    }
    return Error(Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "'"));
  }

  // ---- Data movement -------------------------------------------------------------------------

  Result<std::vector<int64_t>> IntList(const Instruction& inst, const char* name) const {
    const hlo::Attribute* a = inst.FindAttribute(name);
    if (a == nullptr) return Error(Malformed(inst, std::string("no ") + name));
    return m_.IntList(*a);
  }

  // Statements declaring d0, d1, ... as the row-major digits of `linear` over `dims`.
  static std::string DigitsOf(const std::string& linear, const std::vector<int64_t>& dims) {
    std::string out = "    int64_t r_ = " + linear + ";\n";
    for (size_t k = dims.size(); k-- > 0;) {
      const std::string d = "d" + std::to_string(k);
      if (k == 0) {
        out += "    const int64_t " + d + " = r_;\n";
      } else {
        out += "    const int64_t " + d + " = r_ % " + Num(dims[k]) +
               ";\n    r_ /= " + Num(dims[k]) + ";\n";
      }
    }
    return out + "    (void)r_;\n";
  }
  static std::string AffineOf(const std::string& base, const std::vector<int64_t>& coef) {
    std::string out = base;
    for (size_t k = 0; k < coef.size(); ++k) {
      if (coef[k] != 0) out += " + d" + std::to_string(k) + " * " + Num(coef[k]);
    }
    return out;
  }

  // Start indices of a dynamic slice or update from operand `first` on, clamped so the window
  // stays inside operand 0: statements declaring s0, s1, ...
  std::string DynamicStarts(Frame& f, const Instruction& inst, size_t first,
                            const std::vector<int64_t>& window, std::set<int64_t>& reads) {
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

  Val NewArray(const Instruction& inst) {
    Val v;
    v.shape = &inst.shape;
    v.buffer = NewBuffer(inst.shape);
    return v;
  }

  // broadcast, transpose, slice, reverse, dynamic-slice: result element d reads the operand at
  // base + sum(d_k * coefficient_k).
  Status AffineCopy(Frame& f, int32_t index, const Instruction& inst) {
    const auto& od = inst.shape.dims;
    const auto& id = OperandShape(f, inst, 0).dims;
    std::vector<int64_t> coef;
    std::string prologue, base;
    std::set<int64_t> reads;
    if (inst.opcode.opcode == Opcode::kDynamicSlice) {
      const auto is = hlo::RowMajorStrides(id);
      prologue = DynamicStarts(f, inst, 1, od, reads);
      base = "0";
      for (size_t d = 0; d < id.size(); ++d) {
        base += " + s" + std::to_string(d) + " * " + Num(is[d]);
      }
      coef = is;
    } else {
      HLOCACHE_ASSIGN_OR_RETURN(AffineRead read, AffineReadOf(m_, inst, id));
      base = Num(read.base);
      coef = std::move(read.coefficients);
    }
    Val out = NewArray(inst);
    const Expr src = At(Operand(f, inst, 0), AffineOf(base, coef));
    reads.insert(src.buffers.begin(), src.buffers.end());
    Launch({out.buffer}, reads, ElementCount(inst.shape),
           prologue + DigitsOf("i", od) + "    " + B(out.buffer) + "[i] = " + src.code + ";\n");
    f.values[static_cast<size_t>(index)] = {std::move(out)};
    return Status::Ok();
  }

  Status Pad(Frame& f, int32_t index, const Instruction& inst) {
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> spec, interp::PaddingSpec(m_, inst));
    const auto& od = inst.shape.dims;
    const auto& id = OperandShape(f, inst, 0).dims;
    const auto is = hlo::RowMajorStrides(id);
    // Result element d holds operand element q when d = low + q * (interior + 1).
    std::string body = DigitsOf("i", od) + "    bool in_ = true;\n    int64_t src_ = 0;\n";
    for (size_t k = 0; k < od.size(); ++k) {
      const std::string q = "q" + std::to_string(k);
      const int64_t step = spec[3 * k + 2] + 1;
      body += "    const int64_t " + q + " = d" + std::to_string(k) + " - (" + Num(spec[3 * k]) +
              ");\n    in_ = in_ && " + q + " >= 0 && " + q + " % " + Num(step) + " == 0 && " + q +
              " / " + Num(step) + " < " + Num(id[k]) + ";\n    src_ += (" + q + " / " + Num(step) +
              ") * " + Num(is[k]) + ";\n";
    }
    const Expr src = At(Operand(f, inst, 0), "src_");
    const Expr pad = At(Operand(f, inst, 1), "0");
    std::set<int64_t> reads = src.buffers;
    reads.insert(pad.buffers.begin(), pad.buffers.end());
    Val out = NewArray(inst);
    Launch({out.buffer}, reads, ElementCount(inst.shape),
           body + "    " + B(out.buffer) + "[i] = in_ ? " + src.code + " : " + pad.code + ";\n");
    f.values[static_cast<size_t>(index)] = {std::move(out)};
    return Status::Ok();
  }

  Status Concatenate(Frame& f, int32_t index, const Instruction& inst) {
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IntList(inst, "dimensions"));
    const auto cd = static_cast<size_t>(dims[0]);
    const auto& od = inst.shape.dims;
    int64_t inner = 1;
    for (size_t k = cd + 1; k < od.size(); ++k) inner *= od[k];
    const int64_t row = od[cd] * inner;
    Val out = NewArray(inst);
    std::string body = "    const int64_t o_ = i / " + Num(row) + ", c_ = (i % " + Num(row) +
                       ") / " + Num(inner) + ", n_ = i % " + Num(inner) + ";\n";
    std::set<int64_t> reads;
    int64_t start = 0;
    for (size_t k = 0; k < inst.operands.size(); ++k) {
      const int64_t size = OperandShape(f, inst, k).dims[cd];
      if (size == 0) continue;
      const Expr src = At(Operand(f, inst, k), "o_ * " + Num(size * inner) + " + (c_ - " +
                                                   Num(start) + ") * " + Num(inner) + " + n_");
      reads.insert(src.buffers.begin(), src.buffers.end());
      body += "    " + std::string(start == 0 ? "" : "else ") + "if (c_ < " + Num(start + size) +
              ") " + B(out.buffer) + "[i] = " + src.code + ";\n";
      start += size;
    }
    Launch({out.buffer}, reads, ElementCount(inst.shape), body);
    f.values[static_cast<size_t>(index)] = {std::move(out)};
    return Status::Ok();
  }

  Status DynamicUpdateSlice(Frame& f, int32_t index, const Instruction& inst) {
    const auto& od = inst.shape.dims;
    const auto& ud = OperandShape(f, inst, 1).dims;
    const auto us = hlo::RowMajorStrides(ud);
    std::set<int64_t> reads;
    std::string body = DynamicStarts(f, inst, 2, ud, reads) + DigitsOf("i", od) +
                       "    bool in_ = true;\n    int64_t src_ = 0;\n";
    for (size_t k = 0; k < od.size(); ++k) {
      const std::string q = "(d" + std::to_string(k) + " - s" + std::to_string(k) + ")";
      body += "    in_ = in_ && " + q + " >= 0 && " + q + " < " + Num(ud[k]) +
              ";\n    src_ += " + q + " * " + Num(us[k]) + ";\n";
    }
    const Expr base = At(Operand(f, inst, 0), "i");
    const Expr update = At(Operand(f, inst, 1), "src_");
    reads.insert(base.buffers.begin(), base.buffers.end());
    reads.insert(update.buffers.begin(), update.buffers.end());
    Val out = NewArray(inst);
    Launch(
        {out.buffer}, reads, ElementCount(inst.shape),
        body + "    " + B(out.buffer) + "[i] = in_ ? " + update.code + " : " + base.code + ";\n");
    f.values[static_cast<size_t>(index)] = {std::move(out)};
    return Status::Ok();
  }

  // ---- Reductions and contractions ------------------------------------------------------------

  // The row-major offsets of every index over `group` (sizes and strides), as a device table.
  std::string OffsetTable(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
    std::vector<int64_t> offsets;
    std::vector<int64_t> index(sizes.size(), 0);
    const int64_t count = Product(sizes);
    offsets.reserve(static_cast<size_t>(count));
    for (int64_t n = 0; n < count; ++n) {
      int64_t off = 0;
      for (size_t j = 0; j < index.size(); ++j) off += index[j] * strides[j];
      offsets.push_back(off);
      for (size_t j = index.size(); j-- > 0;) {
        if (++index[j] < sizes[j]) break;
        index[j] = 0;
      }
    }
    const std::string name = "t" + std::to_string(table_count_++);
    constants_ += "__device__ const int64_t " + name + "[] = {";
    for (size_t k = 0; k < offsets.size(); ++k) {
      constants_ += (k == 0 ? "" : k % 16 == 0 ? ",\n    " : ", ") + Num(offsets[k]);
    }
    if (offsets.empty()) constants_ += "0";
    constants_ += "};\n";
    return name;
  }

  // dot: one block computes a 16 x 16 tile of results of one batch index, stepping through the
  // contracting indices 16 at a time through shared memory, summing in k order in double (in
  // 64-bit wrapping integers for integer results), rounded once: the interpreter's sums.
  Status Dot(Frame& f, int32_t index, const Instruction& inst) {
    if (inst.shape.type == PrimitiveType::kPred) return Unsupported(inst, "dot of pred");
    const Shape& lhs = OperandShape(f, inst, 0);
    const Shape& rhs = OperandShape(f, inst, 1);
    if (!hlo::IsFloat(inst.shape.type) && (hlo::IsFloat(lhs.type) || hlo::IsFloat(rhs.type))) {
      return Unsupported(inst, "an integer dot of floats");
    }
    if (hlo::IsFloat(inst.shape.type) && (!hlo::IsFloat(lhs.type) || !hlo::IsFloat(rhs.type))) {
      return Unsupported(inst, "a float dot of integers");
    }
    auto list = [&](const char* name) -> std::vector<int64_t> {
      const hlo::Attribute* a = inst.FindAttribute(name);
      if (a == nullptr) return {};
      auto v = m_.IntList(*a);
      return v ? *v : std::vector<int64_t>();
    };
    const auto lb = list("lhs_batch_dims"), rb = list("rhs_batch_dims");
    const auto lc = list("lhs_contracting_dims"), rc = list("rhs_contracting_dims");
    const auto ls = hlo::RowMajorStrides(lhs.dims), rs = hlo::RowMajorStrides(rhs.dims);
    struct Group {
      std::vector<int64_t> sizes, strides;
      void Add(int64_t size, int64_t stride) {
        sizes.push_back(size);
        strides.push_back(stride);
      }
    };
    Group l_batch, r_batch, l_free, r_free, l_con, r_con;
    for (size_t k = 0; k < lb.size(); ++k) {
      l_batch.Add(lhs.dims[static_cast<size_t>(lb[k])], ls[static_cast<size_t>(lb[k])]);
      r_batch.Add(rhs.dims[static_cast<size_t>(rb[k])], rs[static_cast<size_t>(rb[k])]);
    }
    for (size_t k = 0; k < lc.size(); ++k) {
      l_con.Add(lhs.dims[static_cast<size_t>(lc[k])], ls[static_cast<size_t>(lc[k])]);
      r_con.Add(rhs.dims[static_cast<size_t>(rc[k])], rs[static_cast<size_t>(rc[k])]);
    }
    auto add_free = [](const Shape& s, const std::vector<int64_t>& strides,
                       const std::vector<int64_t>& b, const std::vector<int64_t>& c, Group& g) {
      for (size_t d = 0; d < s.dims.size(); ++d) {
        const auto di = static_cast<int64_t>(d);
        if (std::find(b.begin(), b.end(), di) == b.end() &&
            std::find(c.begin(), c.end(), di) == c.end()) {
          g.Add(s.dims[d], strides[d]);
        }
      }
    };
    add_free(lhs, ls, lb, lc, l_free);
    add_free(rhs, rs, rb, rc, r_free);
    const int64_t batches = Product(l_batch.sizes), M = Product(l_free.sizes);
    const int64_t N = Product(r_free.sizes), K = Product(l_con.sizes);
    Val out = NewArray(inst);
    const int64_t count = ElementCount(inst.shape);
    if (count == 0) {
      f.values[static_cast<size_t>(index)] = {std::move(out)};
      return Status::Ok();
    }
    const std::string tlb = OffsetTable(l_batch.sizes, l_batch.strides);
    const std::string tlf = OffsetTable(l_free.sizes, l_free.strides);
    const std::string tlc = OffsetTable(l_con.sizes, l_con.strides);
    const std::string trb = OffsetTable(r_batch.sizes, r_batch.strides);
    const std::string trf = OffsetTable(r_free.sizes, r_free.strides);
    const std::string trc = OffsetTable(r_con.sizes, r_con.strides);
    const bool is_float = hlo::IsFloat(inst.shape.type);
    const std::string acc = is_float ? "double" : "uint64_t";
    const std::string widen = is_float ? "hc_to_double" : "hc_to_u64";
    const Expr a = At(Operand(f, inst, 0), "(" + tlb + "[b_] + " + tlf + "[m_] + " + tlc + "[k_])");
    const Expr b = At(Operand(f, inst, 1), "(" + trb + "[b_] + " + trc + "[k_] + " + trf + "[n_])");
    std::set<int64_t> reads = a.buffers;
    reads.insert(b.buffers.begin(), b.buffers.end());
    const std::string name = "k" + std::to_string(kernel_count_++);
    reads.erase(out.buffer);
    std::string sig = std::string(CType(inst.shape.type)) + "* __restrict__ " + B(out.buffer);
    CudaStep step;
    step.kernel = name;
    step.args.push_back(out.buffer);
    for (int64_t r : reads) {
      sig += ", const " + buffer_types_[static_cast<size_t>(r)] + "* __restrict__ " + B(r);
      step.args.push_back(r);
    }
    const std::string T = std::to_string(kTile);
    const std::string store = is_float ? "hc_store<" + std::string(CType(inst.shape.type)) + ">(s_)"
                                       : "(" + std::string(CType(inst.shape.type)) + ")s_";
    kernels_ +=
        "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kTile * kTile) + ") " +
        name + "(" + sig + ") {\n" + "  __shared__ " + acc + " as_[" + T + "][" + T + "], bs_[" +
        T + "][" + T + "];\n" + "  const int tx = threadIdx.x, ty = threadIdx.y;\n" +
        "  for (int64_t b_ = blockIdx.z; b_ < " + Num(batches) + "; b_ += gridDim.z)\n" +
        "  for (int64_t m0 = (int64_t)blockIdx.y * " + T + "; m0 < " + Num(M) +
        "; m0 += (int64_t)gridDim.y * " + T + ")\n" + "  for (int64_t n0 = (int64_t)blockIdx.x * " +
        T + "; n0 < " + Num(N) + "; n0 += (int64_t)gridDim.x * " + T + ") {\n" + "    " + acc +
        " s_ = 0;\n" + "    for (int64_t k0 = 0; k0 < " + Num(K) + "; k0 += " + T + ") {\n" +
        "      {\n        const int64_t m_ = m0 + ty, k_ = k0 + tx;\n" +
        "        as_[ty][tx] = (m_ < " + Num(M) + " && k_ < " + Num(K) + ") ? " + widen + "(" +
        a.code + ") : 0;\n      }\n" +
        "      {\n        const int64_t n_ = n0 + tx, k_ = k0 + ty;\n" +
        "        bs_[ty][tx] = (n_ < " + Num(N) + " && k_ < " + Num(K) + ") ? " + widen + "(" +
        b.code + ") : 0;\n      }\n" + "      __syncthreads();\n" +
        "      const int kn = " + Num(K) + " - k0 < " + T + " ? (int)(" + Num(K) + " - k0) : " + T +
        ";\n" + "      for (int kk = 0; kk < kn; ++kk) s_ += as_[ty][kk] * bs_[kk][tx];\n" +
        "      __syncthreads();\n    }\n" + "    const int64_t m_ = m0 + ty, n_ = n0 + tx;\n" +
        "    if (m_ < " + Num(M) + " && n_ < " + Num(N) + ") " + B(out.buffer) + "[(b_ * " +
        Num(M) + " + m_) * " + Num(N) + " + n_] = " + store + ";\n  }\n}\n\n";
    step.block = {kTile, kTile, 1};
    step.grid = {std::min<int64_t>((N + kTile - 1) / kTile, kMaxBlocks),
                 std::min<int64_t>((M + kTile - 1) / kTile, 65535),
                 std::min<int64_t>(batches, 65535)};
    plan_.steps.push_back(std::move(step));
    f.values[static_cast<size_t>(index)] = {std::move(out)};
    return Status::Ok();
  }

  // A scalar computation (a reducer) as a device function `void NAME(const T0 a0, ...,
  // T0* r0, ...)`, made of elementwise ops on scalars.
  Result<std::string> ScalarFunction(int32_t c) {
    if (auto it = scalar_functions_.find(c); it != scalar_functions_.end()) return it->second;
    const Computation& comp = m_.computations[static_cast<size_t>(c)];
    if (comp.root < 0)
      return Error(InvalidArgument(m_.filename() + ": a computation without a root"));
    const std::string name = "f" + std::to_string(c);
    std::vector<std::vector<std::string>> vars(comp.instructions.size());
    std::string sig, body;
    for (size_t p = 0; p < comp.parameters.size(); ++p) {
      const Instruction& param = comp.instructions[static_cast<size_t>(comp.parameters[p])];
      if (!param.shape.IsArray() || ElementCount(param.shape) != 1 ||
          DeviceType(param.shape.type) == nullptr) {
        return Error(Unsupported(param, "a reducer parameter that is not a scalar"));
      }
      sig += std::string(p ? ", " : "") + "const " + CType(param.shape.type) + " a" +
             std::to_string(p);
      vars[static_cast<size_t>(comp.parameters[p])] = {"a" + std::to_string(p)};
    }
    for (size_t i = 0; i < comp.instructions.size(); ++i) {
      const Instruction& inst = comp.instructions[i];
      const Opcode op = inst.opcode.opcode;
      if (op == Opcode::kParameter) continue;
      for (int32_t o : inst.operands) {
        if (o < 0 || static_cast<size_t>(o) >= i) {
          return Error(Unsupported(inst, "operands defined after their use"));
        }
      }
      HLOCACHE_RETURN_IF_ERROR(interp::CheckOperandCount(m_, inst));
      if (op == Opcode::kTuple) {
        for (int32_t o : inst.operands) {
          const auto& v = vars[static_cast<size_t>(o)];
          vars[i].insert(vars[i].end(), v.begin(), v.end());
        }
        continue;
      }
      if (op == Opcode::kGetTupleElement) {
        const hlo::Attribute* a = inst.FindAttribute("index");
        if (a == nullptr) return Error(Malformed(inst, "no index"));
        HLOCACHE_ASSIGN_OR_RETURN(int64_t k, m_.Int(*a));
        const auto& v = vars[static_cast<size_t>(inst.operands[0])];
        if (k < 0 || static_cast<size_t>(k) >= v.size() || !inst.shape.IsArray()) {
          return Error(Unsupported(inst, "this get-tuple-element in a reducer"));
        }
        vars[i] = {v[static_cast<size_t>(k)]};
        continue;
      }
      if (!inst.has_shape() || !inst.shape.IsArray() || ElementCount(inst.shape) != 1 ||
          DeviceType(inst.shape.type) == nullptr) {
        return Error(Unsupported(inst, "a reducer value that is not a scalar"));
      }
      std::vector<const Shape*> shapes;
      std::vector<std::string> in;
      for (int32_t o : inst.operands) {
        const Instruction& operand = comp.instructions[static_cast<size_t>(o)];
        if (!operand.shape.IsArray() || vars[static_cast<size_t>(o)].size() != 1) {
          return Error(Unsupported(inst, "a tuple operand in a reducer"));
        }
        shapes.push_back(&operand.shape);
        in.push_back(vars[static_cast<size_t>(o)][0]);
      }
      HLOCACHE_RETURN_IF_ERROR(interp::CheckShapes(m_, inst, shapes));
      std::string expr;
      if (op == Opcode::kConstant) {
        HLOCACHE_ASSIGN_OR_RETURN(std::string k, Constant(inst));
        expr = k + "[0]";
      } else if (IsElementwise(inst) || op == Opcode::kBroadcast) {
        HLOCACHE_ASSIGN_OR_RETURN(expr, ElementExpr(inst, in, shapes));
      } else {
        return Error(Unsupported(inst, "'" + std::string(hlo::OpcodeName(op)) + "' in a reducer"));
      }
      const std::string v = "v" + std::to_string(i);
      body += "  const " + std::string(CType(inst.shape.type)) + " " + v + " = " + expr + ";\n";
      vars[i] = {v};
    }
    std::vector<const Shape*> results;
    hlo::AppendLeafShapes(comp.instructions[static_cast<size_t>(comp.root)].shape, results);
    const auto& out = vars[static_cast<size_t>(comp.root)];
    if (out.size() != results.size()) {
      return Error(Malformed(comp.instructions[static_cast<size_t>(comp.root)],
                             "the reducer's root does not have its shape"));
    }
    for (size_t j = 0; j < out.size(); ++j) {
      sig += std::string(sig.empty() ? "" : ", ") + CType(results[j]->type) + "* r" +
             std::to_string(j);
      body += "  *r" + std::to_string(j) + " = " + out[j] + ";\n";
    }
    functions_ += "inline void " + name + "(" + sig + ") {\n" + body + "}\n\n";
    scalar_functions_[c] = name;
    return name;
  }

  // reduce (variadic): one thread per result element folds the reduced dimensions in row-major
  // order from the inits, as the interpreter does.
  Status Reduce(Frame& f, int32_t index, const Instruction& inst) {
    const size_t n = inst.operands.size() / 2;
    if (inst.callees.size() != 1) return Unsupported(inst, "a reduce without one computation");
    const Computation& fn = m_.computations[static_cast<size_t>(inst.callees[0])];
    if (fn.parameters.size() != 2 * n || fn.root < 0) {
      return Malformed(inst, "the reduction computation does not take 2 scalars per operand");
    }
    for (size_t k = 0; k < 2 * n; ++k) {
      const Shape& p = fn.instructions[static_cast<size_t>(fn.parameters[k])].shape;
      if (!p.IsArray() || !p.dims.empty() || p.type != OperandShape(f, inst, k % n).type) {
        return Malformed(inst, "the reduction computation's parameter " + std::to_string(k) +
                                   " is not a scalar of its operand's type");
      }
    }
    HLOCACHE_ASSIGN_OR_RETURN(std::vector<int64_t> d, IntList(inst, "dimensions"));
    const auto& id = OperandShape(f, inst, 0).dims;
    const auto is = hlo::RowMajorStrides(id);
    std::vector<bool> reduced(id.size(), false);
    for (int64_t x : d) reduced[static_cast<size_t>(x)] = true;
    std::vector<int64_t> kd, ks, rd, rs;
    for (size_t k = 0; k < id.size(); ++k) {
      (reduced[k] ? rd : kd).push_back(id[k]);
      (reduced[k] ? rs : ks).push_back(is[k]);
    }
    bool swapped = false;
    const char* helper =
        n == 1 ? OneOpCombiner(fn, OperandShape(f, inst, 0).type, swapped) : nullptr;
    std::string reducer;
    if (helper == nullptr) {
      HLOCACHE_ASSIGN_OR_RETURN(reducer, ScalarFunction(inst.callees[0]));
    }
    std::set<int64_t> reads;
    std::vector<Expr> operands;
    for (size_t k = 0; k < n; ++k) {
      Expr e = Read(Operand(f, inst, k));
      reads.insert(e.buffers.begin(), e.buffers.end());
      operands.push_back(std::move(e));
    }
    std::vector<const Shape*> leaves;
    hlo::AppendLeafShapes(inst.shape, leaves);
    Value out;
    std::vector<int64_t> outs;
    std::string body;
    for (size_t k = 0; k < n; ++k) {
      Val& init = Operand(f, inst, n + k);
      HLOCACHE_RETURN_IF_ERROR(Materialize(init));
      const Expr e = At(init, "0");
      reads.insert(e.buffers.begin(), e.buffers.end());
      body += "    " + std::string(CType(OperandShape(f, inst, k).type)) + " acc" +
              std::to_string(k) + " = " + e.code + ";\n";
      Val v;
      v.shape = leaves[k];
      v.buffer = NewBuffer(*leaves[k]);
      outs.push_back(v.buffer);
      out.push_back(std::move(v));
    }
    // The result's index q is i's name outside; inside the fold, i is the element read.
    std::string kept_digits = "    int64_t base_ = 0;\n    {\n      int64_t r_ = q_;\n";
    for (size_t k = kd.size(); k-- > 0;) {
      kept_digits += "      base_ += (r_ % " + Num(kd[k]) + ") * " + Num(ks[k]) +
                     ";\n      r_ /= " + Num(kd[k]) + ";\n";
    }
    kept_digits += "    }\n";
    std::string step;
    for (size_t k = 0; k < n; ++k) {
      step += "      const " + std::string(CType(OperandShape(f, inst, k).type)) + " x" +
              std::to_string(k) + " = " + operands[k].code + ";\n";
    }
    if (helper != nullptr) {
      const std::string t = CType(OperandShape(f, inst, 0).type);
      step += "      acc0 = " + std::string(helper) + "<" + t + ">(" +
              (swapped ? "x0, acc0" : "acc0, x0") + ");\n";
    } else {
      std::string args;
      for (size_t k = 0; k < n; ++k) args += (k ? ", acc" : "acc") + std::to_string(k);
      for (size_t k = 0; k < n; ++k) args += ", x" + std::to_string(k);
      for (size_t k = 0; k < n; ++k) {
        step += "      " + std::string(CType(OperandShape(f, inst, k).type)) + " next" +
                std::to_string(k) + ";\n";
        args += ", &next" + std::to_string(k);
      }
      step += "      " + reducer + "(" + args + ");\n";
      for (size_t k = 0; k < n; ++k) {
        step += "      acc" + std::to_string(k) + " = next" + std::to_string(k) + ";\n";
      }
    }
    const int64_t reduced_count = Product(rd);
    std::string fold = "    for (int64_t j_ = 0; j_ < " + Num(reduced_count) + "; ++j_) {\n" +
                       "      int64_t i = base_;\n      {\n        int64_t r_ = j_;\n";
    for (size_t k = rd.size(); k-- > 0;) {
      fold += "        i += (r_ % " + Num(rd[k]) + ") * " + Num(rs[k]) +
              ";\n        r_ /= " + Num(rd[k]) + ";\n";
    }
    fold += "      }\n" + step + "    }\n";
    std::string store;
    for (size_t k = 0; k < n; ++k) {
      store += "    " + B(outs[k]) + "[q_] = acc" + std::to_string(k) + ";\n";
    }
    Launch(outs, reads, Product(kd),
           "    const int64_t q_ = i;\n" + kept_digits + body + fold + store);
    f.values[static_cast<size_t>(index)] = std::move(out);
    return Status::Ok();
  }

  const hlo::Module& m_;
  CudaPlan plan_;
  std::vector<std::string> buffer_types_;
  std::string constants_, functions_, kernels_;
  std::map<int32_t, std::string> scalar_functions_;
  std::vector<int32_t> active_;  // The computations being inlined, outermost first.
  int kernel_count_ = 0, constant_count_ = 0, table_count_ = 0;
};

}  // namespace

std::string CudaTargetArch(std::string_view target) {
  if (target == "cuda-sm_80") return "sm_80";
  if (target == "cuda-sm_90") return "sm_90";
  return "";
}

Result<CudaProgram> LowerToCuda(const hlo::Module& module, std::string_view arch) {
  if (arch != "sm_80" && arch != "sm_90") {
    return Error(InvalidArgument("no CUDA architecture " + std::string(arch) +
                                 " (the targets are cuda-sm_80 and cuda-sm_90)"));
  }
  return CudaLowering(module, std::string(arch)).Run();
}

}  // namespace hlocache::compiler
