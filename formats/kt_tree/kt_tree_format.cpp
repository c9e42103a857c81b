// `kt-tree` (`--no-merge-safetensor`): kt-kernel's `.kt` file tree (kt-cpu-format.md §6):
// `_layer_{L}/_numa_{i}/{P}_{proj}_{e}_{B}Byte_quant_.kt` (the code bytes) and
// `..._{S}Byte_scale_.kt` (the float32 row scales), P = INT4 / INT8, and with
// --save-backward-weights the same pair for the backward weights (`{P}_{proj}_bwd_{e}_...`, as
// kt's SFT code saves them), and nothing else. A layer
// is written into `._layer_{L}.moequant.partial/` and renamed when complete, so a layer folder
// under its final name is always whole.

#include "kt_naming.hpp"
#include "kt_output_format.hpp"
#include "kt_tree_reader.hpp"
#include "layer_shard_plan.hpp"

#include <moequant/digest.hpp>
#include <moequant/error.hpp>
#include <moequant/fault_handler.hpp>
#include <moequant/output_file.hpp>
#include <moequant/plugin.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace {

using namespace moequant;
using namespace moequant::formats;
namespace fs = std::filesystem;

std::string layer_folder(std::int64_t layer) { return "_layer_" + std::to_string(layer); }

class KtTreeSink final : public LayerSink {
public:
    KtTreeSink(fs::path output, std::int64_t layer, std::string prefix, int parts)
        : output_(std::move(output)), layer_(layer), prefix_(std::move(prefix)), parts_(parts) {
        staging_ = output_ / ("." + layer_folder(layer) + partial_marker);
        std::error_code ec;
        fs::remove_all(staging_, ec);  // leftovers of an interrupted run (a link loses only its name)
        // mkdir, not create_directories: the staging folder must be one this run made, never
        // something found under its name.
        if (::mkdir(staging_.c_str(), 0755) != 0) {
            const int e = errno;
            throw Error(ErrorKind::io, std::string("cannot create the layer folder: ") + std::strerror(e),
                        {.file = staging_.string(), .code = "WriteFailed"});
        }
        fault_slot_ = remove_on_fault(staging_);  // no destructor runs when a mapped input faults
        for (int i = 0; i < parts_; ++i) {
            fs::create_directory(staging_ / ("_numa_" + std::to_string(i)), ec);
            if (ec)
                throw Error(ErrorKind::io, "cannot create the layer folder: " + ec.message(),
                            {.file = staging_.string(), .code = "WriteFailed"});
        }
    }

    ~KtTreeSink() override {
        if (!committed_) {
            std::error_code ec;
            fs::remove_all(staging_, ec);
        }
        forget_on_fault(fault_slot_);
    }

    void write(const QuantizedExpert& q) override {
        if (!q.tensor.part("weight") || !q.tensor.part("scale"))
            throw Error(ErrorKind::plugin, "kt-tree needs quantizers that produce 'weight' and 'scale' parts");
        const std::string numa = "_numa_" + std::to_string(q.part);
        for (const auto& [part, tensor] : q.tensor.parts)  // the backward weights' parts too, when there are any
            write_file(numa + "/" + kt_file(prefix_, q.projection, q.expert, tensor.size_bytes(), part), tensor.bytes());
    }

