// Giving freed heap pages back to the kernel between large steps (a layer, an expert, a copied
// tensor), so that the resident set stays at one step's working memory rather than the sum of
// the threads' arenas. One function for the host and plugins alike.
#pragma once

#include <moequant/export.hpp>

namespace moequant {

// glibc's malloc_trim(0) over every arena. A no-op in a sanitizer build: the sanitizer owns the
// heap there, and glibc's trim of its own unused arenas crashed under AddressSanitizer.
MOEQUANT_API void return_freed_heap() noexcept;

}  // namespace moequant
