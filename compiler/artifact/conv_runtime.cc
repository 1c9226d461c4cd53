#include "compiler/artifact/conv_runtime.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>  // Types and declarations only: the library is opened at run time.

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace hlocache::compiler {
namespace {

// The buffers kept shapes may hold for operands in oneDNN's layouts, all together.
constexpr size_t kKeptConvolutionBytes = size_t{256} << 20;

// oneDNN's C API, looked up in the library opened at run time.
struct Api {
#define HLOCACHE_DNNL_FUNCTIONS(X)                                                           \
  X(dnnl_engine_create)                                                                      \
  X(dnnl_stream_create)                                                                      \
  X(dnnl_stream_destroy) X(dnnl_stream_wait) X(dnnl_memory_desc_init_by_strides)             \
      X(dnnl_memory_desc_init_by_tag) X(dnnl_memory_desc_equal) X(dnnl_memory_desc_get_size) \
          X(dnnl_dilated_convolution_forward_desc_init) X(dnnl_primitive_attr_create)        \
              X(dnnl_primitive_attr_destroy) X(dnnl_primitive_attr_set_fpmath_mode)          \
                  X(dnnl_primitive_desc_create) X(dnnl_primitive_desc_destroy)               \
                      X(dnnl_primitive_desc_query_md) X(dnnl_reorder_primitive_desc_create)  \
                          X(dnnl_primitive_create) X(dnnl_primitive_destroy)                 \
                              X(dnnl_primitive_execute) X(dnnl_memory_create)                \
                                  X(dnnl_memory_destroy) X(dnnl_memory_set_data_handle)
#define HLOCACHE_DNNL_FIELD(name) decltype(&::name) name = nullptr;
  HLOCACHE_DNNL_FUNCTIONS(HLOCACHE_DNNL_FIELD)
#undef HLOCACHE_DNNL_FIELD
  // libgomp's, which oneDNN runs on (Debian builds it with OpenMP); absent under another runtime.
  void (*omp_set_num_threads)(int) = nullptr;
  int (*omp_get_max_threads)() = nullptr;
  dnnl_engine_t engine = nullptr;
};

const Api* LoadApi() {
  static const Api* api = []() -> const Api* {
    const char* chosen = std::getenv("HLOCACHE_DNNL_LIBRARY");
    const std::string_view name = chosen != nullptr && *chosen ? chosen : "libdnnl.so.2";
    if (name == "none") return nullptr;
    void* handle = ::dlopen(std::string(name).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return nullptr;
    auto* a = new Api;  // Kept for the process, as the library is: executables hold its functions.
    bool complete = true;
#define HLOCACHE_DNNL_LOOKUP(name)                                       \
  a->name = reinterpret_cast<decltype(a->name)>(::dlsym(handle, #name)); \
  complete = complete && a->name != nullptr;
    HLOCACHE_DNNL_FUNCTIONS(HLOCACHE_DNNL_LOOKUP)
#undef HLOCACHE_DNNL_LOOKUP
    a->omp_set_num_threads =
        reinterpret_cast<void (*)(int)>(::dlsym(handle, "omp_set_num_threads"));
    a->omp_get_max_threads = reinterpret_cast<int (*)()>(::dlsym(handle, "omp_get_max_threads"));
    if (!complete || a->dnnl_engine_create(&a->engine, dnnl_cpu, 0) != dnnl_success) {
      delete a;
      ::dlclose(handle);
      return nullptr;
    }
    return a;
  }();
  return api;
}

// One shape's primitives and the memory objects they run on: the user's operands (their
// pointers set at each run) and, where oneDNN's layout differs from the user's, a buffer in its
// layout with the reorder into it (or, for the result, out of it).
struct Shape {
  explicit Shape(const Api& library) : api(library) {}
  Shape(const Shape&) = delete;
  Shape& operator=(const Shape&) = delete;
  ~Shape() {
    for (dnnl_primitive_t p : {conv, reorder_src, reorder_weights, reorder_dst}) {
      if (p != nullptr) api.dnnl_primitive_destroy(p);
    }
    for (dnnl_memory_t m : {user_src, user_weights, user_dst, src, weights, dst}) {
      if (m != nullptr) api.dnnl_memory_destroy(m);
    }
    if (stream != nullptr) api.dnnl_stream_destroy(stream);
  }

  const Api& api;
  std::vector<int64_t> signature;  // The threads and every field of the spec.
  std::mutex running;
  size_t bytes = 0;  // Of the buffers in oneDNN's layouts.
  dnnl_stream_t stream = nullptr;
  dnnl_primitive_t conv = nullptr, reorder_src = nullptr, reorder_weights = nullptr,
                   reorder_dst = nullptr;
  dnnl_memory_t user_src = nullptr, user_weights = nullptr, user_dst = nullptr, src = nullptr,
                weights = nullptr, dst = nullptr;
};

std::vector<int64_t> SignatureOf(int threads, const hlocache_conv_spec& s) {
  std::vector<int64_t> v = {threads,
                            s.spatial,
                            s.out_batch,
                            s.groups,
                            s.feature_grouped,
                            s.batch_grouped,
                            s.kernel_in_features,
                            s.outputs_per_group,
                            s.in_batch_stride,
                            s.in_feature_stride,
                            s.kernel_in_stride,
                            s.kernel_out_stride,
                            s.out_batch_stride,
                            s.out_feature_stride};
  for (int64_t d = 0; d < s.spatial; ++d) {
    const hlocache_conv_dim& w = s.dims[d];
    v.insert(v.end(),
             {w.in_extent, w.in_stride, w.size, w.kernel_stride, w.out_extent, w.out_stride,
              w.stride, w.pad_low, w.base_dilation, w.window_dilation, w.reversed});
  }
  return v;
}

// Whether oneDNN is asked to take this convolution at all (the header says which).
bool Takes(const hlocache_conv_spec& s) {
  if (s.spatial < 1 || s.spatial > 3 || s.batch_grouped != 0) return false;
  if (s.feature_grouped == 0 && s.groups != 1) return false;
  if (s.out_batch <= 0 || s.groups <= 0 || s.kernel_in_features <= 0 || s.outputs_per_group <= 0) {
    return false;
  }
  int64_t macs = s.out_batch * s.groups * s.outputs_per_group * s.kernel_in_features;
  for (int64_t d = 0; d < s.spatial; ++d) {
    const hlocache_conv_dim& w = s.dims[d];
    if (w.base_dilation != 1 || w.reversed != 0 || w.pad_low < 0 || w.stride < 1 ||
        w.window_dilation < 1 || w.size < 1 || w.in_extent < 1 || w.out_extent < 1) {
      return false;
    }
    macs *= w.size * w.out_extent;
  }
  return macs >= kMinDnnlMacs;
}

// A reorder from `from` to `to`, or null when it cannot be made.
dnnl_primitive_t MakeReorder(const Api& api, const dnnl_memory_desc_t* from,
                             const dnnl_memory_desc_t* to) {
  dnnl_primitive_desc_t pd = nullptr;
  if (api.dnnl_reorder_primitive_desc_create(&pd, from, api.engine, to, api.engine, nullptr) !=
      dnnl_success) {
    return nullptr;
  }
  dnnl_primitive_t p = nullptr;
  if (api.dnnl_primitive_create(&p, pd) != dnnl_success) p = nullptr;
  api.dnnl_primitive_desc_destroy(pd);
  return p;
}

// The user's operand `user` as memory, and where oneDNN chose another layout (`chosen`), a buffer
// in it and the reorder between them (into the buffer for inputs, out of it for the result).
bool Bind(Shape& shape, const dnnl_memory_desc_t& user, const dnnl_memory_desc_t* chosen,
          bool is_result, dnnl_memory_t& user_memory, dnnl_memory_t& buffer,
          dnnl_primitive_t& reorder) {
  const Api& api = shape.api;
  if (api.dnnl_memory_create(&user_memory, &user, api.engine, DNNL_MEMORY_NONE) != dnnl_success) {
    user_memory = nullptr;
    return false;
  }
  if (api.dnnl_memory_desc_equal(&user, chosen) != 0) return true;
  if (api.dnnl_memory_create(&buffer, chosen, api.engine, DNNL_MEMORY_ALLOCATE) != dnnl_success) {
    buffer = nullptr;
    return false;
  }
  shape.bytes += api.dnnl_memory_desc_get_size(chosen);
  reorder = is_result ? MakeReorder(api, chosen, &user) : MakeReorder(api, &user, chosen);
  return reorder != nullptr;
}

std::unique_ptr<Shape> MakeShape(const Api& api, int threads, const hlocache_conv_spec& s) {
  auto shape = std::make_unique<Shape>(api);
  shape->signature = SignatureOf(threads, s);
  const int n = static_cast<int>(s.spatial);
  const int64_t g = s.feature_grouped != 0 ? s.groups : 1, kif = s.kernel_in_features,
                opg = s.outputs_per_group;
  dnnl_dims_t src_dims = {s.out_batch, g * kif},
              src_strides = {s.in_batch_stride, s.in_feature_stride};
  dnnl_dims_t dst_dims = {s.out_batch, g * opg},
              dst_strides = {s.out_batch_stride, s.out_feature_stride};
  // Weights as [out feature, in feature, window...], or [group, out feature of the group, ...].
  dnnl_dims_t w_dims = {}, w_strides = {};
  int w_lead = 0;
  if (g > 1) {
    w_dims[w_lead] = g, w_strides[w_lead++] = opg * s.kernel_out_stride;
  }
  w_dims[w_lead] = opg, w_strides[w_lead++] = s.kernel_out_stride;
  w_dims[w_lead] = kif, w_strides[w_lead++] = s.kernel_in_stride;
  dnnl_dims_t strides = {}, dilates = {}, pad_l = {}, pad_r = {};
  for (int d = 0; d < n; ++d) {
    const hlocache_conv_dim& w = s.dims[d];
    src_dims[2 + d] = w.in_extent, src_strides[2 + d] = w.in_stride;
    dst_dims[2 + d] = w.out_extent, dst_strides[2 + d] = w.out_stride;
    w_dims[w_lead + d] = w.size, w_strides[w_lead + d] = w.kernel_stride;
    strides[d] = w.stride;
    dilates[d] = w.window_dilation - 1;  // oneDNN counts the holes.
    pad_l[d] = w.pad_low;
    // The end padding that reaches the last window's end: negative where inputs past it are
    // never read, which oneDNN takes.
    const int64_t extent = (w.size - 1) * w.window_dilation + 1;
    pad_r[d] = (w.out_extent - 1) * w.stride + extent - w.in_extent - w.pad_low;
  }
  dnnl_memory_desc_t user_src, user_w, user_dst, any_src, any_w, any_dst;
  if (api.dnnl_memory_desc_init_by_strides(&user_src, n + 2, src_dims, dnnl_f32, src_strides) !=
          dnnl_success ||
      api.dnnl_memory_desc_init_by_strides(&user_w, w_lead + n, w_dims, dnnl_f32, w_strides) !=
          dnnl_success ||
      api.dnnl_memory_desc_init_by_strides(&user_dst, n + 2, dst_dims, dnnl_f32, dst_strides) !=
          dnnl_success ||
      api.dnnl_memory_desc_init_by_tag(&any_src, n + 2, src_dims, dnnl_f32, dnnl_format_tag_any) !=
          dnnl_success ||
      api.dnnl_memory_desc_init_by_tag(&any_w, w_lead + n, w_dims, dnnl_f32, dnnl_format_tag_any) !=
          dnnl_success ||
      api.dnnl_memory_desc_init_by_tag(&any_dst, n + 2, dst_dims, dnnl_f32, dnnl_format_tag_any) !=
          dnnl_success) {
    return nullptr;
  }
  dnnl_convolution_desc_t conv_desc;
  if (api.dnnl_dilated_convolution_forward_desc_init(
          &conv_desc, dnnl_forward_inference, dnnl_convolution_direct, &any_src, &any_w, nullptr,
          &any_dst, strides, dilates, pad_l, pad_r) != dnnl_success) {
    return nullptr;
  }
  // Float arithmetic throughout, whatever ONEDNN_DEFAULT_FPMATH_MODE says.
  dnnl_primitive_attr_t attr = nullptr;
  if (api.dnnl_primitive_attr_create(&attr) != dnnl_success) return nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  const bool made =
      api.dnnl_primitive_attr_set_fpmath_mode(attr, dnnl_fpmath_mode_strict) == dnnl_success &&
      api.dnnl_primitive_desc_create(&pd, &conv_desc, attr, api.engine, nullptr) == dnnl_success;
  api.dnnl_primitive_attr_destroy(attr);
  if (!made) return nullptr;
  Shape& sh = *shape;
  const bool bound =
      api.dnnl_primitive_create(&sh.conv, pd) == dnnl_success &&
      Bind(sh, user_src, api.dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), false,
           sh.user_src, sh.src, sh.reorder_src) &&
      Bind(sh, user_w, api.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), false,
           sh.user_weights, sh.weights, sh.reorder_weights) &&
      Bind(sh, user_dst, api.dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), true,
           sh.user_dst, sh.dst, sh.reorder_dst) &&
      api.dnnl_stream_create(&sh.stream, api.engine, dnnl_stream_default_flags) == dnnl_success;
  api.dnnl_primitive_desc_destroy(pd);
  if (!bound) return nullptr;
  return shape;
}

bool Run(Shape& shape, const float* lhs, const float* rhs, float* out) {
  const Api& api = shape.api;
  // oneDNN reads the inputs only; its memory objects take non-const pointers.
  if (api.dnnl_memory_set_data_handle(shape.user_src, const_cast<float*>(lhs)) != dnnl_success ||
      api.dnnl_memory_set_data_handle(shape.user_weights, const_cast<float*>(rhs)) !=
          dnnl_success ||
      api.dnnl_memory_set_data_handle(shape.user_dst, out) != dnnl_success) {
    return false;
  }
  auto reorder = [&](dnnl_primitive_t p, dnnl_memory_t from, dnnl_memory_t to) {
    if (p == nullptr) return true;
    const dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return api.dnnl_primitive_execute(p, shape.stream, 2, args) == dnnl_success;
  };
  const dnnl_exec_arg_t conv_args[] = {
      {DNNL_ARG_SRC, shape.src != nullptr ? shape.src : shape.user_src},
      {DNNL_ARG_WEIGHTS, shape.weights != nullptr ? shape.weights : shape.user_weights},
      {DNNL_ARG_DST, shape.dst != nullptr ? shape.dst : shape.user_dst}};
  return reorder(shape.reorder_src, shape.user_src, shape.src) &&
         reorder(shape.reorder_weights, shape.user_weights, shape.weights) &&
         api.dnnl_primitive_execute(shape.conv, shape.stream, 3, conv_args) == dnnl_success &&
         reorder(shape.reorder_dst, shape.dst, shape.user_dst) &&
         api.dnnl_stream_wait(shape.stream) == dnnl_success;
}

std::atomic<uint64_t> computed{0};

// The kept shapes, most recently used first.
struct Kept {
  std::mutex mutex;
  std::list<std::shared_ptr<Shape>> shapes;
};

// The shape for `signature`, made if it is not kept; null when oneDNN refuses it. Keeps at most
// kKeptConvolutions shapes and kKeptConvolutionBytes of their buffers (the one returned always).
std::shared_ptr<Shape> Find(const Api& api, int threads, const hlocache_conv_spec& s) {
  static Kept& kept = *new Kept;  // Never destroyed: executables may run during exit.
  const std::vector<int64_t> signature = SignatureOf(threads, s);
  {
    std::lock_guard<std::mutex> lock(kept.mutex);
    for (auto it = kept.shapes.begin(); it != kept.shapes.end(); ++it) {
      if ((*it)->signature == signature) {
        kept.shapes.splice(kept.shapes.begin(), kept.shapes, it);
        return kept.shapes.front();
      }
    }
  }
  std::shared_ptr<Shape> made = MakeShape(api, threads, s);
  if (made == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(kept.mutex);
  kept.shapes.push_front(made);
  size_t bytes = 0;
  int count = 0;
  for (auto it = kept.shapes.begin(); it != kept.shapes.end();) {
    bytes += (*it)->bytes;
    ++count;
    if (it != kept.shapes.begin() && (count > kKeptConvolutions || bytes > kKeptConvolutionBytes)) {
      bytes -= (*it)->bytes;
      --count;
      it = kept.shapes.erase(it);  // A run holding it keeps it alive until it ends.
    } else {
      ++it;
    }
  }
  return made;
}

}  // namespace

int DnnlConvolve(int threads, const hlocache_conv_spec* spec, const float* lhs, const float* rhs,
                 float* out) {
  const Api* api = LoadApi();
  if (api == nullptr || spec == nullptr || !Takes(*spec)) return 1;
  threads = std::max(threads, 1);
  // oneDNN sizes its work by the calling thread's OpenMP thread count, when the primitive is made
  // and when it runs; the caller's count is put back after.
  const int before = api->omp_get_max_threads != nullptr ? api->omp_get_max_threads() : 0;
  if (api->omp_set_num_threads != nullptr) api->omp_set_num_threads(threads);
  int status = 1;
  if (std::shared_ptr<Shape> shape = Find(*api, threads, *spec); shape != nullptr) {
    std::lock_guard<std::mutex> lock(shape->running);
    status = Run(*shape, lhs, rhs, out) ? 0 : 1;
  }
  if (status == 0) computed.fetch_add(1, std::memory_order_relaxed);
  if (api->omp_set_num_threads != nullptr && before > 0) api->omp_set_num_threads(before);
  return status;
}

bool HasDnnl() { return LoadApi() != nullptr; }

uint64_t DnnlConvolutionCount() { return computed.load(std::memory_order_relaxed); }

}  // namespace hlocache::compiler
