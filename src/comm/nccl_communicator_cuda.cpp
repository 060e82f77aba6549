#include "comm/nccl_communicator.hpp"

#include <cstdlib>
#include <string>

#include "comm/mpi_session.hpp"
#include "core/error.hpp"
#include "device/cuda_check.hpp"

namespace parbench {
namespace {

// Every type of ours has an NCCL twin.
ncclDataType_t nccl_type(DType type) {
    switch (type) {
        case DType::float32: return ncclFloat32;
        case DType::float64: return ncclFloat64;
        case DType::float16: return ncclFloat16;
        case DType::bfloat16: return ncclBfloat16;
        case DType::int8: return ncclInt8;
        case DType::uint8: return ncclUint8;
        case DType::int32: return ncclInt32;
        case DType::uint32: return ncclUint32;
        case DType::int64: return ncclInt64;
        case DType::uint64: return ncclUint64;
    }
    throw std::logic_error("nccl_type: unknown DType");
}

ncclRedOp_t nccl_op(ReduceOp op) {
    switch (op) {
        case ReduceOp::sum: return ncclSum;
        case ReduceOp::prod: return ncclProd;
        case ReduceOp::max: return ncclMax;
        case ReduceOp::min: return ncclMin;
        case ReduceOp::avg: return ncclAvg;
    }
    throw std::logic_error("nccl_op: unknown ReduceOp");
}

const char* offset(const void* base, std::size_t bytes) { return static_cast<const char*>(base) + bytes; }
char* offset(void* base, std::size_t bytes) { return static_cast<char*>(base) + bytes; }

// ncclGroupStart/End as a scope: a call that throws inside the group still closes it, so
// the next NCCL call on this thread is not silently swallowed into a dead group.
class NcclGroup {
  public:
    NcclGroup() { check_nccl(ncclGroupStart(), "ncclGroupStart"); }
    ~NcclGroup() {
        if (open_) (void)ncclGroupEnd();
    }
    NcclGroup(const NcclGroup&) = delete;
    NcclGroup& operator=(const NcclGroup&) = delete;
    void end(ncclComm_t comm) {
        open_ = false;
        check_nccl(ncclGroupEnd(), "ncclGroupEnd", comm);
    }

  private:
    bool open_ = true;
};

void check_async_error(ncclComm_t comm) {
    ncclResult_t async = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError", comm);
    check_nccl(async, "NCCL operation in flight (asynchronous error)", comm);
}

// A call on the side stream: wait() orders the main stream after it, test() polls it.
class NcclRequest : public Request::Impl {
  public:
    NcclRequest(std::shared_ptr<CudaStream> main, std::unique_ptr<CudaEvent> done)
        : main_(std::move(main)), done_(std::move(done)) {}
    void wait() override {
        check_cuda(cudaStreamWaitEvent(main_->get(), done_->get(), 0), "cudaStreamWaitEvent(request)");
    }
    bool test() override {
        const cudaError_t state = cudaEventQuery(done_->get());
        if (state == cudaErrorNotReady) return false;
        check_cuda(state, "cudaEventQuery(request)");
        return true;
    }

  private:
    std::shared_ptr<CudaStream> main_;
    std::unique_ptr<CudaEvent> done_;
};

}  // namespace

// Pending work is waited for by ncclCommDestroy itself; errors cannot be reported from here.
NcclComm::~NcclComm() {
    if (comm_ != nullptr) (void)ncclCommDestroy(comm_);
}

HostComm::~HostComm() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

// The events and side stream belong to the GPU selected on this thread, which is the
// rank's GPU for as long as its CudaDevice lives.
NcclCommunicator::NcclCommunicator(std::shared_ptr<NcclComm> comm, std::shared_ptr<CudaStream> stream,
                                   std::unique_ptr<HostComm> host)
    : comm_(std::move(comm)), stream_(std::move(stream)), side_stream_(stream_->device()), host_(std::move(host)) {
    check_nccl(ncclCommUserRank(comm_->get(), &rank_), "ncclCommUserRank", comm_->get());
    check_nccl(ncclCommCount(comm_->get(), &size_), "ncclCommCount", comm_->get());
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) { return split_onto(color, key, stream_); }

std::unique_ptr<NcclCommunicator> NcclCommunicator::split_onto(int color, int key, std::shared_ptr<CudaStream> stream) {
    CurrentDeviceScope scope(stream_->device());
    const bool member = color >= 0;
    MPI_Comm host = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(host_->get(), member ? color : MPI_UNDEFINED, key, &host), "MPI_Comm_split");
    auto host_owner = std::make_unique<HostComm>(host);
    ncclComm_t child = nullptr;
    check_nccl(ncclCommSplit(comm_->get(), member ? color : NCCL_SPLIT_NOCOLOR, key, &child, nullptr),
               "ncclCommSplit", comm_->get());
    if (!member) return nullptr;
    return std::make_unique<NcclCommunicator>(std::make_shared<NcclComm>(child), std::move(stream),
                                              std::move(host_owner));
}

