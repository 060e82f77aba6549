#include "report/csv_report.hpp"

#include <sstream>

namespace parbench {

std::string to_csv(const std::vector<CollectiveResult>& results) {
    std::ostringstream out;
    out.precision(10);
    out << "collective,bytes,requested_bytes,count,dtype,op,root,inplace,aggregation,reported_time_us,time_us_median,"
           "time_us_p95,time_us_mean,time_us_min,time_us_max,time_us_stddev,algbw_gbps,busbw_gbps,wrong,skipped\n";
    for (const CollectiveResult& r : results) {
        out << r.collective << ',' << r.bytes << ',' << r.requested_bytes << ',' << r.count << ','
            << dtype_name(r.dtype) << ',' << (r.op ? std::string(reduce_op_name(*r.op)) : "") << ','
            << (r.root ? std::to_string(*r.root) : "") << ',' << (r.inplace ? "true" : "false") << ',';
        if (r.skipped) {
            out << ",,,,,,,,,,," << '"' << *r.skipped << '"' << '\n';
            continue;
        }
        out << aggregation_name(r.aggregation) << ',' << r.reported_time_us << ',' << r.time_us.median << ','
            << r.time_us.p95 << ',' << r.time_us.mean << ',' << r.time_us.min << ',' << r.time_us.max << ','
            << (r.time_us.stddev ? std::to_string(*r.time_us.stddev) : "") << ',' << r.algbw_gbps << ','
            << r.busbw_gbps << ',' << (r.wrong ? std::to_string(*r.wrong) : "") << ",\n";
    }
    return out.str();
}

}  // namespace parbench
