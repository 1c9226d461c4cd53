// The loader's oneDNN convolution (compiler/artifact/conv_runtime.h) called directly: results
// against a reference in double, outputs with gaps left as they were, convolutions run from
// several threads at once, and convolutions evicted and prepared again. The compiled path through
// it is checked against the interpreter in ops/convolution_test.cc.
#include "compiler/artifact/conv_runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

namespace hlocache::compiler {
namespace {

// A 2-D NHWC convolution with an HWIO kernel, padded to keep the size; the output's batch stride
// has `gap` unused floats after each batch element.
struct Nhwc {
  int64_t batch, height, width, in_features, out_features, gap = 0;
  std::vector<hlocache_conv_dim> dims;
  hlocache_conv_spec spec{};

  Nhwc(int64_t b, int64_t h, int64_t w, int64_t i, int64_t o, int64_t gap_floats = 0)
      : batch(b), height(h), width(w), in_features(i), out_features(o), gap(gap_floats) {
    dims = {
        {h, w * i, 3, 3 * i * o, h, w * o, 1, 1, 1, 1, 0},
        {w, i, 3, i * o, w, o, 1, 1, 1, 1, 0},
    };
    spec = {2, b, 1, 0, 0, i, o, h * w * i, 1, o, 1, h * w * o + gap_floats, 1, dims.data()};
  }
  size_t input_size() const { return static_cast<size_t>(batch * height * width * in_features); }
  size_t kernel_size() const { return static_cast<size_t>(9 * in_features * out_features); }
  size_t output_size() const {
    return static_cast<size_t>(batch * (height * width * out_features + gap));
  }
};

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Each output within 1e-5 of the sum of its terms' magnitudes (sums in any order stay within
// (n - 1) u of it); the gaps still NaN, as they were filled.
void ExpectMatchesReference(const Nhwc& c, const std::vector<float>& x, const std::vector<float>& k,
                            const std::vector<float>& out) {
  int64_t wrong = 0, gaps_written = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t base = b * c.spec.out_batch_stride;
    for (int64_t g = 0; g < c.gap; ++g) {
      if (!std::isnan(out[base + c.height * c.width * c.out_features + g])) ++gaps_written;
    }
    for (int64_t y = 0; y < c.height; ++y) {
      for (int64_t z = 0; z < c.width; ++z) {
        for (int64_t o = 0; o < c.out_features; ++o) {
          double sum = 0, magnitude = 0;
          for (int64_t ky = 0; ky < 3; ++ky) {
            for (int64_t kz = 0; kz < 3; ++kz) {
              const int64_t iy = y + ky - 1, iz = z + kz - 1;
              if (iy < 0 || iz < 0 || iy >= c.height || iz >= c.width) continue;
              for (int64_t i = 0; i < c.in_features; ++i) {
                const double term =
                    double{x[((b * c.height + iy) * c.width + iz) * c.in_features + i]} *
                    k[((ky * 3 + kz) * c.in_features + i) * c.out_features + o];
                sum += term;
                magnitude += std::fabs(term);
              }
            }
          }
          const float got = out[base + (y * c.width + z) * c.out_features + o];
          if (!(std::fabs(got - sum) <= 1e-5 * magnitude + 1e-30)) ++wrong;
        }
      }
    }
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(gaps_written, 0);
}

TEST(ConvRuntimeTest, ConvolvesAsTheReferenceAndLeavesGapsInTheOutputAlone) {
  ASSERT_TRUE(HasDnnl()) << "libdnnl.so.2 (Debian's libdnnl2) is not on this host";
  const Nhwc c(2, 16, 16, 64, 64, /*gap_floats=*/7);
  const std::vector<float> x = Random(c.input_size(), 1), k = Random(c.kernel_size(), 2);
  for (int threads : {1, 2}) {
    std::vector<float> out(c.output_size(), NAN);
    const uint64_t before = DnnlConvolutionCount();
    ASSERT_EQ(DnnlConvolve(threads, &c.spec, x.data(), k.data(), out.data()), 0);
    EXPECT_EQ(DnnlConvolutionCount(), before + 1);
    ExpectMatchesReference(c, x, k, out);
  }
}

TEST(ConvRuntimeTest, DeclinesWhatItDoesNotTake) {
  ASSERT_TRUE(HasDnnl());
  const Nhwc small(1, 8, 8, 16, 16);  // 147,456 multiply-adds: under kMinDnnlMacs.
  std::vector<float> x = Random(small.input_size(), 1), k = Random(small.kernel_size(), 2),
                     out(small.output_size());
  EXPECT_EQ(DnnlConvolve(1, &small.spec, x.data(), k.data(), out.data()), 1);
  Nhwc large(2, 16, 16, 64, 64);
  x = Random(large.input_size(), 1), k = Random(large.kernel_size(), 2);
  out.assign(large.output_size(), 0);
  for (auto mutate :
       {+[](Nhwc& c) { c.dims[0].base_dilation = 2; }, +[](Nhwc& c) { c.dims[1].reversed = 1; },
        +[](Nhwc& c) { c.spec.batch_grouped = 1; }, +[](Nhwc& c) { c.dims[0].pad_low = -1; }}) {
    Nhwc c = large;
    c.spec.dims = c.dims.data();
    mutate(c);
    EXPECT_EQ(DnnlConvolve(1, &c.spec, x.data(), k.data(), out.data()), 1);
  }
  EXPECT_EQ(DnnlConvolve(1, nullptr, x.data(), k.data(), out.data()), 1);
}

// Two convolutions, each run by two threads at once, three times each: one prepared by this
// thread beforehand (so run only by others), one prepared by whichever of its threads comes
// first.
TEST(ConvRuntimeTest, ConvolutionsRunFromSeveralThreadsAtOnce) {
  ASSERT_TRUE(HasDnnl());
  const Nhwc first(2, 16, 16, 64, 64), second(2, 16, 16, 64, 64, /*gap_floats=*/5);
  const std::vector<float> k = Random(first.kernel_size(), 9);
  {
    const std::vector<float> x = Random(first.input_size(), 8);
    std::vector<float> out(first.output_size());
    ASSERT_EQ(DnnlConvolve(1, &first.spec, x.data(), k.data(), out.data()), 0);
  }
  const Nhwc* convs[4] = {&first, &first, &second, &second};
  std::vector<std::vector<float>> inputs, outputs;
  for (uint32_t t = 0; t < 4; ++t) {
    inputs.push_back(Random(convs[t]->input_size(), 10 + t));
    outputs.emplace_back(convs[t]->output_size(), NAN);
  }
  std::vector<int> status(4, -1);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int run = 0; run < 3 && status[t] != 1; ++run) {
        status[t] = DnnlConvolve(1, &convs[t]->spec, inputs[t].data(), k.data(), outputs[t].data());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t t = 0; t < 4; ++t) {
    ASSERT_EQ(status[t], 0);
    ExpectMatchesReference(*convs[t], inputs[t], k, outputs[t]);
  }
}

TEST(ConvRuntimeTest, ConvolutionsPastTheKeptCountArePreparedAgainWithTheSameResults) {
  ASSERT_TRUE(HasDnnl());
  const Nhwc first(2, 16, 16, 64, 64);
  const std::vector<float> x = Random(first.input_size(), 3), k = Random(first.kernel_size(), 4);
  std::vector<float> before(first.output_size()), after(first.output_size());
  ASSERT_EQ(DnnlConvolve(1, &first.spec, x.data(), k.data(), before.data()), 0);
  // As many other convolutions as are kept and one more (only the gap after each batch differs).
  for (int gap = 1; gap <= kKeptConvolutions + 1; ++gap) {
    const Nhwc other(2, 16, 16, 64, 64, gap);
    std::vector<float> out(other.output_size());
    ASSERT_EQ(DnnlConvolve(1, &other.spec, x.data(), k.data(), out.data()), 0) << gap;
  }
  ASSERT_EQ(DnnlConvolve(1, &first.spec, x.data(), k.data(), after.data()), 0);
  EXPECT_EQ(before, after);
  ExpectMatchesReference(first, x, k, after);
}

}  // namespace
}  // namespace hlocache::compiler