void NcclCommunicator::abort(int exit_code) {
    (void)ncclCommAbort(comm_->get());
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
}

std::function<void()> NcclCommunicator::async_error_check() const {
    std::weak_ptr<NcclComm> weak = comm_;
    return [weak] {
        if (const auto comm = weak.lock()) check_async_error(comm->get());
    };
}

void NcclCommunicator::synchronize() {
    const auto check = [this] { check_async_error(comm_->get()); };
    wait_for_stream(side_stream_.get(), check);
    wait_for_stream(main_stream(), check);
}

const void* NcclCommunicator::stage_in_scratch(const void* data, std::size_t bytes) {
    if (bytes > scratch_bytes_) {
        cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
        check_cuda(cudaStreamIsCapturing(main_stream(), &capturing), "cudaStreamIsCapturing");
        if (capturing != cudaStreamCaptureStatusNone)
            throw RuntimeFailure("in-place alltoall/sendrecv of " + std::to_string(bytes) +
                                 " bytes needs a scratch buffer, which cannot be allocated during CUDA graph "
                                 "capture; run the call once before capturing it");
        CurrentDeviceScope scope(stream_->device());
        synchronize();  // the old scratch may still be read by queued sends
        scratch_.reset();
        scratch_ = allocate_device_memory(bytes);
        scratch_bytes_ = bytes;
    }
    check_cuda(cudaMemcpyAsync(scratch_.get(), data, bytes, cudaMemcpyDeviceToDevice, main_stream()),
               "cudaMemcpyAsync(in-place staging)");
    return scratch_.get();
}

Request NcclCommunicator::on_side_stream(const std::function<void(cudaStream_t)>& work) {
    CurrentDeviceScope scope(stream_->device());
    check_cuda(cudaEventRecord(main_ready_.get(), main_stream()), "cudaEventRecord(main ready)");
    check_cuda(cudaStreamWaitEvent(side_stream_.get(), main_ready_.get(), 0), "cudaStreamWaitEvent(side)");
    work(side_stream_.get());
    auto done = std::make_unique<CudaEvent>();
    check_cuda(cudaEventRecord(done->get(), side_stream_.get()), "cudaEventRecord(request done)");
    return Request(std::make_unique<NcclRequest>(stream_, std::move(done)));
}

void NcclCommunicator::enqueue_allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op,
                                         cudaStream_t stream) {
    check_nccl(ncclAllReduce(send, recv, count, nccl_type(type), nccl_op(op), comm_->get(), stream), "ncclAllReduce",
               comm_->get());
}

// In place when send is this rank's slice of recv: NCCL detects that itself.
void NcclCommunicator::enqueue_allgather(const void* send, void* recv, std::size_t send_count, DType type,
                                         cudaStream_t stream) {
    check_nccl(ncclAllGather(send, recv, send_count, nccl_type(type), comm_->get(), stream), "ncclAllGather",
               comm_->get());
}

void NcclCommunicator::enqueue_reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                                              ReduceOp op, cudaStream_t stream) {
    check_nccl(ncclReduceScatter(send, recv, recv_count, nccl_type(type), nccl_op(op), comm_->get(), stream),
               "ncclReduceScatter", comm_->get());
}

