#include "client/hlocache_c.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "client/cache.h"
#include "compiler/codegen/cpu_codegen.h"
#include "compiler/hlo/parser.h"
#include "keying/keying.h"

struct hlocache_executable {
  hlocache::client::Executable executable;
  std::string source;
  std::vector<size_t> parameter_bytes;
  std::vector<size_t> result_bytes;
};

namespace {

using hlocache::Status;

void SetError(char* error, size_t size, const std::string& message) {
  if (error == nullptr || size == 0) return;
  const size_t n = std::min(size - 1, message.size());
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

int Fail(char* error, size_t size, const Status& status) {
  SetError(error, size, status.message());
  return -1;
}

size_t LeafBytes(const hlocache::hlo::Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape.dims) n *= d;
  return static_cast<size_t>(n * hlocache::hlo::BufferElementBytes(shape.type));
}

// The process-wide cache, made on first use from $HLOCACHE when nobody initialized it.
hlocache::client::Cache* Global(std::string& why) {
  if (auto* cache = hlocache::client::global_cache()) return cache;
  Status s = hlocache::client::initialize_cache("");
  if (!s.ok()) {
    why = s.message();
    return nullptr;
  }
  return hlocache::client::global_cache();
}

}  // namespace

extern "C" {

int hlocache_initialize_cache(const char* spec, int read_only, char* error, size_t error_size) {
  try {
    auto options = hlocache::client::CacheOptions::FromEnvironment();
    if (read_only) options.read_only = true;
    Status s = hlocache::client::initialize_cache(spec ? spec : "", options);
    return s.ok() ? 0 : Fail(error, error_size, s);
  } catch (const std::exception& e) {
    SetError(error, error_size, e.what());
    return -1;
  }
}

int hlocache_key(const char* hlo_text, size_t hlo_size, const char* target, char* key_out,
                 char* error, size_t error_size) {
  try {
    hlocache::keying::KeySettings settings;
    if (target) settings.target = target;
    auto keyed = hlocache::keying::KeyText(std::string(hlo_text, hlo_size), "module", settings);
    if (!keyed) return Fail(error, error_size, keyed.error());
    const std::string& key = keyed->key.text;
    std::memcpy(key_out, key.c_str(), key.size() + 1);
    return 0;
  } catch (const std::exception& e) {
    SetError(error, error_size, e.what());
    return -1;
  }
}

hlocache_executable* hlocache_compile(const char* hlo_text, size_t hlo_size, const char* target,
                                      char* error, size_t error_size) {
  try {
    std::string why;
    auto* cache = Global(why);
    if (!cache) {
      SetError(error, error_size, why);
      return nullptr;
    }
    auto module = hlocache::hlo::ParseModule(std::string(hlo_text, hlo_size), "module");
    if (!module) {
      Fail(error, error_size, module.error());
      return nullptr;
    }
    auto leaves = hlocache::compiler::EntryLeavesOf(*module);
    if (!leaves) {
      Fail(error, error_size, leaves.error());
      return nullptr;
    }
    auto exe = cache->GetOrCompile(*module, target ? target : "");
    if (!exe) {
      Fail(error, error_size, exe.error());
      return nullptr;
    }
    if (!exe->executable) {
      SetError(error, error_size, "the executable's target does not run on this host");
      return nullptr;
    }
    auto out = std::make_unique<hlocache_executable>();
    out->source = std::string(hlocache::client::SourceName(exe->source));
    out->executable = std::move(*exe);
    for (const auto& s : leaves->parameters) out->parameter_bytes.push_back(LeafBytes(s));
    for (const auto& s : leaves->results) out->result_bytes.push_back(LeafBytes(s));
    return out.release();
  } catch (const std::exception& e) {
    SetError(error, error_size, e.what());
    return nullptr;
  }
}

void hlocache_executable_free(hlocache_executable* executable) { delete executable; }

const char* hlocache_executable_key(const hlocache_executable* e) {
  return e->executable.key.c_str();
}
const char* hlocache_executable_source(const hlocache_executable* e) { return e->source.c_str(); }
double hlocache_executable_seconds(const hlocache_executable* e) {
  return e->executable.total_seconds;
}
size_t hlocache_executable_parameter_count(const hlocache_executable* e) {
  return e->parameter_bytes.size();
}
size_t hlocache_executable_result_count(const hlocache_executable* e) {
  return e->result_bytes.size();
}
size_t hlocache_executable_parameter_bytes(const hlocache_executable* e, size_t i) {
  return i < e->parameter_bytes.size() ? e->parameter_bytes[i] : 0;
}
size_t hlocache_executable_result_bytes(const hlocache_executable* e, size_t i) {
  return i < e->result_bytes.size() ? e->result_bytes[i] : 0;
}

int hlocache_executable_run(const hlocache_executable* e, const void* const* parameters,
                            void* const* results, char* error, size_t error_size) {
  using Entry = int (*)(const void* const*, void* const*);
  auto entry = reinterpret_cast<Entry>(e->executable.executable->entry());
  if (entry(parameters, results) != 0) {
    SetError(error, error_size, "the executable could not allocate its buffers");
    return -1;
  }
  return 0;
}

}  // extern "C"
