// Runs across MPI ranks (issue 20, docs/cluster.md): `mpirun -np N moequant convert|gptq|record|eval`
// on this machine (loopback, shared memory) writes exactly the bytes (prints exactly the figures)
// of one process for N = 2 and 3, on two families; a rank killed mid-run ends every rank within seconds and the rerun, under
// another rank count, resumes and completes with the same bytes; ranks that see another
// source, another output folder or another job fail before any work, with one error line.

#ifdef MOEQUANT_MPIEXEC  // builds with MOEQUANT_WITH_MPI only

#include "checkpoint_rewrite.hpp"
#include "test_support.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/output_file.hpp>
#include <moequant/safetensors_reader.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <chrono>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

using Args = std::vector<std::string>;

const char* const mpiexec = MOEQUANT_MPIEXEC;  // FindMPI's mpiexec (Open MPI's mpirun)

// mpirun's own options: loopback only, no binding (three ranks on two cores), and a deadline of
// its own, so a hang fails the test instead of stalling it.
Args mpirun_prefix(const std::vector<std::string>& env) {
    Args argv = {mpiexec, "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader",
                 "--mca", "btl_vader_single_copy_mechanism", "none", "--timeout", "180"};
    if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
    for (const auto& e : env) argv.insert(argv.end(), {"-x", e.substr(0, e.find('='))});
    return argv;
}

CommandResult mpirun(int ranks, const Args& args, const std::vector<std::string>& env = {}) {
    Args argv = mpirun_prefix(env);
    argv.insert(argv.end(), {"-np", std::to_string(ranks), host_executable(env).string()});
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, env);
}

// Two ranks with their own command lines (MPMD): what a rank with another view of the files runs.
CommandResult mpirun_two(const Args& first, const Args& second) {
    Args argv = mpirun_prefix({});
    argv.insert(argv.end(), {"-np", "1", host_executable().string()});
    argv.insert(argv.end(), first.begin(), first.end());
    argv.insert(argv.end(), {":", "-np", "1", host_executable().string()});
    argv.insert(argv.end(), second.begin(), second.end());
    return run_command(argv);
}

// Two ranks with the same command line, rank 1 with `assignment` (NAME=VALUE) in its environment.
CommandResult mpirun_two_with_env_on_rank_1(const Args& args, const std::string& assignment) {
    Args argv = mpirun_prefix({});
    argv.insert(argv.end(), {"-np", "1", host_executable().string()});
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {":", "-np", "1", "/usr/bin/env", assignment, host_executable().string()});
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv);
}

fs::path synth(const TempDir& dir, const std::string& family, const std::string& preset = "tiny", const std::string& seed = "42") {
    const fs::path out = dir / (family + "-" + preset + "-" + seed);
    if (fs::exists(out)) return out;
    const CommandResult r = run_moequant({"synth", "--family", family, "--preset", preset, "--seed", seed, "--out", out.string()});
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return out;
}

Args with_output(Args args, const fs::path& out) {
    args.insert(args.end(), {"--output", out.string(), "--quiet"});
    return args;
}

// The one-process output of `args`, then the same command under 2 and 3 ranks: the same bytes.
void check_rank_counts(const TempDir& dir, const std::string& name, const Args& args) {
    const fs::path one = dir / (name + "-1");
    const CommandResult r = run_moequant(with_output(args, one));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto want = file_hashes(one);
    for (int ranks : {2, 3}) {
        const fs::path out = dir / (name + "-" + std::to_string(ranks));
        const CommandResult m = mpirun(ranks, with_output(args, out));
        BOOST_REQUIRE_MESSAGE(m.exit_code == 0, name << " across " << ranks << " ranks: exit " << m.exit_code << ": " << m.err);
        BOOST_TEST(m.out.find("across " + std::to_string(ranks) + " ranks") != std::string::npos, m.out);
        BOOST_TEST((file_hashes(out) == want), name << ": " << ranks << " ranks wrote other bytes than one process");
    }
}

json::object manifest(const fs::path& out) { return json::parse(read_text(out / "moequant-run.json")).as_object(); }

