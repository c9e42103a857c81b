#include "plugin_loader.hpp"

#include <moequant/error.hpp>
#include <moequant/input_file.hpp>

#include <boost/dll/library_info.hpp>
#include <boost/dll/shared_library.hpp>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

namespace moequant::detail {
namespace {

constexpr const char* entry_alias = "moequant_plugin_v1";
constexpr const char* entry_section = "moequant";

// Loaded modules live as long as the process: objects, vtables, type_info and exception
// objects made by plugin code may outlive any owner we could tie them to (Boost.DLL
// "missuses"), so nothing is ever unloaded. Deliberately leaked.
void keep_forever(boost::dll::shared_library library) {
    static std::mutex mutex;
    static auto* kept = new std::vector<boost::dll::shared_library>();
    std::lock_guard lock(mutex);
    kept->push_back(std::move(library));
}

// The loader's own message (from dlerror) inside Boost.DLL's exception text.
std::string loader_message(const std::string& what) {
    static const std::string marker = "dlerror system message: ";
    auto pos = what.find(marker);
    if (pos == std::string::npos) return what;
    std::string msg = what.substr(pos + marker.size());
    if (!msg.empty() && msg.back() == ')') msg.pop_back();
    return msg;
}

std::string sdk_version_string(std::uint32_t v) {
    return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

ModuleCheck reject(std::string reason, std::string hint = {}) {
    ModuleCheck c;
    c.reason = std::move(reason);
    c.hint = std::move(hint);
    return c;
}

}  // namespace

bool is_valid_id(std::string_view id, bool allow_dash) noexcept {
    if (id.empty() || id.size() > 64) return false;
    return std::all_of(id.begin(), id.end(), [&](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || (allow_dash && c == '-');
    });
}

ModuleCheck open_plugin_module(const std::filesystem::path& file) {
    // 0. Only a regular file: reading a FIFO or a device would block or never end.
    try {
        require_regular_file(file);
    } catch (const Error& e) {
        return reject(e.message() + " (" + e.code() + ")");
    }

    // 1. Symbols first, without running any code of the file.
    std::vector<std::string> symbols;
    try {
        boost::dll::library_info info(file, true);
        symbols = info.symbols(entry_section);
    } catch (const std::exception& e) {
        return reject(std::string("not a shared library this host can read (") + e.what() + ")");
    }
    if (std::find(symbols.begin(), symbols.end(), entry_alias) == symbols.end()) {
        for (const auto& s : symbols)
            if (s.rfind("moequant_plugin_v", 0) == 0)
                return reject("exports '" + s + "', a descriptor generation this host cannot read (it reads '" +
                                  entry_alias + "')",
                              "use a moequant that matches the plugin, or rebuild the plugin against this SDK");
        return reject(std::string("not a moequant plugin (no '") + entry_alias + "' in section '" + entry_section + "')",
                      "plugins declare themselves with MOEQUANT_PLUGIN(...) from <moequant/plugin.hpp>");
    }

    // 2. Load: RTLD_NOW reports missing dependencies here, RTLD_LOCAL keeps plugins apart.
    boost::dll::shared_library library;
    try {
        library.load(file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    } catch (const std::exception& e) {
        return reject("cannot load: " + loader_message(e.what()),
                      "the plugin's dependencies must be on the loader path (check with ldd)");
    }

    // 3. The descriptor, checked before anything else of the plugin runs.
    const moequant_plugin_descriptor* d = nullptr;
    try {
        auto& entry = library.get_alias<const moequant_plugin_descriptor*()>(entry_alias);
        d = entry();
    } catch (const std::exception& e) {
        keep_forever(std::move(library));
        return reject(std::string("cannot read the plugin entry point: ") + e.what());
    }
    keep_forever(library);
    if (!d) return reject("the plugin entry point returned no descriptor");
    if (d->struct_size < sizeof(moequant_plugin_descriptor))
        return reject("descriptor is " + std::to_string(d->struct_size) + " bytes, this host needs " +
                      std::to_string(sizeof(moequant_plugin_descriptor)));
    std::string label = d->id ? "'" + std::string(d->id) + "' " + (d->version ? d->version : "?") : "(no id)";
    if (d->abi_version != MOEQUANT_PLUGIN_ABI_VERSION)
        return reject("plugin " + label + " was built for plugin ABI " + std::to_string(d->abi_version) +
                          ", this moequant uses ABI " + std::to_string(MOEQUANT_PLUGIN_ABI_VERSION),
                      "rebuild it against the SDK installed with this moequant (find_package(moequant " +
                          sdk_version_string(MOEQUANT_SDK_VERSION) + "))");
    if (d->sdk_version / 10000 != MOEQUANT_SDK_VERSION / 10000 ||
        d->sdk_version / 100 % 100 > MOEQUANT_SDK_VERSION / 100 % 100)
        return reject("plugin " + label + " was built with SDK " + sdk_version_string(d->sdk_version) +
                          ", newer than or incompatible with this moequant's SDK " +
                          sdk_version_string(MOEQUANT_SDK_VERSION),
                      "rebuild it against the SDK installed with this moequant");
    if (!d->toolchain || std::strcmp(d->toolchain, MOEQUANT_TOOLCHAIN_FINGERPRINT) != 0)
        return reject("plugin " + label + ": toolchain mismatch: plugin " + (d->toolchain ? d->toolchain : "(none)") +
                          ", host " + MOEQUANT_TOOLCHAIN_FINGERPRINT,
                      "build plugins with the compiler and standard library the host was built with");
    if (!d->id || !is_valid_id(d->id, false))
        return reject(std::string("invalid plugin id '") + (d->id ? d->id : "") + "' (must match [a-z0-9_]+)");
    if (!d->version || !d->description || !d->register_objects)
        return reject("plugin " + label + ": descriptor lacks a version, description or registration function");
    constexpr std::uint32_t all_kinds =
        MOEQUANT_KIND_ADAPTER | MOEQUANT_KIND_QUANTIZER | MOEQUANT_KIND_FORMAT | MOEQUANT_KIND_ENCODING | MOEQUANT_KIND_READER;
    if (d->kinds == 0 || (d->kinds & ~all_kinds) != 0)
        return reject("plugin " + label + " declares unknown kinds (bits " + std::to_string(d->kinds) + ")");

    // 4. The plugin's own check of this machine.
    if (d->probe) {
        char reason[512] = {};
        if (d->probe(reason, sizeof reason) <= 0)
            return reject("plugin " + label + " is not usable on this machine: " + reason);
    }
    ModuleCheck ok;
    ok.descriptor = d;
    return ok;
}

}  // namespace moequant::detail
