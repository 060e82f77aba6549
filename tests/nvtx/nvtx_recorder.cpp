// An NVTX injection library that writes every range push and pop to a file, so the tests
// can check parbench's NVTX ranges without Nsight. NVTX loads it itself: a process started
// with NVTX_INJECTION64_PATH=<this library> calls InitializeInjectionNvtx2 on its first
// NVTX call, and the library points NVTX's function table at the recorders below.
//
// Log (PARBENCH_NVTX_LOG names the file; "%p" in it becomes the process id, one file per
// rank under mpirun), one event a line, the name last because names contain spaces:
//     <thread> push <domain> <name>
//     <thread> pop <domain>
// Ranges outside any domain are recorded in domain "(none)".
//
// NVTX's injection contract makes a tool library process-global by nature: its state
// lives in function-local statics.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace {

class Recorder {
  public:
    static Recorder& instance() {
        static Recorder recorder;
        return recorder;
    }
    bool ready() const { return file_ != nullptr; }

    // Domains and registered strings are identified by the address of their stored name,
    // which a deque keeps stable.
    const std::string* keep(const char* text) {
        std::lock_guard lock(mutex_);
        names_.emplace_back(text != nullptr ? text : "");
        return &names_.back();
    }

    void write(const std::string& line) {
        std::lock_guard lock(mutex_);
        std::fprintf(file_, "%zu %s\n", std::hash<std::thread::id>{}(std::this_thread::get_id()), line.c_str());
        std::fflush(file_);  // a process ended by MPI_Abort or _Exit keeps its events
    }

  private:
    Recorder() {
        const char* pattern = std::getenv("PARBENCH_NVTX_LOG");
        if (pattern == nullptr) {
            std::fprintf(stderr, "nvtx_recorder: set PARBENCH_NVTX_LOG to the file to record to\n");
            return;
        }
        std::string path = pattern;
        if (const auto at = path.find("%p"); at != std::string::npos) path.replace(at, 2, std::to_string(getpid()));
        file_ = std::fopen(path.c_str(), "w");
        if (file_ == nullptr) std::fprintf(stderr, "nvtx_recorder: cannot write %s\n", path.c_str());
    }

    std::mutex mutex_;
    std::FILE* file_ = nullptr;
    std::deque<std::string> names_;
};

// Depth of this thread's range stack, which push and pop return as NVTX specifies.
int& depth() {
    thread_local int level = 0;
    return level;
}

std::string domain_name(nvtxDomainHandle_t domain) {
    return domain == nullptr ? "(none)" : *reinterpret_cast<const std::string*>(domain);
}

std::string message_text(const nvtxEventAttributes_t* attributes) {
    if (attributes == nullptr) return "";
    switch (attributes->messageType) {
        case NVTX_MESSAGE_TYPE_ASCII: return attributes->message.ascii != nullptr ? attributes->message.ascii : "";
        case NVTX_MESSAGE_TYPE_REGISTERED:
            return *reinterpret_cast<const std::string*>(attributes->message.registered);
        case NVTX_MESSAGE_TYPE_UNICODE: return "(unicode)";
        default: return "";
    }
}

int push(nvtxDomainHandle_t domain, const std::string& name) {
    Recorder::instance().write("push " + domain_name(domain) + " " + name);
    return depth()++;
}

int pop(nvtxDomainHandle_t domain) {
    Recorder::instance().write("pop " + domain_name(domain));
    return depth() > 0 ? --depth() : -1;
}

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
    return reinterpret_cast<nvtxDomainHandle_t>(const_cast<std::string*>(Recorder::instance().keep(name)));
}
nvtxStringHandle_t NVTX_API register_string(nvtxDomainHandle_t, const char* text) {
    return reinterpret_cast<nvtxStringHandle_t>(const_cast<std::string*>(Recorder::instance().keep(text)));
}
int NVTX_API domain_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
    return push(domain, message_text(attributes));
}
int NVTX_API domain_pop(nvtxDomainHandle_t domain) { return pop(domain); }
int NVTX_API push_ascii(const char* name) { return push(nullptr, name != nullptr ? name : ""); }
int NVTX_API push_ex(const nvtxEventAttributes_t* attributes) { return push(nullptr, message_text(attributes)); }
int NVTX_API pop_default() { return pop(nullptr); }

template <typename Function>
void install(NvtxFunctionTable table, unsigned size, unsigned id, Function function) {
    if (id <= size) *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
}

}  // namespace

// Returns 1 when the recorders are installed; 0 tells NVTX to turn every call into a no-op.
extern "C" NVTX_DYNAMIC_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
    if (!Recorder::instance().ready()) return 0;
    const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
    if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;

    NvtxFunctionTable core2 = nullptr;
    unsigned core2_size = 0;
    if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size)) return 0;
    install(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &domain_push);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &domain_pop);

    NvtxFunctionTable core = nullptr;
    unsigned core_size = 0;
    if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size)) return 0;
    install(core, core_size, NVTX_CBID_CORE_RangePushA, &push_ascii);
    install(core, core_size, NVTX_CBID_CORE_RangePushEx, &push_ex);
    install(core, core_size, NVTX_CBID_CORE_RangePop, &pop_default);
    return 1;
}
