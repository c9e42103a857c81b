#include "estimate/resident_memory.hpp"

#include <moequant/freed_heap.hpp>

#include <malloc.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

namespace moequant::detail {

ResidentMemory resident_memory() {
    ResidentMemory m;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
        std::istringstream fields(line);
        std::string key;
        std::uint64_t kib = 0;
        if (!(fields >> key >> kib)) continue;
        if (key == "VmRSS:") m.total = kib * 1024;
        else if (key == "RssFile:") m.file = kib * 1024;
        else if (key == "VmHWM:") m.peak = kib * 1024;
    }
    return m;
}

std::uint64_t resident_bytes_in_use() {
    return_freed_heap();
    return resident_memory().total;
}

namespace {

// Writing 5 to clear_refs sets VmHWM back to the current resident size (Linux 4.0 and later).
bool reset_peak() {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.flush();
    return static_cast<bool>(clear);
}

}  // namespace

namespace {
constexpr int probe_mmap_threshold = 256 << 10;
}  // namespace

void map_large_buffers() {
    static const bool fixed = ::mallopt(M_MMAP_THRESHOLD, probe_mmap_threshold) == 1;
    (void)fixed;
}

RunHeap::RunHeap() {
    ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
    ::mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

RunHeap::~RunHeap() {
    ::mallopt(M_MMAP_THRESHOLD, probe_mmap_threshold);
    ::mallopt(M_TRIM_THRESHOLD, 128 << 10);  // glibc's default
    return_freed_heap();
}

MeasuredWork measure_work(const std::function<void()>& work) {
    return_freed_heap();
    const ResidentMemory before = resident_memory();
    MeasuredWork out;
    out.exact = reset_peak();
    const auto start = std::chrono::steady_clock::now();
    work();
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const ResidentMemory after = resident_memory();
    const std::uint64_t peak = out.exact ? after.peak : after.total;
    out.file_bytes = after.file > before.file ? after.file - before.file : 0;
    out.bytes = peak > before.total + out.file_bytes ? peak - before.total - out.file_bytes : 0;
    return out;
}

}  // namespace moequant::detail
