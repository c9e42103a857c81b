// Parallel loops on the one thread pool of the process (oneTBB inside the SDK).
//
// Plugins parallelise through these functions instead of linking a threading runtime of their
// own, so the whole process shares one pool and one thread limit.
#pragma once

#include <moequant/export.hpp>

#include <cstddef>
#include <functional>

namespace moequant {

// Calls body(chunk_begin, chunk_end) on disjoint chunks covering [begin, end), possibly
// concurrently; a chunk holds at most `grain` indices (and more than grain/2 unless the range
// is smaller). Returns when all chunks are done.
// The first exception thrown by a body is rethrown here (the others are dropped).
MOEQUANT_API void parallel_for(std::size_t begin, std::size_t end, std::size_t grain,
                               const std::function<void(std::size_t, std::size_t)>& body);

// Caps the number of worker threads for all later parallel work (0 = one per core; a cap above
// the number of cores counts as that number).
MOEQUANT_API void set_max_threads(std::size_t threads);

// The current cap (the number of cores unless set_max_threads was called).
MOEQUANT_API std::size_t max_threads() noexcept;

}  // namespace moequant
