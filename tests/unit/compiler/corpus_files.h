// The corpus's modules, for the tests that run over all of them: the `.hlo` files of the named
// folders of ../shared/corpus (hlo, torch_xla, invalid), sorted by path. A folder that is not
// there adds nothing; the tests check that they found the corpus.
#pragma once

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#ifndef HLOCACHE_CORPUS_DIR
#error "HLOCACHE_CORPUS_DIR names the shared corpus (tests/CMakeLists.txt defines it)"
#endif

namespace hlocache::test_support {

inline std::vector<std::string> CorpusFiles(std::initializer_list<const char*> folders) {
  std::vector<std::string> out;
  for (const char* folder : folders) {
    const std::filesystem::path dir = std::filesystem::path(HLOCACHE_CORPUS_DIR) / folder;
    if (!std::filesystem::is_directory(dir)) continue;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() == ".hlo") out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hlocache::test_support
