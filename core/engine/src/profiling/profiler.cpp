#include <moequant/engine/profiler.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>

namespace moequant {
namespace {

using Clock = std::chrono::steady_clock;

struct Recorder {
    std::atomic<bool> on{false};
    std::mutex lock;
    Clock::time_point origin;
    std::vector<ProfileEvent> events;
    std::atomic<std::uint32_t> next_thread{0};
};

Recorder& recorder() {
    static Recorder r;
    return r;
}

std::int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - recorder().origin).count();
}

std::uint32_t this_thread_number() {
    thread_local const std::uint32_t number = recorder().next_thread.fetch_add(1);
    return number;
}

}  // namespace

void start_profiling() {
    Recorder& r = recorder();
    std::lock_guard guard(r.lock);
    r.events.clear();
    r.origin = Clock::now();
    r.on.store(true);
}

bool profiling() noexcept { return recorder().on.load(std::memory_order_relaxed); }

std::vector<ProfileEvent> stop_profiling() {
    Recorder& r = recorder();
    r.on.store(false);
    std::lock_guard guard(r.lock);
    std::vector<ProfileEvent> out = std::move(r.events);
    r.events.clear();
    std::stable_sort(out.begin(), out.end(), [](const ProfileEvent& a, const ProfileEvent& b) { return a.start_us < b.start_us; });
    return out;
}

ProfileSpan::ProfileSpan(const char* name, std::string_view detail) : name_(name) {
    if (!profiling()) return;
    detail_ = std::string(detail);
    start_us_ = now_us();
}

ProfileSpan::~ProfileSpan() {
    if (start_us_ < 0 || !profiling()) return;
    ProfileEvent e{name_, std::move(detail_), start_us_, now_us() - start_us_, this_thread_number()};
    Recorder& r = recorder();
    std::lock_guard guard(r.lock);
    r.events.push_back(std::move(e));
}

std::string chrome_trace_json(const std::vector<ProfileEvent>& events) {
    boost::json::array trace;
    trace.reserve(events.size());
    for (const auto& e : events) {
        boost::json::object o{{"name", e.name}, {"cat", "moequant"}, {"ph", "X"},          {"ts", e.start_us},
                              {"dur", e.duration_us}, {"pid", 1},      {"tid", e.thread}};
        if (!e.detail.empty()) o["args"] = boost::json::object{{"detail", e.detail}};
        trace.push_back(std::move(o));
    }
    return boost::json::serialize(boost::json::object{{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ms"}}) + "\n";
}

void print_profile_tables(const std::vector<ProfileEvent>& events, double wall_seconds, std::ostream& out) {
    struct Sum {
        std::size_t count = 0;
        double seconds = 0;
    };
    std::map<std::string, Sum> by_name;
    std::vector<std::pair<std::string, double>> layers;
    for (const auto& e : events) {
        Sum& s = by_name[e.name];
        ++s.count;
        s.seconds += static_cast<double>(e.duration_us) * 1e-6;
        if (e.name == "layer") layers.emplace_back(e.detail, static_cast<double>(e.duration_us) * 1e-6);
    }
    std::vector<std::pair<std::string, Sum>> rows(by_name.begin(), by_name.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    char line[160];
    out << "profile: time by step, summed over threads (wall " << wall_seconds << " s)\n";
    std::snprintf(line, sizeof line, "  %-22s %8s %12s %12s %9s\n", "step", "count", "total s", "mean ms", "of wall");
    out << line;
    for (const auto& [name, s] : rows) {
        std::snprintf(line, sizeof line, "  %-22s %8zu %12.3f %12.3f %8.1f%%\n", name.c_str(), s.count, s.seconds,
                      1e3 * s.seconds / static_cast<double>(s.count), wall_seconds > 0 ? 100.0 * s.seconds / wall_seconds : 0.0);
        out << line;
    }
    std::sort(layers.begin(), layers.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    out << "profile: layers, slowest first\n";
    for (const auto& [layer, seconds] : layers) {
        std::snprintf(line, sizeof line, "  %-22s %12.3f s\n", layer.c_str(), seconds);
        out << line;
    }
}

}  // namespace moequant
