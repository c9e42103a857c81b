#include <moequant/engine/plugin_registry.hpp>
#include <moequant/error.hpp>
#include <moequant/plugin.hpp>
#include <moequant/printable.hpp>

#include "plugin_loader.hpp"

#include <boost/dll/runtime_symbol_info.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>

namespace moequant {

namespace fs = std::filesystem;

std::string_view plugin_origin_name(PluginOrigin origin) noexcept {
    switch (origin) {
        case PluginOrigin::explicit_file: return "--plugin";
        case PluginOrigin::plugin_dir: return "--plugin-dir";
        case PluginOrigin::environment: return "MOEQUANT_PLUGIN_PATH";
        case PluginOrigin::default_dir: return "default";
    }
    return "?";
}

fs::path default_plugin_dir() {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) exe = boost::dll::program_location();
    return (exe.parent_path() / MOEQUANT_PLUGIN_DIR_FROM_BIN).lexically_normal();
}

namespace {

bool trace_enabled() {
    static const bool on = [] {
        const char* v = std::getenv("MOEQUANT_PLUGIN_DEBUG");
        return v && *v && std::string_view(v) != "0";
    }();
    return on;
}

void trace(const std::string& line) {
    // Lines name the candidate files found in the plugin folders.
    if (trace_enabled()) std::fprintf(stderr, "moequant: plugins: %s\n", printable_text(line).c_str());
}

template <class T>
struct Entry {
    std::unique_ptr<T> object;
    std::size_t plugin;  // index into Impl::plugins
};

}  // namespace

struct Registry::Impl {
    // PluginInfo addresses are handed out, so they must stay put: a deque-like vector of
    // unique_ptrs.
    std::vector<std::unique_ptr<PluginInfo>> plugins;
    std::vector<PluginInfo> plugin_list;  // copies for plugins(), rebuilt on change
    std::vector<PluginRejection> rejections;
    std::vector<Entry<ModelAdapter>> adapters;
    std::vector<Entry<Quantizer>> quantizers;
    std::vector<Entry<OutputFormat>> formats;
    std::vector<Entry<SourceEncoding>> encodings;
    std::vector<Entry<CheckpointReader>> readers;
    std::set<fs::path> seen;  // real paths already considered

    void rejected(const fs::path& file, PluginOrigin origin, std::string reason, std::string hint = {}) {
        trace("rejected " + file.string() + ": " + reason);
        rejections.push_back(PluginRejection{file, origin, std::move(reason), std::move(hint)});
    }

    template <class T>
    const T* find(const std::vector<Entry<T>>& list, std::string_view id) const noexcept {
        for (const auto& e : list)
            if (e.object->id() == id) return e.object.get();
        return nullptr;
    }

    template <class T>
    std::vector<Registered<T>> listing(const std::vector<Entry<T>>& list) const {
        std::vector<Registered<T>> out;
        for (const auto& e : list) out.push_back({e.object.get(), plugins[e.plugin].get()});
        return out;
    }

    std::string owner_of(std::string_view kind, std::string_view id) const {
        auto describe = [&](std::size_t p) { return "'" + plugins[p]->id + "' (" + plugins[p]->file.string() + ")"; };
        auto owner_in = [&](const auto& entries) -> std::string {
            for (const auto& e : entries)
                if (e.object->id() == id) return describe(e.plugin);
            return {};
        };
        if (kind == "adapter") return owner_in(adapters);
        if (kind == "quantizer") return owner_in(quantizers);
        if (kind == "format") return owner_in(formats);
        if (kind == "encoding") return owner_in(encodings);
        if (kind == "reader") return owner_in(readers);
        return {};
    }
};

namespace {

// Collects what one plugin registers; nothing reaches the registry unless all of it is valid.
class StagingRegistrar final : public PluginRegistrar {
public:
    // `owner_of(kind, id)` names the plugin that already provides an object, or is empty.
    using OwnerLookup = std::function<std::string(std::string_view, std::string_view)>;
    StagingRegistrar(OwnerLookup owner_of, std::uint32_t kinds) : owner_of_(std::move(owner_of)), kinds_(kinds) {}

