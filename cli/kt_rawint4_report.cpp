#include "kt_rawint4_report.hpp"

#include <moequant/printable.hpp>


namespace moequant::cli {

namespace json = boost::json;

namespace {

std::string backends_running(const KtRawint4Report& report) {
    std::string names;
    for (const auto& b : report.backends)
        if (b.runs) names += (names.empty() ? "" : ", ") + b.name;
    return names;
}

}  // namespace

void print_kt_rawint4(const KtRawint4Report& report, bool in_full, std::ostream& out) {
    if (!in_full) {
        out << "\nkt-kernel RAWINT4 (--kt-method RAWINT4 on this folder): ";
        const bool default_runs = !report.backends.empty() && report.backends.front().runs;
        if (report.usable() && default_runs)
            out << "usable, group " << report.group_size << ", on " << backends_running(report) << " (" << report.backends.front().name
                << " is kt's default)\n";
        else if (report.usable())
            out << "usable, group " << report.group_size << ", only with KT_RAWINT4_BACKEND set to one of "
                << backends_running(report) << "\n";
        else
            out << "not usable: " << report.problems.front().rule << ": " << printable_text(report.problems.front().message)
                << (report.problem_count > 1 ? " (and " + std::to_string(report.problem_count - 1) +
                                                   " more problem(s); verify --for kt-rawint4 shows the first of each rule)"
                                             : "")
                << "\n";
        for (const auto& w : report.warnings) out << "  warning: " << printable_text(w) << "\n";
        return;
    }
    out << "\nkt-kernel RAWINT4 (--kt-method RAWINT4 --kt-weight-path on this folder):\n";
    if (report.group_size > 0) out << "  group size " << report.group_size << " (hidden_size / the gate scale's columns, as kt derives it)\n";
    for (const auto& b : report.backends)
        out << "  KT_RAWINT4_BACKEND=" << b.name << ": " << (b.runs ? "runs it" : "cannot run it, " + b.why) << " (" << b.when << ")\n";
    for (const auto& w : report.warnings) out << "  warning: " << printable_text(w) << "\n";
    for (const auto& p : report.problems) out << "  " << p.rule << ": " << printable_text(p.message) << "\n";
    if (report.problem_count > report.problems.size())
        out << "  ... and " << report.problem_count - report.problems.size() << " more problem(s)\n";
    out << (report.usable() ? "kt-kernel RAWINT4: usable\n" : "kt-kernel RAWINT4: NOT usable (" + std::to_string(report.problem_count) + " problem(s))\n");
}

json::object kt_rawint4_json(const KtRawint4Report& report) {
    json::array problems, backends, warnings;
    for (const auto& p : report.problems) problems.push_back(json::object{{"rule", p.rule}, {"message", p.message}});
    for (const auto& b : report.backends)
        backends.push_back(json::object{{"backend", b.name}, {"runs", b.runs}, {"when", b.when}, {"why_not", b.why}});
    for (const auto& w : report.warnings) warnings.push_back(json::value(w));
    return {{"usable", report.usable()},
            {"group_size", report.group_size},
            {"problem_count", report.problem_count},
            {"problems", std::move(problems)},
            {"backends", std::move(backends)},
            {"warnings", std::move(warnings)}};
}

}  // namespace moequant::cli
