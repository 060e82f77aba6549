#include "cli/buffer_pages_flag.hpp"

#include <iostream>

#include "core/console.hpp"

namespace parbench {
namespace {

constexpr const char* flag_name = "--buffer-pages";

}  // namespace

void add_buffer_pages_flag(CLI::App& command) {
    command.add_option(flag_name)
        ->description("Host buffers on normal pages (a plain allocation, as a user's program and IMB/OSU get: the "
                      "kernel's THP setting decides) or huge (madvise transparent huge pages from 2 MiB, what the "
                      "training step was tuned with); the header and report say which pages they got")
        ->type_name("normal|huge")
        ->default_str("normal")
        ->check(CLI::Validator(
            [](std::string& value) {
                return parse_buffer_pages(value) ? std::string()
                                                 : "'" + value + "': use normal (the kernel's THP setting decides, as "
                                                                 "for any program) or huge (ask for huge pages)";
            },
            ""));
}

Backend make_run_backend(const Invocation& invocation, BackendChoice choice, const MpiSession& session,
                         Communicator& control, NcclLogLevel nccl_log) {
    const CLI::Option* flag = invocation.command->get_option_no_throw(flag_name);
    const bool given = flag != nullptr && flag->count() > 0;
    const BufferPages pages = given ? parse_buffer_pages(flag->as<std::string>()).value() : BufferPages::normal;
    Backend backend = make_backend(choice, session, control, pages, nccl_log);
    if (given && backend.device->is_gpu() && control.rank() == 0)
        write_line(std::cerr, std::string("note: ") + flag_name + " " + buffer_pages_name(pages) +
                                  " is for host buffers; the " + std::string(backend.comm->backend()) +
                                  " backend's are GPU memory, so it is ignored");
    return backend;
}

}  // namespace parbench
