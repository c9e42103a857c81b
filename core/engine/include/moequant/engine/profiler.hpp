// Where a run spends its time (convert --profile, as kt-kernel's converter wraps its run in the
// torch profiler): named spans recorded on every thread while profiling is on, written as a
// Chrome trace (chrome://tracing, Perfetto) and summed into tables. Off, a span costs one
// relaxed atomic load.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace moequant {

// A name kept with the trace: the output's file name.
inline constexpr const char* profile_trace_name = "profile_trace.json";

struct ProfileEvent {
    std::string name;    // what ran: "decode", "quantize", "write", "layer", ...
    std::string detail;  // which: "layer 3", a tensor name
    std::int64_t start_us = 0, duration_us = 0;  // from start_profiling()
    std::uint32_t thread = 0;                    // 0 for the first thread that recorded, 1, 2, ...
};

// Clears earlier events and starts recording.
void start_profiling();
bool profiling() noexcept;
// Stops recording; every event since start_profiling(), by start time.
std::vector<ProfileEvent> stop_profiling();

// Records [construction, destruction) as one event while profiling is on; `detail` is copied
// only then.
class ProfileSpan {
public:
    explicit ProfileSpan(const char* name, std::string_view detail = {});
    ~ProfileSpan();
    ProfileSpan(const ProfileSpan&) = delete;
    ProfileSpan& operator=(const ProfileSpan&) = delete;

private:
    const char* name_;
    std::string detail_;
    std::int64_t start_us_ = -1;  // -1: not recording
};

// The Chrome trace event format ({"traceEvents": [...], "displayTimeUnit": "ms"}): one complete
// ("X") event per span, in microseconds, pid 1, tid the recording thread.
std::string chrome_trace_json(const std::vector<ProfileEvent>& events);

// Two tables, as the torch profiler prints two: by event name (count, total and mean seconds,
// share of the wall time) and by layer (the "layer" spans' seconds, slowest first).
void print_profile_tables(const std::vector<ProfileEvent>& events, double wall_seconds, std::ostream& out);

}  // namespace moequant