    void add(std::unique_ptr<ModelAdapter> adapter) override {
        if (check(adapter.get(), MOEQUANT_KIND_ADAPTER, "adapter")) adapters.push_back(std::move(adapter));
    }
    void add(std::unique_ptr<Quantizer> quantizer) override {
        if (check(quantizer.get(), MOEQUANT_KIND_QUANTIZER, "quantizer")) quantizers.push_back(std::move(quantizer));
    }
    void add(std::unique_ptr<OutputFormat> format) override {
        if (check(format.get(), MOEQUANT_KIND_FORMAT, "format")) formats.push_back(std::move(format));
    }
    void add(std::unique_ptr<SourceEncoding> encoding) override {
        if (check(encoding.get(), MOEQUANT_KIND_ENCODING, "encoding")) encodings.push_back(std::move(encoding));
    }
    void add(std::unique_ptr<CheckpointReader> reader) override {
        if (check(reader.get(), MOEQUANT_KIND_READER, "reader")) readers.push_back(std::move(reader));
    }

    std::string problem;
    std::vector<std::unique_ptr<ModelAdapter>> adapters;
    std::vector<std::unique_ptr<Quantizer>> quantizers;
    std::vector<std::unique_ptr<OutputFormat>> formats;
    std::vector<std::unique_ptr<SourceEncoding>> encodings;
    std::vector<std::unique_ptr<CheckpointReader>> readers;

private:
    template <class T>
    bool check(const T* object, std::uint32_t kind, const char* kind_name) {
        if (!problem.empty()) return false;
        if (!object) {
            problem = std::string("registered a null ") + kind_name;
            return false;
        }
        std::string id(object->id());
        if (!(kinds_ & kind)) {
            problem = std::string("registered ") + kind_name + " '" + id + "' but does not declare that kind";
            return false;
        }
        if (!detail::is_valid_id(id, true)) {
            problem = std::string("invalid ") + kind_name + " id '" + id + "' (must match [a-z0-9_-]+)";
            return false;
        }
        std::string owner = owner_of_(kind_name, id);
        if (!owner.empty()) {
            problem = std::string(kind_name) + " '" + id + "' is already provided by plugin " + owner;
            return false;
        }
        if (registered_twice(id, kind)) {
            problem = std::string(kind_name) + " '" + id + "' registered twice";
            return false;
        }
        return true;
    }

    bool registered_twice(const std::string& id, std::uint32_t kind) const {
        auto in = [&](const auto& list) {
            return std::any_of(list.begin(), list.end(), [&](const auto& o) { return o->id() == id; });
        };
        switch (kind) {
            case MOEQUANT_KIND_ADAPTER: return in(adapters);
            case MOEQUANT_KIND_QUANTIZER: return in(quantizers);
            case MOEQUANT_KIND_FORMAT: return in(formats);
            case MOEQUANT_KIND_READER: return in(readers);
            default: return in(encodings);
        }
    }

    OwnerLookup owner_of_;
    std::uint32_t kinds_;
};

}  // namespace

Registry::Registry() : impl_(std::make_unique<Impl>()) {}
Registry::~Registry() = default;

void Registry::load_file(const fs::path& file, PluginOrigin origin) {
    std::error_code ec;
    fs::path real = fs::weakly_canonical(file, ec);
    if (ec || !fs::exists(real)) {
        impl_->rejected(file, origin, "no such file");
        return;
    }
    if (!impl_->seen.insert(real).second) {
        trace("skipped " + file.string() + ": already considered");
        return;
    }
    trace("trying " + real.string() + " (" + std::string(plugin_origin_name(origin)) + ")");
    detail::ModuleCheck check = detail::open_plugin_module(real);
    if (!check.descriptor) {
        impl_->rejected(real, origin, check.reason, check.hint);
        return;
    }
    const moequant_plugin_descriptor& d = *check.descriptor;
    for (const auto& p : impl_->plugins)
        if (p->id == d.id) {
            impl_->rejected(real, origin, "plugin id '" + p->id + "' is already loaded from " + p->file.string(),
                            "remove one of the two copies");
            return;
        }

    StagingRegistrar staging([this](std::string_view kind, std::string_view id) { return impl_->owner_of(kind, id); },
                             d.kinds);
    char error[1024] = {};
    if (d.register_objects(&staging, error, sizeof error) != 0) {
        impl_->rejected(real, origin, "plugin '" + std::string(d.id) + "': registration failed: " + error);
        return;
    }
    if (!staging.problem.empty()) {
        impl_->rejected(real, origin, "plugin '" + std::string(d.id) + "': " + staging.problem);
        return;
    }
    if (staging.adapters.empty() && staging.quantizers.empty() && staging.formats.empty() && staging.encodings.empty() &&
        staging.readers.empty()) {
        impl_->rejected(real, origin, "plugin '" + std::string(d.id) + "' registered nothing");
        return;
    }

    std::size_t index = impl_->plugins.size();
    impl_->plugins.push_back(std::make_unique<PluginInfo>(
        PluginInfo{d.id, d.version, d.description, d.kinds, real, origin}));
    for (auto& a : staging.adapters) impl_->adapters.push_back({std::move(a), index});
    for (auto& q : staging.quantizers) impl_->quantizers.push_back({std::move(q), index});
    for (auto& f : staging.formats) impl_->formats.push_back({std::move(f), index});
    for (auto& e : staging.encodings) impl_->encodings.push_back({std::move(e), index});
    for (auto& r : staging.readers) impl_->readers.push_back({std::move(r), index});
    impl_->plugin_list.push_back(*impl_->plugins.back());
    trace("loaded '" + std::string(d.id) + "' " + d.version + " from " + real.string());
}

