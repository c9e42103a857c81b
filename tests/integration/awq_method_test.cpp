// convert --quant-method awq (kt-kernel's AWQToColumnMajorConverter, quantizer kt-awq) as a user
// meets it: an AutoAWQ checkpoint's words re-laid into kt's names, shapes and dtypes with every
// 4-bit value kept (verify decodes each expert exactly as the source, eval finds no change), a
// rerun keeping the layers, and refused what kt cannot make (a non-AWQ source, the .kt tree,
// calibration), before any file. kt's own functions' words: the golden suite; kt's whole
// converter against this one: docs/kt-awq.md.
#include "synth_checkpoint.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/safetensors_reader.hpp>

#include <boost/test/unit_test.hpp>

#include <cstring>

using namespace moequant;
using namespace moequant::test;

namespace {

std::vector<std::string> awq_args(const fs::path& src, const fs::path& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"convert", "-i", src.string(), "-o", out.string(), "--input-type", "awq", "--quant-method", "awq"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
}

// The shard holding `tensor` (model.safetensors.index.json's weight_map, read plainly).
fs::path shard_of(const fs::path& out, const std::string& tensor) {
    const std::string index = read_text(out / "model.safetensors.index.json");
    const std::size_t at = index.find("\"" + tensor + "\"");
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, tensor << " is not in the index");
    const std::size_t begin = index.find('"', index.find(':', at)) + 1;
    return out / index.substr(begin, index.find('"', begin) - begin);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(awq_method)

BOOST_AUTO_TEST_CASE(words_are_relaid_and_every_value_kept) {
    TempDir dir;
    const fs::path src = dir / "src", out = dir / "out";
    synth_checkpoint(src, {"qwen3_moe", "awq"});
    auto r = run_moequant(awq_args(src, out, {"--threadpool-count", "2"}));  // kt's default, unused by its awq method
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    BOOST_TEST(contains(r.err, "--threadpool-count 2: kt's awq method stores each expert matrix whole"), r.err);

    // kt's names (no .numa.), shapes and dtypes: gate [I, H] -> weight [I, H/8], qzeros [H/32, I/8], scale [H/32 * I].
    const Checkpoint source = Checkpoint::open(src);
    const TensorInfo& qweight = source.info("model.layers.0.mlp.experts.1.gate_proj.qweight");
    const std::int64_t hidden = qweight.shape[0], inter = qweight.shape[1] * 8, groups = hidden / 32;
    const SafetensorsFile shard = SafetensorsFile::open(shard_of(out, "blk.0.ffn_gate_exps.1.weight"));
    const TensorInfo& weight = shard.info("blk.0.ffn_gate_exps.1.weight");
    BOOST_TEST((weight.dtype == DType::I32 && weight.shape == Shape{inter, hidden / 8}), shape_to_string(weight.shape));
    BOOST_TEST((shard.info("blk.0.ffn_gate_exps.1.qzeros").shape == Shape{groups, inter / 8}));
    BOOST_TEST((shard.info("blk.0.ffn_gate_exps.1.scale").dtype == DType::F16));
    BOOST_TEST((shard.info("blk.0.ffn_gate_exps.1.scale").shape == Shape{groups * inter}));
    for (const auto& t : shard.tensors()) BOOST_TEST(!contains(t.name, ".numa."), t.name);
    // The scales are AutoAWQ's bytes, flattened.
    const TensorView scale = shard.view("blk.0.ffn_gate_exps.1.scale");
    const TensorView source_scale = source.view("model.layers.0.mlp.experts.1.gate_proj.scales");
    BOOST_TEST((scale.bytes.size() == source_scale.bytes.size() &&
                std::memcmp(scale.bytes.data(), source_scale.bytes.data(), scale.bytes.size()) == 0));

    // Every expert decodes exactly to the source's values (error bound 0), and the model computes as before.
    auto v = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(v.exit_code == 0, v.out << v.err);
    BOOST_TEST(contains(v.out, "PASSED"), v.out);
    auto e = run_moequant({"eval", "--model_id", src.string(), "--dataset", "embedded", "--cpu-weights", out.string(),
                           "--max_sequence_length", "64", "--num_calibration_samples", "4"});
    BOOST_TEST(e.exit_code == 0, e.err);
    BOOST_TEST(contains(e.out, "top-1 agreement  1.0000"), e.out);

    // A rerun of the same command keeps the finished layers and their bytes.
    const std::vector<std::uint8_t> before = read_bytes(shard_of(out, "blk.0.ffn_gate_exps.1.weight"));
    auto again = run_moequant(awq_args(src, out, {"--quiet"}));
    BOOST_TEST(again.exit_code == 0, again.err);
    BOOST_TEST((read_bytes(shard_of(out, "blk.0.ffn_gate_exps.1.weight")) == before));

    // One flipped code is caught, naming the expert.
    const fs::path damaged = shard_of(out, "blk.1.ffn_up_exps.2.weight");
    std::vector<std::uint8_t> bytes = read_bytes(damaged);
    const SafetensorsFile damaged_shard = SafetensorsFile::open(damaged);
    const TensorInfo& info = damaged_shard.info("blk.1.ffn_up_exps.2.weight");
    std::uint64_t header = 0;  // the data start after the 8-byte length and the header
    std::memcpy(&header, bytes.data(), 8);
    bytes[8 + header + info.begin + 5] ^= 0x10;
    write_bytes(damaged, bytes);
    auto bad = run_moequant({"verify", "--source", src.string(), "--converted", out.string()});
    BOOST_TEST(bad.exit_code != 0, bad.out);
    BOOST_TEST(contains(bad.out, "blk.1 expert 2 up"), bad.out);
}

BOOST_AUTO_TEST_CASE(what_kt_cannot_make_is_refused_before_any_file) {
    TempDir dir;
    const fs::path awq = dir / "awq", bf16 = dir / "bf16";
    synth_checkpoint(awq, {"qwen3_moe", "awq"});
    synth_checkpoint(bf16, {"qwen3_moe", "bf16"});
    auto with = [&](const fs::path& source, std::vector<std::string> extra) {
        std::vector<std::string> args = awq_args(source, dir / "refused", std::move(extra));
        if (source == bf16) args[6] = "bf16";  // --input-type bf16: kt's awq method ignores it, the source is refused
        return args;
    };
    check_refusals({
                       {with(bf16, {}), 3, "kt's awq method (kt-awq) re-lays AutoAWQ INT4 checkpoints' words and quantizes nothing"},
                       {with(awq, {"--no-merge-safetensor"}), 2, "--quant-method awq has no .kt tree"},
                       {with(awq, {"--calibrate", "--dataset", "embedded"}), 2, "nothing to calibrate"},
                       {with(awq, {"--format", "kt-tree", "--quantizer", "kt-awq", "--threadpool-count", "1"}), 2,
                        "kt-tree has no files for kt's AWQ method"},
                       {with(awq, {"--quantizer", "kt-awq", "--threadpool-count", "2"}), 2,
                        "carries the source's stored codes whole, not in 2 threadpool parts"},
                   },
                   dir / "refused");
    // --save-backward-weights: kt hands it to its AMX methods only; noted, nothing extra written.
    auto r = run_moequant(awq_args(awq, dir / "bwd", {"--save-backward-weights"}));
    BOOST_TEST(r.exit_code == 0, r.err);
    BOOST_TEST(contains(r.err, "--save-backward-weights: AWQ has no SFT method"), r.err);
}

BOOST_AUTO_TEST_SUITE_END()
