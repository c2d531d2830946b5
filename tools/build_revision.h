#pragma once

namespace qevict::cli {

// The source revision this binary was built from: a commit's first 12 hex digits, "-dirty" when
// the build's sources differed from it, or "unknown" outside a git checkout (written at build
// time by cmake/build_revision.cmake). Shown by `qevict --version` and recorded in eval summaries
// and bench rows, so that every figure names the code that made it.
const char* BuildRevision();

}  // namespace qevict::cli
