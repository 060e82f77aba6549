#include "report/csv_report.hpp"

#include <sstream>

namespace parbench {

namespace {

// alltoallv's skew, the imbalance it produced (max / mean bytes per rank, received and sent) and
// its direction (dispatch or combine), empty for the other collectives: the columns that tell a skewed point from a uniform one.
std::string skew_cells(const CollectiveResult& r) {
    std::ostringstream cells;
    cells.precision(10);
    if (r.skew) cells << r.skew->distribution << ',' << r.skew->seed;
    else cells << ',';
    cells << ',';
    if (r.imbalance) cells << r.imbalance->received.max_over_mean() << ',' << r.imbalance->sent.max_over_mean();
    else cells << ',';
    cells << ',' << (r.skew ? r.skew->direction : "");
    return cells.str();
}

// --repeat: the whole sweep that measured the point (from 1); empty for a run of one sweep.
std::string repetition_cell(const CollectiveResult& r) { return r.repetition ? std::to_string(*r.repetition) : ""; }

}  // namespace

std::string to_csv(const std::vector<CollectiveResult>& results) {
    std::ostringstream out;
    out.precision(10);
    out << "collective,bytes,requested_bytes,count,dtype,op,root,inplace,aggregation,reported_time_us,time_us_median,"
           "time_us_p95,time_us_mean,time_us_min,time_us_max,time_us_stddev,algbw_gbps,busbw_gbps,wrong,skipped,skew,skew_seed,"
           "imbalance_received,imbalance_sent,direction,repetition\n";
    for (const CollectiveResult& r : results) {
        out << r.collective << ',' << r.bytes << ',' << r.requested_bytes << ',' << r.count << ','
            << dtype_name(r.dtype) << ',' << (r.op ? std::string(reduce_op_name(*r.op)) : "") << ','
            << (r.root ? std::to_string(*r.root) : "") << ',' << (r.inplace ? "true" : "false") << ',';
        if (r.skipped) {
            out << ",,,,,,,,,,," << '"' << *r.skipped << '"' << ',' << skew_cells(r) << ',' << repetition_cell(r) << '\n';
            continue;
        }
        out << aggregation_name(r.aggregation) << ',' << r.reported_time_us << ',' << r.time_us.median << ','
            << r.time_us.p95 << ',' << r.time_us.mean << ',' << r.time_us.min << ',' << r.time_us.max << ','
            << (r.time_us.stddev ? std::to_string(*r.time_us.stddev) : "") << ',' << r.algbw_gbps << ','
            << r.busbw_gbps << ',' << (r.wrong ? std::to_string(*r.wrong) : "") << ",," << skew_cells(r) << ','
            << repetition_cell(r) << '\n';
    }
    return out.str();
}

}  // namespace parbench
