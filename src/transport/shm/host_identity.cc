#include "transport/shm/host_identity.h"

#include <sys/stat.h>

#include <fstream>

namespace cohort::shm {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string inode(const char* path) {
  struct stat st {};
  if (::stat(path, &st) != 0) return "?";
  return std::to_string(static_cast<unsigned long long>(st.st_ino));
}

// The file system /dev/shm is on and the directory itself: two mounts of
// tmpfs there (one per container) differ in the device.
std::string shm_directory() {
  struct stat st {};
  if (::stat("/dev/shm", &st) != 0) return "?";
  return std::to_string(static_cast<unsigned long long>(st.st_dev)) + ":" +
         std::to_string(static_cast<unsigned long long>(st.st_ino));
}

}  // namespace

std::string boot_id() {
  const std::string boot = first_line("/proc/sys/kernel/random/boot_id");
  return boot.empty() || boot.find(' ') != std::string::npos ? "?" : boot;
}

std::string host_identity() {
  return "boot=" + boot_id() + " shm=" + shm_directory() +
         " pid=" + inode("/proc/self/ns/pid");
}

}  // namespace cohort::shm
