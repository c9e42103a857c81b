// Bad input to `moequant convert`, end to end: each case synthesizes a checkpoint, breaks one
// thing (a shard's bytes or header, the index, the data, the command line, the output folder,
// the disk), runs the host and checks the documented exit code, one error line naming the file
// or tensor and the reason, and that nothing in the output folder looks complete. The unit
// suites cover the readers; this covers what the whole command does with their errors.

#include "test_support.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstring>
#include <set>

using namespace moequant::test;
namespace json = boost::json;

namespace {

// The synthesized checkpoints every case copies before breaking its copy (made once).
struct Models {
    TempDir dir;
    fs::path fp8 = dir / "deepseek_fp8";    // layers 1, 2 MoE; FP8 experts with 128x128 block scales
    fs::path bf16 = dir / "deepseek_bf16";  // the same in BF16
    Models() {
        for (const auto& [out, dtype] : {std::pair{fp8, "fp8"}, std::pair{bf16, "bf16"}}) {
            auto r = run_moequant({"synth", "--family", "deepseek_v3", "--dtype", dtype, "--out", out.string()});
            if (r.exit_code != 0) throw std::runtime_error("synth failed: " + r.err);
        }
    }
};

const Models& models() {
    static Models m;
    return m;
}

fs::path copy_model(const fs::path& from, const fs::path& to) {
    fs::copy(from, to, fs::copy_options::recursive);
    return to;
}

// ---- a safetensors file as bytes: the header as JSON, the data after it ----

struct Shard {
    json::object header;
    std::vector<std::uint8_t> data;
};

Shard read_shard(const fs::path& file) {
    auto bytes = read_bytes(file);
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    Shard s;
    s.header = json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n))).as_object();
    s.data.assign(bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n), bytes.end());
    return s;
}

void write_shard(const fs::path& file, const Shard& s) { write_bytes(file, safetensors_bytes(json::serialize(s.header), s.data)); }

json::object read_index(const fs::path& model) { return json::parse(read_text(model / "model.safetensors.index.json")).as_object(); }
void write_index(const fs::path& model, const json::object& index) {
    write_text(model / "model.safetensors.index.json", json::serialize(index));
}

fs::path shard_of(const fs::path& model, const std::string& tensor) {
    return model / std::string(read_index(model).at("weight_map").at(tensor).as_string());
}

std::array<std::uint64_t, 2> offsets(const Shard& s, const std::string& tensor) {
    const auto& o = s.header.at(tensor).at("data_offsets").as_array();
    return {o[0].to_number<std::uint64_t>(), o[1].to_number<std::uint64_t>()};
}

void set_offsets(Shard& s, const std::string& tensor, std::uint64_t begin, std::uint64_t end) {
    s.header[tensor].as_object()["data_offsets"] = json::array{begin, end};
}

// Drops a tensor from its shard (header, bytes, index) and packs the rest of the data.
void remove_tensor(const fs::path& model, const std::string& tensor) {
    const fs::path file = shard_of(model, tensor);
    Shard s = read_shard(file);
    const auto [b, e] = offsets(s, tensor);
    s.header.erase(tensor);
    s.data.erase(s.data.begin() + static_cast<std::ptrdiff_t>(b), s.data.begin() + static_cast<std::ptrdiff_t>(e));
    for (auto& [name, info] : s.header)
        if (name != "__metadata__") {
            auto [tb, te] = offsets(s, name);
            if (tb >= e) set_offsets(s, name, tb - (e - b), te - (e - b));
        }
    write_shard(file, s);
    json::object index = read_index(model);
    index["weight_map"].as_object().erase(tensor);
    write_index(model, index);
}

// Overwrites one element (2 bytes of a BF16 tensor, 1 of an FP8 one) at `index` (one per dimension).
void poke(const fs::path& model, const std::string& tensor, const std::vector<std::int64_t>& index, std::vector<std::uint8_t> value) {
    const fs::path file = shard_of(model, tensor);
    Shard s = read_shard(file);
    const auto& shape = s.header.at(tensor).at("shape").as_array();
    std::uint64_t element = 0;
    for (std::size_t d = 0; d < index.size(); ++d) element = element * shape[d].to_number<std::uint64_t>() + static_cast<std::uint64_t>(index[d]);
    const std::uint64_t at = offsets(s, tensor)[0] + element * value.size();
    std::copy(value.begin(), value.end(), s.data.begin() + static_cast<std::ptrdiff_t>(at));
    write_shard(file, s);
}

