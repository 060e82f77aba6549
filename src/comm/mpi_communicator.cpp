#include "comm/mpi_communicator.hpp"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/mpi_session.hpp"
#include "core/error.hpp"
#include "kernels/half_types.hpp"
#include "kernels/validation_data.hpp"

namespace parbench {
namespace {

int mpi_count(std::size_t count, const char* call) {
    if (count > static_cast<std::size_t>(INT_MAX))
        throw UsageError(std::string(call) + ": " + std::to_string(count) +
                         " elements exceed MPI's int count limit; use a smaller --size or a wider --dtype");
    return static_cast<int>(count);
}

// Counts or displacements for MPI, each checked against INT_MAX.
std::vector<int> mpi_counts(std::span<const std::size_t> values, const char* call) {
    std::vector<int> converted;
    converted.reserve(values.size());
    for (std::size_t value : values) converted.push_back(mpi_count(value, call));
    return converted;
}

// One tag for every point-to-point call, so a send matches a sendrecv's receive and the
// reverse; MPI keeps messages between a pair in order.
constexpr int point_to_point_tag = 0;

constexpr int op_index(ReduceOp op) {
    switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg: return 0;
        case ReduceOp::prod: return 1;
        case ReduceOp::max: return 2;
        case ReduceOp::min: return 3;
    }
    return 0;
}

template <typename Storage, int Index>
void reduce_16bit(void* in, void* inout, int* length, MPI_Datatype*) {
    const auto* a = static_cast<const Storage*>(in);
    auto* b = static_cast<Storage*>(inout);
    for (int i = 0; i < *length; ++i) {
        const float x = to_float(a[i]);
        const float y = to_float(b[i]);
        float result = 0.0f;
        if constexpr (Index == 0) result = x + y;
        if constexpr (Index == 1) result = x * y;
        if constexpr (Index == 2) result = x > y ? x : y;
        if constexpr (Index == 3) result = x < y ? x : y;
        if constexpr (std::is_same_v<Storage, Half>)
            b[i] = to_half(result);
        else
            b[i] = to_bfloat16(result);
    }
}

template <typename Storage>
void create_ops(MPI_Op (&ops)[4]) {
    check_mpi(MPI_Op_create(&reduce_16bit<Storage, 0>, 1, &ops[0]), "MPI_Op_create(sum16)");
    check_mpi(MPI_Op_create(&reduce_16bit<Storage, 1>, 1, &ops[1]), "MPI_Op_create(prod16)");
    check_mpi(MPI_Op_create(&reduce_16bit<Storage, 2>, 1, &ops[2]), "MPI_Op_create(max16)");
    check_mpi(MPI_Op_create(&reduce_16bit<Storage, 3>, 1, &ops[3]), "MPI_Op_create(min16)");
}

// Completes an MPI request, then runs what must follow it (avg's division). `arguments`:
// what MPI reads until the request completes (MPI_Ialltoallv's counts and displacements:
// MPI 4.0 sec. 6.12 forbids changing them before completion), kept alive with it.
class MpiRequest : public Request::Impl {
  public:
    MpiRequest(MPI_Request request, std::function<void()> after, std::vector<int> arguments = {})
        : request_(request), after_(std::move(after)), arguments_(std::move(arguments)) {}
    void wait() override {
        check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
        finish();
    }
    bool test() override {
        int done = 0;
        check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) finish();
        return done != 0;
    }

  private:
    void finish() {
        if (after_) after_();
        after_ = nullptr;
    }
    MPI_Request request_;
    std::function<void()> after_;
    std::vector<int> arguments_;
};

}  // namespace

MpiTypes::MpiTypes() {
    check_mpi(MPI_Type_contiguous(2, MPI_BYTE, &float16_), "MPI_Type_contiguous(float16)");
    check_mpi(MPI_Type_commit(&float16_), "MPI_Type_commit(float16)");
    check_mpi(MPI_Type_contiguous(2, MPI_BYTE, &bfloat16_), "MPI_Type_contiguous(bfloat16)");
    check_mpi(MPI_Type_commit(&bfloat16_), "MPI_Type_commit(bfloat16)");
    create_ops<Half>(float16_ops_);
    create_ops<BFloat16>(bfloat16_ops_);
}