void NcclCommunicator::enqueue_send(const void* buffer, std::size_t count, DType type, int peer,
                                    cudaStream_t stream) {
    check_nccl(ncclSend(buffer, count, nccl_type(type), peer, comm_->get(), stream), "ncclSend", comm_->get());
}

void NcclCommunicator::enqueue_recv(void* buffer, std::size_t count, DType type, int peer, cudaStream_t stream) {
    check_nccl(ncclRecv(buffer, count, nccl_type(type), peer, comm_->get(), stream), "ncclRecv", comm_->get());
}

void NcclCommunicator::do_allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) {
    enqueue_allreduce(send, recv, count, type, op, main_stream());
}

void NcclCommunicator::do_allgather(const void* send, void* recv, std::size_t send_count, DType type) {
    enqueue_allgather(send, recv, send_count, type, main_stream());
}

void NcclCommunicator::do_reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                                         ReduceOp op) {
    enqueue_reduce_scatter(send, recv, recv_count, type, op, main_stream());
}

void NcclCommunicator::do_broadcast(const void* send, void* recv, std::size_t count, DType type, int root) {
    check_nccl(ncclBroadcast(send, recv, count, nccl_type(type), root, comm_->get(), main_stream()), "ncclBroadcast",
               comm_->get());
}

void NcclCommunicator::do_reduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op,
                                 int root) {
    check_nccl(ncclReduce(send, recv, count, nccl_type(type), nccl_op(op), root, comm_->get(), main_stream()),
               "ncclReduce", comm_->get());
}

// Block q of send goes to rank q, block q of recv comes from rank q (this rank included:
// NCCL copies to itself), all in one group so that every pair proceeds at once.
void NcclCommunicator::do_alltoall(const void* send, void* recv, std::size_t count_per_peer, DType type) {
    const std::size_t block = count_per_peer * dtype_size(type);
    const void* source = send == recv ? stage_in_scratch(send, block * static_cast<std::size_t>(size_)) : send;
    NcclGroup group;
    for (int peer = 0; peer < size_; ++peer) {
        const std::size_t at = block * static_cast<std::size_t>(peer);
        enqueue_send(offset(source, at), count_per_peer, type, peer, main_stream());
        enqueue_recv(offset(recv, at), count_per_peer, type, peer, main_stream());
    }
    group.end(comm_->get());
}

// Every non-empty block as its own send or receive, all in one group. A pair whose block is
// empty posts nothing on either side (both ranks agree on the counts), so no zero-byte
// operation waits for a partner that never posts it.
void NcclCommunicator::enqueue_alltoallv(const void* send, std::span<const std::size_t> send_counts,
                                         std::span<const std::size_t> send_offsets, void* recv,
                                         std::span<const std::size_t> recv_counts,
                                         std::span<const std::size_t> recv_offsets, DType type, cudaStream_t stream) {
    const std::size_t element = dtype_size(type);
    NcclGroup group;
    for (int peer = 0; peer < size_; ++peer) {
        const auto q = static_cast<std::size_t>(peer);
        if (send_counts[q] > 0)
            enqueue_send(offset(send, send_offsets[q] * element), send_counts[q], type, peer, stream);
        if (recv_counts[q] > 0)
            enqueue_recv(offset(recv, recv_offsets[q] * element), recv_counts[q], type, peer, stream);
    }
    group.end(comm_->get());
}

void NcclCommunicator::do_alltoallv(const void* send, std::span<const std::size_t> send_counts,
                                    std::span<const std::size_t> send_offsets, void* recv,
                                    std::span<const std::size_t> recv_counts,
                                    std::span<const std::size_t> recv_offsets, DType type) {
    enqueue_alltoallv(send, send_counts, send_offsets, recv, recv_counts, recv_offsets, type, main_stream());
}