void Registry::load_directory(const fs::path& dir, PluginOrigin origin) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        if (origin == PluginOrigin::plugin_dir) impl_->rejected(dir, origin, "plugin folder does not exist");
        else trace("no plugin folder " + dir.string());
        return;
    }
    std::vector<fs::path> candidates;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        std::string name = entry.path().filename().string();
        if (name.rfind("moequant-", 0) == 0 && name.size() > 12 && name.ends_with(".so") &&
            fs::is_regular_file(entry.path(), ec))
            candidates.push_back(entry.path());
    }
    std::sort(candidates.begin(), candidates.end());
    for (const auto& file : candidates) load_file(file, origin);
}

void Registry::discover(const PluginSearch& search) {
    for (const auto& file : search.files) load_file(file, PluginOrigin::explicit_file);
    for (const auto& dir : search.dirs) load_directory(dir, PluginOrigin::plugin_dir);
    if (search.use_environment) {
        // secure_getenv: ignored in setuid processes, like every loader path variable.
        if (const char* env = ::secure_getenv("MOEQUANT_PLUGIN_PATH")) {
            std::string_view rest(env);
            while (!rest.empty()) {
                auto colon = rest.find(':');
                std::string_view part = rest.substr(0, colon);
                if (!part.empty()) load_directory(fs::path(part), PluginOrigin::environment);
                rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
            }
        }
    }
    if (search.use_default_dir) load_directory(default_plugin_dir(), PluginOrigin::default_dir);
}

const std::vector<PluginInfo>& Registry::plugins() const noexcept { return impl_->plugin_list; }
const std::vector<PluginRejection>& Registry::rejections() const noexcept { return impl_->rejections; }
std::vector<Registered<ModelAdapter>> Registry::adapters() const { return impl_->listing(impl_->adapters); }
std::vector<Registered<Quantizer>> Registry::quantizers() const { return impl_->listing(impl_->quantizers); }
std::vector<Registered<OutputFormat>> Registry::formats() const { return impl_->listing(impl_->formats); }
const ModelAdapter* Registry::adapter(std::string_view id) const noexcept { return impl_->find(impl_->adapters, id); }
const Quantizer* Registry::quantizer(std::string_view id) const noexcept { return impl_->find(impl_->quantizers, id); }
const OutputFormat* Registry::format(std::string_view id) const noexcept { return impl_->find(impl_->formats, id); }
std::vector<Registered<SourceEncoding>> Registry::encodings() const { return impl_->listing(impl_->encodings); }
const SourceEncoding* Registry::encoding(std::string_view id) const noexcept { return impl_->find(impl_->encodings, id); }
std::vector<Registered<CheckpointReader>> Registry::readers() const { return impl_->listing(impl_->readers); }

Checkpoint open_checkpoint(const Registry& registry, const fs::path& path) {
    for (const auto& r : registry.readers())
        if (r.object->recognises(path)) {
            trace("reading " + path.string() + " with reader '" + std::string(r.object->id()) + "'");
            return Checkpoint::from_description(r.object->describe(path));
        }
    return Checkpoint::open(path);
}

void attach_encodings(Checkpoint& checkpoint, const Registry& registry) {
    std::vector<const SourceEncoding*> list;
    for (const auto& e : registry.encodings()) list.push_back(e.object);
    checkpoint.use_encodings(std::move(list));
}

std::shared_ptr<const Quantizer> configured_quantizer(const Quantizer& quantizer, const Options& options) {
    if (auto configured = quantizer.configure(options)) return configured;
    return std::shared_ptr<const Quantizer>(&quantizer, [](const Quantizer*) {});
}

}  // namespace moequant
