// Opening one plugin module and checking its descriptor (private to the engine).
#pragma once

#include <moequant/plugin.hpp>

#include <filesystem>
#include <optional>
#include <string>

namespace moequant::detail {

struct ModuleCheck {
    // Set when the module passed every check up to (not including) registration.
    const moequant_plugin_descriptor* descriptor = nullptr;
    std::string reason;  // why it was rejected (empty when accepted)
    std::string hint;
};

// Reads the module's symbols without running it, loads it (RTLD_NOW | RTLD_LOCAL) and checks
// the descriptor and the probe. An accepted module stays loaded for the life of the process;
// a rejected one that got loaded also stays (unloading is never safe, see plugin.hpp).
ModuleCheck open_plugin_module(const std::filesystem::path& file);

// True for ids made of [a-z0-9_] (plugin ids) or, with dashes allowed, [a-z0-9_-] (objects).
bool is_valid_id(std::string_view id, bool allow_dash) noexcept;

}  // namespace moequant::detail
