// config_registry.h: typed reads of the knobs declared in common/knobs.h.
//
// Values are read from the environment once, at first use, and cached;
// set_config (cohort/config.h) replaces a value for this process. A value of
// the wrong type throws InvalidArgument naming the knob and the value.
#pragma once

#include <cstdint>
#include <string>

#include "common/knobs.h"

namespace cohort {

bool config_bool(const KnobSpec& knob);
int64_t config_int(const KnobSpec& knob);
double config_float(const KnobSpec& knob);
std::string config_string(const KnobSpec& knob);

// config_generation changes whenever set_config or reset_config runs, so
// that a hot path can cache a parsed value and notice when to reparse.
uint64_t config_generation();

}  // namespace cohort
