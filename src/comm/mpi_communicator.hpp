// The Communicator over MPI on host memory: the CPU backend, and the bootstrap that the
// NCCL backend uses to exchange its unique id.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"

namespace parbench {

// MPI has no 16-bit floating types: they travel as 2-byte types with user-defined
// reductions (computed in float, as NCCL does). Freed before MPI_Finalize with the last
// communicator that uses them.
class MpiTypes {
  public:
    MpiTypes();
    ~MpiTypes();
    MpiTypes(const MpiTypes&) = delete;
    MpiTypes& operator=(const MpiTypes&) = delete;
    MPI_Datatype datatype(DType type) const;
    // avg is reduced as sum; the communicator divides afterwards.
    MPI_Op op(DType type, ReduceOp op) const;

  private:
    MPI_Datatype float16_ = MPI_DATATYPE_NULL;
    MPI_Datatype bfloat16_ = MPI_DATATYPE_NULL;
    MPI_Op float16_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
    MPI_Op bfloat16_ops_[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
};

class MpiCommunicator : public Communicator {
  public:
    // A duplicate of MPI_COMM_WORLD, so parbench's traffic never matches a user's.
    static std::unique_ptr<MpiCommunicator> world();
    ~MpiCommunicator() override;

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    std::string_view backend() const override { return "mpi"; }
    MPI_Comm handle() const { return comm_; }
    std::unique_ptr<Communicator> split(int color, int key) override;
    [[noreturn]] void abort(int exit_code) override;
    // Runs `issue` with each MPI call it makes (and each host step of one: avg's division, a
    // copy) recorded instead of made, and returns them to repeat in order.
    std::unique_ptr<PreparedCall> prepare(std::function<void()> issue) override;
    // Records the calls as prepare() does, converting each count to MPI's int, and drops them.
    void check_arguments(const std::function<void()>& issue) override { (void)prepare(issue); }

  protected:
    void do_allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override;
    void do_allgather(const void* send, void* recv, std::size_t send_count, DType type) override;
    void do_reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type, ReduceOp op) override;
    void do_broadcast(const void* send, void* recv, std::size_t count, DType type, int root) override;
    void do_reduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op, int root) override;
    void do_alltoall(const void* send, void* recv, std::size_t count_per_peer, DType type) override;
    void do_alltoallv(const void* send, std::span<const std::size_t> send_counts,
                      std::span<const std::size_t> send_offsets, void* recv, std::span<const std::size_t> recv_counts,
                      std::span<const std::size_t> recv_offsets, DType type) override;
    void do_gather(const void* send, void* recv, std::size_t send_count, DType type, int root) override;
    void do_scatter(const void* send, void* recv, std::size_t recv_count, DType type, int root) override;
    void do_send(const void* buffer, std::size_t count, DType type, int peer) override;
    void do_recv(void* buffer, std::size_t count, DType type, int peer) override;
    void do_sendrecv(const void* send, int send_peer, void* recv, int recv_peer, std::size_t count,
                     DType type) override;
    void do_barrier() override;
    Request do_iallreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) override;
    Request do_iallgather(const void* send, void* recv, std::size_t send_count, DType type) override;
    Request do_ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                               ReduceOp op) override;
    Request do_isend(const void* buffer, std::size_t count, DType type, int peer) override;
    Request do_irecv(void* buffer, std::size_t count, DType type, int peer) override;
    Request do_ialltoallv(const void* send, std::span<const std::size_t> send_counts,
                          std::span<const std::size_t> send_offsets, void* recv,
                          std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_offsets,
                          DType type) override;

  private:
    // One MPI call with its arguments decided, named for the error message, or a host step
    // of a call (mpi_call null).
    struct Step {
        const char* mpi_call;
        std::function<int()> run;
    };
    class PreparedSteps;

    MpiCommunicator(MPI_Comm comm, std::shared_ptr<const MpiTypes> types);
    // Each element / size: avg's step after MPI's sum (callers issue it for avg alone).
    void divide_for_avg(void* data, std::size_t count, DType type) const;
    // Makes the call now, or keeps it while prepare() records.
    template <class Call>
    void issue(const char* mpi_call, Call&& call);
    template <class Work>
    void host_step(Work&& work);
    void refuse_while_recording(const char* mpi_call) const;

    MPI_Comm comm_;
    std::shared_ptr<const MpiTypes> types_;
    int rank_ = 0;
    int size_ = 1;
    std::vector<Step>* recording_ = nullptr;  // set while prepare() runs its `issue`
};

}  // namespace parbench
