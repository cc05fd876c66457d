// point_of_view.h: rewording a rank's message for another rank to read.
//
// Errors are written by the rank that saw them, in its own words: "rank 0
// is in all_reduce #2 while this rank is in broadcast #2". When a failing
// rank tells its peers why (transport failure relay), that text travels
// with the rank that wrote it (relayed_cause.h); read as is on rank 0 it
// would say the opposite of the truth. So the reader turns the writer's
// "this rank" into the writer's number, and its own number into "this
// rank (N)".
#pragma once

#include <string>

namespace cohort {

// as_said_by rewrites `text`, written by `rank`, for any reader: "this
// rank" (and "this rank (N)", a relayed text) becomes "rank N".
std::string as_said_by(const std::string& text, int rank);

// as_read_by rewrites a text from as_said_by for `rank`: "rank N" (the
// whole number, not "ranks [..]") becomes "this rank (N)".
std::string as_read_by(const std::string& text, int rank);

}  // namespace cohort
