// The watchdog's own side channel: small TCP connections, set up once at start-up, that
// carry each rank's last activity to rank 0 (the hub) and a beat back. The watchdog thread
// only reads and writes these sockets, so it needs no MPI call and no MPI thread level
// above the one the measurement runs at (a higher level slows every small message).
//
// A peer on the hub's host connects over 127.0.0.1 only; a peer on another host tries the
// hub's non-loopback IPv4 addresses in turn. Setting up is collective over `control`; once
// it returns, no MPI is involved.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace parbench {

// One rank's state as it goes over the wire (fixed size, host byte order: every rank of
// a job runs the same binary on the same architecture).
struct HeartbeatRecord {
    std::int32_t rank = 0;
    std::int32_t idle = 1;
    std::uint64_t progress = 0;  // activities entered so far (idle ones not counted)
    std::uint64_t bytes = 0;
    std::int64_t iteration = 0;
    double age_s = 0.0;  // how long the activity had lasted when sent
    char phase[24] = {};
    char operation[40] = {};
    char call[96] = {};  // the communicator call it waits in, as the watchdog describes it
};

// A file descriptor closed on destruction.
class Socket {
  public:
    Socket() = default;
    explicit Socket(int fd) : fd_(fd) {}
    Socket(Socket&& other) noexcept : fd_(other.release()) {}
    Socket& operator=(Socket&& other) noexcept;
    ~Socket();
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;
    int fd() const { return fd_; }
    int release() {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }

  private:
    int fd_ = -1;
};

// Bytes read from a non-blocking stream socket, cut into fixed-size records.
struct Inbox {
    std::string pending;
    bool closed = false;  // the peer closed the connection (its process ended)
    // Reads what is there; returns the complete records received.
    std::vector<HeartbeatRecord> read_records(int fd);
    // Reads and discards what is there; true when anything arrived.
    bool drain(int fd);
};

class HeartbeatChannel {
  public:
    // Collective over `control`. nullptr, with `failure` set alike on every rank, when any
    // rank could not connect (the watchdog then works without naming other ranks).
    static std::unique_ptr<HeartbeatChannel> open(Communicator& control, const std::vector<std::string>& hosts,
                                                  std::string& failure);
    bool is_hub() const { return rank_ == 0; }
    int rank() const { return rank_; }
    int size() const { return size_; }
    // Hub: the connection to each rank (index 0 unused). Other ranks: the connection to the hub.
    const std::vector<Socket>& peers() const { return peers_; }
    const Socket& hub() const { return peers_.front(); }

  private:
    HeartbeatChannel(int rank, int size) : rank_(rank), size_(size) {}
    int rank_;
    int size_;
    std::vector<Socket> peers_;
};

// Sends what fits now (never blocks; a stopped peer's full buffer drops the beat).
void send_nowait(int fd, const void* data, std::size_t bytes);

// The non-loopback IPv4 addresses of this host's interfaces that are up.
std::vector<std::string> local_ipv4_addresses();

}  // namespace parbench