const std::vector<std::uint8_t> bf16_nan = {0xC0, 0x7F}, bf16_inf = {0x80, 0x7F}, e4m3_nan = {0x7F};

// ---- running convert and checking what it left ----

CommandResult convert(const fs::path& in, const fs::path& out, std::vector<std::string> extra = {},
                      const std::vector<std::string>& env = {}, const ChildLimits& limits = {}) {
    std::vector<std::string> args = {"convert", "-i", in.string(), "-o", out.string(), "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_moequant(args, env, limits);
}

// The output folder (if any) holds nothing that looks complete: no index, and every shard or
// `_layer_*` file under its final name is one the run manifest records as a completed layer.
void check_nothing_looks_complete(const fs::path& out) {
    if (!fs::exists(out)) return;
    BOOST_TEST(!fs::exists(out / "model.safetensors.index.json"));
    std::set<std::string> recorded;
    if (fs::exists(out / "moequant-run.json")) {
        auto manifest = json::parse(read_text(out / "moequant-run.json")).as_object();
        BOOST_TEST(!manifest.at("complete").as_bool());
        for (const auto& l : manifest.at("completed_layers").as_array())
            for (const auto& f : l.at("files").as_array()) {
                const std::string name(f.at("name").as_string());
                recorded.insert(name);
                BOOST_TEST(fs::file_size(out / name) == f.at("bytes").to_number<std::uint64_t>(), name);
            }
    }
    for (const auto& e : fs::recursive_directory_iterator(out)) {
        const std::string rel = fs::relative(e.path(), out).string();
        if (!e.is_regular_file() || rel.starts_with(".") || rel.find("/.") != std::string::npos) continue;  // partials
        if (rel.ends_with(".safetensors") || rel.starts_with("_layer_"))
            BOOST_TEST(recorded.count(rel) == 1, rel << " looks complete but no completed layer records it");
    }
}

// A refused conversion: exit code, exactly one line on stderr holding every expected piece, and
// no output that looks complete.
void expect_refusal(const CommandResult& r, const fs::path& out, int code, const std::vector<std::string>& pieces) {
    BOOST_TEST(r.exit_code == code, "exit " << r.exit_code << ", wanted " << code << ": " << r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, "not one line: " << r.err);
    BOOST_TEST(r.err.starts_with("moequant: error: "), r.err);
    for (const auto& p : pieces) BOOST_TEST(r.err.find(p) != std::string::npos, "missing '" << p << "' in: " << r.err);
    check_nothing_looks_complete(out);
}

const std::string expert3_down = "model.layers.1.mlp.experts.3.down_proj.weight";
const std::string expert5_gate = "model.layers.2.mlp.experts.5.gate_proj.weight";

}  // namespace

BOOST_AUTO_TEST_SUITE(bad_input)

