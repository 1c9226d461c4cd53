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

// The buffers kept convolutions may hold (operands in oneDNN's layouts, scratchpads), all
// together.
constexpr size_t kKeptConvolutionBytes = size_t{256} << 20;

// oneDNN's C API, looked up in the library opened at run time.
struct Api {
// clang-format off
#define HLOCACHE_DNNL_FUNCTIONS(X) \
  X(dnnl_engine_create)                           \
  X(dnnl_stream_create)                           \
  X(dnnl_stream_destroy)                          \
  X(dnnl_stream_wait)                             \
  X(dnnl_memory_desc_init_by_strides)             \
  X(dnnl_memory_desc_init_by_tag)                 \
  X(dnnl_memory_desc_equal)                       \
  X(dnnl_memory_desc_get_size)                    \
  X(dnnl_dilated_convolution_forward_desc_init)   \
  X(dnnl_primitive_attr_create)                   \
  X(dnnl_primitive_attr_destroy)                  \
  X(dnnl_primitive_attr_set_fpmath_mode)          \
  X(dnnl_primitive_attr_set_scratchpad_mode)      \
  X(dnnl_primitive_desc_create)                   \
  X(dnnl_primitive_desc_destroy)                  \
  X(dnnl_primitive_desc_query_md)                 \
  X(dnnl_reorder_primitive_desc_create)           \
  X(dnnl_primitive_create)                        \
  X(dnnl_primitive_destroy)                       \
  X(dnnl_primitive_execute)                       \
  X(dnnl_memory_create)                           \
  X(dnnl_memory_destroy)                          \
  X(dnnl_memory_set_data_handle)
// clang-format on
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
#undef HLOCACHE_DNNL_FUNCTIONS

// A primitive and, where it needs one, its own scratchpad: with oneDNN's default (library)
// scratchpad, a primitive must run on the thread that made it, and executables' threads come
// and go.
struct Step {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_t scratchpad = nullptr;
};

// One convolution's primitives and the memory objects they run on: the user's operands (their
// pointers set at each run) and, where oneDNN's layout differs from the user's, a buffer in its
// layout with the reorder into it (or, for the result, out of it).
struct Prepared {
  explicit Prepared(const Api& library) : api(library) {}
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;
  ~Prepared() {
    for (const Step& step : {conv, reorder_src, reorder_weights, reorder_dst}) {
      if (step.primitive != nullptr) api.dnnl_primitive_destroy(step.primitive);
      if (step.scratchpad != nullptr) api.dnnl_memory_destroy(step.scratchpad);
    }
    for (dnnl_memory_t m : {user_src, user_weights, user_dst, src, weights, dst}) {
      if (m != nullptr) api.dnnl_memory_destroy(m);
    }
    if (stream != nullptr) api.dnnl_stream_destroy(stream);
  }

  const Api& api;
  std::vector<int64_t> signature;  // The threads and every field of the spec.
  std::mutex running;
  size_t bytes = 0;  // Of the buffers in oneDNN's layouts and the scratchpads.
  dnnl_stream_t stream = nullptr;
  Step conv, reorder_src, reorder_weights, reorder_dst;
  dnnl_memory_t user_src = nullptr, user_weights = nullptr, user_dst = nullptr, src = nullptr,
                weights = nullptr, dst = nullptr;
};

// Attributes asking for a scratchpad the caller provides and, for the convolution, float
// arithmetic throughout whatever ONEDNN_DEFAULT_FPMATH_MODE says; null when they cannot be made.
dnnl_primitive_attr_t MakeAttributes(const Api& api, bool strict_float) {
  dnnl_primitive_attr_t attr = nullptr;
  if (api.dnnl_primitive_attr_create(&attr) != dnnl_success) return nullptr;
  if (api.dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) !=
          dnnl_success ||
      (strict_float &&
       api.dnnl_primitive_attr_set_fpmath_mode(attr, dnnl_fpmath_mode_strict) != dnnl_success)) {
    api.dnnl_primitive_attr_destroy(attr);
    return nullptr;
  }
  return attr;
}