std::size_t error_lines(const std::string& err) {
    std::size_t n = 0;
    for (std::size_t at = err.find("moequant: "); at != std::string::npos; at = err.find("moequant: ", at + 1)) ++n;
    return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cluster)

BOOST_AUTO_TEST_CASE(convert_writes_the_bytes_of_one_process) {
    TempDir dir;
    check_rank_counts(dir, "qwen3-int4", {"convert", "-i", synth(dir, "qwen3_moe").string(), "--quant-method", "int4"});
    check_rank_counts(dir, "deepseek-int8-tree", {"convert", "-i", synth(dir, "deepseek_v3").string(), "--quant-method", "int8",
                                                  "--format", "kt-tree", "--threadpool-count", "2"});
}

BOOST_AUTO_TEST_CASE(gptq_dataset_writes_the_bytes_of_one_process) {
    TempDir dir;
    check_rank_counts(dir, "qwen3-gptq", {"gptq", "-i", synth(dir, "qwen3_moe").string(), "--quant_type", "W4A16",
                                          "--dataset", "embedded"});
    check_rank_counts(dir, "deepseek-gptq-routed", {"gptq", "-i", synth(dir, "deepseek_v3").string(), "--quant_type", "W4A16",
                                                    "--dataset", "embedded", "--routed-only"});
    check_rank_counts(dir, "deepseek-calibrated-amx", {"convert", "-i", synth(dir, "deepseek_v3").string(), "--quant-method",
                                                       "int4", "--calibrate", "--dataset", "embedded"});
}

BOOST_AUTO_TEST_CASE(record_and_eval_give_the_results_of_one_process) {
    TempDir dir;
    const fs::path model = synth(dir, "deepseek_v3"), quantized = dir / "ct";
    BOOST_REQUIRE(run_moequant({"gptq", "-i", model.string(), "-o", quantized.string(), "--quant_type", "W4A16", "--quant_method",
                                "RTN", "--quiet"}).exit_code == 0);
    const Args eval = {"eval", "--model_id", model.string(), "--dataset", "embedded", "--gpu-weights", quantized.string(), "--json",
                       "--quiet"};
    const CommandResult one = run_moequant(eval);
    BOOST_REQUIRE_MESSAGE(one.exit_code == 0, one.err);
    BOOST_REQUIRE(one.out.find("kl_mean") != std::string::npos);
    const fs::path recorded = dir / "one.safetensors";
    BOOST_REQUIRE(run_moequant({"record", "--model_id", model.string(), "--dataset", "embedded", "--output", recorded.string(),
                                "--quiet"}).exit_code == 0);
    for (int ranks : {2, 3}) {
        const CommandResult many = mpirun(ranks, eval);
        BOOST_REQUIRE_MESSAGE(many.exit_code == 0, many.err);
        BOOST_TEST(many.out == one.out, "eval across " << ranks << " ranks:\n" << many.out << "\none process:\n" << one.out);
        const fs::path out = dir / ("ranks-" + std::to_string(ranks) + ".safetensors");
        const CommandResult r = mpirun(ranks, {"record", "--model_id", model.string(), "--dataset", "embedded", "--output",
                                               out.string(), "--quiet"});
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        BOOST_TEST(sha256_file(out) == sha256_file(recorded), "record across " << ranks << " ranks wrote other bytes");
    }
}

