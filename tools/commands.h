// Subcommands of the `qevict` CLI. Each registers its flags on a CLI11 subcommand and runs when
// chosen; errors are thrown as qevict::Error and turned into a message and exit code by main.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace qevict::cli {

// Registers the subcommand and returns the function to call when it was chosen.
std::function<int()> RegisterRun(CLI::App& app);
std::function<int()> RegisterChat(CLI::App& app);
std::function<int()> RegisterInfo(CLI::App& app);
std::function<int()> RegisterBench(CLI::App& app);
std::function<int()> RegisterServe(CLI::App& app);
std::function<int()> RegisterEval(CLI::App& app);
std::function<int()> RegisterReport(CLI::App& app);

// The command line as typed (for outputs that record how they were made).
std::string& CommandLine();

}  // namespace qevict::cli
