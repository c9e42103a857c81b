// The reason code a call fails with: the tests of refusals check the code, not the wording.
#pragma once

#include <moequant/error.hpp>

#include <boost/test/unit_test.hpp>

#include <string>

namespace moequant::test {

// The code of the moequant::Error that `f` throws, which must be of `kind`; "" if it throws none.
template <class F>
std::string error_code_of(F&& f, ErrorKind kind) {
    try {
        f();
    } catch (const Error& e) {
        BOOST_TEST((e.kind() == kind), e.what());
        return e.code();
    }
    return "";
}

}  // namespace moequant::test