// The root's own block is a device copy (nothing to move in place); the others arrive by
// ncclRecv from each rank, grouped.
void NcclCommunicator::do_gather(const void* send, void* recv, std::size_t send_count, DType type, int root) {
    const std::size_t block = send_count * dtype_size(type);
    if (rank_ == root) {
        void* own = offset(recv, block * static_cast<std::size_t>(root));
        if (own != send)
            check_cuda(cudaMemcpyAsync(own, send, block, cudaMemcpyDeviceToDevice, main_stream()),
                       "cudaMemcpyAsync(gather own block)");
    }
    NcclGroup group;
    if (rank_ != root) enqueue_send(send, send_count, type, root, main_stream());
    if (rank_ == root)
        for (int peer = 0; peer < size_; ++peer)
            if (peer != root)
                enqueue_recv(offset(recv, block * static_cast<std::size_t>(peer)), send_count, type, peer,
                             main_stream());
    group.end(comm_->get());
}

void NcclCommunicator::do_scatter(const void* send, void* recv, std::size_t recv_count, DType type, int root) {
    const std::size_t block = recv_count * dtype_size(type);
    if (rank_ == root) {
        const void* own = offset(send, block * static_cast<std::size_t>(root));
        if (own != recv)
            check_cuda(cudaMemcpyAsync(recv, own, block, cudaMemcpyDeviceToDevice, main_stream()),
                       "cudaMemcpyAsync(scatter own block)");
    }
    NcclGroup group;
    if (rank_ != root) enqueue_recv(recv, recv_count, type, root, main_stream());
    if (rank_ == root)
        for (int peer = 0; peer < size_; ++peer)
            if (peer != root)
                enqueue_send(offset(send, block * static_cast<std::size_t>(peer)), recv_count, type, peer,
                             main_stream());
    group.end(comm_->get());
}

void NcclCommunicator::do_send(const void* buffer, std::size_t count, DType type, int peer) {
    enqueue_send(buffer, count, type, peer, main_stream());
}

void NcclCommunicator::do_recv(void* buffer, std::size_t count, DType type, int peer) {
    enqueue_recv(buffer, count, type, peer, main_stream());
}

void NcclCommunicator::do_sendrecv(const void* send, int send_peer, void* recv, int recv_peer, std::size_t count,
                                   DType type) {
    const void* source = send == recv ? stage_in_scratch(send, count * dtype_size(type)) : send;
    NcclGroup group;
    enqueue_send(source, count, type, send_peer, main_stream());
    enqueue_recv(recv, count, type, recv_peer, main_stream());
    group.end(comm_->get());
}

// All GPU work of this rank done, then all ranks meet on the host: what the harness needs
// before it starts a timer.
void NcclCommunicator::do_barrier() {
    synchronize();
    check_mpi(MPI_Barrier(host_->get()), "MPI_Barrier");
}

Request NcclCommunicator::do_iallreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) {
    return on_side_stream(
        [&](cudaStream_t stream) { enqueue_allreduce(send, recv, count, type, op, stream); });
}

Request NcclCommunicator::do_iallgather(const void* send, void* recv, std::size_t send_count, DType type) {
    return on_side_stream([&](cudaStream_t stream) { enqueue_allgather(send, recv, send_count, type, stream); });
}

Request NcclCommunicator::do_ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                                             ReduceOp op) {
    return on_side_stream(
        [&](cudaStream_t stream) { enqueue_reduce_scatter(send, recv, recv_count, type, op, stream); });
}

Request NcclCommunicator::do_isend(const void* buffer, std::size_t count, DType type, int peer) {
    return on_side_stream([&](cudaStream_t stream) { enqueue_send(buffer, count, type, peer, stream); });
}

Request NcclCommunicator::do_irecv(void* buffer, std::size_t count, DType type, int peer) {
    return on_side_stream([&](cudaStream_t stream) { enqueue_recv(buffer, count, type, peer, stream); });
}

// The counts are read while the group is enqueued, so the caller's may go once this returns.
Request NcclCommunicator::do_ialltoallv(const void* send, std::span<const std::size_t> send_counts,
                                       std::span<const std::size_t> send_offsets, void* recv,
                                       std::span<const std::size_t> recv_counts,
                                       std::span<const std::size_t> recv_offsets, DType type) {
    return on_side_stream([&](cudaStream_t stream) {
        enqueue_alltoallv(send, send_counts, send_offsets, recv, recv_counts, recv_offsets, type, stream);
    });
}

}  // namespace parbench
