// The host side of plugins: discovery, loading, checking, and the registry of loaded objects.
//
// Discovery order (conventions.md §1, architecture.md §2); earlier wins when two modules
// provide the same plugin id or object id, and the later one is rejected with a reason:
//   1. --plugin FILE     (explicit: a rejection is reported as an error by the CLI)
//   2. --plugin-dir DIR
//   3. MOEQUANT_PLUGIN_PATH (':'-separated folders)
//   4. the plugin folder next to the executable: <exe dir>/<relative plugin dir>, which is
//      lib/moequant/plugins in the install tree and in the build tree alike.
// Folders are scanned non-recursively for files named moequant-*.so, in name order, and
// modules are de-duplicated by their real path.
//
// Loading a candidate: (1) read its symbols without running code (Boost.DLL library_info) and
// require `moequant_plugin_v1` in section "moequant"; (2) dlopen it with RTLD_NOW|RTLD_LOCAL;
// (3) check the descriptor: size, ABI integer, SDK version (same major, minor not newer),
// toolchain fingerprint, plugin id; (4) run its probe; (5) run its registration, checking
// object ids ([a-z0-9_-]+), declared kinds and duplicates. Any failure rejects the module with
// a one-line reason and registers nothing from it. Loaded modules are never unloaded.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/checkpoint_reader.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/output_format.hpp>
#include <moequant/quantizer.hpp>
#include <moequant/source_encoding.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace moequant {

// Where a candidate module came from.
enum class PluginOrigin : std::uint8_t { explicit_file, plugin_dir, environment, default_dir };
std::string_view plugin_origin_name(PluginOrigin origin) noexcept;

// A loaded plugin module.
struct PluginInfo {
    std::string id;
    std::string version;
    std::string description;
    std::uint32_t kinds = 0;  // MOEQUANT_KIND_* bits
    std::filesystem::path file;
    PluginOrigin origin = PluginOrigin::default_dir;
};

// A module that was looked at and not loaded.
struct PluginRejection {
    std::filesystem::path file;
    PluginOrigin origin = PluginOrigin::default_dir;
    std::string reason;  // one line, e.g. "built for plugin ABI 2, this moequant uses ABI 1"
    std::string hint;    // what to do about it (may be empty)
};

// A registered object and the plugin that provided it.
template <class T>
struct Registered {
    const T* object = nullptr;
    const PluginInfo* plugin = nullptr;
};

struct PluginSearch {
    std::vector<std::filesystem::path> files;  // --plugin
    std::vector<std::filesystem::path> dirs;   // --plugin-dir
    bool use_environment = true;               // MOEQUANT_PLUGIN_PATH
    bool use_default_dir = true;               // next to the executable
};

// The plugin folder next to the running executable (lib/moequant/plugins relative to bin/).
std::filesystem::path default_plugin_dir();

class Registry {
public:
    Registry();
    ~Registry();
    Registry(const Registry&) = delete;
    Registry& operator=(const Registry&) = delete;

    // Runs the whole discovery order.
    void discover(const PluginSearch& search);
    // Loads one module. Never throws for plugin problems: they become rejections.
    void load_file(const std::filesystem::path& file, PluginOrigin origin);
    // Loads every moequant-*.so in a folder (non-recursive, in name order). A missing folder
    // is a rejection only for explicit --plugin-dir folders.
    void load_directory(const std::filesystem::path& dir, PluginOrigin origin);

    const std::vector<PluginInfo>& plugins() const noexcept;
    const std::vector<PluginRejection>& rejections() const noexcept;

    std::vector<Registered<ModelAdapter>> adapters() const;
    std::vector<Registered<Quantizer>> quantizers() const;
    std::vector<Registered<OutputFormat>> formats() const;
    std::vector<Registered<SourceEncoding>> encodings() const;
    std::vector<Registered<CheckpointReader>> readers() const;

    // Lookup by object id; nullptr if absent.
    const ModelAdapter* adapter(std::string_view id) const noexcept;
    const Quantizer* quantizer(std::string_view id) const noexcept;
    const OutputFormat* format(std::string_view id) const noexcept;
    const SourceEncoding* encoding(std::string_view id) const noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The model at `path`: read by the first registered reader that recognises it (a GGUF file),
// else a safetensors or PyTorch checkpoint (Checkpoint::open).
Checkpoint open_checkpoint(const Registry& registry, const std::filesystem::path& path);

// Hands every registered encoding to a checkpoint (Checkpoint::use_encodings), in load order:
// before this, the checkpoint's weight() recognises nothing.
void attach_encodings(Checkpoint& checkpoint, const Registry& registry);

// `quantizer` (an object the registry owns, so never freed here) bound to `options`: the
// object Quantizer::configure() makes, or `quantizer` itself when the options change nothing.
std::shared_ptr<const Quantizer> configured_quantizer(const Quantizer& quantizer, const Options& options);

}  // namespace moequant
