// dot: batch, free and contracting dimensions, accumulated in double (or int64).
#include "compiler/interp/evaluator.h"

namespace hlocache::interp::internal {

template <typename Acc, typename LhsAt, typename RhsAt>
void Evaluator::DotRows(const std::vector<size_t>& l_batch, const std::vector<size_t>& l_free,
                        const std::vector<size_t>& l_con, const std::vector<size_t>& r_batch,
                        const std::vector<size_t>& r_free, const std::vector<size_t>& r_con,
                        Literal& out, LhsAt lhs_at, RhsAt rhs_at) {
  const size_t m_size = l_free.size(), n_size = r_free.size(), k_size = l_con.size();
  // Rows of results are computed kRows at a time, each load of rhs serving all of them.
  constexpr size_t kRows = 4;
  std::vector<Acc> rhs_dense(k_size * n_size), lhs_rows(kRows * k_size), acc(kRows * n_size);
  size_t i = 0;
  for (size_t b = 0; b < l_batch.size(); ++b) {
    for (size_t k = 0; k < k_size; ++k) {
      for (size_t n = 0; n < n_size; ++n) {
        rhs_dense[k * n_size + n] = rhs_at(r_batch[b] + r_con[k] + r_free[n]);
      }
    }
    for (size_t m0 = 0; m0 < m_size; m0 += kRows) {
      const size_t rows = std::min(kRows, m_size - m0);
      for (size_t r = 0; r < kRows; ++r) {
        for (size_t k = 0; k < k_size; ++k) {
          // Rows past the end multiply zeros; their results are not stored.
          lhs_rows[r * k_size + k] =
              r < rows ? lhs_at(l_batch[b] + l_free[m0 + r] + l_con[k]) : Acc{0};
        }
      }
      std::fill(acc.begin(), acc.end(), Acc{0});
      Acc* __restrict a0 = acc.data();
      Acc* __restrict a1 = a0 + n_size;
      Acc* __restrict a2 = a1 + n_size;
      Acc* __restrict a3 = a2 + n_size;
      for (size_t k = 0; k < k_size; ++k) {
        const Acc x0 = lhs_rows[k], x1 = lhs_rows[k_size + k];
        const Acc x2 = lhs_rows[2 * k_size + k], x3 = lhs_rows[3 * k_size + k];
        const Acc* __restrict row = rhs_dense.data() + k * n_size;
        auto step = [&](size_t n) {
          const Acc y = row[n];
          a0[n] += x0 * y;
          a1[n] += x1 * y;
          a2[n] += x2 * y;
          a3[n] += x3 * y;
        };
        // Fixed-size blocks, which the compiler turns into vector instructions at -O2.
        constexpr size_t kBlock = 8;
        size_t n = 0;
        for (; n + kBlock <= n_size; n += kBlock) {
          for (size_t j = 0; j < kBlock; ++j) step(n + j);
        }
        for (; n < n_size; ++n) step(n);
      }
      for (size_t r = 0; r < rows; ++r) {
        for (size_t n = 0; n < n_size; ++n, ++i) {
          if constexpr (std::is_floating_point_v<Acc>) {
            out.SetFloat(i, acc[r * n_size + n]);
          } else {
            out.SetInt(i, static_cast<int64_t>(acc[r * n_size + n]));
          }
        }
      }
    }
  }
}

// dot: output dims are the batch dims, then lhs's free dims, then rhs's free dims. Each
// result element sums its products in row-major order of the contracting dimensions,
// starting from zero. The loops run over a dense copy of one batch of rhs, with a row of
// results accumulated at once, so that the innermost loop walks memory in order: the sums
// and their order are those of the one-element-at-a-time definition.
Status Evaluator::Dot(const Instruction& inst, const Literal& lhs, const Literal& rhs,
                      Literal& out) const {
  const auto lb = IntsOrEmpty(inst, "lhs_batch_dims"), rb = IntsOrEmpty(inst, "rhs_batch_dims");
  const auto lc = IntsOrEmpty(inst, "lhs_contracting_dims");
  const auto rc = IntsOrEmpty(inst, "rhs_contracting_dims");
  if (lb.size() != rb.size() || lc.size() != rc.size()) return Unsupported(inst, "this dot");
  const auto& ld = lhs.shape().dims;
  const auto& rd = rhs.shape().dims;
  auto free_dims = [](size_t rank, std::span<const int64_t> a, std::span<const int64_t> b) {
    std::vector<int64_t> f;
    for (size_t d = 0; d < rank; ++d) {
      if (std::find(a.begin(), a.end(), static_cast<int64_t>(d)) == a.end() &&
          std::find(b.begin(), b.end(), static_cast<int64_t>(d)) == b.end()) {
        f.push_back(static_cast<int64_t>(d));
      }
    }
    return f;
  };
  const auto lf = free_dims(ld.size(), lb, lc), rf = free_dims(rd.size(), rb, rc);
  const auto ls = hlo::RowMajorStrides(ld), rs = hlo::RowMajorStrides(rd);
  // The offsets, in row-major order, of every index over the dimensions `group` of an
  // operand with dimensions `dims` and strides `strides`.
  auto offsets = [](std::span<const int64_t> group, std::span<const int64_t> dims,
                    std::span<const int64_t> strides) {
    std::vector<int64_t> sizes;
    for (int64_t d : group) sizes.push_back(dims[static_cast<size_t>(d)]);
    std::vector<size_t> result;
    if (std::any_of(sizes.begin(), sizes.end(), [](int64_t n) { return n <= 0; })) {
      return result;
    }
    std::vector<int64_t> index(sizes.size(), 0);
    do {
      int64_t off = 0;
      for (size_t j = 0; j < index.size(); ++j) {
        off += index[j] * strides[static_cast<size_t>(group[j])];
      }
      result.push_back(static_cast<size_t>(off));
    } while (!index.empty() && Next(index, sizes));
    return result;
  };
  const auto l_batch = offsets(lb, ld, ls), r_batch = offsets(rb, rd, rs);
  const auto l_free = offsets(lf, ld, ls), r_free = offsets(rf, rd, rs);
  const auto l_con = offsets(lc, ld, ls), r_con = offsets(rc, rd, rs);
  if (l_batch.size() != r_batch.size() || l_con.size() != r_con.size() ||
      l_batch.size() * l_free.size() * r_free.size() != out.size()) {
    return Unsupported(inst, "this dot's shapes");
  }
  if (out.is_float()) {
    // An integer operand's elements are first converted to the result's type.
    const PrimitiveType t = out.type();
    auto as_result = [t](const Literal& l, size_t i) {
      return l.is_float() ? l.AsDouble(i) : RoundToType(l.AsDouble(i), t);
    };
    DotRows<double>(
        l_batch, l_free, l_con, r_batch, r_free, r_con, out,
        [&](size_t i) { return as_result(lhs, i); }, [&](size_t i) { return as_result(rhs, i); });
  } else {
    // Integers wrap: the products and sums are taken modulo 2^64, then to the result type.
    DotRows<uint64_t>(
        l_batch, l_free, l_con, r_batch, r_free, r_con, out,
        [&](size_t i) { return static_cast<uint64_t>(lhs.GetInt(i)); },
        [&](size_t i) { return static_cast<uint64_t>(rhs.GetInt(i)); });
  }
  return Status::Ok();
}

}  // namespace hlocache::interp::internal
