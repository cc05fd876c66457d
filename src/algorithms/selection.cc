#include "algorithms/selection.h"

#include <cstdio>
#include <sstream>

#include "common/config_registry.h"

namespace cohort {
namespace {

std::string size_text(size_t bytes) {
  if (bytes == SIZE_MAX) return "";
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) bytes /= 1024, ++u;
  return std::to_string(bytes) + units[u];
}

std::string time_text(double s) {
  char text[32];
  if (s < 1e-3) {
    std::snprintf(text, sizeof text, "%.1f us", s * 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.2f ms", s * 1e3);
  }
  return text;
}

}  // namespace

bool parse_size(const std::string& text, size_t* out) {
  if (text.empty()) return false;
  size_t value = 0, k = 0;
  for (; k < text.size() && text[k] >= '0' && text[k] <= '9'; ++k) {
    if (value > (SIZE_MAX - 9) / 10) return false;
    value = value * 10 + static_cast<size_t>(text[k] - '0');
  }
  if (k == 0) return false;
  int shift = 0;
  if (k + 1 == text.size()) {
    switch (text[k]) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      default:
        return false;
    }
  } else if (k != text.size()) {
    return false;
  }
  if (shift && value > (SIZE_MAX >> shift)) return false;
  *out = value << shift;
  return true;
}

int AlgorithmTable::class_of(size_t bytes) {
  return bytes == 0 ? 0 : 64 - __builtin_clzll(static_cast<unsigned long long>(bytes));
}

size_t AlgorithmTable::class_start(int k) {
  return k == 0 ? 0 : size_t{1} << (k - 1);
}

size_t AlgorithmTable::class_end(int k) {
  return k == 0 ? 1 : k >= 64 ? SIZE_MAX : size_t{1} << k;
}

AlgorithmTable AlgorithmTable::build(const GroupShape& shape, const CostModel& model,
                                     const std::string& overrides, bool leaders) {
  AlgorithmTable t;
  t.shape_ = shape;
  t.model_ = model;
  for (int c = 0; c < kCollectives; ++c) {
    for (int k = 0; k < kClasses; ++k) {
      // Priced across the class, not at one of its ends.
      t.chosen_[c][k] =
          cheapest_over(static_cast<Collective>(c), shape, model, static_cast<double>(class_start(k)),
                        static_cast<double>(class_end(k) - 1));
    }
  }
  std::stringstream ss(overrides);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    std::string body = item;
    const bool for_leaders = body.rfind("leaders.", 0) == 0;
    if (for_leaders) body = body.substr(8);
    if (for_leaders != leaders) continue;
    // collective=algorithm, or collective:LO-HI:algorithm
    std::string collective_text, range, algorithm_text;
    const size_t eq = body.find('=');
    const size_t colon = body.find(':');
    if (eq != std::string::npos && colon == std::string::npos) {
      collective_text = body.substr(0, eq);
      algorithm_text = body.substr(eq + 1);
    } else if (colon != std::string::npos && eq == std::string::npos) {
      const size_t second = body.find(':', colon + 1);
      if (second == std::string::npos) {
        t.unparsable_ = invalid_argument("COHORT_ALGO item '" + item +
                                         "' is not collective=algorithm or collective:LO-HI:algorithm");
        return t;
      }
      collective_text = body.substr(0, colon);
      range = body.substr(colon + 1, second - colon - 1);
      algorithm_text = body.substr(second + 1);
    } else {
      t.unparsable_ = invalid_argument("COHORT_ALGO item '" + item +
                                       "' is not collective=algorithm or collective:LO-HI:algorithm");
      return t;
    }
    Collective collective;
    if (!parse_collective(collective_text, &collective)) {
      t.unparsable_ = invalid_argument("COHORT_ALGO item '" + item + "' names unknown collective '" +
                                       collective_text + "'");
      return t;
    }
    Override o{0, SIZE_MAX, Algorithm::kDirect, ShmWay::kByRule, item};
    if (!range.empty()) {
      const size_t dash = range.find('-');
      const std::string lo = range.substr(0, dash),
                        hi = dash == std::string::npos ? "" : range.substr(dash + 1);
      if (dash == std::string::npos || !parse_size(lo, &o.from) || (!hi.empty() && !parse_size(hi, &o.to)) ||
          o.to <= o.from) {
        t.unparsable_ = invalid_argument("COHORT_ALGO item '" + item + "': '" + range +
                                         "' is not a range of bytes per rank LO-HI (e.g. 0-64K, 64K-)");
        return t;
      }
    }
    const int c = static_cast<int>(collective);
    // shm_direct.WAY: the algorithm, and its way within the host.
    const size_t dot = algorithm_text.find('.');
    if (dot != std::string::npos) {
      const std::string way_text = algorithm_text.substr(dot + 1);
      algorithm_text.resize(dot);
      std::string why;
      if (algorithm_text != algorithm_name(Algorithm::kShmDirect)) {
        why = "only shm_direct has ways to force (shm_direct.WAY)";
      } else if (!parse_shm_way(way_text, &o.way)) {
        const std::string ways = shm_ways_of(collective);
        why = "shm_direct has no way '" + way_text + "'" +
              (ways.empty() ? "" : " (" + std::string(collective_name(collective)) + "'s: " + ways + ")");
      } else {
        why = why_way_cannot_run(collective, o.way, ShmCallFacts{0, true, 0, false});
      }
      if (!why.empty()) {
        t.refused_[c] = invalid_argument("COHORT_ALGO item '" + item + "': " + why);
        continue;
      }
    }
    if (!parse_algorithm(algorithm_text, &o.algorithm)) {
      t.refused_[c] = invalid_argument("COHORT_ALGO names unknown algorithm '" + algorithm_text +
                                       "' (item '" + item + "')");
      continue;
    }
    const std::string why = why_cannot_run(o.algorithm, collective, shape);
    if (!why.empty()) {
      t.refused_[c] = invalid_argument("COHORT_ALGO item '" + item + "' cannot run on this group (" +
                                       shape.describe() + "): " + why);
      continue;
    }
    t.overrides_[c].push_back(o);
  }
  return t;
}

