#include "common/curl_library.h"

#include <dlfcn.h>

namespace hlocache {
namespace {

struct Loaded {
  CurlLibrary functions{};
  bool ok = false;
  std::string error;
};

const Loaded& Load() {
  static const Loaded* loaded = [] {
    auto* l = new Loaded;  // Kept for the process, as the library is.
    // The soname of Debian's libcurl4 (OpenSSL), which the headers hlocache builds with are.
    void* handle = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* reason = ::dlerror();
      l->error = std::string("cannot open libcurl.so.4 (install libcurl4): ") +
                 (reason != nullptr ? reason : "not found");
      return l;
    }
    bool complete = true;
    auto find = [&](auto& field, const char* name) {
      field = reinterpret_cast<std::remove_reference_t<decltype(field)>>(::dlsym(handle, name));
      if (field == nullptr) complete = false;
    };
    CurlLibrary& f = l->functions;
    find(f.easy_init, "curl_easy_init");
    find(f.easy_setopt, "curl_easy_setopt");
    find(f.easy_perform, "curl_easy_perform");
    find(f.easy_getinfo, "curl_easy_getinfo");
    find(f.easy_reset, "curl_easy_reset");
    find(f.easy_cleanup, "curl_easy_cleanup");
    find(f.easy_strerror, "curl_easy_strerror");
    find(f.slist_append, "curl_slist_append");
    find(f.slist_free_all, "curl_slist_free_all");
    decltype(&::curl_global_init) global_init = nullptr;
    find(global_init, "curl_global_init");
    if (!complete) {
      l->error = "libcurl.so.4 lacks a function hlocache calls";
      return l;
    }
    if (global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      l->error = "libcurl's initialization failed";
      return l;
    }
    l->ok = true;
    return l;
  }();
  return *loaded;
}

}  // namespace

const CurlLibrary* LoadCurl(std::string* why) {
  const Loaded& l = Load();
  if (!l.ok && why != nullptr) *why = l.error;
  return l.ok ? &l.functions : nullptr;
}

}  // namespace hlocache
