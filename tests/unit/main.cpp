// Boost.Test entry point for the unit suites.
#define BOOST_TEST_MODULE moequant unit tests
#include <boost/test/unit_test.hpp>
