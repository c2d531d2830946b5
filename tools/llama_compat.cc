#include "tools/llama_compat.h"

#include <cstdio>
#include <string>

namespace qevict::cli {
namespace {

struct ArgRewrite {
  const char* from;
  const char* to;
};
constexpr ArgRewrite kSingleDashLong[] = {{"-ngl", "--n-gpu-layers"}, {"-np", "--parallel"}};
constexpr const char* kGpuFlagsGroup = "GPU (llama.cpp's flags; ignored, this is a CPU engine)";

}  // namespace

std::vector<std::string> RewriteLlamaArgs(int argc, char** argv) {
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(argc));
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    for (const ArgRewrite& r : kSingleDashLong) {
      const std::string from = r.from;
      if (arg == from) {
        arg = r.to;
      } else if (arg.starts_with(from + "=")) {
        arg = r.to + arg.substr(from.size());
      }
    }
    out.push_back(std::move(arg));
  }
  return out;
}

void AddGpuFlags(CLI::App& cmd) {
  // The values are parsed as text: whatever llama.cpp accepts there ("99", "all", "auto") is
  // accepted here, since nothing is done with it.
  cmd.add_option("--n-gpu-layers,--gpu-layers")
      ->description("-ngl N: layers to offload to a GPU (ignored)")
      ->type_name("N")
      ->group(kGpuFlagsGroup);
  for (const char* name : {"--main-gpu", "--split-mode", "--tensor-split"}) {
    cmd.add_option(name)->description("(ignored)")->type_name("X")->group(kGpuFlagsGroup);
  }
}

void NoteIgnoredGpuFlags(const CLI::App& cmd) {
  for (const char* name : {"--n-gpu-layers", "--main-gpu", "--split-mode", "--tensor-split"}) {
    const CLI::Option* option = cmd.get_option_no_throw(name);
    if (option != nullptr && option->count() > 0) {
      std::fprintf(stderr,
                   "qevict: note: %s is ignored: qevict is a CPU engine (every layer runs "
                   "on the CPU)\n",
                   name == std::string("--n-gpu-layers") ? "-ngl" : name);
      return;
    }
  }
}

}  // namespace qevict::cli
