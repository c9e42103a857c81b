// Writing a moequant plugin: the entry point, its descriptor and the registrar.
//
// A plugin is a shared-library module (built with moequant_add_plugin() from the installed
// CMake package) containing exactly one MOEQUANT_PLUGIN block:
//
//     #include <moequant/plugin.hpp>
//     MOEQUANT_PLUGIN("my_quant", "1.0.0", MOEQUANT_KIND_QUANTIZER, "what it does") {
//         registrar.add(std::make_unique<MyQuantizer>());
//     }
//
// The macro exports one C symbol, `moequant_plugin_v1`, in the ELF section "moequant" (through
// Boost.DLL's alias), pointing at a function that returns a moequant_plugin_descriptor. The
// host finds the symbol without running any plugin code, loads the module, and checks the
// descriptor (ABI integer, SDK version, toolchain fingerprint) before it calls anything else
// in the plugin. A plugin that fails a check is skipped with a one-line reason
// (`moequant plugins --all`). Plugins are never unloaded.
//
// Rules for plugin code: no work in static initialisers (they run at load time, before any
// check); vector code only in functions called after a run-time CPU check; parallel work
// through moequant::parallel_for; only moequant::Error (or std exceptions) may leave the
// plugin's objects.
#pragma once

#include <moequant/checkpoint_reader.hpp>
#include <moequant/export.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/output_format.hpp>
#include <moequant/plugin_abi.hpp>
#include <moequant/quantizer.hpp>
#include <moequant/source_encoding.hpp>

#include <boost/dll/alias.hpp>

#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

namespace moequant {

// Handed to a plugin's registration body; the host checks ids, kinds and duplicates.
class MOEQUANT_API PluginRegistrar {
public:
    virtual void add(std::unique_ptr<ModelAdapter> adapter) = 0;
    virtual void add(std::unique_ptr<Quantizer> quantizer) = 0;
    virtual void add(std::unique_ptr<OutputFormat> format) = 0;
    virtual void add(std::unique_ptr<SourceEncoding> encoding) = 0;
    virtual void add(std::unique_ptr<CheckpointReader> reader) = 0;

protected:
    ~PluginRegistrar() = default;
};

namespace plugin_detail {

// Copies a message into a C buffer, always NUL-terminated.
inline void copy_message(const char* message, char* out, std::size_t size) noexcept {
    if (!out || size == 0) return;
    std::size_t n = std::strlen(message);
    if (n >= size) n = size - 1;
    std::memcpy(out, message, n);
    out[n] = '\0';
}

// Runs a registration body; no exception leaves the plugin through the C entry.
inline int run_registration(void (*body)(PluginRegistrar&), void* registrar, char* error,
                            std::size_t error_size) noexcept {
    try {
        body(*static_cast<PluginRegistrar*>(registrar));
        return 0;
    } catch (const std::exception& e) {
        copy_message(e.what(), error, error_size);
    } catch (...) {
        copy_message("unknown exception", error, error_size);
    }
    return 1;
}

// Runs a probe written as `int probe(std::string& reason)`.
inline int run_probe(int (*probe)(std::string&), char* reason, std::size_t reason_size) noexcept {
    try {
        std::string why;
        int score = probe(why);
        if (score <= 0) copy_message(why.empty() ? "unusable" : why.c_str(), reason, reason_size);
        return score > 0 ? score : 0;
    } catch (const std::exception& e) {
        copy_message(e.what(), reason, reason_size);
    } catch (...) {
        copy_message("probe threw an unknown exception", reason, reason_size);
    }
    return 0;
}

}  // namespace plugin_detail
}  // namespace moequant

// Declares the plugin with a CPU/machine probe: PROBE is `int probe(std::string& reason)`
// returning > 0 when usable (higher = better) and 0 with a reason otherwise.
#define MOEQUANT_PLUGIN_WITH_PROBE(ID, VERSION, KINDS, DESCRIPTION, PROBE)                      \
    static void moequant_plugin_register_body(::moequant::PluginRegistrar& registrar);        \
    namespace moequant_plugin_entry_detail {                                                   \
    static int register_objects(void* r, char* error, std::size_t error_size) noexcept {      \
        return ::moequant::plugin_detail::run_registration(&moequant_plugin_register_body, r,  \
                                                           error, error_size);               \
    }                                                                                         \
    static constexpr int (*probe_function)(std::string&) = PROBE;                                   \
    static int probe(char* reason, std::size_t reason_size) noexcept {                        \
        return ::moequant::plugin_detail::run_probe(probe_function, reason, reason_size);     \
    }                                                                                         \
    static const ::moequant_plugin_descriptor descriptor = {                                  \
        sizeof(::moequant_plugin_descriptor), MOEQUANT_PLUGIN_ABI_VERSION,                    \
        MOEQUANT_SDK_VERSION, MOEQUANT_TOOLCHAIN_FINGERPRINT, ID, VERSION, DESCRIPTION, KINDS, \
        probe_function ? &probe : nullptr, &register_objects};                                 \
    static const ::moequant_plugin_descriptor* entry() noexcept { return &descriptor; }      \
    }                                                                                         \
    BOOST_DLL_ALIAS_SECTIONED(moequant_plugin_entry_detail::entry, moequant_plugin_v1, moequant) \
    static void moequant_plugin_register_body([[maybe_unused]] ::moequant::PluginRegistrar& registrar)

// Declares the plugin; the block that follows registers its objects through `registrar`.
#define MOEQUANT_PLUGIN(ID, VERSION, KINDS, DESCRIPTION) \
    MOEQUANT_PLUGIN_WITH_PROBE(ID, VERSION, KINDS, DESCRIPTION, nullptr)
