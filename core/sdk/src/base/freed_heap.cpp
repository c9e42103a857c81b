#include <moequant/freed_heap.hpp>

#include <malloc.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define MOEQUANT_SANITIZED_HEAP 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MOEQUANT_SANITIZED_HEAP 1
#endif

namespace moequant {

void return_freed_heap() noexcept {
#ifndef MOEQUANT_SANITIZED_HEAP
    ::malloc_trim(0);
#endif
}

}  // namespace moequant