BOOST_AUTO_TEST_CASE(damaged_shards) {
    TempDir dir;
    const std::string victim = expert3_down;

    // Cut short: the header promises more data than the file holds.
    fs::path m = copy_model(models().fp8, dir / "truncated");
    const fs::path truncated = shard_of(m, victim);
    fs::resize_file(truncated, fs::file_size(truncated) - 1000);
    expect_refusal(convert(m, dir / "out1"), dir / "out1", 3, {truncated.filename().string()});

    // The 8-byte header length runs past the end of the file.
    m = copy_model(models().fp8, dir / "long_header");
    fs::path file = shard_of(m, victim);
    {
        auto bytes = read_bytes(file);
        const std::uint64_t n = bytes.size() + 100;
        std::memcpy(bytes.data(), &n, 8);
        write_bytes(file, bytes);
    }
    expect_refusal(convert(m, dir / "out2"), dir / "out2", 3, {file.filename().string(), "InvalidHeaderLength"});

    // Two tensors' data overlap.
    m = copy_model(models().fp8, dir / "overlap");
    file = shard_of(m, victim);
    {
        Shard s = read_shard(file);
        const std::string other = "model.layers.1.mlp.experts.3.down_proj.weight_scale_inv";
        const auto [b, e] = offsets(s, victim);
        const auto [ob, oe] = offsets(s, other);
        set_offsets(s, other, b, b + (oe - ob));  // the scale's bytes inside the weight's
        write_shard(file, s);
    }
    expect_refusal(convert(m, dir / "out3"), dir / "out3", 3, {file.filename().string(), "InvalidOffset"});

    // Offsets beyond the data.
    m = copy_model(models().fp8, dir / "out_of_range");
    file = shard_of(m, victim);
    {
        Shard s = read_shard(file);
        const auto [b, e] = offsets(s, victim);
        set_offsets(s, victim, b + s.data.size(), e + s.data.size());
        write_shard(file, s);
    }
    expect_refusal(convert(m, dir / "out4"), dir / "out4", 3, {file.filename().string(), "InvalidOffset"});

    // A dtype safetensors does not know.
    m = copy_model(models().fp8, dir / "dtype");
    file = shard_of(m, victim);
    {
        Shard s = read_shard(file);
        s.header[victim].as_object()["dtype"] = "Q7_K";
        write_shard(file, s);
    }
    expect_refusal(convert(m, dir / "out5"), dir / "out5", 3, {file.filename().string(), "Q7_K"});
}

BOOST_AUTO_TEST_CASE(index_that_disagrees_with_the_shards) {
    TempDir dir;
    fs::path m = copy_model(models().bf16, dir / "missing_shard");
    json::object index = read_index(m);
    index["weight_map"].as_object()[expert3_down] = "model-00009-of-00009.safetensors";
    write_index(m, index);
    expect_refusal(convert(m, dir / "out1"), dir / "out1", 3, {"model-00009-of-00009.safetensors"});

    // The index sends a tensor to a shard that does not hold it.
    m = copy_model(models().bf16, dir / "wrong_shard");
    index = read_index(m);
    const std::string holder(index.at("weight_map").at(expert3_down).as_string());
    std::string other;
    for (const auto& [name, shard] : index.at("weight_map").as_object())
        if (shard.as_string() != holder) other = std::string(shard.as_string());
    index["weight_map"].as_object()[expert3_down] = other;
    write_index(m, index);
    expect_refusal(convert(m, dir / "out2"), dir / "out2", 3, {expert3_down, other});
}

BOOST_AUTO_TEST_CASE(declared_input_type_must_match_the_data) {
    TempDir dir;
    expect_refusal(convert(models().fp8, dir / "out1", {"--input-type", "bf16"}), dir / "out1", 3,
                   {"InputTypeMismatch", "expert is fp8 (FP8 E4M3", ".mlp.experts."});
    expect_refusal(convert(models().bf16, dir / "out2", {"--input-type", "fp8"}), dir / "out2", 3,
                   {"InputTypeMismatch", "expert is bf16 (BF16)", ".mlp.experts."});
    BOOST_TEST(!fs::exists(dir / "out1"));
    BOOST_TEST(!fs::exists(dir / "out2"));
}

BOOST_AUTO_TEST_CASE(fp8_scales_missing_or_mis_shaped) {
    TempDir dir;
    fs::path m = copy_model(models().fp8, dir / "no_scale");
    remove_tensor(m, expert3_down + "_scale_inv");
    expect_refusal(convert(m, dir / "out1"), dir / "out1", 3, {expert3_down, "MissingScale"});

    m = copy_model(models().fp8, dir / "bad_scale");
    const fs::path file = shard_of(m, expert3_down + "_scale_inv");
    Shard s = read_shard(file);
    s.header[expert3_down + "_scale_inv"].as_object()["shape"] = json::array{4, 1};  // same bytes, wrong shape
    write_shard(file, s);
    expect_refusal(convert(m, dir / "out2"), dir / "out2", 3, {expert3_down + "_scale_inv", "[4,1]", "ScaleShapeMismatch"});
}

