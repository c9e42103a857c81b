#include "sglang_launch_line.hpp"

#include <vector>

namespace moequant::cli {
namespace {

// `text` as one shell word: as it is when it holds only safe characters, else in single quotes.
std::string shell_word(const std::string& text) {
    bool safe = !text.empty();
    for (char c : text)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string_view("/._-+=:,@%").find(c) != std::string_view::npos)) safe = false;
    if (safe) return text;
    std::string quoted = "'";
    for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

}  // namespace

std::string sglang_launch_line(const SglangLaunch& l) {
    const std::vector<std::pair<std::string, std::string>> flags = {
        {"--model", shell_word(l.gpu_checkpoint)},
        {"--kt-weight-path", shell_word(l.cpu_weights)},
        {"--kt-method", l.kt_method},
        {"--kt-cpuinfer", std::to_string(l.cpuinfer)},
        {"--kt-threadpool-count", std::to_string(l.threadpools)},
        {"--kt-num-gpu-experts", std::to_string(l.gpu_experts_per_layer)},
        {"--kt-expert-placement-strategy", "frequency"},
        {"--init-expert-location", shell_word(l.expert_location)},
        {"--trust-remote-code", ""},
    };
    std::string line = "python -m sglang.launch_server";
    for (const auto& [flag, value] : flags) line += " \\\n  " + flag + (value.empty() ? "" : " " + value);
    return line + "\n";
}

}  // namespace moequant::cli
