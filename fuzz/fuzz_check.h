// FUZZ_CHECK: one invariant of a fuzz target. A violation prints the condition
// and aborts, which libFuzzer reports as a crash and saves the input as an
// artifact; added to the target's seed corpus (fuzz/corpus/<target>), it is
// replayed by every fuzz.<target> run.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                      \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__,         \
                   __LINE__, #cond);                                          \
      std::abort();                                                           \
    }                                                                         \
  } while (0)
