// docs/kv-cache.md's options table is KvOptionsMarkdown()'s text (the descriptors of
// kv/kv_options.cc and of every policy's file), so that it cannot go stale. To update it after
// changing an option: QEVICT_UPDATE_DOCS=1 build/policy_test --gtest_filter='KvOptionsDoc.*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "kv/kv_options.h"
#include "source_dir.h"

namespace qevict {
namespace {

constexpr const char* kBegin = "<!-- kv-options:begin";
constexpr const char* kEnd = "<!-- kv-options:end -->";

TEST(KvOptionsDoc, TheDocsTableIsTheGeneratedOne) {
  const std::string path = std::string(QEVICT_SOURCE_DIR) + "/docs/kv-cache.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string doc = buffer.str();
  const size_t begin = doc.find(kBegin);
  ASSERT_NE(begin, std::string::npos) << "docs/kv-cache.md lacks " << kBegin;
  const size_t table = doc.find('\n', begin) + 1;
  const size_t end = doc.find(kEnd, table);
  ASSERT_NE(end, std::string::npos) << "docs/kv-cache.md lacks " << kEnd;
  const std::string generated = KvOptionsMarkdown();
  if (std::getenv("QEVICT_UPDATE_DOCS") != nullptr) {
    std::ofstream(path) << doc.substr(0, table) << generated << doc.substr(end);
    GTEST_SKIP() << "rewrote " << path;
  }
  EXPECT_EQ(doc.substr(table, end - table), generated)
      << "docs/kv-cache.md's options table differs from the option descriptors: run "
         "QEVICT_UPDATE_DOCS=1 build/policy_test --gtest_filter='KvOptionsDoc.*'";
}

TEST(KvOptionsDoc, EveryOptionHasARow) {
  const std::string md = KvOptionsMarkdown();
  for (const KvOptionDef* def : KvOptions()) {
    EXPECT_NE(md.find("| `" + KvOptionFlag(*def) + "` |"), std::string::npos) << def->key;
  }
}

}  // namespace
}  // namespace qevict