BOOST_AUTO_TEST_CASE(a_killed_rank_ends_the_job_and_the_rerun_resumes) {
    TempDir dir;
    const fs::path model = synth(dir, "qwen3_moe", "small");  // 4 MoE layers: two rounds of two ranks
    const Args convert = {"convert", "-i", model.string(), "--quant-method", "int4"};
    const fs::path one = dir / "one", out = dir / "out";
    BOOST_REQUIRE(run_moequant(with_output(convert, one)).exit_code == 0);

    // Rank 1 dies (SIGKILL) after its second layer, while rank 0 waits for it.
    const auto start = std::chrono::steady_clock::now();
    const CommandResult killed = mpirun(2, with_output(convert, out), {"MOEQUANT_TEST_KILL_RANK=1:2"});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    BOOST_TEST(killed.exit_code != 0);
    BOOST_TEST(seconds < 30, "the job took " << seconds << " s to end after a rank died");
    BOOST_TEST(killed.err.find("rank 1") != std::string::npos, killed.err);
    BOOST_TEST(killed.err.find("signal 9") != std::string::npos, killed.err);
    BOOST_TEST(manifest(out).at("complete").as_bool() == false);
    BOOST_TEST(manifest(out).at("completed_layers").as_array().size() == 2u);  // the first round's
    // mpirun ended rank 0 with SIGTERM: it removed its lock and temporaries on the way out.
    for (const auto& e : fs::recursive_directory_iterator(out)) {
        const std::string name = e.path().filename().string();
        BOOST_TEST(name != ".moequant.lock", e.path());
        BOOST_TEST(!moequant::is_partial_name(name), e.path());
    }

    // Under three ranks: the two layers are kept, the rest converted, the same bytes.
    const CommandResult rerun = mpirun(3, with_output(convert, out));
    BOOST_REQUIRE_MESSAGE(rerun.exit_code == 0, rerun.err);
    BOOST_TEST(rerun.out.find("kept 2 completed earlier") != std::string::npos, rerun.out);
    BOOST_TEST((file_hashes(out) == file_hashes(one)));

    // gptq --dataset: rank 1 dies after the first layer; the rerun recomputes every layer.
    const Args gptq = {"gptq", "-i", synth(dir, "deepseek_v3").string(), "--quant_type", "W4A16", "--dataset", "embedded"};
    const fs::path gptq_one = dir / "gptq-one", gptq_out = dir / "gptq-out";
    BOOST_REQUIRE(run_moequant(with_output(gptq, gptq_one)).exit_code == 0);
    const CommandResult gptq_killed = mpirun(2, with_output(gptq, gptq_out), {"MOEQUANT_TEST_KILL_RANK=1:1"});
    BOOST_TEST(gptq_killed.exit_code != 0);
    BOOST_TEST(gptq_killed.err.find("signal 9") != std::string::npos, gptq_killed.err);
    const CommandResult gptq_rerun = mpirun(2, with_output(gptq, gptq_out));
    BOOST_REQUIRE_MESSAGE(gptq_rerun.exit_code == 0, gptq_rerun.err);
    BOOST_TEST((file_hashes(gptq_out) == file_hashes(gptq_one)));
}

BOOST_AUTO_TEST_CASE(ranks_that_see_another_source_fail_before_any_work) {
    TempDir dir;
    // The same shapes and config with other weights (another seed): what a fine-tune looks like.
    const fs::path model = synth(dir, "qwen3_moe"), other = synth(dir, "qwen3_moe", "tiny", "7");
    const fs::path out = dir / "out";
    const CommandResult r = mpirun_two(with_output({"convert", "-i", model.string(), "--quant-method", "int4"}, out),
                                       with_output({"convert", "-i", other.string(), "--quant-method", "int4"}, out));
    BOOST_TEST(r.exit_code == 3, r.err);
    BOOST_TEST(r.err.find("rank 1") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("RankSourceDiffers") != std::string::npos, r.err);
    BOOST_TEST(error_lines(r.err) == 1u, r.err);
    BOOST_TEST(!fs::exists(out));
}

// A copy of `model` whose tensor `tensor` differs in one byte in its middle, which the sampled
// windows of the source check before any work do not see (asserted): only what the ranks read
// by content can tell the copies apart.
fs::path damaged_copy(const TempDir& dir, const fs::path& model, const std::string& tensor) {
    const fs::path copy = dir / (model.filename().string() + "-damaged");
    fs::copy(model, copy, fs::copy_options::recursive);
    const Checkpoint checkpoint = Checkpoint::open(copy);
    const SafetensorsFile& shard = checkpoint.shard(checkpoint.shard_of(tensor));
    const TensorInfo& info = checkpoint.info(tensor);
    const std::uint64_t at = shard.data_start() + (info.begin + info.end) / 2, size = shard.file_size();
    constexpr std::uint64_t window = 64 * 1024;
    for (std::uint64_t i = 0; i < 4; ++i) {  // rank_checks.cpp's sampled windows
        const std::uint64_t begin = size > window ? (size - window) * i / 3 : 0;
        BOOST_REQUIRE_MESSAGE(at < begin || at >= begin + window, "the byte lies in a sampled window; pick another tensor");
    }
    edit_tensor_bytes(copy, tensor, [](std::uint8_t* bytes, std::size_t n) { bytes[n / 2] ^= 0x40; });
    return copy;
}