BOOST_AUTO_TEST_CASE(non_finite_weights_are_refused_unless_allowed) {
    TempDir dir;
    fs::path nan = copy_model(models().bf16, dir / "nan");
    poke(nan, expert3_down, {5, 17}, bf16_nan);
    expect_refusal(convert(nan, dir / "out1"), dir / "out1", 3,
                   {"layer 1", "tensor '" + expert3_down + "'", "NaN at row 5, column 17", "NonFiniteWeight", "--allow-non-finite"});
    // The BF16 export refuses it too, before the layer's shard is written.
    expect_refusal(convert(nan, dir / "out2", {"--format", "bf16-safetensors"}), dir / "out2", 3,
                   {"layer 1", expert3_down, "NonFiniteWeight"});
    BOOST_TEST(!fs::exists(dir / "out2/model-00001-of-00003.safetensors"));

    fs::path inf = copy_model(models().bf16, dir / "inf");
    poke(inf, expert5_gate, {100, 3}, bf16_inf);
    expect_refusal(convert(inf, dir / "out3", {"--no-merge-safetensor"}), dir / "out3", 3,
                   {"layer 2", "tensor '" + expert5_gate + "'", "+Inf at row 100, column 3", "NonFiniteWeight"});

    // FP8 NaN (E4M3 0x7F) is seen after dequantization, in the source tensor's coordinates.
    fs::path fp8 = copy_model(models().fp8, dir / "fp8_nan");
    poke(fp8, expert5_gate, {200, 130}, e4m3_nan);
    expect_refusal(convert(fp8, dir / "out4"), dir / "out4", 3,
                   {"layer 2", expert5_gate, "NaN at row 200, column 130", "NonFiniteWeight"});

    // A fused [E, H, 2I] tensor (Qwen3 layout B): the position is the stored one, expert first.
    auto synth = run_moequant({"synth", "--family", "qwen3_moe", "--layout", "fused-bmm", "--out", (dir / "fused").string()});
    BOOST_REQUIRE_MESSAGE(synth.exit_code == 0, synth.err);
    const std::string gate_up = "model.layers.1.mlp.experts.gate_up_proj";
    poke(dir / "fused", gate_up, {2, 7, 300}, bf16_nan);  // up projection (I = 256) of expert 2
    expect_refusal(convert(dir / "fused", dir / "out5"), dir / "out5", 3,
                   {"layer 1", gate_up, "NaN at [2, 7, 300]", "NonFiniteWeight"});

    // With the opt-out the values pass through, and a rerun into the refused folder continues.
    poke(nan, expert5_gate, {100, 3}, bf16_inf);
    for (const std::string out : {"out1", "out2"}) {
        std::vector<std::string> extra = {"--allow-non-finite"};
        if (out == "out2") extra.insert(extra.end(), {"--format", "bf16-safetensors"});
        auto r = convert(nan, dir / out, extra);
        BOOST_TEST(r.exit_code == 0, r.err);
        BOOST_TEST(fs::exists(dir / out / "model.safetensors.index.json"));
    }
    auto r = convert(fp8, dir / "out4", {"--allow-non-finite"});
    BOOST_TEST(r.exit_code == 0, r.err);
}

BOOST_AUTO_TEST_CASE(shapes_the_quantizer_cannot_split) {
    TempDir dir;
    // I = 256: 3 does not divide it; 4 parts leave the down projection k = 64 < 128 for INT4.
    expect_refusal(convert(models().bf16, dir / "out1", {"--threadpool-count", "3"}), dir / "out1", 3,
                   {"not divisible by 3", "UnsplittableExpert", ".mlp.experts."});
    expect_refusal(convert(models().bf16, dir / "out2", {"--threadpool-count", "4", "--no-merge-safetensor"}), dir / "out2", 3,
                   {"UnpackableShape", "down_proj"});
    BOOST_TEST(!fs::exists(dir / "out1"));
    BOOST_TEST(!fs::exists(dir / "out2"));
}