AlgorithmTable AlgorithmTable::for_config(const GroupShape& shape, bool leaders) {
  return build(shape, CostModel::from_config(), config_string(knobs::kAlgo), leaders);
}

Result<Algorithm> AlgorithmTable::choose(Collective collective, size_t bytes) const {
  const int c = static_cast<int>(collective);
  if (!unparsable_.ok()) return unparsable_;
  if (!refused_[c].ok()) return refused_[c];
  for (const Override& o : overrides_[c]) {
    if (bytes >= o.from && bytes < o.to) return o.algorithm;
  }
  return chosen_[c][class_of(bytes)];
}

ShmWay AlgorithmTable::forced_way(Collective collective, size_t bytes) const {
  for (const Override& o : overrides_[static_cast<int>(collective)]) {
    if (bytes >= o.from && bytes < o.to) return o.way;
  }
  return ShmWay::kByRule;
}

bool AlgorithmTable::varies(Collective collective) const {
  const int c = static_cast<int>(collective);
  if (!overrides_[c].empty()) return true;
  for (int k = 1; k < kClasses; ++k) {
    if (chosen_[c][k] != chosen_[c][0]) return true;
  }
  return false;
}

size_t AlgorithmTable::class_limit(Collective collective, size_t bytes) const {
  const int c = static_cast<int>(collective);
  int k = class_of(bytes);
  const Algorithm a = chosen_[c][k];
  while (k + 1 < kClasses && chosen_[c][k + 1] == a) ++k;
  return class_end(k) == SIZE_MAX ? SIZE_MAX : class_end(k) - 1;
}

