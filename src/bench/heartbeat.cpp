#include "bench/heartbeat.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace parbench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto connect_timeout = std::chrono::seconds(3);
constexpr auto accept_timeout = std::chrono::seconds(10);

std::string last_error(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

void set_nonblocking(int fd) {
    const int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

int remaining_ms(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
}

// Connects within connect_timeout, or returns an empty socket and sets `error`.
Socket connect_to(const std::string& address, int port, std::string& error) {
    Socket socket(::socket(AF_INET, SOCK_STREAM, 0));
    if (socket.fd() < 0) {
        error = last_error("socket");
        return {};
    }
    sockaddr_in target{};
    target.sin_family = AF_INET;
    target.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET, address.c_str(), &target.sin_addr) != 1) {
        error = "bad address " + address;
        return {};
    }
    set_nonblocking(socket.fd());
    if (::connect(socket.fd(), reinterpret_cast<sockaddr*>(&target), sizeof target) != 0 && errno != EINPROGRESS) {
        error = address + ": " + last_error("connect");
        return {};
    }
    pollfd waiting{socket.fd(), POLLOUT, 0};
    const int ready = ::poll(&waiting, 1, static_cast<int>(std::chrono::milliseconds(connect_timeout).count()));
    int status = 0;
    socklen_t length = sizeof status;
    if (ready != 1 || ::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &status, &length) != 0 || status != 0) {
        error = address + ":" + std::to_string(port) + ": " + (ready == 1 ? std::strerror(status) : "no answer");
        return {};
    }
    const int one = 1;
    ::setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return socket;
}

bool write_all(int fd, const void* data, std::size_t bytes, Clock::time_point deadline) {
    const char* at = static_cast<const char*>(data);
    while (bytes > 0) {
        const ssize_t sent = ::send(fd, at, bytes, MSG_NOSIGNAL);
        if (sent > 0) {
            at += sent;
            bytes -= static_cast<std::size_t>(sent);
            continue;
        }
        if (sent < 0 && errno != EAGAIN && errno != EINTR) return false;
        pollfd waiting{fd, POLLOUT, 0};
        if (::poll(&waiting, 1, remaining_ms(deadline)) != 1) return false;
    }
    return true;
}

// Rank 0: accepts a connection from every other rank, each announcing its rank first.
std::string accept_all(int listener, int size, std::vector<Socket>& peers) {
    const auto deadline = Clock::now() + accept_timeout;
    std::vector<std::pair<Socket, std::string>> unnamed;  // accepted, rank not yet read
    int named = 0;
    while (named < size - 1) {
        std::vector<pollfd> waiting{{listener, POLLIN, 0}};
        for (auto& [socket, bytes] : unnamed) waiting.push_back({socket.fd(), POLLIN, 0});
        if (::poll(waiting.data(), waiting.size(), remaining_ms(deadline)) <= 0)
            return std::to_string(size - 1 - named) + " rank(s) did not connect within " +
                   std::to_string(accept_timeout.count()) + " s";
        if (waiting[0].revents & POLLIN) {
            const int fd = ::accept(listener, nullptr, nullptr);
            if (fd >= 0) {
                set_nonblocking(fd);
                unnamed.emplace_back(Socket(fd), std::string());
            }
        }
        for (std::size_t i = 0; i < unnamed.size(); ++i) {
            auto& [socket, bytes] = unnamed[i];
            char chunk[sizeof(std::int32_t)];
            const ssize_t got = ::recv(socket.fd(), chunk, sizeof chunk - bytes.size(), 0);
            if (got > 0) bytes.append(chunk, static_cast<std::size_t>(got));
            if (bytes.size() < sizeof(std::int32_t)) continue;
            std::int32_t rank = 0;
            std::memcpy(&rank, bytes.data(), sizeof rank);
            if (rank <= 0 || rank >= size || peers[static_cast<std::size_t>(rank)].fd() >= 0)
                return "a connection announced rank " + std::to_string(rank);
            peers[static_cast<std::size_t>(rank)] = std::move(socket);
            unnamed.erase(unnamed.begin() + static_cast<std::ptrdiff_t>(i));
            --i;
            ++named;
        }
    }
    return {};
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = other.release();
    }
    return *this;
}

Socket::~Socket() {
    if (fd_ >= 0) ::close(fd_);
}

