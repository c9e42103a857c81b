// Collecting a runtime check's problems (OutputReader::run_runtime_check()): every one is counted,
// the first few of each rule are kept with their messages, so a folder with thousands of the
// same fault gives a short report. Header-only, shared by the formats' runtime checks.
#pragma once

#include <moequant/output_format.hpp>

#include <map>
#include <string>

namespace moequant::formats {

class RuntimeCheckProblems {
public:
    static constexpr std::size_t shown_per_rule = 5;

    explicit RuntimeCheckProblems(RuntimeCheckReport& report) : report_(report) {}
    void add(const std::string& rule, const std::string& message) {
        ++report_.problem_count;
        if (shown_[rule]++ < shown_per_rule) report_.problems.push_back({rule, message});
    }

private:
    RuntimeCheckReport& report_;
    std::map<std::string, std::size_t> shown_;
};

}  // namespace moequant::formats
