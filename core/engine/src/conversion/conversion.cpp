#include "conversion/conversion_modes.hpp"
#include "conversion/job_record.hpp"
#include "conversion/job_validation.hpp"
#include "cluster/wire.hpp"
#include "seams/engine_faults.hpp"

#include <moequant/digest.hpp>
#include <moequant/engine/conversion.hpp>
#include <moequant/engine/output_location.hpp>
#include <moequant/engine/output_lock.hpp>
#include <moequant/engine/output_overwrite.hpp>
#include <moequant/engine/profiler.hpp>
#include <moequant/engine/rank_checks.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/engine/source_reads.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/freed_heap.hpp>
#include <moequant/input_file.hpp>
#include <moequant/output_file.hpp>
#include <moequant/version.hpp>


#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <thread>

namespace moequant {

namespace fs = std::filesystem;

namespace {

// True when the folder holds nothing but a manifest, the lock and the tool's own partials: what a
// run killed or failed before it completed its first layer leaves behind.
bool holds_nothing_complete(const fs::path& dir) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name != run_manifest_name && name != output_lock_name && !is_partial_name(name)) return false;
    }
    return !ec;
}

// What --overwrite may remove: a conversion's files when the folder holds a manifest (even an
// unreadable one: the name is the tool's), and the files an earlier manifest lists.
OverwriteScope overwrite_scope(const fs::path& dir, const std::optional<RunManifest>& earlier) {
    OverwriteScope scope;
    std::error_code ec;
    scope.conversion_output = fs::is_regular_file(fs::symlink_status(dir / run_manifest_name, ec));
    std::set<std::string>& names = scope.names;
    if (!earlier) return scope;
    auto add = [&](const ManifestFile& f) {
        const fs::path name(f.name);
        if (!name.empty() && !name.is_absolute()) names.insert(name.begin()->string());
    };
    for (const auto& layer : earlier->completed_layers)
        for (const auto& f : layer.files) add(f);
    for (const auto& f : earlier->final_files) add(f);
    return scope;
}

// The side files a format will copy at the end are checked now, so a FIFO or a folder under such
// a name fails the run before its first layer rather than after its last.
void check_side_files(const Checkpoint& source) {
    for (const char* name : copied_side_files) source.side_file(name);  // what the copy reads, refused now
}

// The output folder, checked against the inputs, created if needed and locked for this run.
std::unique_ptr<OutputFolderLock> lock_output(const ConversionJob& job) {
    check_side_files(*job.source);
    CommandInputs inputs{.folders = {job.source->directory()}, .files = job.input_files};
    if (job.calibration) inputs.files.push_back(job.calibration->path());
    check_output_folder(job.output, inputs, job.overwrite);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(job.output, ec)) && !fs::is_directory(job.output, ec))
        throw Error(ErrorKind::io, "the output path exists and is not a folder", {.file = job.output.string(), .code = "OutputExists"});
    fs::create_directories(job.output, ec);
    if (ec)
        throw Error(ErrorKind::io, "cannot create the output folder: " + ec.message(),
                    {.file = job.output.string(), .code = "WriteFailed"});
    return std::make_unique<OutputFolderLock>(job.output);
}

// What the locked output folder holds: the manifest to continue from, and the earlier run's
// record of the source shards (empty when starting afresh).
struct PreparedOutput {
    RunManifest manifest;
    RunManifest earlier;
};

PreparedOutput prepare_output(const ConversionJob& job, const ExpertImportance* importance) {
    PreparedOutput out{describe_job(job, importance), {}};
    std::optional<RunManifest> earlier;
    try {
        earlier = RunManifest::load(job.output);
    } catch (const Error&) {
        if (!job.overwrite) throw;
    }
    if (earlier && earlier->same_job(out.manifest) && !job.overwrite) {
        out.manifest.completed_layers = earlier->completed_layers;
        out.earlier = std::move(*earlier);
        return out;
    }
    // Nothing completed yet, whoever started it: start afresh.
    if ((!earlier || (earlier->completed_layers.empty() && !earlier->complete)) && holds_nothing_complete(job.output)) {
        clear_for_overwrite(job.output, overwrite_scope(job.output, earlier));
        return out;
    }
    if (!job.overwrite)
        throw Error(ErrorKind::io,
                    earlier ? "the output folder holds the output of another conversion (different source, plan or settings)"
                            : "the output folder is not empty and holds no moequant-run.json",
                    {.file = job.output.string(), .code = "OutputExists", .hint = "choose another --output or pass --overwrite"});
    clear_for_overwrite(job.output, overwrite_scope(job.output, earlier));
    return out;
}

