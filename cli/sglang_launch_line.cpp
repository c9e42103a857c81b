#include "sglang_launch_line.hpp"

#include "shell_words.hpp"

#include <vector>

namespace moequant::cli {

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