MpiTypes::~MpiTypes() {
    for (MPI_Op& op : float16_ops_) MPI_Op_free(&op);
    for (MPI_Op& op : bfloat16_ops_) MPI_Op_free(&op);
    MPI_Type_free(&float16_);
    MPI_Type_free(&bfloat16_);
}

MPI_Datatype MpiTypes::datatype(DType type) const {
    switch (type) {
        case DType::float32: return MPI_FLOAT;
        case DType::float64: return MPI_DOUBLE;
        case DType::float16: return float16_;
        case DType::bfloat16: return bfloat16_;
        case DType::int8: return MPI_INT8_T;
        case DType::uint8: return MPI_UINT8_T;
        case DType::int32: return MPI_INT32_T;
        case DType::uint32: return MPI_UINT32_T;
        case DType::int64: return MPI_INT64_T;
        case DType::uint64: return MPI_UINT64_T;
    }
    return MPI_BYTE;
}

MPI_Op MpiTypes::op(DType type, ReduceOp op) const {
    if (type == DType::float16) return float16_ops_[op_index(op)];
    if (type == DType::bfloat16) return bfloat16_ops_[op_index(op)];
    switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg: return MPI_SUM;
        case ReduceOp::prod: return MPI_PROD;
        case ReduceOp::max: return MPI_MAX;
        case ReduceOp::min: return MPI_MIN;
    }
    return MPI_SUM;
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
    MPI_Comm comm = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
    return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(comm, std::make_shared<const MpiTypes>()));
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::shared_ptr<const MpiTypes> types)
    : comm_(comm), types_(std::move(types)) {
    check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

MpiCommunicator::~MpiCommunicator() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
    MPI_Comm comm = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(comm_, color, key, &comm), "MPI_Comm_split");
    return std::unique_ptr<Communicator>(new MpiCommunicator(comm, types_));
}

void MpiCommunicator::abort(int exit_code) {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
}

// MPI has no avg: the sum is exact for the validation data, then one division rounds once.
void MpiCommunicator::divide_for_avg(void* data, std::size_t count, DType type) const {
    // fp32 (every training gradient) in a loop the compiler vectorises: x / n in float equals the
    // generic path's double division rounded to float (53 >= 2 x 24 + 2 bits make the double
    // rounding innocuous), and the per-element type dispatch cost ~1 ns a float on a DP step.
    if (type == DType::float32) {
        float* values = static_cast<float*>(data);
        const float ranks = static_cast<float>(size_);
        for (std::size_t i = 0; i < count; ++i) values[i] /= ranks;
        return;
    }
    for (std::size_t i = 0; i < count; ++i)
        store_element(data, i, type, load_element(data, i, type) / size_);
}

template <class Call>
void MpiCommunicator::issue(const char* mpi_call, Call&& call) {
    if (recording_) {
        recording_->push_back(Step{mpi_call, std::forward<Call>(call)});
        return;
    }
    check_mpi(call(), mpi_call);
}

template <class Work>
void MpiCommunicator::host_step(Work&& work) {
    if (recording_) {
        recording_->push_back(Step{nullptr, [work = std::forward<Work>(work)] {
                                       work();
                                       return MPI_SUCCESS;
                                   }});
        return;
    }
    work();
}

void MpiCommunicator::refuse_while_recording(const char* mpi_call) const {
    if (recording_) throw std::logic_error(std::string("MpiCommunicator::prepare: ") + mpi_call + " is non-blocking");
}

// The steps alone: a timed repetition is the MPI call and nothing of parbench's.
class MpiCommunicator::PreparedSteps final : public PreparedCall {
  public:
    explicit PreparedSteps(std::vector<Step> steps) : steps_(std::move(steps)) {}
    void run() override {
        for (const Step& step : steps_) {
            const int code = step.run();
            if (step.mpi_call) check_mpi(code, step.mpi_call);
        }
    }

  private:
    std::vector<Step> steps_;
};

