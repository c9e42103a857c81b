#include "family_selection.hpp"

#include <moequant/error.hpp>

#include <algorithm>
#include <utility>

namespace moequant::cli {

std::string installed_adapters(const Registry& registry) {
    std::string list;
    for (const auto& a : registry.adapters()) {
        std::string types;
        for (const auto& t : a.object->model_types()) types += (types.empty() ? "" : ", ") + t;
        list += (list.empty() ? "" : "; ") + std::string(a.object->id()) + " (" + types + ")";
    }
    return list.empty() ? "none" : list;
}

std::string installed_releases(const Registry& registry) {
    std::string list;
    for (const auto& a : registry.adapters())
        for (const SynthRelease& r : a.object->synth_releases())
            list += (list.empty() ? "" : ", ") + r.name + " (" + std::string(a.object->id()) + ")";
    return list.empty() ? "none" : list;
}

namespace {

// The adapter's release named `name`, if it has one.
std::optional<SynthRelease> release_named(const ModelAdapter& adapter, const std::string& name) {
    for (SynthRelease& r : adapter.synth_releases())
        if (r.name == name) return std::move(r);
    return std::nullopt;
}

}  // namespace

const ModelAdapter* find_adapter(const Registry& registry, const std::string& family) {
    if (const ModelAdapter* a = registry.adapter(family)) return a;
    for (const auto& a : registry.adapters()) {
        auto types = a.object->model_types();
        if (std::find(types.begin(), types.end(), family) != types.end()) return a.object;
    }
    for (const auto& a : registry.adapters())
        if (release_named(*a.object, family)) return a.object;
    return nullptr;
}

SynthTarget find_synth_target(const Registry& registry, const std::string& family) {
    const ModelAdapter* adapter = find_adapter(registry, family);
    if (!adapter)
        throw_usage_error("--family '" + family + "' names no installed adapter, model type or release; installed: " +
                          installed_adapters(registry) + "; releases: " + installed_releases(registry));
    SynthTarget target{.adapter = adapter, .release = release_named(*adapter, family)};
    const auto types = adapter->model_types();
    if (target.release) target.model_type = target.release->model_type;
    else target.model_type = std::find(types.begin(), types.end(), family) != types.end() ? family : types.front();
    return target;
}

SelectedAdapter select_adapter(const Registry& registry, const ModelConfig& config, const Checkpoint& checkpoint,
                               const std::string& family_override) {
    if (!family_override.empty()) {
        const ModelAdapter* a = find_adapter(registry, family_override);
        if (!a)
            throw_usage_error("--family '" + family_override + "' names no installed adapter; installed: " +
                              installed_adapters(registry));
        return {a, true};
    }
    const ModelAdapter* best = nullptr;
    int best_score = 0;
    std::vector<std::string> tied;
    for (const auto& a : registry.adapters()) {
        int score = a.object->match(config, checkpoint);
        if (score <= 0) continue;
        if (score > best_score) {
            best = a.object;
            best_score = score;
            tied = {std::string(a.object->id())};
        } else if (score == best_score) {
            tied.push_back(std::string(a.object->id()));
        }
    }
    if (tied.size() > 1)
        throw Error(ErrorKind::input, "adapters " + tied[0] + " and " + tied[1] + " both claim this checkpoint",
                    {.file = config.source(), .code = "AmbiguousFamily", .hint = "choose one with --family NAME"});
    if (best) return {best, false};

    std::string model_type = config.model_type().empty() ? "(none)" : config.model_type();
    std::string arch;
    for (const auto& a : config.architectures()) arch += (arch.empty() ? "" : ", ") + a;
    std::string hint = "if it is a known family under another model_type, pass --family NAME; to add a family, "
                       "build an adapter plugin against the SDK (docs/plugins.md)";
    if (!registry.rejections().empty())
        hint += "; " + std::to_string(registry.rejections().size()) +
                " plugin module(s) were rejected, see 'moequant plugins --all'";
    throw Error(ErrorKind::input,
                "no installed adapter recognises model_type '" + model_type + "'" +
                    (arch.empty() ? "" : " (architectures " + arch + ")") +
                    "; installed adapters: " + installed_adapters(registry),
                {.file = config.source(), .code = "UnknownFamily", .hint = hint});
}

PlannedSource open_planned_source(const Registry& registry, const std::string& path, const std::string& family_override) {
    Checkpoint checkpoint = open_checkpoint(registry, path);
    attach_encodings(checkpoint, registry);
    ModelConfig config = checkpoint.config();
    const SelectedAdapter adapter = select_adapter(registry, config, checkpoint, family_override);
    ModelPlan plan = adapter.adapter->plan(config, checkpoint);
    return {std::move(checkpoint), std::move(config), std::move(plan)};
}

}  // namespace moequant::cli
