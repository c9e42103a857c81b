// Writing a synthetic checkpoint: a family lists its tensors and config, this writes them the
// way real checkpoints are laid out — config and side files, sharded safetensors named as the
// real model names them, the linears a family marks quantizable stored in the chosen source
// encoding (FP8 block-quantized with their `_scale_inv`, one of them in a different shard than
// its weight; FP8 per channel with `_scale` and `input_scale`), and model.safetensors.index.json
// last.
#pragma once

#include "synth_encoded_linear.hpp"

#include <moequant/fp8_dequant.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/options.hpp>
#include <moequant/tensor.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moequant::adapters {

enum class SynthFill {
    normal,     // N(0, scale²)
    ones,       // 1 + N(0, scale²)
    norm_gain,  // RMSNorm weights: as `ones`; with trained statistics trained_norm_gain()
    embedding,  // token embeddings [vocab, hidden]: as `normal`; with trained statistics low_rank_embeddings()
    zeros,      // exactly 0
    inv_freq,   // rotary inverse frequencies 1 / scale^(2i / (2n)) for n = elements (scale = theta)
};

struct SynthTensor {
    std::string name;
    DType dtype = DType::BF16;  // BF16, F32, or F8_E4M3: quantizable, stored as SynthModel::encoding says
    Shape shape;
    SynthFill fill = SynthFill::normal;
    double scale = 0.02;
    // When set, the tensor's stored bytes (any dtype, e.g. gpt-oss's packed MXFP4 blocks or a
    // hash-routing table) instead of the fill; called with the synth seed.
    std::function<std::vector<std::uint8_t>(std::uint64_t seed)> bytes;
    // A quantizable tensor's own encoding instead of SynthModel::encoding: a checkpoint that
    // mixes two (DeepSeek-V4-Flash: MXFP4 experts, block-FP8 attention and shared experts).
    std::optional<SynthEncoding> encoding;
};

struct SynthModel {
    boost::json::value config;         // written as config.json
    std::vector<SynthTensor> tensors;  // in checkpoint order
    BlockSize fp8_block{128, 128};
    SynthEncoding encoding = SynthEncoding::fp8_block;  // how F8_E4M3-marked tensors are stored
    bool fp8_power_of_two_scales = false;  // FP8 block scales as powers of two (scale_fmt ue8m0)
    std::size_t shard_count = 1;
    // File name of shard `number` (1-based) of `count`.
    std::function<std::string(std::size_t number, std::size_t count)> shard_name;
    std::vector<std::pair<std::string, std::string>> side_files;  // file name -> content
};

// Shorthands for the tensors every family has.
inline SynthTensor linear_weight(std::string name, std::int64_t out, std::int64_t in, bool fp8,
                                 std::optional<SynthEncoding> encoding = std::nullopt) {
    return {std::move(name), fp8 ? DType::F8_E4M3 : DType::BF16, {out, in}, SynthFill::normal, 0.02, {}, encoding};
}
inline SynthTensor norm_weight(std::string name, std::int64_t size) {
    return {std::move(name), DType::BF16, {size}, SynthFill::norm_gain, 0.02};
}
inline SynthTensor embedding_weight(std::string name, std::int64_t vocab, std::int64_t hidden) {
    return {std::move(name), DType::BF16, {vocab, hidden}, SynthFill::embedding, 0.02};
}
inline SynthTensor bf16_tensor(std::string name, Shape shape, double stddev = 0.02) {
    return {std::move(name), DType::BF16, std::move(shape), SynthFill::normal, stddev};
}


// The synth options every family understands (see ModelAdapter::synthesize).
struct SynthSettings {
    std::string model_type;          // one of the family's model types (default: the first)
    std::string release;             // one of the family's releases, or empty (SynthRelease)
    bool small = false;              // preset "small" instead of "tiny"
    // Preset "full": the released model's sizes with every value zero, written as sparse files
    // (the data left as holes: a 688 GB DeepSeek-V3 takes a few MB of disk). For what depends
    // only on sizes (--dry-run's memory, disk and time estimates), never for numerics.
    bool full = false;
    bool fp8 = false;                // a quantized dtype: the family marks its linears F8_E4M3
    SynthEncoding encoding = SynthEncoding::bf16;  // --dtype: bf16, fp8 (block), fp8-channel, int4-ct, mxfp4, gptq
    // --dtype fp16: the BF16 tensors stored as F16 and config.json's torch_dtype float16, as
    // an fp16 release (kt-kernel's --input-type fp16) has them; the encoding is bf16's.
    bool float16 = false;
    std::uint64_t seed = 42;
    std::string layout = "per-expert";
    // --statistics trained: the values of a trained checkpoint's shape rather than independent
    // draws (synth_statistics.hpp); iid (false) keeps the bytes of earlier versions.
    bool trained_statistics = false;
};

// Writes everything into `directory` (which must exist). Deterministic for given settings.
void write_synth_model(const SynthModel& model, const std::filesystem::path& directory, const SynthSettings& settings);

// Reads and checks the options; Error(usage) naming the option and the allowed values. A
// "release" must be one of `releases` and agree with "model_type" (which it sets when absent).
// Preset "full" is refused unless the model type is one of `full_size_types` (the family knows
// its released sizes).
SynthSettings read_synth_settings(const Options& options, const std::vector<std::string>& model_types,
                                  const std::vector<std::string>& layouts, const std::vector<SynthRelease>& releases = {},
                                  const std::vector<std::string>& full_size_types = {});

// "model-00001-of-000163.safetensors": `number_digits` / `count_digits` zero-padded fields.
std::string padded_shard_name(std::size_t number, std::size_t count, int number_digits, int count_digits);
// "model-1-of-61.safetensors" (Kimi-K2).
std::string unpadded_shard_name(std::size_t number, std::size_t count);

// The config fields every synthetic family writes the same way: attention_dropout, hidden_act,
// initializer_range, tie_word_embeddings, torch_dtype, transformers_version, use_cache,
// vocab_size, the bos/eos ids of the tokenizer (those it has), and the encoding's
// quantization_config.
boost::json::object base_config(std::int64_t vocab_size, std::int64_t bos_token_id, std::int64_t eos_token_id,
                                SynthEncoding encoding);

// JSON text indented by two spaces with object keys sorted, as transformers writes configs
// (json.dumps(..., indent=2, sort_keys=True)).
std::string pretty_json(const boost::json::value& value);

}  // namespace moequant::adapters