    std::vector<WrittenFile> commit() override {
        // One flush for the whole layer: thousands of files per layer each fsynced on its own
        // cost about 0.6 ms apiece; syncfs writes them (and the folder entries) out at once.
        const int fd = ::open(staging_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        const int synced = fd >= 0 ? ::syncfs(fd) : -1;
        const int error_number = errno;
        if (fd >= 0) ::close(fd);
        if (synced != 0)
            throw Error(ErrorKind::io, std::string("cannot flush the layer to disk: ") + std::strerror(error_number),
                        {.file = staging_.string(), .code = error_number == ENOSPC ? "DiskFull" : "WriteFailed"});
        for (int i = 0; i < parts_; ++i) sync_folder(staging_ / ("_numa_" + std::to_string(i)));
        const fs::path final_dir = output_ / layer_folder(layer_);
        std::error_code ec;
        fs::remove_all(final_dir, ec);  // an earlier, incomplete or stale copy of this layer
        fs::rename(staging_, final_dir, ec);
        if (ec)
            throw Error(ErrorKind::io, "cannot move the finished layer into place: " + ec.message(),
                        {.file = final_dir.string(), .code = "WriteFailed"});
        forget_on_fault(fault_slot_);  // the staging name is gone
        fault_slot_ = -1;
        sync_folder(output_);
        committed_ = true;
        std::sort(written_.begin(), written_.end(), [](const WrittenFile& a, const WrittenFile& b) { return a.name < b.name; });
        return written_;
    }

private:
    void write_file(const std::string& relative, std::span<const std::byte> bytes) {
        // The staging folder is flushed once and renamed into place in commit(), so the files
        // need no flush of their own.
        OutputFile file(staging_ / relative, bytes.size(), OutputFile::Durability::caller_syncs);
        file.append(bytes);
        file.commit();
        std::lock_guard lock(mutex_);
        written_.push_back({layer_folder(layer_) + "/" + relative, bytes.size(), digest_hex(bytes)});
    }

    fs::path output_, staging_;
    int fault_slot_ = -1;
    std::int64_t layer_;
    std::string prefix_;
    int parts_;
    bool committed_ = false;
    std::mutex mutex_;
    std::vector<WrittenFile> written_;
};

class KtTreeWriter final : public OutputWriter {
public:
    static constexpr bool names_unsplit_parts = false;  // every .kt file name holds its part's folder
    explicit KtTreeWriter(const OutputContext& c) : c_(c), prefix_(c.quantizer->published_name("kt.file_prefix")) {}

    std::unique_ptr<LayerSink> begin_layer(std::int64_t layer) override {
        return std::make_unique<KtTreeSink>(c_.directory, layer, prefix_, c_.parts);
    }

    std::vector<std::string> layer_files(std::int64_t layer) const override {
        std::vector<std::string> files;
        for (const PlannedFile& f : planned_layer(layer)) files.push_back(f.name);
        return files;
    }

    // A layer's .kt files (sorted) with their sizes: the bytes of one quantized part each.
    std::vector<PlannedFile> planned_layer(std::int64_t layer) const {
        std::vector<PlannedFile> files;
        for_each_quantized_part(planned_moe_layer(*c_.plan, layer), *c_.quantizer, c_.parts,
                                [&](std::int64_t expert, Projection p, int part, const TensorSpec& spec) {
                                    const std::uint64_t bytes =
                                        dtype_byte_size(spec.dtype, shape_elements(spec.shape).value_or(0)).value_or(0);
                                    files.push_back({layer_folder(layer) + "/_numa_" + std::to_string(part) + "/" +
                                                         kt_file(prefix_, p, expert, bytes, spec.name),
                                                     bytes});
                                });
        std::sort(files.begin(), files.end(), [](const PlannedFile& a, const PlannedFile& b) { return a.name < b.name; });
        return files;
    }

    // Every converted layer's .kt files: what the job writes.
    std::vector<PlannedFile> planned() const {
        std::vector<PlannedFile> files;
        for (const auto& layer : c_.plan->moe_layers)
            for (PlannedFile& f : planned_layer(layer.layer)) files.push_back(std::move(f));
        return files;
    }

    void adopt_layer(std::int64_t) override {}  // the folder is already in place

    std::vector<WrittenFile> finish() override { return {}; }  // kt-kernel's tree has nothing else

private:
    OutputContext c_;
    std::string prefix_;
};

}  // namespace

MOEQUANT_PLUGIN("kt_tree", "0.1.0", MOEQUANT_KIND_FORMAT, "kt-kernel .kt file tree output (--no-merge-safetensor)") {
    registrar.add(std::make_unique<KtOutputFormat<KtTreeWriter>>(
        "kt-tree", "kt-kernel .kt file tree: _layer_L/_numa_i/{INT4|INT8}_{proj}_{e}_{bytes}Byte_{quant|scale}_.kt",
        open_kt_tree));
}
