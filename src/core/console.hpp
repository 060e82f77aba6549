// Console lines written whole. std::cerr is unbuffered, so `cerr << a << b` is one write per
// piece, and under mpirun, which forwards each rank's stdout and stderr as they come, another
// stream's output lands between the pieces ("warning: of #" on a fresh machine). Build the
// line first, then write it once.
#pragma once

#include <ostream>
#include <string>

namespace parbench {

// Writes `line` and a newline in one write, then flushes.
inline void write_line(std::ostream& out, const std::string& line) { out << (line + '\n') << std::flush; }

}  // namespace parbench
