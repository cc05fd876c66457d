// The factories of backend_factory.h. The MPI and NCCL backends are
// modules (backend_module.h), loaded here the first time a group asks for
// one; a build without a backend answers with the option that builds it.
#include "process_group/backend_factory.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "process_group/backend_module.h"

namespace cohort {

bool mpi_built() {
#ifdef COHORT_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool nccl_built() {
#ifdef COHORT_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

namespace {

Status not_built(const std::string& backend) {
  if (backend == "mpi") {
    return Status(StatusCode::kBackendError,
                  "backend 'mpi' is not built into this cohort (configure with -DCOHORT_WITH_MPI=ON and "
                  "Open MPI installed: apt-get install libopenmpi-dev)");
  }
  return Status(StatusCode::kBackendError,
                "backend 'nccl' is not built into this cohort (configure with -DCOHORT_WITH_NCCL=ON, with "
                "NCCL and the CUDA runtime under CUDA_HOME or /usr/local/cuda)");
}

// module_path is libcohort_<backend>.so in libcohort's own folder: the
// build tree's src/, an install's lib/ and a wheel's package all keep them
// side by side.
std::string module_path(const std::string& backend) {
  Dl_info info{};
  std::string folder = ".";
  if (dladdr(reinterpret_cast<void*>(&mpi_built), &info) != 0 && info.dli_fname) {
    // Made absolute: a libcohort loaded by a relative path would otherwise
    // be looked beside from whatever the working folder is by then.
    char* absolute = ::realpath(info.dli_fname, nullptr);
    const std::string self = absolute ? absolute : info.dli_fname;
    std::free(absolute);
    const size_t slash = self.rfind('/');
    if (slash != std::string::npos) folder = self.substr(0, slash);
  }
  return folder + "/libcohort_" + backend + ".so";
}

// LoadedModule is one backend's module, loaded once per process (never
// unloaded: its backends and MPI's runtime live to the process's end).
struct LoadedModule {
  std::once_flag once;
  const BackendModule* table = nullptr;
  Status failure;
};

Result<const BackendModule*> load_module(const std::string& backend, LoadedModule& slot, const char* entry) {
  std::call_once(slot.once, [&] {
    const std::string path = module_path(backend);
    // MPI's module is loaded for all to see: Open MPI's own components,
    // which it loads in turn, look up libmpi's symbols globally.
    const int mode = RTLD_NOW | (backend == "mpi" ? RTLD_GLOBAL : RTLD_LOCAL);
    void* handle = ::dlopen(path.c_str(), mode);
    if (!handle) {
      const char* why = ::dlerror();
      slot.failure = Status(StatusCode::kBackendError, "backend '" + backend + "' is built, but its module " +
                                                           path + " could not be loaded: " +
                                                           (why ? why : "no reason given"));
      return;
    }
    using Entry = const BackendModule* (*)();
    auto find = reinterpret_cast<Entry>(::dlsym(handle, entry));
    const BackendModule* table = find ? find() : nullptr;
    if (!table || table->abi != kBackendModuleAbi) {
      ::dlclose(handle);
      slot.failure = Status(StatusCode::kBackendError,
                            "backend '" + backend + "': " + path +
                                " is not a module of this cohort build (its entry " + entry +
                                (table ? " has another ABI version" : " is missing") + "); rebuild cohort");
      return;
    }
    slot.table = table;
  });
  if (!slot.table) return slot.failure;
  return slot.table;
}

Result<const BackendModule*> mpi_module() {
  if (!mpi_built()) return not_built("mpi");
  static LoadedModule slot;
  return load_module("mpi", slot, "cohort_mpi_module");
}

Result<const BackendModule*> nccl_module() {
  if (!nccl_built()) return not_built("nccl");
  static LoadedModule slot;
  return load_module("nccl", slot, "cohort_nccl_module");
}

}  // namespace

Status mpi_world(int* rank, int* size) {
  auto module = mpi_module();
  if (!module.ok()) return module.status();
  return module.value()->mpi_world(rank, size);
}

Result<std::unique_ptr<Backend>> make_mpi_backend(const std::vector<int>& world_ranks, int tag) {
  auto module = mpi_module();
  if (!module.ok()) return module.status();
  return module.value()->make_mpi_backend(world_ranks, tag);
}

Result<std::unique_ptr<Backend>> make_nccl_backend(std::shared_ptr<Store> store, int rank, int size,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& name) {
  auto module = nccl_module();
  if (!module.ok()) return module.status();
  return module.value()->make_nccl_backend(std::move(store), rank, size, timeout, name);
}

}  // namespace cohort
