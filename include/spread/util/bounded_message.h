#pragma once
// An error message as the command line prints it: on one line, of bounded length.
#include <cstddef>
#include <string>

namespace spread {

// `message` in at most about `limit` bytes: the middle of a longer one left out, cut between UTF-8 characters. An
// error that quotes what a hostile file holds (a key, a value) would otherwise print all of it: lines of 20-60 KB
// were seen.
std::string bounded_message(const std::string& message, size_t limit = 2000);

}  // namespace spread
