// Golden tests: placeholder until the policy registry lands.
#include "gtest/gtest.h"