// The primitive of `pd` and its scratchpad, in `step`.
bool MakeStep(Prepared& prepared, const_dnnl_primitive_desc_t pd, Step& step) {
  const Api& api = prepared.api;
  if (api.dnnl_primitive_create(&step.primitive, pd) != dnnl_success) {
    step.primitive = nullptr;
    return false;
  }
  const dnnl_memory_desc_t* scratchpad =
      api.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  const size_t bytes = scratchpad != nullptr ? api.dnnl_memory_desc_get_size(scratchpad) : 0;
  if (bytes == 0) return true;
  if (api.dnnl_memory_create(&step.scratchpad, scratchpad, api.engine, DNNL_MEMORY_ALLOCATE) !=
      dnnl_success) {
    step.scratchpad = nullptr;
    return false;
  }
  prepared.bytes += bytes;
  return true;
}

// Runs `step` on `args` (and its scratchpad).
bool Execute(const Prepared& prepared, const Step& step, std::vector<dnnl_exec_arg_t> args) {
  if (step.scratchpad != nullptr) args.push_back({DNNL_ARG_SCRATCHPAD, step.scratchpad});
  return prepared.api.dnnl_primitive_execute(step.primitive, prepared.stream,
                                             static_cast<int>(args.size()),
                                             args.data()) == dnnl_success;
}

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
  // In double: a product of a module's extents may pass int64's range.
  double macs = static_cast<double>(s.out_batch) * static_cast<double>(s.groups) *
                static_cast<double>(s.outputs_per_group) *
                static_cast<double>(s.kernel_in_features);
  for (int64_t d = 0; d < s.spatial; ++d) {
    const hlocache_conv_dim& w = s.dims[d];
    if (w.base_dilation != 1 || w.reversed != 0 || w.pad_low < 0 || w.stride < 1 ||
        w.window_dilation < 1 || w.size < 1 || w.in_extent < 1 || w.out_extent < 1) {
      return false;
    }
    macs *= static_cast<double>(w.size) * static_cast<double>(w.out_extent);
  }
  return macs >= static_cast<double>(kMinDnnlMacs);
}

// A reorder from `from` to `to`, in `step`.
bool MakeReorder(Prepared& prepared, const dnnl_memory_desc_t* from, const dnnl_memory_desc_t* to,
                 Step& step) {
  const Api& api = prepared.api;
  dnnl_primitive_attr_t attr = MakeAttributes(api, /*strict_float=*/false);
  if (attr == nullptr) return false;
  dnnl_primitive_desc_t pd = nullptr;
  const bool described = api.dnnl_reorder_primitive_desc_create(&pd, from, api.engine, to,
                                                                api.engine, attr) == dnnl_success;
  api.dnnl_primitive_attr_destroy(attr);
  if (!described) return false;
  const bool made = MakeStep(prepared, pd, step);
  api.dnnl_primitive_desc_destroy(pd);
  return made;
}

// The user's operand `user` as memory, and where oneDNN chose another layout (`chosen`), a buffer
// in it and the reorder between them (into the buffer for inputs, out of it for the result).
bool Bind(Prepared& prepared, const dnnl_memory_desc_t& user, const dnnl_memory_desc_t* chosen,
          bool is_result, dnnl_memory_t& user_memory, dnnl_memory_t& buffer, Step& reorder) {
  const Api& api = prepared.api;
  if (api.dnnl_memory_create(&user_memory, &user, api.engine, DNNL_MEMORY_NONE) != dnnl_success) {
    user_memory = nullptr;
    return false;
  }
  if (api.dnnl_memory_desc_equal(&user, chosen) != 0) return true;
  if (api.dnnl_memory_create(&buffer, chosen, api.engine, DNNL_MEMORY_ALLOCATE) != dnnl_success) {
    buffer = nullptr;
    return false;
  }
  prepared.bytes += api.dnnl_memory_desc_get_size(chosen);
  return is_result ? MakeReorder(prepared, chosen, &user, reorder)
                   : MakeReorder(prepared, &user, chosen, reorder);
}

std::unique_ptr<Prepared> Prepare(const Api& api, int threads, const hlocache_conv_spec& s) {
  auto prepared = std::make_unique<Prepared>(api);
  prepared->signature = SignatureOf(threads, s);
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
  dnnl_primitive_attr_t attr = MakeAttributes(api, /*strict_float=*/true);
  if (attr == nullptr) return nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  const bool described =
      api.dnnl_primitive_desc_create(&pd, &conv_desc, attr, api.engine, nullptr) == dnnl_success;
  api.dnnl_primitive_attr_destroy(attr);
  if (!described) return nullptr;
  Prepared& p = *prepared;
  const bool made =
      MakeStep(p, pd, p.conv) &&
      Bind(p, user_src, api.dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), false,
           p.user_src, p.src, p.reorder_src) &&
      Bind(p, user_w, api.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), false,
           p.user_weights, p.weights, p.reorder_weights) &&
      Bind(p, user_dst, api.dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), true,
           p.user_dst, p.dst, p.reorder_dst) &&
      api.dnnl_stream_create(&p.stream, api.engine, dnnl_stream_default_flags) == dnnl_success;
  api.dnnl_primitive_desc_destroy(pd);
  if (!made) return nullptr;
  return prepared;
}

