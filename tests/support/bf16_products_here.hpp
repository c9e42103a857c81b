// Boost.Test precondition of the cases that run BF16 products: oneDNN 2.x has them only with
// AVX-512, so elsewhere those cases are reported skipped, not failed. And the compute dtype for
// one scope.
#pragma once

#include <moequant/compute_dtype.hpp>

#include <boost/test/unit_test.hpp>

namespace moequant::test {

inline boost::test_tools::assertion_result bf16_products_here(boost::unit_test::test_unit_id) {
    boost::test_tools::assertion_result here(bf16_products_available());
    here.message() << "oneDNN has no BF16 products on this CPU (it needs AVX-512)";
    return here;
}

// Sets the SDK's compute dtype for one scope, and restores f32 (its default) after it.
struct ComputeDtypeScope {
    explicit ComputeDtypeScope(ComputeDtype dtype = ComputeDtype::bf16) { set_compute_dtype(dtype); }
    ~ComputeDtypeScope() { set_compute_dtype(ComputeDtype::f32); }
    ComputeDtypeScope(const ComputeDtypeScope&) = delete;
    ComputeDtypeScope& operator=(const ComputeDtypeScope&) = delete;
};

}  // namespace moequant::test
