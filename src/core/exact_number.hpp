// A floating-point value as text that names it exactly: the shortest decimal that reads back
// as the same double (std::to_chars' round-trip guarantee), so two values print alike only
// when their bit patterns are equal ("1.000004" stays apart from "1", "-0" from "0"); a NaN,
// which reads back as no particular pattern, carries its bits ("nan(0x7ff8000000000001)").
// For what ranks must agree on and what reports record: a value rounded to six digits once
// let zipf:1 and zipf:1.000004 pass as the same skew (issue 32).
#pragma once

#include <string>

namespace parbench {

std::string exact_number_text(double value);

}  // namespace parbench
