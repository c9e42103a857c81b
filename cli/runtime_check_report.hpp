// The runtime checks `verify` runs (OutputFormat::runtime_checks(), e.g. whether kt-kernel's
// RAWINT4 CPU method can serve a compressed-tensors output) and how it shows them: one line in
// every report, everything with --for NAME, which also makes the check part of passing.
#pragma once

#include <moequant/engine/plugin_registry.hpp>
#include <moequant/engine/verification.hpp>
#include <moequant/output_format.hpp>

#include <boost/json.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace moequant::cli {

// A runtime check of the output's format, run as information or, when required (--for), as
// part of passing.
struct RuntimeCheckResult {
    RuntimeCheckInfo check;
    RuntimeCheckReport report;
    bool required = false;
};

// Refuses (usage error) --for NAME when no installed format offers the check, before the output
// is opened.
void require_known_runtime_check(const Registry& registry, const std::string& name);

// Refuses (usage error) --for NAME when the opened output's format does not offer the check.
void require_runtime_check_of(const Registry& registry, const OpenedOutput& output, const std::string& name,
                              const std::string& converted);

// Runs every runtime check of the output's format; one that cannot run is a warning on stderr
// unless it is `required` (--for NAME, or empty).
std::vector<RuntimeCheckResult> run_runtime_checks(const OpenedOutput& output, const ModelPlan& plan, const std::string& required);

// Whether every required check found the output usable.
bool required_checks_pass(const std::vector<RuntimeCheckResult>& checks);

// The verdict in one line (the normal report), or the facts, every verdict and every problem
// shown (--for NAME).
void print_runtime_check(const RuntimeCheckInfo& check, const RuntimeCheckReport& report, bool in_full, std::ostream& out);

// The check's key in verify's JSON report: its name with '_' for '-' (kt-rawint4 -> kt_rawint4).
std::string runtime_check_json_key(const RuntimeCheckInfo& check);

boost::json::object runtime_check_json(const RuntimeCheckInfo& check, const RuntimeCheckReport& report);

}  // namespace moequant::cli
