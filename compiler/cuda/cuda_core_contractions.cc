// The contractions as CUDA kernels: dot (tiled in shared memory, sums in the interpreter's
// order) and reduce (a scalar function of the reducer folded over the reduced dimensions).
#include "compiler/cuda/cuda_lowering.h"

namespace hlocache::compiler::cuda_lowering_internal {

// The row-major offsets of every index over `group` (sizes and strides), as a device table.
std::string CudaLowering::OffsetTable(std::span<const int64_t> sizes,
                                      std::span<const int64_t> strides) {
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
Status CudaLowering::Dot(Frame& f, int32_t index, const Instruction& inst) {
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
  auto add_free = [](const Shape& s, std::span<const int64_t> strides, std::span<const int64_t> b,
                     std::span<const int64_t> c, Group& g) {
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
      name + "(" + sig + ") {\n" + "  __shared__ " + acc + " as_[" + T + "][" + T + "], bs_[" + T +
      "][" + T + "];\n" + "  const int tx = threadIdx.x, ty = threadIdx.y;\n" +
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
      b.code + ") : 0;\n      }\n" + "      __syncthreads();\n" + "      const int kn = " + Num(K) +
      " - k0 < " + T + " ? (int)(" + Num(K) + " - k0) : " + T + ";\n" +
      "      for (int kk = 0; kk < kn; ++kk) s_ += as_[ty][kk] * bs_[kk][tx];\n" +
      "      __syncthreads();\n    }\n" + "    const int64_t m_ = m0 + ty, n_ = n0 + tx;\n" +
      "    if (m_ < " + Num(M) + " && n_ < " + Num(N) + ") " + B(out.buffer) + "[(b_ * " + Num(M) +
      " + m_) * " + Num(N) + " + n_] = " + store + ";\n  }\n}\n\n";
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
Result<std::string> CudaLowering::ScalarFunction(int32_t c) {
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
    sig +=
        std::string(p ? ", " : "") + "const " + CType(param.shape.type) + " a" + std::to_string(p);
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
    sig +=
        std::string(sig.empty() ? "" : ", ") + CType(results[j]->type) + "* r" + std::to_string(j);
    body += "  *r" + std::to_string(j) + " = " + out[j] + ";\n";
  }
  functions_ += "inline void " + name + "(" + sig + ") {\n" + body + "}\n\n";
  scalar_functions_[c] = name;
  return name;
}

// reduce (variadic): one thread per result element folds the reduced dimensions in row-major
// order from the inits, as the interpreter does.
Status CudaLowering::Reduce(Frame& f, int32_t index, const Instruction& inst) {
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
  const char* helper = n == 1 ? OneOpCombiner(fn, OperandShape(f, inst, 0).type, swapped) : nullptr;
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

}  // namespace hlocache::compiler::cuda_lowering_internal
