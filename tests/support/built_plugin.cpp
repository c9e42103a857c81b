#include "built_plugin.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>

namespace moequant::test {

BuiltPlugin::BuiltPlugin(const std::string& module) {
    registry_.load_file(std::filesystem::path(MOEQUANT_PLUGIN_BUILD_DIR) / (module + ".so"), PluginOrigin::explicit_file);
    BOOST_REQUIRE_MESSAGE(registry_.rejections().empty(), registry_.rejections().front().reason);
}

const Quantizer& BuiltPlugin::quantizer(const std::string& id) const {
    const Quantizer* q = registry_.quantizer(id);
    BOOST_REQUIRE_MESSAGE(q, id);
    return *q;
}

}  // namespace moequant::test
