// `moequant plugins [--all] [--json]`: what was loaded, from where, and (--all) what was
// rejected and why.

#include "command.hpp"
#include "command_line.hpp"
#include "global_options.hpp"

#include <moequant/error.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/plugin.hpp>
#include <moequant/printable.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <iomanip>
#include <iostream>

namespace moequant::cli {

namespace po = boost::program_options;
namespace json = boost::json;

namespace {

std::string kinds_text(std::uint32_t kinds) {
    std::string out;
    auto add = [&](std::uint32_t bit, const char* name) {
        if (kinds & bit) out += (out.empty() ? "" : ",") + std::string(name);
    };
    add(MOEQUANT_KIND_ADAPTER, "adapter");
    add(MOEQUANT_KIND_QUANTIZER, "quantizer");
    add(MOEQUANT_KIND_FORMAT, "format");
    add(MOEQUANT_KIND_ENCODING, "encoding");
    add(MOEQUANT_KIND_READER, "reader");
    return out;
}

struct ObjectLine {
    std::string kind, id, description;
    const PluginInfo* plugin;
    std::vector<SynthRelease> releases;  // an adapter's, for `synth --family`
};

std::vector<ObjectLine> objects_of(const Registry& registry) {
    std::vector<ObjectLine> out;
    for (const auto& a : registry.adapters())
        out.push_back({"adapter", std::string(a.object->id()), std::string(a.object->description()), a.plugin,
                       a.object->synth_releases()});
    for (const auto& q : registry.quantizers())
        out.push_back({"quantizer", std::string(q.object->id()), std::string(q.object->description()), q.plugin});
    for (const auto& f : registry.formats())
        out.push_back({"format", std::string(f.object->id()), std::string(f.object->description()), f.plugin});
    for (const auto& e : registry.encodings())
        out.push_back({"encoding", std::string(e.object->id()), std::string(e.object->description()), e.plugin});
    for (const auto& r : registry.readers())
        out.push_back({"reader", std::string(r.object->id()), std::string(r.object->description()), r.plugin});
    return out;
}

void print_json(const Registry& registry, bool all) {
    json::object root;
    json::array plugins;
    auto objects = objects_of(registry);
    for (const auto& p : registry.plugins()) {
        json::array provides;
        for (const auto& o : objects)
            if (o.plugin->file == p.file) {
                json::object entry{{"kind", o.kind}, {"id", o.id}, {"description", o.description}};
                if (!o.releases.empty()) {
                    json::array releases;
                    for (const SynthRelease& r : o.releases)
                        releases.push_back(json::object{{"name", r.name}, {"model_type", r.model_type}, {"description", r.description}});
                    entry["synth_releases"] = std::move(releases);
                }
                provides.push_back(std::move(entry));
            }
        plugins.push_back(json::object{{"id", p.id},
                                       {"kind", kinds_text(p.kinds)},
                                       {"version", p.version},
                                       {"description", p.description},
                                       {"file", p.file.string()},
                                       {"origin", std::string(plugin_origin_name(p.origin))},
                                       {"provides", std::move(provides)}});
    }
    root["plugins"] = std::move(plugins);
    if (all) {
        json::array rejected;
        for (const auto& r : registry.rejections())
            rejected.push_back(json::object{{"file", r.file.string()},
                                            {"origin", std::string(plugin_origin_name(r.origin))},
                                            {"reason", r.reason},
                                            {"hint", r.hint}});
        root["rejected"] = std::move(rejected);
    }
    std::cout << json::serialize(root) << "\n";
}

void print_table(const Registry& registry, bool all) {
    auto objects = objects_of(registry);
    if (registry.plugins().empty()) {
        std::cout << "No plugins loaded. Searched: --plugin/--plugin-dir arguments, MOEQUANT_PLUGIN_PATH, and "
                  << default_plugin_dir().string() << "\n";
    } else {
        // Each column as wide as its longest entry (a third-party id may be long) and one space more.
        std::size_t id_width = 22, kind_width = 20, version_width = 10, object_width = 22;
        for (const auto& p : registry.plugins()) {
            id_width = std::max(id_width, printable_name(p.id).size() + 2);
            kind_width = std::max(kind_width, kinds_text(p.kinds).size() + 2);
            version_width = std::max(version_width, printable_name(p.version).size() + 2);
        }
        for (const auto& o : objects) object_width = std::max(object_width, printable_name(o.id).size() + 2);
        const auto column = [](std::size_t width) { return std::setw(static_cast<int>(width)); };
        std::cout << std::left << column(id_width) << "PLUGIN" << column(kind_width) << "KIND" << column(version_width)
                  << "VERSION" << "FILE\n";
        for (const auto& p : registry.plugins()) {
            // Ids, versions and descriptions come from the modules, file names from the folders searched.
            std::cout << column(id_width) << printable_name(p.id) << column(kind_width) << kinds_text(p.kinds)
                      << column(version_width) << printable_name(p.version) << printable_name(p.file.string()) << "\n";
            for (const auto& o : objects) {
                if (o.plugin->file != p.file) continue;
                std::cout << "    " << std::setw(10) << o.kind << column(object_width) << printable_name(o.id)
                          << printable_text(o.description) << "\n";
                for (const SynthRelease& r : o.releases)  // what `synth --family` also takes
                    std::cout << "    " << std::setw(10) << "  release" << column(object_width) << printable_name(r.name)
                              << printable_text(r.description) << "\n";
            }
        }
    }
    const auto& rejected = registry.rejections();
    if (all) {
        if (!rejected.empty()) std::cout << "\nRejected:\n";
        for (const auto& r : rejected) {
            std::cout << "  " << printable_name(r.file.string()) << " (" << plugin_origin_name(r.origin)
                      << "): " << printable_text(r.reason) << "\n";
            if (!r.hint.empty()) std::cout << "      hint: " << printable_text(r.hint) << "\n";
        }
    } else {
        warn_about_rejections(registry);
    }
}

}  // namespace

int run_plugins_command(const std::vector<std::string>& args, GlobalOptions globals) {
    bool all = false, as_json = false;
    po::options_description options("Options");
    options.add_options()
        ("all", po::bool_switch(&all), "also list every rejected candidate module and the reason")
        ("json", po::bool_switch(&as_json), "print JSON instead of a table");
    if (!parse_command(args, options, globals,
                       {"moequant plugins [--all] [--json]",
                        "Lists the plugin modules that loaded (id, kind, version, file) and the adapters,\n"
                        "quantizers and output formats each one provides."}))
        return 0;
    Registry registry;
    load_plugins(registry, globals, /*fail_on_explicit=*/false);
    if (as_json) print_json(registry, all);
    else print_table(registry, all);
    std::cout.flush();
    check_explicit_plugins(registry);
    return 0;
}

}  // namespace moequant::cli