std::unique_ptr<PreparedCall> MpiCommunicator::prepare(std::function<void()> issue_calls) {
    // However `issue_calls` ends, the communicator makes its calls again afterwards.
    class Recording {
      public:
        Recording(MpiCommunicator& comm, std::vector<Step>& steps) : comm_(comm) { comm_.recording_ = &steps; }
        ~Recording() { comm_.recording_ = nullptr; }
        Recording(const Recording&) = delete;
        Recording& operator=(const Recording&) = delete;

      private:
        MpiCommunicator& comm_;
    };
    std::vector<Step> steps;
    {
        const PausedCounting paused(stats());  // recorded calls are not made, so not counted either
        const Recording recording(*this, steps);
        issue_calls();
    }
    return std::make_unique<PreparedSteps>(std::move(steps));
}

void MpiCommunicator::do_allreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) {
    const void* source = send == recv ? MPI_IN_PLACE : send;
    const int n = mpi_count(count, "MPI_Allreduce");
    const MPI_Datatype datatype = types_->datatype(type);
    const MPI_Op mpi_op = types_->op(type, op);
    issue("MPI_Allreduce", [=, comm = comm_] { return MPI_Allreduce(source, recv, n, datatype, mpi_op, comm); });
    if (op == ReduceOp::avg) host_step([=, this] { divide_for_avg(recv, count, type); });
}

void MpiCommunicator::do_allgather(const void* send, void* recv, std::size_t send_count, DType type) {
    const auto bytes = send_count * dtype_size(type);
    const bool in_place = send == static_cast<const char*>(recv) + bytes * static_cast<std::size_t>(rank_);
    const void* source = in_place ? MPI_IN_PLACE : send;
    const int n = mpi_count(send_count, "MPI_Allgather");
    const MPI_Datatype datatype = types_->datatype(type);
    issue("MPI_Allgather",
          [=, comm = comm_] { return MPI_Allgather(source, n, datatype, recv, n, datatype, comm); });
}

// NCCL's in-place reduce-scatter leaves the result at the rank's own slice; MPI's at the
// start of the buffer, so it is moved into place afterwards.
void MpiCommunicator::do_reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                                        ReduceOp op) {
    const auto bytes = recv_count * dtype_size(type);
    char* own_slice = static_cast<char*>(const_cast<void*>(send)) + bytes * static_cast<std::size_t>(rank_);
    const bool in_place = recv == own_slice;
    void* target = in_place ? const_cast<void*>(send) : recv;
    const void* source = in_place ? MPI_IN_PLACE : send;
    const int n = mpi_count(recv_count, "MPI_Reduce_scatter_block");
    const MPI_Datatype datatype = types_->datatype(type);
    const MPI_Op mpi_op = types_->op(type, op);
    issue("MPI_Reduce_scatter_block",
          [=, comm = comm_] { return MPI_Reduce_scatter_block(source, target, n, datatype, mpi_op, comm); });
    if (in_place && rank_ != 0) host_step([=] { std::memmove(own_slice, target, bytes); });
    if (op == ReduceOp::avg) host_step([=, this] { divide_for_avg(recv, recv_count, type); });
}

void MpiCommunicator::do_broadcast(const void* send, void* recv, std::size_t count, DType type, int root) {
    if (rank_ == root && send != recv) host_step([=] { std::memcpy(recv, send, count * dtype_size(type)); });
    const int n = mpi_count(count, "MPI_Bcast");
    const MPI_Datatype datatype = types_->datatype(type);
    issue("MPI_Bcast", [=, comm = comm_] { return MPI_Bcast(recv, n, datatype, root, comm); });
}

void MpiCommunicator::do_reduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op,
                                int root) {
    const void* source = (rank_ == root && send == recv) ? MPI_IN_PLACE : send;
    const int n = mpi_count(count, "MPI_Reduce");
    const MPI_Datatype datatype = types_->datatype(type);
    const MPI_Op mpi_op = types_->op(type, op);
    issue("MPI_Reduce", [=, comm = comm_] { return MPI_Reduce(source, recv, n, datatype, mpi_op, root, comm); });
    if (rank_ == root && op == ReduceOp::avg) host_step([=, this] { divide_for_avg(recv, count, type); });
}