BOOST_AUTO_TEST_CASE(a_rank_reading_other_bytes_is_refused_before_its_layer_is_recorded) {
    TempDir dir;
    const fs::path model = synth(dir, "qwen3_moe", "small");
    // Rank 1 converts layer 1 (layers are dealt in rounds), from its own copy.
    const std::string tensor = "model.layers.1.mlp.experts.5.up_proj.weight";
    const fs::path damaged = damaged_copy(dir, model, tensor);
    for (const Args& command : {Args{"convert", "--quant-method", "int4"},
                                Args{"gptq", "--quant_type", "W4A16", "--dataset", "embedded", "--num_calibration_samples", "4"}}) {
        BOOST_TEST_CONTEXT(command[0]) {
            const fs::path out = dir / ("out-" + command[0]);
            Args good = {command[0], "-i", model.string()}, bad = {command[0], "-i", damaged.string()};
            good.insert(good.end(), command.begin() + 1, command.end());
            bad.insert(bad.end(), command.begin() + 1, command.end());
            const CommandResult r = mpirun_two(with_output(good, out), with_output(bad, out));
            BOOST_TEST(r.exit_code == 3, r.err);
            BOOST_TEST(r.err.find("rank 1") != std::string::npos, r.err);
            BOOST_TEST(r.err.find("read other bytes than rank 0 in tensor " + tensor) != std::string::npos, r.err);
            BOOST_TEST(r.err.find("RankSourceDiffers") != std::string::npos, r.err);
            BOOST_TEST(error_lines(r.err) == 1u, r.err);
            // Nothing looks complete, and no layer rank 1 made is recorded.
            BOOST_TEST(!fs::exists(out / "model.safetensors.index.json"));
            const json::object recorded = manifest(out);
            for (const auto& layer : recorded.at("completed_layers").as_array()) BOOST_TEST(layer.at("layer").as_int64() != 1);
            // With identical copies the same command completes with one process's bytes.
            const fs::path one = dir / ("one-" + command[0]);
            BOOST_REQUIRE(run_moequant(with_output(good, one)).exit_code == 0);
            const CommandResult again = mpirun_two(with_output(good, out), with_output(good, out));
            BOOST_TEST(again.exit_code == 0, again.err);
            BOOST_TEST(file_hashes(out) == file_hashes(one));
        }
    }
}

BOOST_AUTO_TEST_CASE(eval_refuses_a_tampered_output_and_a_rank_reading_other_bytes) {
    TempDir dir;
    const fs::path model = synth(dir, "qwen3_moe", "small"), out = dir / "int4";
    BOOST_REQUIRE(run_moequant({"convert", "-i", model.string(), "-o", out.string(), "-q"}).exit_code == 0);
    const Args eval = {"eval", "--model_id", model.string(), "--dataset", "embedded", "--num_calibration_samples", "4",
                       "--json", "-q"};
    // Rank 1's copy of the output has code bytes overwritten, its manifest unchanged: each rank
    // checks the files against the manifest it reads, and the ranks compare manifests.
    const fs::path copy = dir / "int4-copy";
    fs::copy(out, copy, fs::copy_options::recursive);
    edit_tensor_bytes(copy, "blk.1.ffn_up_exps.2.numa.0.weight", [](std::uint8_t* b, std::size_t) {
        for (int i = 0; i < 64; ++i) b[i] ^= 0x11;
    });
    Args good = eval, bad = eval;
    good.insert(good.end(), {"--cpu-weights", out.string()});
    bad.insert(bad.end(), {"--cpu-weights", copy.string()});
    const CommandResult tampered = mpirun_two(good, bad);
    BOOST_TEST(tampered.exit_code == 3, tampered.err);
    BOOST_TEST(tampered.err.find("OutputChanged") != std::string::npos, tampered.err);
    BOOST_TEST(tampered.out.empty(), tampered.out);
    // One process refuses it too.
    const CommandResult alone = run_moequant(bad);
    BOOST_TEST(alone.exit_code == 3, alone.err);
    BOOST_TEST(alone.err.find("holds other bytes than its run manifest records") != std::string::npos, alone.err);
    // Rank 1 reading another copy of the source: refused, no report.
    const fs::path damaged = damaged_copy(dir, model, "model.layers.2.mlp.experts.1.down_proj.weight");
    Args other = {"eval", "--model_id", damaged.string()};
    other.insert(other.end(), eval.begin() + 3, eval.end());
    other.insert(other.end(), {"--cpu-weights", out.string()});
    const CommandResult source = mpirun_two(good, other);
    BOOST_TEST(source.exit_code == 3, source.err);
    BOOST_TEST(source.err.find("RankSourceDiffers") != std::string::npos, source.err);
    BOOST_TEST(source.out.empty(), source.out);
    // With identical inputs, one process's report.
    const CommandResult same = mpirun_two(good, good);
    BOOST_TEST(same.exit_code == 0, same.err);
    BOOST_TEST(same.out == run_moequant(good).out);
}

