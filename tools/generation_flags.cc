#include "tools/generation_flags.h"

#include <fstream>
#include <sstream>

#include "util/error.h"

namespace qevict::cli {

void AddSamplingFlags(CLI::App& cmd, SamplingFlags& flags, const std::string& seed_help) {
  cmd.add_option("--temp", flags.temperature, "temperature; 0 = greedy")->capture_default_str();
  cmd.add_option("--top-k", flags.top_k, "top-k (<= 0: off)")->capture_default_str();
  cmd.add_option("--top-p", flags.top_p, "top-p (1: off)")->capture_default_str();
  cmd.add_option("--seed", flags.seed, seed_help)->capture_default_str();
}

std::string ReadTextFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + what + " '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace qevict::cli
