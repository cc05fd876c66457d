// module.cc: the cohort_torch._C extension: ProcessGroupCohort, the c10d
// backend, as a Python class deriving from torch's
// torch._C._distributed_c10d.Backend. Thin: the logic is in
// c10d_backend.cc and the C++ layers under it.
#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/python.h>

#include "c10d_backend.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "cohort's torch.distributed backend (import cohort_torch to register it)";
  // torch.distributed registers c10d::Backend's Python type, the base below.
  py::module_::import("torch.distributed");
  py::class_<cohort_torch::CohortBackend, c10d::Backend, c10::intrusive_ptr<cohort_torch::CohortBackend>>(
      m, "ProcessGroupCohort",
      "A cohort group as a torch.distributed backend; made by torch through "
      "init_process_group('cohort') and new_group, not by hand.")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& group_name) {
             return c10::make_intrusive<cohort_torch::CohortBackend>(store, rank, size, timeout, group_name);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("group_name") = "0",
           // Joining blocks until every rank has: other Python threads run on.
           py::call_guard<py::gil_scoped_release>());
}
