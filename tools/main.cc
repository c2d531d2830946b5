// qevict: long-context LLM decoding with a recoverable quantized KV cache.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "tools/build_revision.h"
#include "tools/commands.h"
#include "tools/llama_compat.h"
#include "util/error.h"

namespace qevict::cli {
std::string& CommandLine() {
  static std::string line;
  return line;
}
}  // namespace qevict::cli

int main(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    std::string& line = qevict::cli::CommandLine();
    if (i > 0) line += ' ';
    const std::string arg = i == 0 ? std::string("qevict") : std::string(argv[i]);
    const bool plain = arg.find_first_of(" \t\"'$\\") == std::string::npos && !arg.empty();
    line += plain ? arg : "'" + arg + "'";
  }
  CLI::App app{"qevict: long-context LLM decoding with a recoverable quantized KV cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("qevict 0.1.0 (") + qevict::cli::BuildRevision() + ")");
  std::vector<std::pair<CLI::App*, std::function<int()>>> commands;
  auto add = [&](std::function<int()> (*reg)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    auto fn = reg(app);
    commands.emplace_back(app.get_subcommands({})[before], fn);
  };
  add(qevict::cli::RegisterRun);
  add(qevict::cli::RegisterChat);
  add(qevict::cli::RegisterInfo);
  add(qevict::cli::RegisterBench);
  add(qevict::cli::RegisterServe);
  add(qevict::cli::RegisterEval);
  add(qevict::cli::RegisterReport);
  for (auto& [sub, fn] : commands) qevict::cli::AddGpuFlags(*sub);
  // CLI11 parses the arguments in reverse order, program name excluded.
  std::vector<std::string> args = qevict::cli::RewriteLlamaArgs(argc, argv);
  args.erase(args.begin());
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and succeed; every other parse error is an error like any
    // other: one line naming the flag, the command's --help to read, exit 1 (README, "Errors").
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::string command = "qevict";
    for (auto& [sub, fn] : commands) {
      if (sub->parsed()) command += " " + sub->get_name();
    }
    std::fprintf(stderr, "qevict: error: %s; see '%s --help' for the options\n", e.what(),
                 command.c_str());
    return 1;
  }
  try {
    for (auto& [sub, fn] : commands) {
      if (!sub->parsed()) continue;
      qevict::cli::NoteIgnoredGpuFlags(*sub);
      return fn();
    }
  } catch (const qevict::Error& e) {
    std::fprintf(stderr, "qevict: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "qevict: error: out of memory\n");
    return 1;
  }
  return 0;
}
