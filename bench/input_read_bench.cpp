// How to read expert bytes from the input shards: mmap (what the converter does: map each
// shard, touch the pages of one layer, then drop them) against pread into one reused buffer.
// Both read a file of random bytes once front to back and sum it, with the page cache warm
// (page-fault cost only: first touches on these machines run at 1-2 GB/s) and cold
// (posix_fadvise DONTNEED first: disk-bound). Reports GB/s and the pread / mmap ratio.
// Usage: moequant_input_read_bench [work-dir] [GiB]   (default: /tmp, 2)

#include "bench_timing.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

volatile std::uint64_t sink;  // keeps the sums from being optimised away

std::uint64_t sum_words(const std::uint8_t* p, std::size_t n) {
    std::uint64_t s = 0;
    for (std::size_t i = 0; i + 8 <= n; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, p + i, 8);
        s += w;
    }
    return s;
}

void drop_cache(int fd, std::uint64_t size) {
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, static_cast<off_t>(size), POSIX_FADV_DONTNEED);
}

// `willneed`: ask for the whole range up front (MADV_WILLNEED starts readahead of all of it),
// as a reader can for one layer's tensors before it touches them.
void read_mmap(int fd, std::uint64_t size, bool willneed) {
    void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) std::perror("mmap"), std::exit(1);
    ::madvise(m, size, willneed ? MADV_WILLNEED : MADV_SEQUENTIAL);
    sink = sum_words(static_cast<const std::uint8_t*>(m), size);
    ::munmap(m, size);
}

void read_pread(int fd, std::uint64_t size, std::vector<std::uint8_t>& buffer) {
    std::uint64_t s = 0;
    for (std::uint64_t off = 0; off < size;) {
        const ssize_t got = ::pread(fd, buffer.data(), buffer.size(), static_cast<off_t>(off));
        if (got <= 0) std::perror("pread"), std::exit(1);
        s += sum_words(buffer.data(), static_cast<std::size_t>(got));
        off += static_cast<std::uint64_t>(got);
    }
    sink = s;
}

}  // namespace

int main(int argc, char** argv) {
    const fs::path dir = argc > 1 ? argv[1] : "/tmp";
    const std::uint64_t size = (argc > 2 ? std::stoull(argv[2]) : 2) << 30;
    const fs::path file = dir / "moequant-input-read-bench.bin";
    {
        std::vector<std::uint64_t> block(1 << 20);
        std::uint64_t state = 7;
        FILE* f = std::fopen(file.c_str(), "wb");
        for (std::uint64_t written = 0; written < size; written += block.size() * 8) {
            for (auto& w : block) w = state = state * 6364136223846793005ull + 1442695040888963407ull;
            std::fwrite(block.data(), 8, block.size(), f);
        }
        std::fclose(f);
    }
    const int fd = ::open(file.c_str(), O_RDONLY);
    // A buffer that stays in cache and one the size of a large expert matrix, both touched
    // before timing (the reused buffer pays its page faults once).
    std::vector<std::uint8_t> small(1u << 20), large(64u << 20);
    std::memset(small.data(), 0, small.size());
    std::memset(large.data(), 0, large.size());
    const double gb = static_cast<double>(size) / 1e9;

    struct Way {
        const char* name;
        std::function<void()> read;
    };
    const Way ways[] = {
        {"mmap", [&] { read_mmap(fd, size, false); }},
        {"mmap + MADV_WILLNEED", [&] { read_mmap(fd, size, true); }},
        {"pread, 1 MiB buffer", [&] { read_pread(fd, size, small); }},
        {"pread, 64 MiB buffer", [&] { read_pread(fd, size, large); }},
    };
    std::printf("input read, %.1f GB file, one thread (best of runs), GB/s and ratio to mmap\n", gb);
    for (bool cold : {false, true}) {
        std::printf("  page cache %s:\n", cold ? "cold (dropped before each run)" : "warm");
        if (!cold) read_pread(fd, size, small);
        double mmap_seconds = 0;
        for (const Way& way : ways) {
            const double s = moequant::bench::best_seconds(cold ? 2 : 3, [&] {
                if (cold) drop_cache(fd, size);
                way.read();
            });
            if (mmap_seconds == 0) mmap_seconds = s;
            std::printf("    %-22s %6.2f GB/s  %5.2fx\n", way.name, gb / s, mmap_seconds / s);
        }
    }
    ::close(fd);
    fs::remove(file);
    return 0;
}
