// In-job figures beside the benchmark: NCCL Inspector's records of a production job
// (report/inspector_log.hpp) grouped by (collective, size bucket, group size), each group set
// beside the matching point of parbench collective reports of the same group size: the job's
// busbw, the benchmark's, their ratio, and a verdict when the job reaches well below what the
// same group reaches alone.
//
// A size bucket is a power of two, [2^k, 2^(k+1)) bytes in parbench's size convention; the
// benchmark point is the report point of the same collective and rank count whose size is
// nearest (in log scale) inside the bucket, out of place where both placements were measured.
// The job's busbw is the median over the bucket's records (one per rank and operation), the
// figure Inspector's own exporter summarises (ext-profiler/inspector/exporter).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/compare.hpp"
#include "report/inspector_log.hpp"

namespace parbench {

// The verdicts' bounds: a job below `low` x the benchmark's busbw is LOW (the same group reaches
// more than twice that alone: contention, overlap with compute, a worse algorithm or transport in
// the job); above `high` the benchmark measured less than the job reaches (its setup differs).
struct InJobBounds {
    double low = 0.5;
    double high = 1.2;
};

struct InJobRow {
    std::string collective;
    std::uint64_t bucket_bytes = 0;  // 2^k: the bucket [2^k, 2^(k+1))
    int n_ranks = 0;
    int nnodes = 0;
    std::size_t records = 0;     // rank records in the bucket
    std::size_t operations = 0;  // distinct (communicator, coll_sn)
    std::size_t hosts = 0;
    double job_busbw_gbps = 0.0;  // median over the records
    double job_busbw_min_gbps = 0.0;
    double job_time_us = 0.0;     // median
    std::uint64_t job_bytes = 0;  // median size of the records
    // The benchmark point, when a report holds one.
    std::optional<double> bench_busbw_gbps;
    std::uint64_t bench_bytes = 0;
    std::string bench_report;
    int bench_hosts = 0;
    std::optional<double> ratio;  // job / benchmark busbw
    std::string verdict;          // "ok", "LOW", "above benchmark", "no benchmark point"
    std::string note;             // why the verdict, or what differs between the two setups
};

struct InJobComparison {
    std::vector<InJobRow> rows;
    std::size_t records = 0;
    std::size_t untimed_records = 0;  // coll_exec_time_us 0: no bandwidth in them, left out
    InJobBounds bounds;
};

// `records`: every Inspector record read; `reports`: parbench collective reports (checked as
// compare checks them). UsageError when there are no timed records.
InJobComparison compare_in_job(const std::vector<InspectorRecord>& records, const std::vector<LabelledReport>& reports,
                               const InJobBounds& bounds = {});
std::string render(const InJobComparison& comparison, CompareFormat format);

}  // namespace parbench