std::string AlgorithmTable::describe() const {
  std::ostringstream out;
  out << "# " << shape_.describe() << "; bytes per rank (all_gather, reduce_scatter, gather, scatter, "
      << "all_to_all: a rank's block); LO-HI is LO <= bytes < HI; predicted time of the winner and the "
         "runner-up at the largest size of each run\n";
  for (int c = 0; c < kCollectives; ++c) {
    const Collective collective = static_cast<Collective>(c);
    if (!refused_[c].ok())
      out << collective_name(collective) << "  refused: " << refused_[c].message() << "\n";
    for (const Override& o : overrides_[c]) {
      out << collective_name(collective) << "  " << size_text(o.from) << "-" << size_text(o.to) << "  "
          << algorithm_name(o.algorithm)
          << (o.way == ShmWay::kByRule ? std::string() : std::string(".") + shm_way_name(o.way))
          << "  (forced by COHORT_ALGO)\n";
    }
    int k = 0;
    // Sizes up to 1 GiB a rank: the classes above only repeat the last.
    constexpr int kLastShown = 31;
    while (k <= kLastShown) {
      const Algorithm a = chosen_[c][k];
      int last = k;
      while (last + 1 <= kLastShown && chosen_[c][last + 1] == a) ++last;
      // A barrier moves no bytes: its price is its steps'.
      const double top = collective == Collective::kBarrier ? 0.0 : static_cast<double>(class_end(last) - 1);
      double best = registry_entry(a).cost(collective, shape_, model_, top);
      std::string runner_up;
      double second = 0;
      for (const AlgorithmEntry& e : algorithm_registry()) {
        if (e.algorithm == a || !e.can_run(collective, shape_)) continue;
        const double s = e.cost(collective, shape_, model_, top);
        if (runner_up.empty() || s < second) runner_up = e.name, second = s;
      }
      out << collective_name(collective) << "  " << size_text(class_start(k)) << "-"
          << (last == kLastShown ? "" : size_text(class_end(last))) << "  " << algorithm_name(a) << "  ("
          << time_text(best);
      if (!runner_up.empty()) out << "; " << runner_up << " " << time_text(second);
      // Taken by rule where measured faster than the model can tell
      // (AlgorithmEntry::taken_on): a dearer prediction is not a mistake.
      if (registry_entry(a).taken(shape_.topology) && !runner_up.empty() && second < best)
        out << "; taken here whatever the model says: measured faster";
      out << ")\n";
      k = last + 1;
    }
  }
  if (shape_.topology == Topology::kOneHost) out << describe_shm_ways();
  return out.str();
}

std::string AlgorithmTable::predictions(const std::vector<size_t>& sizes) const {
  std::ostringstream out;
  out << "| collective | bytes a rank | algorithm | predicted | lower bound | predicted / bound | bound by "
         "|\n"
      << "|---|---|---|---|---|---|---|\n";
  char ratio[32];
  for (int c = 0; c < kCollectives; ++c) {
    const Collective collective = static_cast<Collective>(c);
    if (collective == Collective::kBarrier) continue;
    for (size_t bytes : sizes) {
      const Algorithm a = chosen_[c][class_of(bytes)];
      const double predicted = registry_entry(a).cost(collective, shape_, model_, static_cast<double>(bytes));
      const LowerBound bound = lower_bound(collective, shape_, model_, static_cast<double>(bytes));
      std::snprintf(ratio, sizeof ratio, "%.2f", bound.seconds > 0 ? predicted / bound.seconds : 0.0);
      out << "| " << collective_name(collective) << " | " << size_text(bytes) << " | " << algorithm_name(a)
          << " | " << time_text(predicted) << " | " << time_text(bound.seconds) << " | " << ratio << " | "
          << (bound.latency_bound ? "latency" : "bytes") << " |\n";
    }
  }
  return out.str();
}

Result<Algorithm> choose_algorithm(Collective collective, size_t bytes, int world_size, Topology topology) {
  GroupShape shape = GroupShape::flat(world_size);
  if (topology == Topology::kOneHost) shape = GroupShape{world_size, 1, world_size, Topology::kOneHost};
  if (topology == Topology::kHosts) shape = GroupShape::of(world_size, (world_size + 1) / 2);
  return AlgorithmTable::for_config(shape).choose(collective, bytes);
}

}  // namespace cohort
