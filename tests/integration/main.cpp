// Boost.Test entry point for the integration suites.
#define BOOST_TEST_MODULE moequant integration tests
#include <boost/test/unit_test.hpp>
