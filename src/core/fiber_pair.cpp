#include "core/fiber_pair.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace parbench {
namespace {

[[noreturn]] void fail(const char* call) {
    throw std::runtime_error(std::string("fiber: ") + call + " failed: " + std::strerror(errno));
}

// AddressSanitizer must be told of every stack switch, else it takes the fibers' frames for
// overflows of the thread's stack (scripts/test.sh --sanitize); no-ops in other builds.
// `fake_stack`: where the leaving context's fake stack is kept (null: the leaving fiber ends).
void switch_begins([[maybe_unused]] void** fake_stack, [[maybe_unused]] const void* bottom,
                   [[maybe_unused]] std::size_t size) {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#endif
}
void switch_ends([[maybe_unused]] void* fake_stack, [[maybe_unused]] const void** bottom_old,
                 [[maybe_unused]] std::size_t* size_old) {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake_stack, bottom_old, size_old);
#endif
}

}  // namespace

FiberStack::FiberStack(std::size_t bytes) {
    const long page_size = sysconf(_SC_PAGESIZE);
    if (page_size <= 0) fail("sysconf(_SC_PAGESIZE)");
    const auto page = static_cast<std::size_t>(page_size);
    usable_bytes_ = (bytes + page - 1) / page * page;
    mapping_bytes_ = usable_bytes_ + page;
    mapping_ = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
    if (mapping_ == MAP_FAILED) {
        mapping_ = nullptr;
        fail("mmap");
    }
    if (mprotect(mapping_, page, PROT_NONE) != 0) {
        const int saved = errno;
        munmap(mapping_, mapping_bytes_);
        errno = saved;
        fail("mprotect");
    }
    usable_ = static_cast<char*>(mapping_) + page;
}

FiberStack::~FiberStack() {
    if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);  // nothing to do if it fails in a destructor
}

FiberPair::FiberPair(std::size_t stack_bytes) : fibers_{Fiber(stack_bytes), Fiber(stack_bytes)} {}

void FiberPair::entry(unsigned int high, unsigned int low) {
    // makecontext passes int arguments only: the pair's address comes in two 32-bit halves.
    const std::uintptr_t address = (static_cast<std::uintptr_t>(high) << 32) | static_cast<std::uintptr_t>(low);
    auto* pair = reinterpret_cast<FiberPair*>(address);
    pair->run_current();
    // Returning ends the fiber: uc_link resumes the scheduler.
}

void FiberPair::run_current() {
    Fiber& fiber = fibers_[current_];
    switch_ends(nullptr, &scheduler_stack_, &scheduler_stack_size_);  // learns the scheduler's stack
    try {
        (*fiber.body)();
    } catch (...) {  // an exception must not unwind past makecontext's frame
        fiber.error = std::current_exception();
    }
    fiber.ended = true;
    switch_begins(nullptr, scheduler_stack_, scheduler_stack_size_);  // this fiber's frames end here
}

void FiberPair::run(const std::function<void()>& first, const std::function<void()>& second) {
    if (current_ >= 0) throw std::logic_error("FiberPair::run: called from inside one of its fibers");
    const std::function<void()>* bodies[2] = {&first, &second};
    const auto address = reinterpret_cast<std::uintptr_t>(this);
    for (int i = 0; i < 2; ++i) {
        Fiber& fiber = fibers_[i];
        if (getcontext(&fiber.context) != 0) fail("getcontext");
        fiber.context.uc_stack.ss_sp = fiber.stack.base();
        fiber.context.uc_stack.ss_size = fiber.stack.size();
        fiber.context.uc_link = &scheduler_;
        makecontext(&fiber.context, reinterpret_cast<void (*)()>(&FiberPair::entry), 2,
                    static_cast<unsigned int>(address >> 32), static_cast<unsigned int>(address & 0xffffffffu));
        fiber.body = bodies[i];
        fiber.ended = false;
        fiber.error = nullptr;
    }
    switches_ = 0;
    // The scheduler resumes the fibers in turn: a yield (or a fiber's end) comes back here.
    int next = 0;
    while (!fibers_[0].ended || !fibers_[1].ended) {
        if (fibers_[next].ended) next = 1 - next;
        current_ = next;
        void* fake_stack = nullptr;
        switch_begins(&fake_stack, fibers_[next].stack.base(), fibers_[next].stack.size());
        const int swapped = swapcontext(&scheduler_, &fibers_[next].context);
        switch_ends(fake_stack, nullptr, nullptr);
        current_ = -1;
        if (swapped != 0) fail("swapcontext");
        for (Fiber& fiber : fibers_)
            if (fiber.error) {
                std::exception_ptr error = fiber.error;
                fiber.error = nullptr;
                fibers_[0].ended = fibers_[1].ended = true;
                std::rethrow_exception(error);
            }
        next = 1 - next;
    }
}

void FiberPair::yield() {
    if (current_ < 0 || fibers_[1 - current_].ended) return;
    ++switches_;
    Fiber& fiber = fibers_[current_];
    void* fake_stack = nullptr;
    switch_begins(&fake_stack, scheduler_stack_, scheduler_stack_size_);
    const int swapped = swapcontext(&fiber.context, &scheduler_);
    switch_ends(fake_stack, &scheduler_stack_, &scheduler_stack_size_);
    if (swapped != 0) fail("swapcontext");
}

}  // namespace parbench