std::vector<HeartbeatRecord> Inbox::read_records(int fd) {
    char chunk[4096];
    for (;;) {
        const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
        if (got > 0) {
            pending.append(chunk, static_cast<std::size_t>(got));
            continue;
        }
        if (got == 0) closed = true;
        break;
    }
    std::vector<HeartbeatRecord> records;
    while (pending.size() >= sizeof(HeartbeatRecord)) {
        HeartbeatRecord record;
        std::memcpy(&record, pending.data(), sizeof record);
        pending.erase(0, sizeof record);
        records.push_back(record);
    }
    return records;
}

bool Inbox::drain(int fd) {
    char chunk[256];
    bool any = false;
    for (;;) {
        const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
        if (got > 0) {
            any = true;
            continue;
        }
        if (got == 0) closed = true;
        return any;
    }
}

void send_nowait(int fd, const void* data, std::size_t bytes) {
    // A partial send would cut a record; records are small, so a full buffer drops them whole.
    ::send(fd, data, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
}

std::vector<std::string> local_ipv4_addresses() {
    std::vector<std::string> addresses;
    ifaddrs* interfaces = nullptr;
    if (::getifaddrs(&interfaces) != 0) return addresses;
    for (ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
        if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
        char text[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
        addresses.emplace_back(text);
    }
    ::freeifaddrs(interfaces);
    return addresses;
}

std::unique_ptr<HeartbeatChannel> HeartbeatChannel::open(Communicator& control, const std::vector<std::string>& hosts,
                                                         std::string& failure) {
    const int rank = control.rank();
    const int size = control.size();
    std::unique_ptr<HeartbeatChannel> channel(new HeartbeatChannel(rank, size));
    std::string error;

    // Rank 0 listens on an ephemeral port and announces it with its addresses: "port a1 a2 ...".
    Socket listener;
    std::string announcement;
    if (rank == 0) {
        listener = Socket(::socket(AF_INET, SOCK_STREAM, 0));
        sockaddr_in any{};
        any.sin_family = AF_INET;
        any.sin_addr.s_addr = htonl(INADDR_ANY);
        socklen_t length = sizeof any;
        if (listener.fd() < 0 || ::bind(listener.fd(), reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
            ::listen(listener.fd(), size) != 0 ||
            ::getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&any), &length) != 0) {
            error = last_error("listen");
            announcement = "0";
        } else {
            announcement = std::to_string(ntohs(any.sin_port));
            for (const std::string& address : local_ipv4_addresses()) announcement += " " + address;
        }
    }
    std::int64_t length = static_cast<std::int64_t>(announcement.size());
    control.broadcast(&length, &length, 1, DType::int64, 0);
    announcement.resize(static_cast<std::size_t>(length));
    control.broadcast(announcement.data(), announcement.data(), announcement.size(), DType::uint8, 0);

    std::istringstream words(announcement);
    int port = 0;
    words >> port;
    if (rank == 0) {
        channel->peers_.resize(static_cast<std::size_t>(size));
        if (error.empty()) error = accept_all(listener.fd(), size, channel->peers_);
    } else if (port > 0) {
        // Same host: loopback only, never one of this machine's other addresses.
        std::vector<std::string> candidates;
        if (hosts.size() == static_cast<std::size_t>(size) && hosts[static_cast<std::size_t>(rank)] == hosts[0]) {
            candidates.push_back("127.0.0.1");
        } else {
            for (std::string address; words >> address;) candidates.push_back(address);
        }
        for (const std::string& address : candidates) {
            Socket socket = connect_to(address, port, error);
            if (socket.fd() < 0) continue;
            const std::int32_t hello = rank;
            if (!write_all(socket.fd(), &hello, sizeof hello, Clock::now() + connect_timeout)) {
                error = address + ": " + last_error("send");
                continue;
            }
            channel->peers_.push_back(std::move(socket));
            error.clear();
            break;
        }
        if (channel->peers_.empty() && error.empty()) error = "rank 0 announced no address to reach it by";
    }

    // Agree: the lowest failing rank's reason, on every rank.
    const int mine = error.empty() ? size : rank;
    int first = size;
    control.allreduce(&mine, &first, 1, DType::int32, ReduceOp::min);
    if (first == size) return channel;
    std::int64_t reason_length = static_cast<std::int64_t>(error.size());
    control.broadcast(&reason_length, &reason_length, 1, DType::int64, first);
    error.resize(static_cast<std::size_t>(reason_length));
    control.broadcast(error.data(), error.data(), error.size(), DType::uint8, first);
    failure = "rank " + std::to_string(first) + ": " + error;
    return nullptr;
}

}  // namespace parbench
