#include "synth_blocks.hpp"

namespace moequant::adapters {

void add_swiglu(std::vector<SynthTensor>& t, const std::string& prefix, const std::array<std::string, 3>& names,
                std::int64_t intermediate, std::int64_t hidden, bool fp8) {
    t.push_back(linear_weight(prefix + names[0] + ".weight", intermediate, hidden, fp8));
    t.push_back(linear_weight(prefix + names[1] + ".weight", intermediate, hidden, fp8));
    t.push_back(linear_weight(prefix + names[2] + ".weight", hidden, intermediate, fp8));
}

void add_gqa_attention(std::vector<SynthTensor>& t, const std::string& prefix, const GqaAttention& a, bool fp8) {
    const std::string s = prefix + "self_attn.";
    const std::int64_t q_rows = a.q_rows ? a.q_rows : a.heads * a.head_dim;
    const std::int64_t kv_rows = a.kv_heads * a.head_dim;
    t.push_back(linear_weight(s + "q_proj.weight", q_rows, a.hidden, fp8));
    if (a.bias) t.push_back(bf16_tensor(s + "q_proj.bias", {q_rows}));
    t.push_back(linear_weight(s + "k_proj.weight", kv_rows, a.hidden, fp8));
    if (a.bias) t.push_back(bf16_tensor(s + "k_proj.bias", {kv_rows}));
    t.push_back(linear_weight(s + "v_proj.weight", kv_rows, a.hidden, fp8));
    if (a.bias) t.push_back(bf16_tensor(s + "v_proj.bias", {kv_rows}));
    t.push_back(linear_weight(s + "o_proj.weight", a.hidden, a.heads * a.head_dim, fp8));
    if (a.qk_norm) {
        t.push_back(norm_weight(s + "q_norm.weight", a.head_dim));
        t.push_back(norm_weight(s + "k_norm.weight", a.head_dim));
    }
}

void add_fused_experts(std::vector<SynthTensor>& t, const std::string& prefix, std::int64_t experts,
                       std::int64_t intermediate, std::int64_t hidden, bool layout_b) {
    const std::string e = prefix + "mlp.experts.";
    if (layout_b) {
        t.push_back(bf16_tensor(e + "gate_up_proj", {experts, hidden, 2 * intermediate}));
        t.push_back(bf16_tensor(e + "down_proj", {experts, intermediate, hidden}));
    } else {
        t.push_back(bf16_tensor(e + "gate_up_proj", {experts, 2 * intermediate, hidden}));
        t.push_back(bf16_tensor(e + "down_proj", {experts, hidden, intermediate}));
    }
}

}  // namespace moequant::adapters
