// The Communicator over NCCL on GPU memory, one GPU per rank. Every call is enqueued on the
// rank's device stream (shared with its CudaDevice), so "blocking" means stream-ordered, as
// in NCCL itself: the host returns once the work is queued, and synchronize() waits for it.
//
// Collectives NCCL lacks are built from grouped ncclSend/ncclRecv: alltoall, alltoallv,
// gather, scatter and sendrecv. In place, alltoall and sendrecv first copy the send data to a
// scratch buffer (a send and a receive on one buffer would race); the copy is part of the
// measured time, since it is what in-place costs. The scratch grows to the largest such
// call and is kept, so only the first call of a size allocates (never inside a graph).
//
// Non-blocking calls go to a side stream that first waits for the main stream; the
// Request's wait() makes the main stream wait for the call's completion event (the host
// does not block) and test() asks whether it has completed. The side stream runs its calls
// in issue order, so two ranks that each isend before they irecv large messages deadlock,
// as with NCCL itself: exchange with sendrecv instead.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <functional>
#include <memory>

#include "comm/communicator.hpp"
#include "device/cuda_device.hpp"

namespace parbench {

// An owned ncclComm_t, destroyed with ncclCommDestroy.
class NcclComm {
  public:
    explicit NcclComm(ncclComm_t comm) : comm_(comm) {}
    ~NcclComm();
    NcclComm(const NcclComm&) = delete;
    NcclComm& operator=(const NcclComm&) = delete;
    ncclComm_t get() const { return comm_; }

  private:
    ncclComm_t comm_;
};

// An owned MPI communicator over the same ranks, on host memory: barriers need no GPU.
class HostComm {
  public:
    explicit HostComm(MPI_Comm comm) : comm_(comm) {}
    ~HostComm();
    HostComm(const HostComm&) = delete;
    HostComm& operator=(const HostComm&) = delete;
    MPI_Comm get() const { return comm_; }

  private:
    MPI_Comm comm_;
};

class NcclCommunicator : public Communicator {
  public:
    NcclCommunicator(std::shared_ptr<NcclComm> comm, std::shared_ptr<CudaStream> stream,
                     std::unique_ptr<HostComm> host);

    int rank() const override { return rank_; }
    int size() const override { return size_; }
    std::string_view backend() const override { return "nccl"; }
    // A negative color leaves this rank out (NCCL_SPLIT_NOCOLOR): it gets nullptr.
    std::unique_ptr<Communicator> split(int color, int key) override;
    // split(color, key) with the child's calls enqueued on `stream` instead of this stream: a
    // second communicator whose collectives run beside this one's (--background collective).
    std::unique_ptr<NcclCommunicator> split_onto(int color, int key, std::shared_ptr<CudaStream> stream);
    // ncclCommAbort first, so no kernel waiting for a lost peer keeps the GPU, then MPI_Abort.
    [[noreturn]] void abort(int exit_code) override;
    // Polls both streams and NCCL's asynchronous error instead of blocking in the driver, so
    // a failed peer surfaces as an error and a --timeout watchdog can still end the job.
    void synchronize() override;

    // Throws RuntimeFailure when NCCL reports an asynchronous error on this communicator;
    // safe to keep after the communicator is gone (it then checks nothing).
    std::function<void()> async_error_check() const;

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
    // Grouped ncclSend/ncclRecv on the side stream. The caller's semantics are those of every
    // request here: wait() only orders the main stream after the exchange (the host does not
    // block), so the received rows may be read by work enqueued on the main stream after
    // wait(), and by the host only after synchronize(); test() true means they have landed.
    Request do_ialltoallv(const void* send, std::span<const std::size_t> send_counts,
                          std::span<const std::size_t> send_offsets, void* recv,
                          std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_offsets,
                          DType type) override;

  private:
    cudaStream_t main_stream() const { return stream_->get(); }
    // Enqueues `work` on the side stream after everything already on the main stream.
    Request on_side_stream(const std::function<void(cudaStream_t)>& work);
    // Copies `bytes` of `data` into the scratch buffer on the main stream; returns the copy.
    const void* stage_in_scratch(const void* data, std::size_t bytes);
    void enqueue_allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op,
                           cudaStream_t stream);
    void enqueue_allgather(const void* send, void* recv, std::size_t send_count, DType type, cudaStream_t stream);
    void enqueue_reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type, ReduceOp op,
                                cudaStream_t stream);
    void enqueue_send(const void* buffer, std::size_t count, DType type, int peer, cudaStream_t stream);
    void enqueue_recv(void* buffer, std::size_t count, DType type, int peer, cudaStream_t stream);
    void enqueue_alltoallv(const void* send, std::span<const std::size_t> send_counts,
                           std::span<const std::size_t> send_offsets, void* recv,
                           std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_offsets,
                           DType type, cudaStream_t stream);

    std::shared_ptr<NcclComm> comm_;
    std::shared_ptr<CudaStream> stream_;
    CudaStream side_stream_;
    CudaEvent main_ready_;  // recorded on the main stream when the side stream must catch up
    std::unique_ptr<HostComm> host_;
    int rank_ = 0;
    int size_ = 1;
    std::shared_ptr<void> scratch_;
    std::size_t scratch_bytes_ = 0;
};

}  // namespace parbench
