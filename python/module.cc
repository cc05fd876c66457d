// module.cc: the cohort_torch._C extension: ProcessGroupCohort, the c10d
// backend, as a Python class deriving from torch's
// torch._C._distributed_c10d.Backend. Thin: the logic is in
// c10d_backend.cc and the C++ layers under it.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/python.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "c10d_backend.h"
#include "common/cpu_binding.h"
#include "common/json.h"
#include "diagnostics/top_screen.h"
#include "tcp_store.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "cohort's torch.distributed backend (import cohort_torch to register it)";
  // torch.distributed registers c10d::Backend's Python type, the base below.
  py::module_::import("torch.distributed");
  py::class_<cohort_torch::CohortBackend, c10d::Backend, c10::intrusive_ptr<cohort_torch::CohortBackend>>(
      m, "ProcessGroupCohort", py::dynamic_attr(),
      "A cohort group as a torch.distributed backend; made by torch through "
      "init_process_group('cohort') and new_group, not by hand.")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& group_name) {
             return c10::make_intrusive<cohort_torch::CohortBackend>(store, rank, size, timeout, group_name);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("group_name") = "0",
           // Joining blocks until every rank has: other Python threads run on.
           py::call_guard<py::gil_scoped_release>())
      .def("_set_profiling_name", &cohort_torch::CohortBackend::set_profiling_name, py::arg("name"),
           "Names the profiler's events '<name>:<op>' (default 'cohort'; the gloo stand-in sets 'gloo').")
      .def("_alloc_symmetric", &cohort_torch::CohortBackend::alloc_symmetric, py::arg("bytes"),
           "A uint8 tensor of `bytes` on a block every rank of the group on this host maps "
           "(cohort_torch.empty_symmetric wraps it); collective.",
           py::call_guard<py::gil_scoped_release>())
      .def(
          "_stragglers", [](const cohort_torch::CohortBackend& b) { return b.group()->stragglers_json(); },
          "The group's straggler accounting as JSON (cohort_torch.stragglers parses it).");

  // Deliberately not a registered class: Python sees the group as torch's
  // own ProcessGroup type, which torch checks exactly (`type(group) is
  // ProcessGroup`) before it coalesces batch_isend_irecv.
  m.def(
      "_cohort_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store,
         const c10::intrusive_ptr<cohort_torch::CohortBackend>& backend)
          -> c10::intrusive_ptr<c10d::ProcessGroup> {
        return c10::make_intrusive<cohort_torch::CohortProcessGroup>(store, backend);
      },
      py::arg("store"), py::arg("backend"),
      "The ProcessGroup torch keeps for a cohort group: it names itself 'cohort' to torch's C++ side.");

  m.def(
      "_top_screen",
      [](const std::string& address, const std::string& group, const std::string& summary,
         const std::vector<std::string>& records) {
        auto parse = [](const std::string& text) {
          auto doc = cohort::Json::parse(text);
          return doc.ok() ? doc.value() : cohort::Json();
        };
        std::vector<cohort::Json> parsed;
        for (const std::string& r : records) parsed.push_back(parse(r));
        return cohort::top_screen(address, group, parse(summary), parsed);
      },
      py::arg("address"), py::arg("group"), py::arg("summary"), py::arg("records"),
      "One screen of cohort-top from a group's summary and its ranks' records (JSON texts).");

  m.def(
      "_bind_from_environment",
      [] {
        const cohort::BindOutcome outcome = cohort::bind_from_environment();
        return py::make_tuple(outcome.bound, outcome.cpus, outcome.reason);
      },
      "Binds this process as COHORT_BIND says, once (common/cpu_binding.h): (bound, cpus, why not).");

  py::class_<cohort_torch::TorchTcpStore, c10d::Store, c10::intrusive_ptr<cohort_torch::TorchTcpStore>>(
      m, "TCPStore",
      "cohort's TcpStore as a torch.distributed Store, with torch.distributed.TCPStore's first arguments: "
      "one event-loop server for thousands of clients, HMAC authentication when COHORT_STORE_TOKEN is set, "
      "set() that returns once the server stored the key.")
      .def(py::init([](const std::string& host_name, int port, std::optional<int> world_size, bool is_master,
                       std::chrono::milliseconds timeout, bool wait_for_workers) {
             if (port < 0 || port > 65535) {
               throw std::invalid_argument("cohort_torch.TCPStore: port " + std::to_string(port) +
                                           " is out of range (0-65535)");
             }
             cohort::TcpStoreOptions options;
             options.port = static_cast<uint16_t>(port);
             options.is_server = is_master;
             options.num_workers = world_size;
             options.wait_for_workers = wait_for_workers && world_size.has_value();
             options.timeout = timeout;
             return c10::make_intrusive<cohort_torch::TorchTcpStore>(host_name, options);
           }),
           py::arg("host_name"), py::arg("port"), py::arg("world_size") = py::none(),
           py::arg("is_master") = false, py::arg("timeout") = std::chrono::milliseconds(300000),
           py::arg("wait_for_workers") = true, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("host", &cohort_torch::TorchTcpStore::host)
      .def_property_readonly("port", &cohort_torch::TorchTcpStore::port);
}