bool Run(Prepared& p, const float* lhs, const float* rhs, float* out) {
  const Api& api = p.api;
  // oneDNN reads the inputs only; its memory objects take non-const pointers.
  if (api.dnnl_memory_set_data_handle(p.user_src, const_cast<float*>(lhs)) != dnnl_success ||
      api.dnnl_memory_set_data_handle(p.user_weights, const_cast<float*>(rhs)) != dnnl_success ||
      api.dnnl_memory_set_data_handle(p.user_dst, out) != dnnl_success) {
    return false;
  }
  auto reorder = [&](const Step& step, dnnl_memory_t from, dnnl_memory_t to) {
    return step.primitive == nullptr ||
           Execute(p, step, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  };
  return reorder(p.reorder_src, p.user_src, p.src) &&
         reorder(p.reorder_weights, p.user_weights, p.weights) &&
         Execute(p, p.conv,
                 {{DNNL_ARG_SRC, p.src != nullptr ? p.src : p.user_src},
                  {DNNL_ARG_WEIGHTS, p.weights != nullptr ? p.weights : p.user_weights},
                  {DNNL_ARG_DST, p.dst != nullptr ? p.dst : p.user_dst}}) &&
         reorder(p.reorder_dst, p.dst, p.user_dst) &&
         api.dnnl_stream_wait(p.stream) == dnnl_success;
}

std::atomic<uint64_t> computed{0};

// The kept convolutions, most recently used first, and the last signatures oneDNN refused (so
// that a refused convolution run again costs a lookup, not another attempt).
struct Kept {
  static constexpr size_t kRefused = 64;
  std::mutex mutex;
  std::list<std::shared_ptr<Prepared>> convolutions;
  std::list<std::vector<int64_t>> refused;
};

// The prepared convolution for `s` at `threads`, made if it is not kept; null when oneDNN
// refuses it (now or the last time). Keeps at most kKeptConvolutions of them and
// kKeptConvolutionBytes of their buffers (the one returned always).
std::shared_ptr<Prepared> Find(const Api& api, int threads, const hlocache_conv_spec& s) {
  static Kept& kept = *new Kept;  // Never destroyed: executables may run during exit.
  const std::vector<int64_t> signature = SignatureOf(threads, s);
  auto& list = kept.convolutions;
  {
    std::lock_guard<std::mutex> lock(kept.mutex);
    for (auto it = list.begin(); it != list.end(); ++it) {
      if ((*it)->signature == signature) {
        list.splice(list.begin(), list, it);
        return list.front();
      }
    }
    for (const std::vector<int64_t>& r : kept.refused) {
      if (r == signature) return nullptr;
    }
  }
  std::shared_ptr<Prepared> made = Prepare(api, threads, s);
  std::lock_guard<std::mutex> lock(kept.mutex);
  if (made == nullptr) {
    kept.refused.push_front(signature);
    if (kept.refused.size() > Kept::kRefused) kept.refused.pop_back();
    return nullptr;
  }
  list.push_front(made);
  size_t bytes = 0;
  int count = 0;
  for (auto it = list.begin(); it != list.end();) {
    bytes += (*it)->bytes;
    ++count;
    if (it != list.begin() && (count > kKeptConvolutions || bytes > kKeptConvolutionBytes)) {
      bytes -= (*it)->bytes;
      --count;
      it = list.erase(it);  // A run holding it keeps it alive until it ends.
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
  if (std::shared_ptr<Prepared> prepared = Find(*api, threads, *spec); prepared != nullptr) {
    std::lock_guard<std::mutex> lock(prepared->running);
    status = Run(*prepared, lhs, rhs, out) ? 0 : 1;
  }
  if (status == 0) computed.fetch_add(1, std::memory_order_relaxed);
  if (api->omp_set_num_threads != nullptr && before > 0) api->omp_set_num_threads(before);
  return status;
}

bool HasDnnl() { return LoadApi() != nullptr; }

uint64_t DnnlConvolutionCount() { return computed.load(std::memory_order_relaxed); }

}  // namespace hlocache::compiler
