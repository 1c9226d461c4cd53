// libcurl, opened the first time a transfer needs it instead of when the process starts.
//
// Linked, it made every hlocache command load its dependencies (TLS, LDAP, Kerberos, SSH,
// IDN: 25 libraries) and resolve their symbols before main, about half of the start-up of a
// command that never speaks HTTP (`hlocache key`, `run`, `compile`). Opened at the first HTTP
// client or bucket connection, with curl_global_init called once.
//
// Thread safety: LoadCurl() may be called from any thread; the library is opened once per
// process and kept open. The functions may be called as libcurl allows (a handle from one
// thread at a time).
#pragma once

#include <curl/curl.h>

#include <string>

namespace hlocache {

// The libcurl functions hlocache calls, as curl.h declares them.
struct CurlLibrary {
  decltype(&::curl_easy_init) easy_init;
  decltype(&::curl_easy_setopt) easy_setopt;
  decltype(&::curl_easy_perform) easy_perform;
  decltype(&::curl_easy_getinfo) easy_getinfo;
  decltype(&::curl_easy_reset) easy_reset;
  decltype(&::curl_easy_cleanup) easy_cleanup;
  decltype(&::curl_easy_strerror) easy_strerror;
  decltype(&::curl_slist_append) slist_append;
  decltype(&::curl_slist_free_all) slist_free_all;
};

// The library, opened (and initialized) by the first call; null where it cannot be, and then
// `*why` (when given) says what failed, on one line.
const CurlLibrary* LoadCurl(std::string* why = nullptr);

// The library once LoadCurl() has returned it: for code that holds a handle it made.
inline const CurlLibrary& Curl() { return *LoadCurl(); }

}  // namespace hlocache
