#include "launcher/straggler_summary.h"

#include <dirent.h>

#include <fstream>
#include <sstream>

#include "common/json.h"
#include "diagnostics/straggler_stats.h"

namespace cohort::launcher {

std::optional<std::string> straggler_summary(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return std::nullopt;
  Json best;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".json") != 0) continue;
    std::ifstream in(dir + "/" + name);
    std::stringstream text;
    text << in.rdbuf();
    auto doc = Json::parse(text.str());
    if (!doc.ok() || !doc.value().has("straggler")) continue;  // not a summary (or half of one)
    if (best.is_null() || doc.value()["size"].as_int() > best["size"].as_int()) best = std::move(doc.value());
  }
  ::closedir(d);
  if (best.is_null() || best["collectives"].as_int() == 0) return std::nullopt;
  return "cohortrun: stragglers: " + straggler_line(best);
}

}  // namespace cohort::launcher
