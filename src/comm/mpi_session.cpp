#include "comm/mpi_session.hpp"

#include <algorithm>
#include <array>
#include <utility>
#include <string>

#include "core/error.hpp"

namespace parbench {

void check_mpi(int code, const char* call) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(code, text, &length);
    int rank = -1;
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    throw RuntimeFailure(std::string(call) + " failed on rank " + std::to_string(rank) + ": " +
                         std::string(text, static_cast<std::size_t>(length)));
}

namespace {

constexpr std::array<std::pair<MpiThreadLevel, std::string_view>, 4> level_names{{
    {MpiThreadLevel::single, "single"},
    {MpiThreadLevel::funneled, "funneled"},
    {MpiThreadLevel::serialized, "serialized"},
    {MpiThreadLevel::multiple, "multiple"},
}};

int mpi_constant(MpiThreadLevel level) {
    switch (level) {
        case MpiThreadLevel::single: return MPI_THREAD_SINGLE;
        case MpiThreadLevel::funneled: return MPI_THREAD_FUNNELED;
        case MpiThreadLevel::serialized: return MPI_THREAD_SERIALIZED;
        case MpiThreadLevel::multiple: return MPI_THREAD_MULTIPLE;
    }
    return MPI_THREAD_SINGLE;
}

MpiThreadLevel from_mpi_constant(int provided) {
    if (provided == MPI_THREAD_MULTIPLE) return MpiThreadLevel::multiple;
    if (provided == MPI_THREAD_SERIALIZED) return MpiThreadLevel::serialized;
    if (provided == MPI_THREAD_FUNNELED) return MpiThreadLevel::funneled;
    return MpiThreadLevel::single;
}

}  // namespace

std::string_view thread_level_name(MpiThreadLevel level) {
    for (const auto& [value, name] : level_names)
        if (value == level) return name;
    return "single";
}

std::optional<MpiThreadLevel> parse_thread_level(std::string_view name) {
    for (const auto& [value, level_name] : level_names)
        if (level_name == name) return value;
    return std::nullopt;
}

MpiSession::MpiSession(int& argc, char**& argv, MpiThreadLevel requested) : requested_level_(requested) {
    if (requested == MpiThreadLevel::single) {
        check_mpi(MPI_Init(&argc, &argv), "MPI_Init");
    } else {
        int provided = 0;
        check_mpi(MPI_Init_thread(&argc, &argv, mpi_constant(requested), &provided), "MPI_Init_thread");
    }
    // What the library actually gives (Open MPI's OMPI_MPI_THREAD_LEVEL can raise it).
    int provided = MPI_THREAD_SINGLE;
    check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
    provided_level_ = from_mpi_constant(provided);
    check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size_), "MPI_Comm_size");

    MPI_Comm node_comm = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank_, MPI_INFO_NULL, &node_comm),
              "MPI_Comm_split_type");
    check_mpi(MPI_Comm_rank(node_comm, &local_rank_), "MPI_Comm_rank(node)");
    check_mpi(MPI_Comm_size(node_comm, &local_size_), "MPI_Comm_size(node)");
    check_mpi(MPI_Comm_free(&node_comm), "MPI_Comm_free(node)");

    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    check_mpi(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
    std::vector<char> all(static_cast<std::size_t>(world_size_) * MPI_MAX_PROCESSOR_NAME);
    check_mpi(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                            MPI_COMM_WORLD),
              "MPI_Allgather(hostnames)");
    for (int r = 0; r < world_size_; ++r) hosts_by_rank_.emplace_back(&all[static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
}

MpiSession::~MpiSession() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

std::string MpiSession::library_version() const {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(text, &length);
    std::string version(text, static_cast<std::size_t>(length));
    const auto end = version.find_first_of(",\n");
    return version.substr(0, end);
}

}  // namespace parbench
