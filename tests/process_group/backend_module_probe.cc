// backend_module_probe: a process that links libcohort and makes one group
// of the backend spec in argv[1] (world size 1), saying which of the
// optional backends' libraries its address space holds before and after,
// for backend_module_test.cc. A group it cannot make prints "error: ...".
#include <fstream>
#include <iostream>
#include <set>
#include <string>

#include "cohort/distributed.h"
#include "cohort/hash_store.h"

namespace {

// mapped lists the libraries of interest found in /proc/self/maps.
std::string mapped() {
  const char* names[] = {"libcohort_mpi.so", "libcohort_nccl.so", "libmpi.so", "libopen-pal.so", "libnccl.so",
                         "libcudart.so"};
  std::set<std::string> found;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    for (const char* n : names) {
      if (line.find(std::string("/") + n) != std::string::npos) found.insert(n);
    }
  }
  std::string out;
  for (const std::string& n : found) out += (out.empty() ? "" : ",") + n;
  return out.empty() ? "none" : out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: backend_module_probe BACKEND_SPEC\n";
    return 2;
  }
  std::cout << "before: " << mapped() << std::endl;
  try {
    auto group = cohort::make_group(std::make_shared<cohort::HashStore>(), 0, 1, std::chrono::seconds(30),
                                    "probe", "", argv[1]);
    group->barrier();
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << std::endl;
    return 1;
  }
  std::cout << "after: " << mapped() << std::endl;
  return 0;
}