void MpiCommunicator::do_alltoall(const void* send, void* recv, std::size_t count_per_peer, DType type) {
    const void* source = send == recv ? MPI_IN_PLACE : send;
    const int n = mpi_count(count_per_peer, "MPI_Alltoall");
    const MPI_Datatype datatype = types_->datatype(type);
    issue("MPI_Alltoall", [=, comm = comm_] { return MPI_Alltoall(source, n, datatype, recv, n, datatype, comm); });
}

// MPI takes int counts and displacements; each is checked against INT_MAX, so a buffer
// whose blocks start past 2^31 elements is refused rather than wrapped.
void MpiCommunicator::do_alltoallv(const void* send, std::span<const std::size_t> send_counts,
                                   std::span<const std::size_t> send_offsets, void* recv,
                                   std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_offsets,
                                   DType type) {
    const auto ints = [](std::span<const std::size_t> values) { return mpi_counts(values, "MPI_Alltoallv"); };
    const MPI_Datatype datatype = types_->datatype(type);
    issue("MPI_Alltoallv", [=, send_n = ints(send_counts), send_at = ints(send_offsets), recv_n = ints(recv_counts),
                            recv_at = ints(recv_offsets), comm = comm_] {
        return MPI_Alltoallv(send, send_n.data(), send_at.data(), datatype, recv, recv_n.data(), recv_at.data(),
                             datatype, comm);
    });
}

void MpiCommunicator::do_gather(const void* send, void* recv, std::size_t send_count, DType type, int root) {
    const auto bytes = send_count * dtype_size(type);
    const bool in_place =
        rank_ == root && send == static_cast<const char*>(recv) + bytes * static_cast<std::size_t>(rank_);
    const void* source = in_place ? MPI_IN_PLACE : send;
    const int n = mpi_count(send_count, "MPI_Gather");
    const MPI_Datatype datatype = types_->datatype(type);
    issue("MPI_Gather",
          [=, comm = comm_] { return MPI_Gather(source, n, datatype, recv, n, datatype, root, comm); });
}

void MpiCommunicator::do_scatter(const void* send, void* recv, std::size_t recv_count, DType type, int root) {
    const auto bytes = recv_count * dtype_size(type);
    const bool in_place =
        rank_ == root && recv == static_cast<const char*>(send) + bytes * static_cast<std::size_t>(rank_);
    void* target = in_place ? MPI_IN_PLACE : recv;
    const int n = mpi_count(recv_count, "MPI_Scatter");
    const MPI_Datatype datatype = types_->datatype(type);
    issue("MPI_Scatter",
          [=, comm = comm_] { return MPI_Scatter(send, n, datatype, target, n, datatype, root, comm); });
}

void MpiCommunicator::do_send(const void* buffer, std::size_t count, DType type, int peer) {
    const int n = mpi_count(count, "MPI_Send");
    const MPI_Datatype datatype = types_->datatype(type);
    issue("MPI_Send", [=, comm = comm_] { return MPI_Send(buffer, n, datatype, peer, point_to_point_tag, comm); });
}

void MpiCommunicator::do_recv(void* buffer, std::size_t count, DType type, int peer) {
    const int n = mpi_count(count, "MPI_Recv");
    const MPI_Datatype datatype = types_->datatype(type);
    issue("MPI_Recv", [=, comm = comm_] {
        return MPI_Recv(buffer, n, datatype, peer, point_to_point_tag, comm, MPI_STATUS_IGNORE);
    });
}

void MpiCommunicator::do_sendrecv(const void* send, int send_peer, void* recv, int recv_peer, std::size_t count,
                                  DType type) {
    const int n = mpi_count(count, "MPI_Sendrecv");
    const MPI_Datatype datatype = types_->datatype(type);
    issue("MPI_Sendrecv", [=, comm = comm_] {
        return MPI_Sendrecv(send, n, datatype, send_peer, point_to_point_tag, recv, n, datatype, recv_peer,
                            point_to_point_tag, comm, MPI_STATUS_IGNORE);
    });
}

void MpiCommunicator::do_barrier() {
    issue("MPI_Barrier", [comm = comm_] { return MPI_Barrier(comm); });
}

