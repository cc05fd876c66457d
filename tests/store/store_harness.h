// store_harness.h: one way to build each kind of store, so that the same
// conformance tests run against all of them.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "cohort/store.h"

namespace cohort::testing {

// StoreHarness owns whatever a store needs (a file, a server) and hands out
// clients that all see the same keys.
class StoreHarness {
 public:
  virtual ~StoreHarness() = default;
  // client returns a new handle on the shared store (for HashStore, the same
  // object: it has no other kind of client).
  virtual std::shared_ptr<Store> client() = 0;
};

struct StoreKind {
  std::string name;
  std::function<std::unique_ptr<StoreHarness>()> make;
};

// PrintTo names a kind in gtest's output.
inline void PrintTo(const StoreKind& kind, std::ostream* os) {
  *os << kind.name;
}

// all_store_kinds lists HashStore, FileStore, PrefixStore over HashStore,
// TcpStore, and TcpStore with authentication.
std::vector<StoreKind> all_store_kinds();

// temp_path returns a fresh path under the test's temporary directory.
std::string temp_path(const std::string& stem);

}  // namespace cohort::testing
