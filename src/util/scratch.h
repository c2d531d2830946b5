// Scratch vectors that live in thread_local storage keep their largest size for the thread's
// life: a step that once needed megabytes (a prompt's end, a question's scan of a long context)
// would keep them charged to the process. ReleaseIfLarge hands such a vector's memory back
// after the step; small ones (a decoding step's) are kept, so steps that run often allocate
// nothing.
#pragma once

#include <cstddef>
#include <vector>

namespace qevict {

inline constexpr size_t kKeptScratchBytes = size_t{256} << 10;

template <class T>
void ReleaseIfLarge(std::vector<T>& v, size_t keep_bytes = kKeptScratchBytes) {
  if (v.capacity() * sizeof(T) > keep_bytes) std::vector<T>().swap(v);
}

}  // namespace qevict
