// Loading plugin modules: the purpose-built fixtures of tests/plugin_fixtures, each rejected
// for exactly its reason, and the good ones usable through the interfaces.

#include <moequant/engine/plugin_registry.hpp>
#include <moequant/error.hpp>
#include <moequant/plugin.hpp>

#include "error_code_of.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdlib>

using namespace moequant;
using namespace moequant::test;

namespace {

fs::path fixture(const std::string& variant) {
    return fs::path(MOEQUANT_TEST_PLUGIN_DIR) / ("moequant-quantizer-fixture_" + variant + ".so");
}

// Loads `file` alone and returns the single rejection reason (fails if it loaded).
std::string rejection_of(const fs::path& file) {
    Registry r;
    r.load_file(file, PluginOrigin::explicit_file);
    BOOST_REQUIRE_MESSAGE(r.plugins().empty(), file << " loaded but should have been rejected");
    BOOST_REQUIRE_EQUAL(r.rejections().size(), 1u);
    return r.rejections().front().reason;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(plugin_loader)

BOOST_AUTO_TEST_CASE(good_plugin_loads_and_its_objects_work) {
    Registry r;
    r.load_file(fixture("good"), PluginOrigin::explicit_file);
    BOOST_TEST_REQUIRE(r.rejections().empty());
    BOOST_TEST_REQUIRE(r.plugins().size() == 1u);
    const PluginInfo& p = r.plugins().front();
    BOOST_TEST(p.id == "fixture_good");
    BOOST_TEST(p.version == "1.2.3");
    BOOST_TEST(p.kinds == MOEQUANT_KIND_QUANTIZER);
    BOOST_TEST(p.file == fs::canonical(fixture("good")));
    const Quantizer* q = r.quantizer("fixture-good");
    BOOST_TEST_REQUIRE(q != nullptr);
    float w[4] = {1, 2, 3, 4};
    TensorView view{DType::F32, {2, 2}, std::as_bytes(std::span<float>(w))};
    QuantizedTensor out = q->quantize(view);
    BOOST_TEST(out.method == "IDENTITY");
    BOOST_TEST(out.part("weight")->data_as<float>()[3] == 4.0f);
    BOOST_TEST(r.quantizers().front().plugin->id == "fixture_good");
}

BOOST_AUTO_TEST_CASE(plugin_with_several_kinds_registers_all_objects) {
    Registry r;
    r.load_file(fixture("second_good"), PluginOrigin::explicit_file);
    BOOST_TEST_REQUIRE(r.rejections().empty());
    BOOST_TEST(r.adapter("fixture-family") != nullptr);
    BOOST_TEST(r.format("fixture-format") != nullptr);
    // An Error thrown inside plugin code is caught as moequant::Error in the host.
    try {
        r.format("fixture-format")->create({});
        BOOST_FAIL("expected an error");
    } catch (const Error& e) {
        BOOST_TEST((e.kind() == ErrorKind::plugin));
    }
}

// synthesize() is optional: an adapter that does not implement it refuses as a usage error.
BOOST_AUTO_TEST_CASE(adapter_without_synthesize_refuses_naming_its_family) {
    Registry r;
    r.load_file(fixture("second_good"), PluginOrigin::explicit_file);
    const ModelAdapter* adapter = r.adapter("fixture-family");
    BOOST_TEST_REQUIRE(adapter != nullptr);
    const Error e = error_of([&] { adapter->synthesize(fs::temp_directory_path(), Options{}); }, ErrorKind::usage);
    BOOST_TEST(e.code() == "NoSynthesis");
    BOOST_TEST(contains(e.what(), "family 'fixture-family' cannot synthesize a checkpoint"), e.what());
}

BOOST_AUTO_TEST_CASE(abi_mismatch_names_both_numbers) {
    auto reason = rejection_of(fixture("abi_plus_one"));
    BOOST_TEST(contains(reason, "built for plugin ABI " + std::to_string(MOEQUANT_PLUGIN_ABI_VERSION + 1)), reason);
    BOOST_TEST(contains(reason, "this moequant uses ABI " + std::to_string(MOEQUANT_PLUGIN_ABI_VERSION)), reason);
}

BOOST_AUTO_TEST_CASE(a_plugin_built_against_abi_7_is_refused) {
    // Its ModelAdapter has no decoder_forward() slot and its OutputFile is smaller: calling
    // through it would be undefined behaviour, so it never gets that far.
    auto reason = rejection_of(fixture("abi_seven"));
    BOOST_TEST(contains(reason, "built for plugin ABI 7"), reason);
    BOOST_TEST(contains(reason, "this moequant uses ABI " + std::to_string(MOEQUANT_PLUGIN_ABI_VERSION)), reason);
}

BOOST_AUTO_TEST_CASE(sdk_major_mismatch_is_rejected) {
    BOOST_TEST(contains(rejection_of(fixture("sdk_major_plus_one")), "SDK"));
}

BOOST_AUTO_TEST_CASE(toolchain_mismatch_shows_both_fingerprints) {
    auto reason = rejection_of(fixture("fingerprint"));
    BOOST_TEST(contains(reason, "toolchain mismatch"), reason);
    BOOST_TEST(contains(reason, "gcc-99"), reason);
    BOOST_TEST(contains(reason, MOEQUANT_TOOLCHAIN_FINGERPRINT), reason);
}

BOOST_AUTO_TEST_CASE(short_descriptor_is_rejected) {
    BOOST_TEST(contains(rejection_of(fixture("small_descriptor")), "descriptor is 16 bytes"));
}

BOOST_AUTO_TEST_CASE(other_descriptor_generation_is_reported_without_loading) {
    auto reason = rejection_of(fixture("generation_v2"));
    BOOST_TEST(contains(reason, "moequant_plugin_v2"), reason);
}

BOOST_AUTO_TEST_CASE(registration_that_throws_is_contained) {
    auto reason = rejection_of(fixture("throws"));
    BOOST_TEST(contains(reason, "registration failed"), reason);
    BOOST_TEST(contains(reason, "fixture refuses to register"), reason);
}

BOOST_AUTO_TEST_CASE(probe_zero_gives_the_plugins_reason) {
    auto reason = rejection_of(fixture("probe_zero"));
    BOOST_TEST(contains(reason, "not usable on this machine: needs AMX-INT8"), reason);
}

BOOST_AUTO_TEST_CASE(invalid_object_id_and_undeclared_kind_and_empty_plugins) {
    BOOST_TEST(contains(rejection_of(fixture("bad_object_id")), "invalid quantizer id 'Bad Name'"));
    BOOST_TEST(contains(rejection_of(fixture("wrong_kind")), "does not declare that kind"));
    BOOST_TEST(contains(rejection_of(fixture("nothing")), "registered nothing"));
}

BOOST_AUTO_TEST_CASE(missing_dependency_shows_the_loader_message) {
    auto reason = rejection_of(fixture("missing_dep"));
    BOOST_TEST(contains(reason, "cannot load"), reason);
    BOOST_TEST(contains(reason, "libmoequant_fixture_stub.so"), reason);
}

BOOST_AUTO_TEST_CASE(non_plugins_are_rejected_without_running_them) {
    auto reason = rejection_of(fs::path(MOEQUANT_TEST_PLUGIN_DIR) / "not-on-loader-path/libmoequant_fixture_stub.so");
    BOOST_TEST(contains(reason, "not a moequant plugin (no 'moequant_plugin_v1' in section 'moequant')"), reason);
    auto text = rejection_of(fs::path(MOEQUANT_TEST_PLUGIN_DIR) / "moequant-format-fixture_not_elf.so");
    BOOST_TEST(contains(text, "not a shared library"), text);
    BOOST_TEST(contains(rejection_of(fs::path(MOEQUANT_TEST_PLUGIN_DIR) / "absent.so"), "no such file"));
}

BOOST_AUTO_TEST_CASE(duplicates_lose_to_the_first_module) {
    Registry r;
    r.load_file(fixture("good"), PluginOrigin::explicit_file);
    r.load_file(fixture("late_dup_object"), PluginOrigin::plugin_dir);
    r.load_file(fixture("late_dup_plugin_id"), PluginOrigin::plugin_dir);
    BOOST_TEST(r.plugins().size() == 1u);
    BOOST_TEST_REQUIRE(r.rejections().size() == 2u);
    BOOST_TEST(contains(r.rejections()[0].reason, "quantizer 'fixture-good' is already provided by plugin 'fixture_good'"));
    BOOST_TEST(contains(r.rejections()[1].reason, "plugin id 'fixture_good' is already loaded from"));
    BOOST_TEST(r.quantizer("fixture-dup-plugin-id") == nullptr);
}

BOOST_AUTO_TEST_CASE(the_same_file_twice_is_loaded_once) {
    TempDir dir;
    fs::create_symlink(fixture("good"), dir / "moequant-quantizer-alias.so");
    Registry r;
    r.load_file(fixture("good"), PluginOrigin::explicit_file);
    r.load_directory(dir.path(), PluginOrigin::plugin_dir);
    BOOST_TEST(r.plugins().size() == 1u);
    BOOST_TEST(r.rejections().empty());
}

BOOST_AUTO_TEST_CASE(scanning_the_fixture_folder_loads_the_good_and_explains_the_rest) {
    Registry r;
    r.load_directory(MOEQUANT_TEST_PLUGIN_DIR, PluginOrigin::plugin_dir);
    // Name order puts "..._good" before "..._late_dup_*", so the good module wins.
    BOOST_TEST_REQUIRE(r.quantizer("fixture-good") != nullptr);
    BOOST_TEST(r.quantizers().front().plugin->version == "1.2.3");
    BOOST_TEST(r.adapter("fixture-family") != nullptr);
    for (const auto& rej : r.rejections()) {
        BOOST_TEST(!rej.reason.empty());
        BOOST_TEST(rej.reason.find('\n') == std::string::npos);
    }
    BOOST_TEST(r.rejections().size() >= 11u);
}

BOOST_AUTO_TEST_CASE(discovery_order_and_environment_path) {
    TempDir dir;
    fs::copy_file(fixture("second_good"), dir / "moequant-format-fixture_second_good.so");
    ::setenv("MOEQUANT_PLUGIN_PATH", (":" + dir.path().string() + "::/nonexistent").c_str(), 1);
    Registry r;
    PluginSearch search;
    search.files.push_back(fixture("good"));
    search.use_default_dir = false;
    r.discover(search);
    ::unsetenv("MOEQUANT_PLUGIN_PATH");
    BOOST_TEST_REQUIRE(r.plugins().size() == 2u);
    BOOST_TEST((r.plugins()[0].origin == PluginOrigin::explicit_file));
    BOOST_TEST((r.plugins()[1].origin == PluginOrigin::environment));
    BOOST_TEST(r.rejections().empty());  // missing environment folders are not errors
}

BOOST_AUTO_TEST_CASE(missing_explicit_plugin_dir_is_a_rejection) {
    Registry r;
    PluginSearch search;
    search.dirs.push_back("/nonexistent/plugins");
    search.use_environment = false;
    search.use_default_dir = false;
    r.discover(search);
    BOOST_TEST_REQUIRE(r.rejections().size() == 1u);
    BOOST_TEST(r.rejections()[0].reason == "plugin folder does not exist");
}

BOOST_AUTO_TEST_SUITE_END()
