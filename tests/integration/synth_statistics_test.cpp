// `synth --statistics`: iid is the default and keeps the bytes; trained gives token embeddings
// most of whose energy lies in a subspace of rank hidden/8 and RMSNorm gains spread over more
// than an order of magnitude, where iid's are neither; any other value is a usage error.

#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/dtype_convert.hpp>

#include <Eigen/Dense>
#include <boost/test/unit_test.hpp>

#include <algorithm>

using namespace moequant;
using namespace moequant::test;

namespace {

fs::path synth(const TempDir& dir, const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args = {host_executable().string(), "synth", "--family", "qwen3_moe", "--out", (dir / name).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run_command(args);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return dir / name;
}

std::vector<float> values(const Checkpoint& ckpt, const std::string& name) {
    const TensorView v = ckpt.view(name);
    std::vector<float> out(v.elements());
    decode_to_f32(v, out);
    return out;
}

// The share of the embedding table's energy (sum of squares) in its top `rank` principal
// directions: the largest eigenvalues of E^T E over their sum.
double top_energy_share(const Checkpoint& ckpt, const std::string& name, std::int64_t rank) {
    const Shape shape = ckpt.info(name).shape;
    const std::vector<float> e = values(ckpt, name);
    const Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> m(e.data(), shape[0], shape[1]);
    const Eigen::MatrixXd gram = (m.transpose() * m).cast<double>();
    const Eigen::VectorXd eig = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(gram).eigenvalues();  // ascending
    return eig.tail(rank).sum() / eig.sum();
}

double spread(const std::vector<float>& v) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return *hi / *lo;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(synth_statistics)

BOOST_AUTO_TEST_CASE(iid_is_the_default_and_trained_shapes_embeddings_and_norms) {
    TempDir dir;
    const fs::path plain = synth(dir, "default", {}), iid = synth(dir, "iid", {"--statistics", "iid"}),
                   trained = synth(dir, "trained", {"--statistics", "trained"});
    std::size_t shards = 0;
    for (const auto& f : fs::directory_iterator(plain))
        if (f.path().extension() == ".safetensors") {
            ++shards;
            BOOST_TEST(read_text(f.path()) == read_text(iid / f.path().filename()), f.path().filename());
        }
    BOOST_TEST(shards > 0u);

    const Checkpoint a = Checkpoint::open(iid), b = Checkpoint::open(trained);
    const std::string embed = "model.embed_tokens.weight", norm = "model.layers.0.post_attention_layernorm.weight";
    const std::int64_t rank = a.info(embed).shape[1] / 8;
    // Rank hidden/8 plus 30 % noise: about 1 / 1.09 of the energy; independent values spread theirs.
    BOOST_TEST(top_energy_share(b, embed, rank) > 0.85);
    BOOST_TEST(top_energy_share(a, embed, rank) < 0.4);
    BOOST_TEST(spread(values(b, norm)) > 10.0);
    BOOST_TEST(spread(values(a, norm)) < 1.5);
    // The linear weights stay independent draws in both.
    const std::string expert = "model.layers.0.mlp.experts.0.gate_proj.weight";
    BOOST_TEST(read_text(iid / "model.safetensors.index.json") == read_text(trained / "model.safetensors.index.json"));
    BOOST_TEST(values(a, expert) == values(b, expert));

    auto bad = run_command({host_executable().string(), "synth", "--family", "qwen3_moe", "--statistics", "real", "--out",
                            (dir / "bad").string()});
    BOOST_TEST(bad.exit_code == 2);
    BOOST_TEST(bad.err.find("--statistics 'real' is not one of: iid, trained") != std::string::npos, bad.err);
    BOOST_TEST(!fs::exists(dir / "bad"));
}

BOOST_AUTO_TEST_SUITE_END()
