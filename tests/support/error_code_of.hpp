// The reason code a call fails with: the tests of refusals check the code, not the wording
// (and, where the message must name a place, the error itself).
#pragma once

#include <moequant/error.hpp>

#include <boost/test/unit_test.hpp>

#include <stdexcept>
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

// The moequant::Error that `f` must throw, of `kind` (the test fails when it throws none).
template <class F>
Error error_of(F&& f, ErrorKind kind) {
    try {
        f();
    } catch (const Error& e) {
        BOOST_TEST((e.kind() == kind), e.what());
        return e;
    }
    BOOST_FAIL("expected an error");
    throw std::logic_error("unreachable");
}

}  // namespace moequant::test
