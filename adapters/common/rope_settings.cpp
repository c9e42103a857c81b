#include "rope_settings.hpp"

namespace moequant::adapters {

double rope_setting(const ModelConfig& config, const std::string& key, double fallback) {
    for (const std::string& path : {key, "rope_parameters." + key})
        if (auto v = config.find(path); v && !v->is_null()) return v->as_double();
    return fallback;
}

}  // namespace moequant::adapters
