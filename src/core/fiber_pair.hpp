// Two cooperative fibers on the calling thread (POSIX makecontext/swapcontext), run in a fixed,
// deterministic alternation: the first runs until it calls yield() (or ends), then the second
// until it yields (or ends), then the first again, and so on; once one has ended the other runs
// to its end, its yields returning at once. Nothing is preemptive and nothing runs concurrently:
// a switch happens only inside yield(), so which code runs between two switches is a function
// of the program alone, the same on every rank that runs the same pair of functions.
//
// What it is for: the 1F1B executor's pairing of one micro-batch's forward with another's
// backward (--moe-a2a-overlap-1f1b, train/pipeline/pipeline_executor.cpp), each posting its
// MoE all-to-all and yielding, so the partner computes while the exchange travels.
//
// Each fiber owns a stack of its own (mmap'd, with a guard page below it so an overflow faults
// instead of writing over the heap), allocated once and reused by every run().
#pragma once

#include <ucontext.h>

#include <cstddef>
#include <exception>
#include <functional>

namespace parbench {

// One mmap'd stack with a PROT_NONE guard page at its low end (stacks grow down); unmapped on
// destruction. Pages are touched only as the fiber uses them.
class FiberStack {
  public:
    explicit FiberStack(std::size_t bytes);
    ~FiberStack();
    FiberStack(const FiberStack&) = delete;
    FiberStack& operator=(const FiberStack&) = delete;
    void* base() const { return usable_; }
    std::size_t size() const { return usable_bytes_; }

  private:
    void* mapping_ = nullptr;
    std::size_t mapping_bytes_ = 0;
    void* usable_ = nullptr;
    std::size_t usable_bytes_ = 0;
};

class FiberPair {
  public:
    // 8 MiB each by default: the training code's deepest calls (BLAS, MPI) run on them.
    explicit FiberPair(std::size_t stack_bytes = std::size_t{8} << 20);
    FiberPair(const FiberPair&) = delete;
    FiberPair& operator=(const FiberPair&) = delete;

    // Runs `first` and `second` as above and returns when both have ended. An exception that
    // leaves either is rethrown here once the pair stops; the other fiber is then abandoned
    // where it stood (its stack's objects are not destroyed): the run cannot go on after it.
    void run(const std::function<void()>& first, const std::function<void()>& second);
    // From inside a running fiber: hands the thread to the partner if it has not ended, else
    // returns at once. Outside run() it returns at once.
    void yield();
    // The fiber running now: 0 or 1; -1 outside run().
    int current() const { return current_; }
    // Switches made by the last run() (from one fiber to the other, either way).
    int switches() const { return switches_; }

  private:
    static void entry(unsigned int high, unsigned int low);  // makecontext's argument convention
    void run_current();
    struct Fiber {
        FiberStack stack;
        ucontext_t context{};
        const std::function<void()>* body = nullptr;
        bool ended = true;
        std::exception_ptr error;
        explicit Fiber(std::size_t bytes) : stack(bytes) {}
    };
    Fiber fibers_[2];
    ucontext_t scheduler_{};
    const void* scheduler_stack_ = nullptr;  // the thread's stack, for AddressSanitizer's switch notes
    std::size_t scheduler_stack_size_ = 0;
    int current_ = -1;
    int switches_ = 0;
};

}  // namespace parbench
