// MPI's lifetime as an object: MPI_Init (or MPI_Init_thread above SINGLE) in the
// constructor, MPI_Finalize in the destructor. Also the facts about the job that every
// backend and report needs.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parbench {

// Throws RuntimeFailure naming the call and the MPI error string when code is not MPI_SUCCESS.
void check_mpi(int code, const char* call);

// MPI's thread support levels, lowest first. A higher level costs every small message
// latency in Open MPI (its progress engine takes locks), so a measurement asks for the
// lowest it needs: nothing in parbench calls MPI from a second thread.
enum class MpiThreadLevel { single, funneled, serialized, multiple };
std::string_view thread_level_name(MpiThreadLevel level);
std::optional<MpiThreadLevel> parse_thread_level(std::string_view name);

class MpiSession {
  public:
    // SINGLE calls plain MPI_Init, as the MPI benchmarks users compare with do.
    MpiSession(int& argc, char**& argv, MpiThreadLevel requested = MpiThreadLevel::single);
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;

    int world_rank() const { return world_rank_; }
    int world_size() const { return world_size_; }
    // Ranks on this host and this rank's index among them (the GPU it should take).
    int local_rank() const { return local_rank_; }
    int local_size() const { return local_size_; }
    // Host name of every rank, in rank order (identical on all ranks).
    const std::vector<std::string>& hosts_by_rank() const { return hosts_by_rank_; }
    std::string library_version() const;
    MpiThreadLevel thread_level_requested() const { return requested_level_; }
    MpiThreadLevel thread_level_provided() const { return provided_level_; }

  private:
    int world_rank_ = 0;
    int world_size_ = 1;
    int local_rank_ = 0;
    int local_size_ = 1;
    std::vector<std::string> hosts_by_rank_;
    MpiThreadLevel requested_level_ = MpiThreadLevel::single;
    MpiThreadLevel provided_level_ = MpiThreadLevel::single;
};

}  // namespace parbench
