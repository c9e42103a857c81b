#include "kt_safetensors_reader.hpp"

#include "kt_naming.hpp"
#include "stored_parts.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/sharded_writer.hpp>

#include <algorithm>
#include <array>

namespace moequant::formats {
namespace {

namespace fs = std::filesystem;

// The tensors kt's awq method stores per whole expert matrix (no ".numa.{i}").
constexpr std::array<std::string_view, 3> awq_tensors = {"weight", "qzeros", "scale"};

// "blk.{L}.ffn_{proj}_exps.{E}.numa.{i}.{tensor}" -> key and the quantizer part it holds
// ("backward.{tensor}" for ffn_{proj}_bwd_exps), "blk.{L}.ffn_{proj}_exps.{E}.{tensor}" (kt's
// awq) -> part 0; nullopt for other names.
std::optional<std::pair<StoredPartKey, std::string>> parse_kt_tensor_name(std::string_view name) {
    const std::vector<std::string_view> fields = split_fields(name, '.');
    const bool split = fields.size() == 7 && fields[4] == "numa";
    const bool whole = fields.size() == 5 && std::find(awq_tensors.begin(), awq_tensors.end(), fields[4]) != awq_tensors.end();
    if ((!split && !whole) || fields[0] != "blk") return std::nullopt;
    std::string_view proj = fields[2];
    if (!proj.starts_with("ffn_") || !proj.ends_with("_exps")) return std::nullopt;
    proj = proj.substr(4, proj.size() - 9);
    const bool backward = proj.ends_with("_bwd");
    if (backward) proj.remove_suffix(4);
    auto projection = projection_from_name(proj);
    auto layer = parse_decimal(fields[1]), expert = parse_decimal(fields[3]);
    auto part = split ? parse_decimal(fields[5]) : std::optional<std::int64_t>(0);
    if (!projection || !layer || !expert || !part || *part > 1'000'000 || (whole && backward)) return std::nullopt;
    return std::pair{StoredPartKey{*layer, *expert, *projection, static_cast<int>(*part)},
                     quantizer_part_name(fields[split ? 6 : 4], backward)};
}

// kt's awq output records nothing; its qzeros name the method (quantizer fact kt.method AWQ).
bool holds_awq_parts(const StoredPartIndex& index) {
    return index.begin()->second.count("qzeros") != 0;
}

}  // namespace

std::unique_ptr<OutputReader> open_kt_safetensors(const fs::path& directory) {
    // Without the index (written last) this is no complete output; the host tells an unfinished
    // conversion of its own from a folder that is none by its run manifest.
    if (!fs::exists(directory / safetensors_index_name)) return nullptr;
    Checkpoint checkpoint = Checkpoint::open(directory);
    StoredPartIndex index;
    for (const std::string& name : checkpoint.tensor_names())
        if (auto parsed = parse_kt_tensor_name(name)) index[parsed->first][parsed->second] = name;
    if (index.empty()) return nullptr;  // a safetensors checkpoint, but not a kt output
    // moequant's shards record the job in __metadata__; the reference converter's do not.
    Options recorded;
    recorded.set("experts_on", "cpu");  // kt-kernel's CPU experts
    record_backward_weights(recorded, index);
    const SafetensorsFile& shard = checkpoint.shard(checkpoint.shard_of(index.begin()->second.begin()->second));
    if (auto method = shard.metadata("moequant.method")) record_method(recorded, *method);
    else if (holds_awq_parts(index)) record_method(recorded, "AWQ");
    record_shard_metadata(recorded, shard);
    return std::make_unique<CheckpointPartReader>(std::move(checkpoint), std::move(index), std::move(recorded));
}

}  // namespace moequant::formats
