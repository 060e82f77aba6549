// MPI's lifetime as an object: MPI_Init_thread in the constructor, MPI_Finalize in the
// destructor. Also the facts about the job that every backend and report needs.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace parbench {

// Throws RuntimeFailure naming the call and the MPI error string when code is not MPI_SUCCESS.
void check_mpi(int code, const char* call);

class MpiSession {
  public:
    MpiSession(int& argc, char**& argv);
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

  private:
    int world_rank_ = 0;
    int world_size_ = 1;
    int local_rank_ = 0;
    int local_size_ = 1;
    std::vector<std::string> hosts_by_rank_;
};

}  // namespace parbench
