// Helpers of the eval module's tests that read and write files: a fresh temporary directory, a
// file written whole, and the message a qevict::Error carries.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "util/error.h"

namespace qevict::eval_test {

// TempDir()/qevict_NAME, emptied and created.
inline std::string FreshTempDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/qevict_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// What f throws as a qevict::Error, or "no error".
inline std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace qevict::eval_test
