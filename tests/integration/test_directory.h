// A test fixture with a fresh directory of its own, removed after the test:
// $TMPDIR/hlocache-SUITE-PID-TEST.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace hlocache::testing {

class TestDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = std::filesystem::temp_directory_path() /
            ("hlocache-" + std::string(info->test_suite_name()) + "-" + std::to_string(::getpid()) +
             "-" + info->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  std::filesystem::path root_;
};

}  // namespace hlocache::testing
