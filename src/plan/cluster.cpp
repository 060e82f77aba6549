#include "plan/cluster.hpp"

#include <algorithm>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "theory/gpu_peaks.hpp"

namespace parbench {
namespace {

// Capacities from NVIDIA's data sheets (SXM parts); the peaks (0 here) from theory/gpu_peaks.hpp's
// table, the one train's MFU reads. Links: NVLink 3/4/5 at 300/450/900 GB/s per direction and 200/400/400 Gb/s InfiniBand per GPU, at ~80% as NCCL's
// bus bandwidth; latencies are typical NCCL small-message figures. Assumptions, not
// measurements: --calibrate replaces them. GEMM efficiency by shape: each preset's own curve, cited
// in device_compute.cpp.
DeviceSpec preset(const std::string& name) {
    DeviceSpec spec;
    if (name == "A100") spec = {"A100", 0.0, 0.0, 80.0, 2039.0, {10.0, 240.0}, {20.0, 20.0}, "preset A100 SXM 80GB", true};
    if (name == "H100") spec = {"H100", 0.0, 0.0, 80.0, 3350.0, {10.0, 360.0}, {20.0, 40.0}, "preset H100 SXM", true};
    if (name == "H200") spec = {"H200", 0.0, 0.0, 141e9 / (1u << 30), 4800.0, {10.0, 360.0}, {20.0, 40.0},
                                "preset H200 SXM 141GB", true};
    if (name == "B200") spec = {"B200", 0.0, 0.0, 180e9 / (1u << 30), 8000.0, {8.0, 720.0}, {20.0, 40.0},
                                "preset B200 (HGX, 180GB)", true};
    if (!spec.name.empty()) {
        const GpuPeak* peak = find_gpu_peak(spec.name);
        spec.peak_tflops_bf16 = peak->bf16_tflops;
        spec.peak_tflops_fp32 = peak->fp32_tflops;
        spec.peak_tflops_fp8 = peak->fp8_tflops;
        spec.gemm_preset = spec.name;
        spec.memory_reserved_gib = framework_memory_reserve_gib;
        spec.intra_host.ring_step_us = nccl_ring_step_nvlink_us;
        spec.cross_host.ring_step_us = nccl_ring_step_network_us;
    }
    return spec;
}

}  // namespace

ComputeShare compute_share(const ClusterSpec& cluster, int world) {
    ComputeShare share;
    share.ranks_per_host = std::max(1, std::min(cluster.gpus_per_host, world));
    share.cores_per_host = cluster.cores_per_host;
    if (cluster.cores_per_host > 0 && share.ranks_per_host > cluster.cores_per_host)
        share.share = static_cast<double>(cluster.cores_per_host) / share.ranks_per_host;
    return share;
}

std::vector<std::string> device_preset_names() { return {"A100", "H100", "H200", "B200"}; }

DeviceSpec device_preset(const std::string& name) {
    DeviceSpec spec = preset(name);
    if (spec.name.empty())
        throw UsageError("--device '" + name + "': use one of A100, H100, H200, B200 (or describe it with --cluster FILE)");
    return spec;
}

ClusterSpec parse_cluster(const nlohmann::json& document, const std::string& source) {
    // schemas/cluster.schema.json says the same; every key's range is checked here, naming it.
    const JsonFields root(document, source);
    root.refuse_unknown_keys({"description", "sources", "device", "gpus", "gpus_per_host", "cores_per_host"});
    ClusterSpec cluster;
    cluster.source = source;
    if (root.has("description")) root.string("description");
    if (root.has("sources")) {
        const JsonFields sources = root.object("sources");
        for (const auto& [key, text] : sources.json().items()) sources.string(key);
    }
    if (!root.has("device")) throw UsageError(root.name("device") + " is missing: give a preset name (A100, H100, "
                                              "H200, B200) or an object with the device's figures");
    const nlohmann::json& device = document.at("device");
    if (device.is_string()) {
        const std::string name = device.get<std::string>();
        cluster.device = preset(name);
        if (cluster.device.name.empty())
            throw UsageError(root.name("device") + " is \"" + name + "\"; use A100, H100, H200 or B200, or an object");
    } else if (device.is_object()) {
        const JsonFields fields = root.object("device");
        fields.refuse_unknown_keys({"name", "peak_tflops_bf16", "peak_tflops_fp32", "memory_gib",
                                    "memory_bandwidth_gbps", "intra_host", "cross_host", "gemm_sustained",
                                    "gemm_overhead_us", "gemm_preset", "memory_fraction", "memory_reserved_gib",
                                    "flash_forward_fraction", "flash_backward_fraction", "peak_tflops_fp8"});
        DeviceSpec& d = cluster.device;
        d.name = fields.optional_string("name").value_or("custom");
        d.peak_tflops_bf16 = fields.number("peak_tflops_bf16", 0, cluster_limits::max_tflops, true);
        d.peak_tflops_fp32 =
            fields.optional_number("peak_tflops_fp32", 0, cluster_limits::max_tflops, true).value_or(d.peak_tflops_bf16 / 16.0);
        d.peak_tflops_fp8 = fields.optional_number("peak_tflops_fp8", 0, cluster_limits::max_tflops, true).value_or(0.0);
        d.memory_gib = fields.number("memory_gib", 0, cluster_limits::max_memory_gib, true);
        d.memory_bandwidth_gbps =
            fields.optional_number("memory_bandwidth_gbps", 0, cluster_limits::max_gbps, true).value_or(2000.0);
        for (const auto& [key, link] : {std::pair{"intra_host", &d.intra_host}, std::pair{"cross_host", &d.cross_host}}) {
            const JsonFields figures = fields.object(key);
            figures.refuse_unknown_keys({"latency_us", "busbw_gbps", "ring_step_us"});
            link->latency_us = figures.number("latency_us", 0, cluster_limits::max_latency_us);
            link->ring_step_us = figures.optional_number("ring_step_us", 0, cluster_limits::max_latency_us).value_or(0.0);
            link->busbw_gbps = figures.number("busbw_gbps", 0, cluster_limits::max_gbps, true);
        }
        d.source = source;
        // The compute model: the curve of the preset it names, or its own numbers
        // (plan/device_compute.hpp), its own replacing the named preset's.
        if (const auto named = fields.optional_string("gemm_preset")) {
            const std::vector<std::string> names = device_preset_names();
            if (std::find(names.begin(), names.end(), *named) == names.end())
                throw UsageError(fields.name("gemm_preset") + " is \"" + *named +
                                 "\"; name the preset whose GEMM curve this device takes: A100, H100, H200 or B200");
            d.gemm_preset = *named;
        }
        d.gemm_sustained = fields.optional_number("gemm_sustained", 0, 1, true).value_or(0.0);
        d.gemm_overhead_us = fields.optional_number("gemm_overhead_us", 0, cluster_limits::max_latency_us).value_or(0.0);
        d.memory_fraction = fields.optional_number("memory_fraction", 0, 1, true).value_or(0.0);
        d.flash_forward_fraction = fields.optional_number("flash_forward_fraction", 0, 1, true).value_or(0.0);
        d.flash_backward_fraction = fields.optional_number("flash_backward_fraction", 0, 1, true).value_or(0.0);
        d.memory_reserved_gib = fields.optional_number("memory_reserved_gib", 0, cluster_limits::max_memory_gib).value_or(0.0);
        if (d.memory_reserved_gib >= d.memory_gib)
            throw UsageError(fields.name("memory_reserved_gib") + " is " + std::to_string(d.memory_reserved_gib) +
                             " GiB, not below memory_gib (" + std::to_string(d.memory_gib) +
                             "): give what the runtime and allocator keep from the tensors, less than the HBM");
    } else {
        throw UsageError(root.name("device") + " must be a preset name (A100, H100, H200, B200) or an object, got " +
                         device.dump());
    }
    cluster.gpus = static_cast<int>(root.integer("gpus", 1, cluster_limits::max_gpus));
    cluster.gpus_per_host = static_cast<int>(
        root.optional_integer("gpus_per_host", 1, cluster_limits::max_gpus_per_host).value_or(cluster.gpus_per_host));
    cluster.cores_per_host =
        static_cast<int>(root.optional_integer("cores_per_host", 1, cluster_limits::max_cores_per_host).value_or(0));
    if (cluster.cores_per_host > 0) cluster.cores_source = source;
    return cluster;
}

ClusterSpec read_cluster_file(const std::string& path) {
    nlohmann::json document;
    try {
        document = read_json_file(path);
    } catch (const UsageError& error) {
        throw UsageError(std::string("--cluster: ") + error.what());
    }
    return parse_cluster(document, "--cluster " + path);
}

nlohmann::json to_json(const ClusterSpec& c) {
    const DeviceSpec& d = c.device;
    auto link = [](const LinkModel& l) {
        return nlohmann::json{{"latency_us", l.latency_us}, {"busbw_gbps", l.busbw_gbps}, {"ring_step_us", l.ring_step_us}};
    };
    return {{"gpus", c.gpus},
            {"gpus_per_host", c.gpus_per_host},
            {"cores_per_host", c.cores_per_host > 0 ? nlohmann::json(c.cores_per_host) : nlohmann::json(nullptr)},
            {"cores_source", c.cores_source},
            {"source", c.source},
            {"device",
             {{"name", d.name},
              {"peak_tflops_bf16", d.peak_tflops_bf16},
              {"peak_tflops_fp32", d.peak_tflops_fp32},
              {"peak_tflops_fp8", d.peak_tflops_fp8 > 0 ? nlohmann::json(d.peak_tflops_fp8) : nlohmann::json(nullptr)},
              {"memory_gib", d.memory_gib},
              {"memory_bandwidth_gbps", d.memory_bandwidth_gbps},
              {"memory_reserved_gib", d.memory_reserved_gib},
              {"intra_host", link(d.intra_host)},
              {"cross_host", link(d.cross_host)},
              {"preset", d.preset},
              {"gemm_preset", d.gemm_preset.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.gemm_preset)},
              {"source", d.source}}}};
}

}  // namespace parbench
