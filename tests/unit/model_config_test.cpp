#include <moequant/error.hpp>
#include <moequant/model_config.hpp>

#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

using namespace moequant;

BOOST_AUTO_TEST_SUITE(model_config)

const char* deepseek = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
  "hidden_size": 7168, "moe_intermediate_size": 2048, "n_routed_experts": 256,
  "rms_norm_eps": 1e-06, "routed_scaling_factor": 2.5, "tie_word_embeddings": false,
  "num_hidden_layers": 61.0,
  "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}
})";

BOOST_AUTO_TEST_CASE(typed_access_to_top_level_keys) {
    auto c = ModelConfig::parse(deepseek, "config.json");
    BOOST_TEST(c.model_type() == "deepseek_v3");
    BOOST_TEST(c.require_int("hidden_size") == 7168);
    BOOST_TEST(c.require_int("num_hidden_layers") == 61);  // whole-number floats are integers
    BOOST_TEST(c.require("rms_norm_eps").as_double() == 1e-6);
    BOOST_TEST(!c.require("tie_word_embeddings").as_bool());
    BOOST_TEST((c.require("quantization_config.weight_block_size").as_int_array() == std::vector<std::int64_t>{128, 128}));
    BOOST_TEST(c.int_or("first_k_dense_replace", 0) == 0);
    BOOST_TEST(c.architectures().front() == "DeepseekV3ForCausalLM");
    BOOST_TEST(!c.has_text_config());
}

BOOST_AUTO_TEST_CASE(text_config_is_searched_first_then_the_root) {
    auto c = ModelConfig::parse(R"({
      "model_type": "kimi_k25",
      "quantization_config": {"quant_method": "compressed-tensors"},
      "text_config": {"model_type": "kimi_k2", "n_routed_experts": 384, "hidden_size": 7168}
    })", "config.json");
    BOOST_TEST(c.has_text_config());
    BOOST_TEST(c.model_type() == "kimi_k2");
    BOOST_TEST(c.require_int("n_routed_experts") == 384);
    BOOST_TEST(c.string_or("quantization_config.quant_method", "") == "compressed-tensors");
    BOOST_TEST(c.root().get("model_type")->as_string() == "kimi_k25");
    BOOST_TEST(c.text().path() == "text_config");
}

BOOST_AUTO_TEST_CASE(errors_name_the_file_and_the_key_path) {
    auto c = ModelConfig::parse(R"({"hidden_size": "big", "text_config": {"x": [1, "a"]}})", "/m/config.json");
    try {
        c.require_int("hidden_size");
        BOOST_FAIL("expected an error");
    } catch (const Error& e) {
        std::string what = e.what();
        BOOST_TEST(what.find("/m/config.json") != std::string::npos);
        BOOST_TEST(what.find("'hidden_size' must be an integer") != std::string::npos);
        BOOST_TEST((e.kind() == ErrorKind::input));
    }
    try {
        c.require("x").as_int_array();
        BOOST_FAIL("expected an error");
    } catch (const Error& e) {
        BOOST_TEST(std::string(e.what()).find("text_config.x[1]") != std::string::npos);
    }
    try {
        c.require("n_routed_experts");
        BOOST_FAIL("expected an error");
    } catch (const Error& e) {
        BOOST_TEST(std::string(e.what()).find("missing required key 'n_routed_experts'") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(invalid_documents_are_rejected) {
    BOOST_CHECK_THROW(ModelConfig::parse("{", "c"), Error);
    BOOST_CHECK_THROW(ModelConfig::parse("[1]", "c"), Error);
    moequant::test::TempDir dir;
    BOOST_CHECK_THROW(ModelConfig::load(dir / "config.json"), Error);
    moequant::test::write_text(dir / "config.json", R"({"model_type": "mixtral", "num_local_experts": 8})");
    BOOST_TEST(ModelConfig::load(dir / "config.json").require_int("num_local_experts") == 8);
}

BOOST_AUTO_TEST_SUITE_END()
