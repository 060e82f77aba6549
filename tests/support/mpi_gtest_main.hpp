// The main() of a gtest binary launched under mpirun: every rank runs every test against a
// World of the test's own (communicators, device) that lives between MPI's start and end;
// only the first rank prints gtest's report, and the exit code is the worst of all ranks, so
// a failure on any rank fails the test.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include "comm/mpi_session.hpp"

namespace parbench {

template <class World>
int run_all_tests_on_every_rank(int argc, char** argv, World*& world) {
    ::testing::InitGoogleTest(&argc, argv);
    MpiSession session(argc, argv);
    if (session.world_rank() != 0) {
        auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
    }
    int status = 0;
    {
        World instance;
        world = &instance;
        status = RUN_ALL_TESTS();
        world = nullptr;
    }
    int worst = 0;
    MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

}  // namespace parbench
