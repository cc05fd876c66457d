// checkpoint.cc: see include/cohort/checkpoint.h.
#include "cohort/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <torch/serialize/archive.h>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cohort/errors.h"

namespace cohort {
namespace {

void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

}  // namespace

void save_checkpoint(const std::string& path, const torch::nn::Module& module,
                     const torch::optim::Optimizer& optimizer, int64_t step, const GroupPtr& group) {
  const GroupPtr g = group ? group : default_group();
  std::string error;
  if (g->rank() == 0) {
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    try {
      torch::serialize::OutputArchive archive, model, optim;
      module.save(model);
      optimizer.save(optim);
      archive.write("model", model);
      archive.write("optimizer", optim);
      archive.write("step", at::tensor(step));
      archive.write("format", at::tensor(int64_t{1}));
      archive.save_to(tmp);
      fsync_path(tmp, O_RDONLY);
      if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
        std::remove(tmp.c_str());
      } else {
        fsync_path(directory_of(path), O_RDONLY | O_DIRECTORY);
      }
    } catch (const std::exception& e) {
      std::remove(tmp.c_str());
      error = std::string("cannot write checkpoint ") + path + ": " + e.what();
    }
  }
  // Every rank learns whether rank 0 succeeded, so none loads a stale file.
  int32_t failed = error.empty() ? 0 : 1;
  AllReduceOptions o;
  o.op = ReduceOp::MAX;
  g->all_reduce(Buffer::of(&failed, 1), o);
  if (!error.empty()) throw Error(error);
  if (failed)
    throw Error("checkpoint " + path + " was not written: rank 0 failed to save it (see its error)");
}

int64_t load_checkpoint(const std::string& path, torch::nn::Module& module,
                        torch::optim::Optimizer& optimizer) {
  if (::access(path.c_str(), R_OK) != 0) {
    throw InvalidArgument("checkpoint " + path + " cannot be read: " + std::strerror(errno));
  }
  torch::serialize::InputArchive archive, model, optim;
  at::Tensor step, format;
  try {
    archive.load_from(path);
  } catch (const std::exception& e) {
    throw InvalidArgument("checkpoint " + path + " is not a readable archive: " + e.what());
  }
  if (!archive.try_read("format", format) || !archive.try_read("model", model) ||
      !archive.try_read("optimizer", optim) || !archive.try_read("step", step)) {
    throw InvalidArgument("checkpoint " + path + " is not a cohort checkpoint (no model/optimizer/step)");
  }
  torch::NoGradGuard no_grad;
  module.load(model);
  optimizer.load(optim);
  return step.item<int64_t>();
}

}  // namespace cohort