// The shards a layer's experts (and router) are read from.
std::set<std::string> shards_feeding(const Checkpoint& source, const MoeLayerPlan& layer) {
    std::set<std::string> shards;
    auto add = [&](const std::string& tensor) {
        if (!tensor.empty() && source.contains(tensor)) shards.insert(source.shard_of(tensor));
    };
    for (const auto& e : layer.experts)
        for (const auto& s : e.weights)
            for (const auto& [role, tensor] : source.weight(s.tensor).tensors) add(tensor);
    add(layer.router_weight);
    add(layer.router_bias);
    return shards;
}

// "layer 3 is" or "layers 0, 1, 2 are" (at most 16 named, then how many in all).
std::string layers_sentence(const std::vector<std::int64_t>& layers) {
    constexpr std::size_t named = 16;
    std::string list;
    for (std::size_t i = 0; i < std::min(layers.size(), named); ++i) list += (i ? ", " : "") + std::to_string(layers[i]);
    if (layers.size() > named) list += ", ... (" + std::to_string(layers.size()) + " in all)";
    return (layers.size() == 1 ? "layer " : "layers ") + list + (layers.size() == 1 ? " is" : " are");
}

// Why a layer an earlier run completed cannot be adopted, or nullopt when it can: every file it
// recorded must still hold the bytes written (digest), the format must name the same files, and
// the source shards feeding the layer must be as they were (size, modification time, header).
std::optional<std::string> why_redo(const ConversionJob& job, const OutputWriter& writer, const MoeLayerPlan& layer,
                                    const ManifestLayer& done, const RunManifest& earlier, const RunManifest& now) {
    auto expected = writer.layer_files(done.layer);
    if (done.files.empty() && writer.folds_layer_files())  // the earlier run finished and removed them
        return "the earlier run folded its experts into the output's files, which keep no per-layer file to resume from";
    if (expected.size() != done.files.size()) return "the output format now names other files for it";
    for (const auto& shard : shards_feeding(*job.source, layer)) {
        const ManifestShard* then = earlier.source_shard(shard);
        const ManifestShard* current = now.source_shard(shard);
        if (!then) return "the earlier run recorded no state of source shard " + shard;
        if (!current || !(*then == *current)) return "source shard " + shard + " changed since the layer was written";
    }
    for (const auto& f : done.files) {
        if (std::find(expected.begin(), expected.end(), f.name) == expected.end())
            return "the output format now names other files for it";
        std::error_code ec;
        const fs::path file = job.output / f.name;
        if (fs::is_symlink(file, ec) || !fs::is_regular_file(file, ec)) return f.name + " is missing or not a regular file";
        if (fs::file_size(file, ec) != f.bytes || ec) return f.name + " has another size than the earlier run wrote";
        if (file_digest(file) != f.digest) return f.name + " holds other bytes than the earlier run wrote";
    }
    // The source by content too: a copy can keep a shard's size, time and header with other weights.
    if (done.source_digest.empty()) return "the earlier run recorded no digest of the layer's source tensors";
    const std::string now_digest = combined_digest(tensor_digests(*job.source, expert_tensors(*job.source, layer)));
    release_layer_pages(*job.source, layer);
    if (now_digest != done.source_digest) return "its source tensors hold other bytes than when it was converted";
    return std::nullopt;
}

// --resume-layer R: every layer before R must be complete; R and the layers after it are redone.
void resume_from(const ConversionJob& job, std::int64_t resume_layer, RunManifest& manifest) {
    for (const auto& layer : job.plan->moe_layers)
        if (layer.layer < resume_layer && !manifest.completed(layer.layer))
            throw Error(ErrorKind::usage,
                        "--resume-layer " + std::to_string(resume_layer) + ": layer " + std::to_string(layer.layer) +
                            " before it was not completed by an earlier run in this folder",
                        {.file = job.output.string(), .code = "ResumeGap"});
    std::erase_if(manifest.completed_layers, [&](const ManifestLayer& l) { return l.layer >= resume_layer; });
}

// The engine's fault seams after each layer a rank converted: a pause, so the concurrency tests
// can start or kill a second run mid-way, and a rank's death, for the cluster tests.
void injected_faults_after_layer(const Cluster& cluster) {
    const seams::EngineFaults& faults = seams::engine_faults();
    if (faults.pause_after_layer.count() > 0) std::this_thread::sleep_for(faults.pause_after_layer);
    static long layers = 0;
    ++layers;
    if (faults.kill_rank && faults.kill_rank->rank == cluster.rank() && layers >= faults.kill_rank->after_layers)
        ::raise(SIGKILL);
}