Request MpiCommunicator::do_iallreduce(const void* send, void* recv, std::size_t count, DType type, ReduceOp op) {
    refuse_while_recording("MPI_Iallreduce");
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, mpi_count(count, "MPI_Iallreduce"),
                             types_->datatype(type), types_->op(type, op), comm_, &request),
              "MPI_Iallreduce");
    std::function<void()> after;
    if (op == ReduceOp::avg) after = [this, recv, count, type] { divide_for_avg(recv, count, type); };
    return Request(std::make_unique<MpiRequest>(request, std::move(after)));
}

Request MpiCommunicator::do_iallgather(const void* send, void* recv, std::size_t send_count, DType type) {
    refuse_while_recording("MPI_Iallgather");
    const auto bytes = send_count * dtype_size(type);
    const bool in_place = send == static_cast<const char*>(recv) + bytes * static_cast<std::size_t>(rank_);
    const int count = mpi_count(send_count, "MPI_Iallgather");
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, count, types_->datatype(type), recv, count,
                             types_->datatype(type), comm_, &request),
              "MPI_Iallgather");
    return Request(std::make_unique<MpiRequest>(request, nullptr));
}

Request MpiCommunicator::do_ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType type,
                                            ReduceOp op) {
    refuse_while_recording("MPI_Ireduce_scatter_block");
    if (recv == static_cast<const char*>(send) + recv_count * dtype_size(type) * static_cast<std::size_t>(rank_))
        throw UsageError("ireduce_scatter: in-place is not supported by the MPI backend's non-blocking form");
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ireduce_scatter_block(send, recv, mpi_count(recv_count, "MPI_Ireduce_scatter_block"),
                                        types_->datatype(type), types_->op(type, op), comm_, &request),
              "MPI_Ireduce_scatter_block");
    std::function<void()> after;
    if (op == ReduceOp::avg)
        after = [this, recv, recv_count, type] { divide_for_avg(recv, recv_count, type); };
    return Request(std::make_unique<MpiRequest>(request, std::move(after)));
}

Request MpiCommunicator::do_isend(const void* buffer, std::size_t count, DType type, int peer) {
    refuse_while_recording("MPI_Isend");
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Isend(buffer, mpi_count(count, "MPI_Isend"), types_->datatype(type), peer, point_to_point_tag, comm_,
                        &request),
              "MPI_Isend");
    return Request(std::make_unique<MpiRequest>(request, nullptr));
}

// One vector holds the four arrays (send counts, send displacements, receive counts, receive
// displacements, n each), owned by the request until MPI_Ialltoallv completes.
Request MpiCommunicator::do_ialltoallv(const void* send, std::span<const std::size_t> send_counts,
                                      std::span<const std::size_t> send_offsets, void* recv,
                                      std::span<const std::size_t> recv_counts,
                                      std::span<const std::size_t> recv_offsets, DType type) {
    refuse_while_recording("MPI_Ialltoallv");
    const std::size_t n = send_counts.size();
    std::vector<int> arguments;
    arguments.reserve(4 * n);
    for (auto values : {send_counts, send_offsets, recv_counts, recv_offsets}) {
        const std::vector<int> converted = mpi_counts(values, "MPI_Ialltoallv");
        arguments.insert(arguments.end(), converted.begin(), converted.end());
    }
    const MPI_Datatype datatype = types_->datatype(type);
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Ialltoallv(send, arguments.data(), arguments.data() + n, datatype, recv, arguments.data() + 2 * n,
                             arguments.data() + 3 * n, datatype, comm_, &request),
              "MPI_Ialltoallv");
    return Request(std::make_unique<MpiRequest>(request, nullptr, std::move(arguments)));
}

Request MpiCommunicator::do_irecv(void* buffer, std::size_t count, DType type, int peer) {
    refuse_while_recording("MPI_Irecv");
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Irecv(buffer, mpi_count(count, "MPI_Irecv"), types_->datatype(type), peer, point_to_point_tag, comm_,
                        &request),
              "MPI_Irecv");
    return Request(std::make_unique<MpiRequest>(request, nullptr));
}

}  // namespace parbench
