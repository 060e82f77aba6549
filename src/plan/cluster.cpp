#include "plan/cluster.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/json_file.hpp"

namespace parbench {
namespace {

// Dense peaks and capacities from NVIDIA's data sheets (SXM parts). Links: NVLink 3/4/5 at
// 300/450/900 GB/s per direction and 200/400/400 Gb/s InfiniBand per GPU, at ~80% as NCCL's
// bus bandwidth; latencies are typical NCCL small-message figures. Assumptions, not
// measurements: --calibrate replaces them.
DeviceSpec preset(const std::string& name) {
    if (name == "A100") return {"A100", 312.0, 19.5, 80.0, 2039.0, {10.0, 240.0}, {20.0, 20.0}, "preset A100 SXM 80GB"};
    if (name == "H100") return {"H100", 989.0, 67.0, 80.0, 3350.0, {10.0, 360.0}, {20.0, 40.0}, "preset H100 SXM"};
    if (name == "H200") return {"H200", 989.0, 67.0, 141e9 / (1u << 30), 4800.0, {10.0, 360.0}, {20.0, 40.0},
                                "preset H200 SXM 141GB"};
    if (name == "B200") return {"B200", 2250.0, 80.0, 180e9 / (1u << 30), 8000.0, {8.0, 720.0}, {20.0, 40.0},
                                "preset B200 (HGX, 180GB)"};
    return {};
}

double number(const nlohmann::json& object, const std::string& key, const std::string& path, double fallback,
              bool required) {
    if (!object.contains(key)) {
        if (required) throw UsageError("--cluster " + path + ": missing \"" + key + "\"");
        return fallback;
    }
    if (!object[key].is_number() || !(object[key].get<double>() > 0.0))
        throw UsageError("--cluster " + path + ": \"" + key + "\" must be a positive number");
    return object[key].get<double>();
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

ClusterSpec read_cluster_file(const std::string& path) {
    const nlohmann::json document = read_json_file(path);
    if (!document.is_object()) throw UsageError("--cluster " + path + ": expected a JSON object");
    ClusterSpec cluster;
    cluster.source = path;
    const nlohmann::json& device = document.value("device", nlohmann::json());
    if (device.is_string()) {
        cluster.device = device_preset(device.get<std::string>());
    } else if (device.is_object()) {
        DeviceSpec& d = cluster.device;
        d.name = device.value("name", std::string("custom"));
        d.peak_tflops_bf16 = number(device, "peak_tflops_bf16", path, 0, true);
        d.peak_tflops_fp32 = number(device, "peak_tflops_fp32", path, d.peak_tflops_bf16 / 16.0, false);
        d.memory_gib = number(device, "memory_gib", path, 0, true);
        d.memory_bandwidth_gbps = number(device, "memory_bandwidth_gbps", path, 2000.0, false);
        for (const auto& [key, link] : {std::pair{"intra_host", &d.intra_host}, std::pair{"cross_host", &d.cross_host}}) {
            if (!device.contains(key) || !device[key].is_object())
                throw UsageError("--cluster " + path + ": device needs \"" + key + "\": {\"latency_us\", \"busbw_gbps\"}");
            link->latency_us = number(device[key], "latency_us", path, 0, true);
            link->busbw_gbps = number(device[key], "busbw_gbps", path, 0, true);
        }
        d.source = "--cluster " + path;
    } else {
        throw UsageError("--cluster " + path + ": \"device\" must be a preset name (A100, H100, H200, B200) or an object");
    }
    cluster.gpus = static_cast<int>(number(document, "gpus", path, 1, true));
    cluster.gpus_per_host = static_cast<int>(number(document, "gpus_per_host", path, 8, false));
    cluster.cores_per_host = static_cast<int>(number(document, "cores_per_host", path, 0, false));
    if (cluster.cores_per_host > 0) cluster.cores_source = "--cluster " + path;
    return cluster;
}

nlohmann::json to_json(const ClusterSpec& c) {
    const DeviceSpec& d = c.device;
    auto link = [](const LinkModel& l) { return nlohmann::json{{"latency_us", l.latency_us}, {"busbw_gbps", l.busbw_gbps}}; };
    return {{"gpus", c.gpus},
            {"gpus_per_host", c.gpus_per_host},
            {"cores_per_host", c.cores_per_host > 0 ? nlohmann::json(c.cores_per_host) : nlohmann::json(nullptr)},
            {"cores_source", c.cores_source},
            {"source", c.source},
            {"device",
             {{"name", d.name},
              {"peak_tflops_bf16", d.peak_tflops_bf16},
              {"peak_tflops_fp32", d.peak_tflops_fp32},
              {"memory_gib", d.memory_gib},
              {"memory_bandwidth_gbps", d.memory_bandwidth_gbps},
              {"intra_host", link(d.intra_host)},
              {"cross_host", link(d.cross_host)},
              {"source", d.source}}}};
}

}  // namespace parbench