BOOST_AUTO_TEST_CASE(ranks_that_run_another_job_fail_before_any_work) {
    TempDir dir;
    const fs::path model = synth(dir, "qwen3_moe"), out = dir / "out";
    const CommandResult r = mpirun_two(with_output({"convert", "-i", model.string(), "--quant-method", "int4"}, out),
                                       with_output({"convert", "-i", model.string(), "--quant-method", "int8"}, out));
    BOOST_TEST(r.exit_code == 2, r.err);
    BOOST_TEST(r.err.find("RankJobDiffers") != std::string::npos, r.err);
    BOOST_TEST(!fs::exists(out));
}

BOOST_AUTO_TEST_CASE(calibration_on_another_cpu_kind_is_refused) {
    TempDir dir;
    const fs::path model = synth(dir, "qwen3_moe"), out = dir / "out";
    // FP32 products on moequant's AVX2 kernels on rank 1 and its best ones on rank 0: what two
    // kinds of CPU look like. (On a CPU without AVX-512 both are AVX2 and the run is one job.)
    const Args gptq = with_output({"gptq", "-i", model.string(), "--quant_type", "W4A16", "--dataset", "embedded",
                                   "--compute-dtype", "f32"}, out);
    const CommandResult r = mpirun_two_with_env_on_rank_1(gptq, "MOEQUANT_ISA=avx2");
    if (run_moequant({"--version"}).out.find("CPU kernels: avx512") == std::string::npos) {
        BOOST_TEST(r.exit_code == 0, r.err);
        return;
    }
    BOOST_TEST(r.exit_code == 2, r.err);
    BOOST_TEST(r.err.find("RankJobDiffers") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("kernels=") != std::string::npos, r.err);
    BOOST_TEST(!fs::exists(out));
}

BOOST_AUTO_TEST_CASE(calibration_on_other_blas_kernels_is_refused) {
    TempDir dir;
    const fs::path model = synth(dir, "qwen3_moe"), out = dir / "out";
    // BLIS's Haswell kernels on rank 1 (BLIS 0.9 numbers them 3), the kernels moequant chose on
    // rank 0: GPTQ's factorizations would sum in another order there.
    const Args gptq = with_output({"gptq", "-i", model.string(), "--quant_type", "W4A16", "--dataset", "embedded"}, out);
    const CommandResult r = mpirun_two_with_env_on_rank_1(gptq, "BLIS_ARCH_TYPE=3");
    const std::string kernels = run_moequant({"--version"}).out;
    if (kernels.find("BLIS 0.9.0 haswell") != std::string::npos) {  // the same kernels on both ranks
        BOOST_TEST(r.exit_code == 0, r.err);
        return;
    }
    BOOST_TEST(r.exit_code == 2, r.err);
    BOOST_TEST(r.err.find("RankJobDiffers") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("haswell") != std::string::npos, r.err);
    BOOST_TEST(!fs::exists(out));
}

