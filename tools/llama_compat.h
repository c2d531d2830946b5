// llama.cpp's spellings that CLI11 cannot declare: its single-dash long options (-ngl, -np) are
// rewritten to their long forms before parsing, and its GPU offload flags are accepted on every
// command with a note that this engine runs on the CPU (so that a llama.cpp command line works
// as typed instead of failing on a flag that would change nothing).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace qevict::cli {

// The arguments with llama.cpp's single-dash long options replaced by their long forms:
// "-ngl" -> "--n-gpu-layers", "-np" -> "--parallel" ("-ngl=N" likewise). Only whole arguments
// are rewritten.
std::vector<std::string> RewriteLlamaArgs(int argc, char** argv);

// Adds -ngl / --n-gpu-layers / --gpu-layers (and --main-gpu, --split-mode, --tensor-split) to
// `cmd`, which only say on stderr that they are ignored. Call NoteIgnoredGpuFlags after parsing.
void AddGpuFlags(CLI::App& cmd);
// The one-line note when `cmd` was given a GPU flag.
void NoteIgnoredGpuFlags(const CLI::App& cmd);

}  // namespace qevict::cli