// Rank 0's list of layer indices, on every rank.
std::vector<std::size_t> shared_layer_list(Cluster& cluster, const std::vector<std::size_t>& list) {
    if (cluster.size() == 1) return list;
    detail::WireWriter w;
    w.u64(list.size());
    for (std::size_t i : list) w.u64(i);
    std::string bytes = w.take();
    cluster.broadcast(bytes, 0);
    detail::WireReader in(bytes);
    std::vector<std::size_t> out(in.count(sizeof(std::uint64_t)));
    for (std::size_t& i : out) i = in.u64();
    return out;
}

std::uint64_t total_bytes(const std::vector<WrittenFile>& files) {
    std::uint64_t n = 0;
    for (const auto& f : files) n += f.bytes;
    return n;
}

std::vector<ManifestFile> manifest_files(const std::vector<WrittenFile>& files) {
    std::vector<ManifestFile> out;
    for (const auto& f : files) out.push_back({f.name, f.bytes, f.digest});
    return out;
}

}  // namespace

ConversionResult run_conversion(const ConversionJob& job, ProgressSink& progress) {
    const auto start = std::chrono::steady_clock::now();
    Cluster& cluster = job.cluster ? *job.cluster : Cluster::alone();
    const CheckedJob checked = validate_job(job);
    const std::unique_ptr<ConversionMode> mode = conversion_mode(job, checked.quantizer, checked.importance.get(), progress);
    // Before any file: every rank runs this job on this source ...
    check_same_job_on_every_rank(cluster, [&] { return describe_job(job, checked.importance.get()); }, *job.source);
    // ... and an output that cannot fit is refused now, not after a day of layers.
    if (cluster.root())
        if (const auto planned = plan_checked_output(job, checked)) check_free_disk(*planned, job.output);

    // One writer per folder, for the whole run (rank 0 holds the lock and the manifest); the
    // checks above touched no file.
    std::unique_ptr<OutputFolderLock> lock;
    PreparedOutput prepared;
    RunManifest& manifest = prepared.manifest;
    if (cluster.root()) {
        lock = lock_output(job);
        prepared = prepare_output(job, checked.importance.get());
        if (job.resume_layer) resume_from(job, *job.resume_layer, manifest);
        manifest.complete = false;
        manifest.final_files.clear();
        // Before any output file: a run killed at any point leaves a folder a rerun recognises.
        manifest.save(job.output);
    }
    check_output_shared(cluster, job.output);  // every rank writes into the folder rank 0 locked

    std::unique_ptr<OutputWriter> writer = job.format->create(checked.context);

    ConversionResult result;
    std::uint64_t bytes_total = 0, bytes_done = 0;
    for (const auto& layer : job.plan->moe_layers) bytes_total += layer_input_bytes(*job.source, layer);
    const std::size_t steps = job.plan->moe_layers.size();
    std::size_t done_steps = 0;
    // What the earlier run completed, looked up as it was: the manifest saved after each layer
    // lists only the layers of this run so far. Rank 0 decides which layers to adopt.
    RunManifest carried;
    carried.completed_layers = manifest.completed_layers;
    std::vector<ManifestLayer> kept;
    std::vector<std::size_t> todo;  // indices into plan->moe_layers of the layers to convert
    std::map<std::string, std::vector<std::int64_t>> redone;  // why -> the layers converted again
    for (std::size_t i = 0; i < steps && cluster.root(); ++i) {
        const MoeLayerPlan& layer = job.plan->moe_layers[i];
        const ManifestLayer* done = carried.completed(layer.layer);
        if (done && mode->adopts_completed_layers()) {
            if (const auto reason = why_redo(job, *writer, layer, *done, prepared.earlier, manifest)) {
                redone[*reason].push_back(layer.layer);
            } else {
                writer->adopt_layer(layer.layer);
                kept.push_back(*done);
                ++result.layers_adopted;
                ++done_steps;
                bytes_done += layer_input_bytes(*job.source, layer);
                continue;
            }
        }
        todo.push_back(i);
    }
    for (const auto& [reason, layers] : redone) progress.note(layers_sentence(layers) + " converted again: " + reason);
    todo = shared_layer_list(cluster, todo);

    // Rank 0's record of a converted layer: in the manifest after every layer, so an
    // interrupted run resumes from there.
    auto record = [&](const ManifestLayer& layer, std::uint64_t output_bytes) {
        kept.push_back(layer);
        std::sort(kept.begin(), kept.end(), [](const ManifestLayer& a, const ManifestLayer& b) { return a.layer < b.layer; });
        manifest.completed_layers = kept;
        manifest.save(job.output);
        const std::uint64_t layer_bytes = layer_input_bytes(*job.source, *job.plan->moe_layer(layer.layer));
        ++result.layers_written;
        ++done_steps;
        bytes_done += layer_bytes;
        result.input_bytes += layer_bytes;
        result.output_bytes += output_bytes;
        progress.step(done_steps, steps, "layer", bytes_done, bytes_total);
    };
    // Converts a layer; `read` gets the digests of the source tensors it was made of, taken from
    // the pages just read, before they are released (the proof across ranks, and the record a
    // rerun checks the source against). `while_mapped` runs before the pages go.
    auto convert = [&](const MoeLayerPlan& layer, std::vector<TensorDigest>& read, const std::function<void()>& while_mapped = {}) {
        const ProfileSpan span("layer", "layer " + std::to_string(layer.layer));
        std::vector<WrittenFile> files = mode->convert_layer(layer, *writer);
        read = tensor_digests(*job.source, expert_tensors(*job.source, layer));
        if (while_mapped) while_mapped();
        release_layer_pages(*job.source, layer);  // memory stays about one layer, whatever the model size
        return_freed_heap();  // and the heap the layer's work freed goes back too, in every thread's arena
        ManifestLayer record{layer.layer, manifest_files(files), mode->take_coverage()};
        record.source_digest = combined_digest(read);
        return std::pair{std::move(record), total_bytes(files)};
    };
    if (cluster.size() > 1 && mode->adopts_completed_layers()) {
        // Layers dealt to ranks in rounds: round k converts todo[k*N + r] on rank r, then rank 0
        // adopts the others' layers (their files are in the shared folder) and records them.
        const std::size_t ranks = static_cast<std::size_t>(cluster.size());
        for (std::size_t first = 0; first < todo.size(); first += ranks) {
            std::string mine;
            std::vector<TensorDigest> read;
            const std::size_t k = first + static_cast<std::size_t>(cluster.rank());
            if (k < todo.size()) {
                const auto [layer, bytes] = convert(job.plan->moe_layers[todo[k]], read);
                detail::WireWriter w;
                detail::write_layer_record(w, layer);
                w.u64(bytes);
                mine = w.take();
                injected_faults_after_layer(cluster);
            }
            // Before rank 0 records any layer of the round: every rank made its layer of the
            // bytes rank 0's copy holds (a mismatch ends the job; the round's layers stay unrecorded).
            check_read_alike_on_every_rank(cluster, *job.source, read);
            cluster.share(mine, [&](int r, std::string_view bytes) {
                if (!cluster.root() || bytes.empty()) return;
                detail::WireReader in(bytes);
                const ManifestLayer layer = detail::read_layer_record(in);
                const std::uint64_t written = in.u64();
                if (r != 0) writer->adopt_layer(layer.layer);
                record(layer, written);
            });
        }
    } else {
        // One rank, or sequential calibration: every rank takes part in every layer (samples and
        // experts shared out inside), rank 0 writes it.
        ForwardReadCheck forward_reads(cluster, *job.source, *job.plan);
        for (std::size_t i : todo) {
            std::vector<TensorDigest> read;
            const std::int64_t index = job.plan->moe_layers[i].layer;
            // Every rank ran the forward through these layers and solved some of their experts:
            // all of it read as rank 0 read it, before the layer is recorded.
            const auto [layer, bytes] = convert(job.plan->moe_layers[i], read, [&] { forward_reads.through_layer(index, read); });
            if (cluster.root()) record(layer, bytes);
            injected_faults_after_layer(cluster);
        }
    }
    if (cluster.root()) {
        manifest.completed_layers = kept;
        std::vector<WrittenFile> final_files = [&] {
            const ProfileSpan span("finish");
            return writer->finish();
        }();
        // Files folded into finish()'s are gone: the layers stay recorded, without files, and
        // what the run leaves written is finish()'s files.
        if (writer->folds_layer_files()) {
            for (auto& layer : manifest.completed_layers) layer.files.clear();
            result.output_bytes = 0;
        }
        result.output_bytes += total_bytes(final_files);
        manifest.final_files = manifest_files(final_files);
        manifest.complete = true;
        manifest.save(job.output);
    }
    cluster.barrier();  // no rank reports success before the output is complete
    progress.finish();
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

}  // namespace moequant
