// One plugin module built in this tree, loaded on its own into a registry: what the golden tests
// drive directly, without the host.
#pragma once

#include <moequant/engine/plugin_registry.hpp>

#include <string>

namespace moequant::test {

class BuiltPlugin {
public:
    // Loads <plugin build dir>/<module>.so; the test stops if the registry rejects it.
    explicit BuiltPlugin(const std::string& module);
    // The quantizer the module registers as `id`; the test stops if there is none.
    const Quantizer& quantizer(const std::string& id) const;

private:
    Registry registry_;
};

}  // namespace moequant::test