BOOST_AUTO_TEST_CASE(output_folder_not_writable) {
    TempDir dir;
    // A path under a regular file cannot be created, even by root.
    write_text(dir / "file", "x");
    expect_refusal(convert(models().bf16, dir / "file/out"), dir / "file/out", 5, {(dir / "file/out").string()});

    // A read-only parent, where permissions apply (not as root).
    fs::create_directories(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    if (::access((dir / "ro").c_str(), W_OK) == 0) {
        BOOST_TEST_MESSAGE("permissions do not apply to this user (root?): read-only parent case skipped");
    } else {
        expect_refusal(convert(models().bf16, dir / "ro/out"), dir / "ro/out", 5, {(dir / "ro/out").string()});
        BOOST_TEST(!fs::exists(dir / "ro/out"));
    }
    fs::permissions(dir / "ro", fs::perms::owner_all);
}

BOOST_AUTO_TEST_CASE(output_folder_of_another_job) {
    TempDir dir;
    // The folder holds a complete conversion of another source: refused, untouched.
    BOOST_REQUIRE(convert(models().fp8, dir / "out").exit_code == 0);
    const auto before = file_hashes(dir / "out", true);
    auto r = convert(models().bf16, dir / "out");
    BOOST_TEST(r.exit_code == 5, r.err);
    BOOST_TEST(r.err.find("OutputExists") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("another conversion") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("--overwrite") != std::string::npos, r.err);
    BOOST_TEST((file_hashes(dir / "out", true) == before));

    // An unreadable run manifest is reported as such, and the folder is left alone.
    write_text(dir / "out/moequant-run.json", "{\"tool_version\": ");
    r = convert(models().fp8, dir / "out");
    BOOST_TEST(r.exit_code == 3, r.err);
    BOOST_TEST(r.err.find("moequant-run.json") != std::string::npos, r.err);
    BOOST_TEST(fs::exists(dir / "out/model.safetensors.index.json"));
    BOOST_TEST(convert(models().fp8, dir / "out", {"--overwrite"}).exit_code == 0);
}

BOOST_AUTO_TEST_CASE(disk_full_then_rerun_gives_the_clean_bytes) {
    TempDir dir;
    int n = 0;
    for (bool tree : {false, true}) {
        std::vector<std::string> format;
        if (tree) format.push_back("--no-merge-safetensor");
        const fs::path clean = dir / (tree ? "clean_tree" : "clean");
        BOOST_REQUIRE(convert(models().fp8, clean, format).exit_code == 0);
        const auto want = file_hashes(clean);
        // A file-size limit (ulimit -f, EFBIG) in the first layer and (merged) in the last shard,
        // and the injected full disk (ENOSPC) in the first and in the second layer. Layer shards
        // are 828728 bytes, the other tensors' shard 1.6 MB, .kt code files 16 KiB.
        struct Failure {
            std::optional<std::uint64_t> file_size;
            std::string enospc_after;
            std::string code;
        };
        std::vector<Failure> failures = {{std::nullopt, "100000", "DiskFull"}, {std::nullopt, "1000000", "DiskFull"}};
        if (tree) failures.push_back({8000, "", "FileTooLarge"});
        else failures.insert(failures.end(), {{300000, "", "FileTooLarge"}, {1000000, "", "FileTooLarge"}});
        for (const auto& f : failures) {
            BOOST_TEST_CONTEXT((tree ? "tree, " : "merged, ") << f.code << " " << f.file_size.value_or(0) << f.enospc_after) {
                const fs::path out = dir / ("out" + std::to_string(n++));
                std::vector<std::string> env;
                if (!f.enospc_after.empty()) env.push_back("MOEQUANT_TEST_ENOSPC_AFTER_BYTES=" + f.enospc_after);
                auto r = convert(models().fp8, out, format, env, {.file_size = f.file_size});
                expect_refusal(r, out, 5, {f.code, out.string()});
                auto again = convert(models().fp8, out, format);
                BOOST_REQUIRE_MESSAGE(again.exit_code == 0, again.err);
                BOOST_TEST((file_hashes(out) == want));
            }
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
