// The process's resident memory as the kernel counts it (/proc/self/status), and the peak a
// piece of work adds to it: what --dry-run's probes measure. Peak resident memory is what
// getrusage()'s ru_maxrss reports of a whole run.
#pragma once

#include <cstdint>
#include <functional>

namespace moequant::detail {

struct ResidentMemory {
    std::uint64_t total = 0;  // VmRSS
    std::uint64_t file = 0;   // RssFile: mapped file pages (checkpoint shards, scratch files)
    std::uint64_t peak = 0;   // VmHWM, since the start or the last reset
};

// Zeros when /proc/self/status cannot be read.
ResidentMemory resident_memory();

// VmRSS once free heap memory is returned to the kernel: what the process itself holds.
std::uint64_t resident_bytes_in_use();

// From now on, buffers of 256 KiB and more are mapped for themselves and given back when freed.
// For the probes of the forward and of GPTQ: glibc's own threshold rises after the first large
// free, and what the heap then keeps of freed buffers makes their peaks vary from probe to
// probe by a quarter. It stays so for the rest of the process (a dry run ends after its
// probes); what the run's heap keeps beyond its buffers is its estimate's margin.
void map_large_buffers();

// While it lives, the heap as a run's is once its buffers have grown: glibc's dynamic mmap
// threshold at its 32 MiB ceiling, trimmed above 64 MiB. For timing work a run repeats batch
// after batch: under map_large_buffers' 256 KiB every buffer of a full-size forward pass was a
// fresh mapping faulted in anew, and the pass took twice as long as in a run (attention half
// at 2048 tokens 6.2 s against 2.4 s). map_large_buffers' setting comes back at its end.
class RunHeap {
public:
    RunHeap();
    ~RunHeap();
    RunHeap(const RunHeap&) = delete;
    RunHeap& operator=(const RunHeap&) = delete;
};

// What `work` took: its seconds, and the resident memory it added at its peak beyond what the
// process held before it, file pages it touched left out (the caller counts those from the
// files' sizes). Free heap memory is returned to the kernel first, so that what the work
// allocates shows. `exact` is false where the peak cannot be reset (no /proc/self/clear_refs):
// the growth by its end is given instead.
struct MeasuredWork {
    double seconds = 0;
    std::uint64_t bytes = 0;
    std::uint64_t file_bytes = 0;  // mapped file pages it touched (resident at its end)
    bool exact = true;
};
MeasuredWork measure_work(const std::function<void()>& work);

}  // namespace moequant::detail
