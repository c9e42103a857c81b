// Boost.Test entry point for the golden-vector suites.
#define BOOST_TEST_MODULE moequant golden tests
#include <boost/test/unit_test.hpp>
