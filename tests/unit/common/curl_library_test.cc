// libcurl opened at its first use (common/curl_library.h): not mapped before, mapped and whole
// after, in a process of its own so that no other test has opened it already.
#include "common/curl_library.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace hlocache {
namespace {

bool LibcurlMapped() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find("libcurl.so.4") != std::string::npos;
}

int OpenAndCheck() {
  if (LibcurlMapped()) return 2;  // Loaded at start: linked after all.
  std::string why;
  const CurlLibrary* curl = LoadCurl(&why);
  if (curl == nullptr || !why.empty()) return 3;
  if (!LibcurlMapped()) return 4;
  // The functions work: a handle made, an option set, an error named, the handle freed.
  CURL* handle = curl->easy_init();
  if (handle == nullptr) return 5;
  if (curl->easy_setopt(handle, CURLOPT_URL, "http://127.0.0.1:1/") != CURLE_OK) return 6;
  const std::string unsupported = curl->easy_strerror(CURLE_UNSUPPORTED_PROTOCOL);
  curl->easy_cleanup(handle);
  if (unsupported.empty()) return 7;
  return LoadCurl() == curl ? 0 : 8;  // Opened once.
}

TEST(CurlLibraryTest, OpensAtFirstUseNotAtStart) {
  // A fresh process (the test binary run again for this test alone): earlier tests of this
  // binary may have opened libcurl in this one.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(::_exit(OpenAndCheck()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace hlocache