BOOST_AUTO_TEST_CASE(one_ranks_unusable_tmpdir_ends_the_job_with_exit_5) {
    TempDir dir;
    const fs::path model = synth(dir, "qwen3_moe"), out = dir / "out";
    const Args gptq = with_output({"gptq", "-i", model.string(), "--quant_type", "W4A16", "--dataset", "embedded"}, out);
    const CommandResult r = mpirun_two_with_env_on_rank_1(gptq, "TMPDIR=" + (dir / "missing").string());
    BOOST_TEST(r.exit_code == 5, r.err);
    BOOST_TEST(r.err.find("BadTmpdir") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("rank 1") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(ranks_that_do_not_share_the_output_folder_fail_before_any_work) {
    TempDir dir;
    const fs::path model = synth(dir, "qwen3_moe"), out = dir / "out", elsewhere = dir / "elsewhere";
    const Args convert = {"convert", "-i", model.string(), "--quant-method", "int4"};
    const CommandResult r = mpirun_two(with_output(convert, out), with_output(convert, elsewhere));
    BOOST_TEST(r.exit_code == 5, r.err);
    BOOST_TEST(r.err.find("OutputNotShared") != std::string::npos, r.err);
    BOOST_TEST(error_lines(r.err) == 1u, r.err);
    BOOST_TEST(!fs::exists(elsewhere));
    for (const auto& [name, hash] : file_hashes(out)) BOOST_TEST(name.find(".safetensors") == std::string::npos, name);
    BOOST_TEST(manifest(out).at("complete").as_bool() == false);
}

BOOST_AUTO_TEST_CASE(a_rank_that_fails_alone_ends_the_job_with_its_exit_code) {
    TempDir dir;
    const fs::path model = synth(dir, "qwen3_moe"), out = dir / "out", missing = dir / "missing";
    // Rank 1 cannot open its checkpoint while rank 0 waits for it in the checks: no hang.
    const CommandResult r = mpirun_two(with_output({"convert", "-i", model.string(), "--quant-method", "int4"}, out),
                                       with_output({"convert", "-i", missing.string(), "--quant-method", "int4"}, out));
    BOOST_TEST(r.exit_code == 3, r.err);
    BOOST_TEST(r.err.find("(rank 1 of 2) error") != std::string::npos, r.err);
    BOOST_TEST(r.err.find("missing") != std::string::npos, r.err);
    BOOST_TEST(!fs::exists(out));
}

BOOST_AUTO_TEST_CASE(ranks_given_other_commands_are_refused) {
    TempDir dir;
    const fs::path model = synth(dir, "qwen3_moe"), out = dir / "out";
    const Args convert = with_output({"convert", "-i", model.string(), "--quant-method", "int4"}, out);
    Args dry = convert;
    dry.push_back("--dry-run");
    const CommandResult r = mpirun_two(convert, dry);  // rank 1 alone plans: it must not leave rank 0 waiting
    BOOST_TEST(r.exit_code == 2, r.err);
    BOOST_TEST(r.err.find("RankJobDiffers") != std::string::npos, r.err);
    BOOST_TEST(error_lines(r.err) == 1u, r.err);
    BOOST_TEST(!fs::exists(out));
}

BOOST_AUTO_TEST_CASE(one_process_commands_are_refused_across_ranks) {
    TempDir dir;
    const fs::path model = synth(dir, "qwen3_moe");
    const CommandResult inspect = mpirun(2, {"inspect", model.string()});  // nothing to share
    BOOST_TEST(inspect.exit_code == 2, inspect.err);
    BOOST_TEST(inspect.err.find("NotAcrossRanks") != std::string::npos, inspect.err);
    BOOST_TEST(error_lines(inspect.err) == 1u, inspect.err);
    const CommandResult dry = mpirun(2, {"gptq", "-i", model.string(), "-o", (dir / "out").string(), "--dry-run"});
    BOOST_TEST(dry.exit_code == 2, dry.err);
    BOOST_TEST(dry.err.find("--dry-run") != std::string::npos, dry.err);
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // MOEQUANT_MPIEXEC
