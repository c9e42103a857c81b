// Opening a converted output for verify: the formats recognise their own files; the host alone
// reads its run manifest, to refuse an unfinished conversion and to add what the manifest
// records about the job (which quantizer, how many threadpool parts) to what the files say.
#include <moequant/engine/run_manifest.hpp>
#include <moequant/engine/verification.hpp>
#include <moequant/error.hpp>

#include <string_view>
#include <system_error>

namespace moequant {

namespace {

// The settings verify takes from the manifest: the files of some formats do not record them
// (a kt tree holds only its .kt files), and where they do the manifest agrees.
constexpr std::string_view manifest_facts[] = {"quantizer", "parts"};

std::string manifest_setting(const RunManifest& manifest, std::string_view key) {
    for (const auto& [k, v] : manifest.settings)
        if (k == key) return v;
    return {};
}

// A format's reader with the manifest's facts laid over what the format read from its files.
class ManifestRecordedReader final : public OutputReader {
public:
    ManifestRecordedReader(std::unique_ptr<OutputReader> files, const RunManifest& manifest)
        : files_(std::move(files)), recorded_(files_->recorded()) {
        for (std::string_view key : manifest_facts)
            if (std::string value = manifest_setting(manifest, key); !value.empty()) recorded_.set(std::string(key), value);
    }
    Options recorded() const override { return recorded_; }
    std::vector<StoredPartKey> parts() const override { return files_->parts(); }
    StoredPart read(const StoredPartKey& key) const override { return files_->read(key); }
    RuntimeCheckReport run_runtime_check(std::string_view name, const ModelPlan& plan) const override {
        return files_->run_runtime_check(name, plan);
    }

private:
    std::unique_ptr<OutputReader> files_;
    Options recorded_;
};

Error incomplete_output(const std::filesystem::path& directory, const std::string& why) {
    return Error(ErrorKind::input, "the output is incomplete: " + why,
                 {.file = directory.string(), .code = "IncompleteOutput", .hint = "rerun the same convert command to finish it"});
}

}  // namespace

OpenedOutput open_converted_output(const Registry& registry, const std::filesystem::path& directory) {
    std::error_code ec;
    // A file is a format's own file given by name (a GGUF model): no run manifest goes with it.
    if (std::filesystem::is_regular_file(directory, ec)) {
        for (const auto& format : registry.formats())
            if (auto reader = format.object->open(directory)) return {format.object, std::move(reader)};
        throw Error(ErrorKind::input, "no installed output format reads this file as a converted output",
                    {.file = directory.string(), .code = "UnknownOutput", .hint = "give the output folder, or a .gguf file"});
    }
    if (!std::filesystem::is_directory(directory, ec))
        throw Error(ErrorKind::input, "not a folder or file", {.file = directory.string(), .code = "NotFound"});
    const auto manifest = RunManifest::load(directory);
    const std::string manifest_format = manifest ? manifest_setting(*manifest, "format") : std::string();
    if (!manifest_format.empty() && !manifest->complete)
        throw incomplete_output(directory, "its run manifest does not record a finished conversion");

    // The format the manifest names is asked first: an output's copied config.json can look
    // like another format's (a kt output of a compressed-tensors source keeps its
    // quantization_config), and moequant knows what it wrote.
    std::vector<const OutputFormat*> order;
    for (const auto& format : registry.formats())
        if (format.object->id() == manifest_format) order.insert(order.begin(), format.object);
        else order.push_back(format.object);
    for (const OutputFormat* format : order) {
        auto reader = format->open(directory);
        if (!reader) continue;
        if (manifest_format == format->id()) reader = std::make_unique<ManifestRecordedReader>(std::move(reader), *manifest);
        return {format, std::move(reader)};
    }
    if (!manifest_format.empty())  // moequant wrote it, and its format no longer finds it whole
        throw incomplete_output(directory, "its run manifest records a finished " + manifest_format +
                                               " conversion, but the " + manifest_format +
                                               " format finds no complete output here (its index is written last)");
    throw Error(ErrorKind::input, "no installed output format recognises this folder as a converted output",
                {.file = directory.string(), .code = "UnknownOutput", .hint = "see 'moequant plugins' for the formats"});
}

}  // namespace moequant
