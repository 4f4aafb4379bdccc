// distributed/tcp_rendezvous.cpp — rank 0's bytes to every rank over TCP (POSIX sockets).
//
// The exchange, in network byte order:
//   rank r -> rank 0   hello: magic "MGRV", protocol version, r, the world size r was given
//   rank 0 -> rank r   answer: status (0 accepted, 1 refused), length, then the payload or,
//                      when refused, the reason (which rank 0 also throws)
#include "memgrad/distributed/tcp_rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>

#include "memgrad/core/error.h"

namespace mg::distributed {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x4D475256;  // "MGRV"
constexpr uint32_t kProtocolVersion = 1;
constexpr uint32_t kAccepted = 0;
constexpr uint32_t kRefused = 1;
// A connection that is not a rank (a port scanner, a health check) gets this long to say hello.
constexpr std::chrono::seconds kHelloTimeout{10};

struct Hello {
  uint32_t magic;
  uint32_t version;
  int32_t rank;
  int32_t world_size;
};

class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_;
};

std::string where(const RendezvousOptions& options) {
  return mg::detail::str_cat(options.master_addr, ":", options.master_port);
}

std::string errno_text(int error) { return std::strerror(error); }

int milliseconds_until(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

// Waits until `fd` has `events` (POLLIN, POLLOUT) or the deadline passes.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, milliseconds_until(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Reads exactly `size` bytes before the deadline; false on a timeout, an error or a
// connection closed early.
bool read_exact(int fd, void* data, size_t size, Clock::time_point deadline) {
  auto* bytes = static_cast<std::byte*>(data);
  while (size > 0) {
    if (!wait_for(fd, POLLIN, deadline)) return false;
    const ssize_t got = ::recv(fd, bytes, size, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    bytes += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

bool write_all(int fd, const void* data, size_t size) {
  const auto* bytes = static_cast<const std::byte*>(data);
  while (size > 0) {
    // MSG_NOSIGNAL: a peer that went away is an error here, not a SIGPIPE for the process.
    const ssize_t sent = ::send(fd, bytes, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    bytes += sent;
    size -= static_cast<size_t>(sent);
  }
  return true;
}

bool send_answer(int fd, uint32_t status, const void* data, size_t size) {
  const uint32_t header[2] = {htonl(status), htonl(static_cast<uint32_t>(size))};
  return write_all(fd, header, sizeof header) && write_all(fd, data, size);
}

// ---- rank 0 ----

// A socket listening on `port` on every interface: IPv6 with IPv4 mapped in where the
// machine has IPv6, else IPv4 only (MASTER_ADDR may resolve to either on the other ranks).
Socket listen_on(const RendezvousOptions& options) {
  int error = 0;
  for (const int family : {AF_INET6, AF_INET}) {
    Socket listener(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!listener.valid()) {
      error = errno;
      continue;
    }
    const int yes = 1;
    const int no = 0;
    // SO_REUSEADDR: a port whose last job ended moments ago (TIME_WAIT) can be bound again;
    // a port another process listens on still cannot.
    ::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    sockaddr_storage address{};
    socklen_t length = 0;
    if (family == AF_INET6) {
      ::setsockopt(listener.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof no);
      auto* ipv6 = reinterpret_cast<sockaddr_in6*>(&address);
      ipv6->sin6_family = AF_INET6;
      ipv6->sin6_addr = in6addr_any;
      ipv6->sin6_port = htons(static_cast<uint16_t>(options.master_port));
      length = sizeof(sockaddr_in6);
    } else {
      auto* ipv4 = reinterpret_cast<sockaddr_in*>(&address);
      ipv4->sin_family = AF_INET;
      ipv4->sin_addr.s_addr = htonl(INADDR_ANY);
      ipv4->sin_port = htons(static_cast<uint16_t>(options.master_port));
      length = sizeof(sockaddr_in);
    }
    if (::bind(listener.fd(), reinterpret_cast<sockaddr*>(&address), length) == 0 &&
        ::listen(listener.fd(), SOMAXCONN) == 0) {
      return listener;
    }
    error = errno;
    if (error == EADDRINUSE) break;  // the other family would find the same port taken
  }
  mg::detail::throw_error(mg::detail::str_cat(
      "init_process_group: rank 0 cannot listen on port ", options.master_port,
      " for the rendezvous (MASTER_PORT): ", errno_text(error), ". Hint: ",
      error == EADDRINUSE ? "another job (or another program) uses this port; "
                            "pick a free MASTER_PORT."
                          : "pick a MASTER_PORT above 1024 that this user may bind."));
}

std::string missing_ranks(const std::vector<bool>& joined) {
  std::string list;
  int count = 0;
  for (size_t rank = 0; rank < joined.size(); ++rank) {
    if (joined[rank]) continue;
    if (++count <= 8) list += mg::detail::str_cat(list.empty() ? "" : ", ", rank);
  }
  if (count > 8) list += mg::detail::str_cat(" and ", count - 8, " more");
  return list;
}

// Why rank 0 refuses a hello, or "" when it is one of the ranks still awaited.
std::string refusal_of(const Hello& hello, const std::vector<bool>& joined) {
  const int world_size = static_cast<int>(joined.size());
  if (hello.world_size != world_size) {
    return mg::detail::str_cat("init_process_group: world size mismatch at the rendezvous: rank ",
                               hello.rank, " was started with WORLD_SIZE=", hello.world_size,
                               ", rank 0 with WORLD_SIZE=", world_size,
                               ". Hint: every rank of a job needs the same WORLD_SIZE.");
  }
  if (hello.rank < 1 || hello.rank >= world_size || joined[hello.rank]) {
    return mg::detail::str_cat("init_process_group: two processes of the job say they are rank ",
                               hello.rank, " (of ", world_size, "). Hint: give every process "
                               "its own RANK, 0 .. WORLD_SIZE-1.");
  }
  return {};
}

void serve(const RendezvousOptions& options, const std::vector<std::byte>& payload,
           Clock::time_point deadline) {
  const Socket listener = listen_on(options);
  std::vector<bool> joined(options.world_size, false);
  joined[0] = true;
  for (int waiting = options.world_size - 1; waiting > 0;) {
    MG_CHECK(wait_for(listener.fd(), POLLIN, deadline),
             "init_process_group: rank 0 waited ", options.timeout.count() / 1000.0,
             " s at the rendezvous (port ", options.master_port, ") but rank(s) ",
             missing_ranks(joined), " of ", options.world_size, " never came. Hint: start every "
             "rank with the same MASTER_ADDR and MASTER_PORT (MASTER_ADDR must name rank 0's "
             "machine), or allow more time (ProcessGroupOptions::timeout).");
    const Socket client(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!client.valid()) continue;  // the connection went away before it was accepted
    Hello hello{};
    const bool said_hello =
        read_exact(client.fd(), &hello, sizeof hello, std::min(deadline, Clock::now() + kHelloTimeout));
    if (!said_hello || ntohl(hello.magic) != kMagic || ntohl(hello.version) != kProtocolVersion) {
      continue;  // not a memgrad rank: ignore it
    }
    hello.rank = static_cast<int32_t>(ntohl(static_cast<uint32_t>(hello.rank)));
    hello.world_size = static_cast<int32_t>(ntohl(static_cast<uint32_t>(hello.world_size)));
    const std::string refusal = refusal_of(hello, joined);
    if (!refusal.empty()) {
      send_answer(client.fd(), kRefused, refusal.data(), refusal.size());
      mg::detail::throw_error(refusal);
    }
    if (!send_answer(client.fd(), kAccepted, payload.data(), payload.size())) continue;
    joined[hello.rank] = true;
    --waiting;
  }
}

// ---- every other rank ----

// A connection to rank 0, tried again and again until the deadline: rank 0 may start later.
Socket connect_to_rank0(const RendezvousOptions& options, Clock::time_point deadline) {
  const std::string port = std::to_string(options.master_port);
  std::string last_error = "nothing tried";
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* addresses = nullptr;
    const int resolved = ::getaddrinfo(options.master_addr.c_str(), port.c_str(), &hints, &addresses);
    if (resolved != 0) {
      last_error = mg::detail::str_cat("cannot resolve MASTER_ADDR: ", ::gai_strerror(resolved));
    }
    for (addrinfo* address = addresses; address != nullptr; address = address->ai_next) {
      Socket socket(::socket(address->ai_family, address->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                             address->ai_protocol));
      if (!socket.valid()) continue;
      // Non-blocking connect, so an unreachable host costs the deadline, not the kernel's
      // two minutes.
      int error = 0;
      if (::connect(socket.fd(), address->ai_addr, address->ai_addrlen) != 0) {
        error = errno;
        if (error == EINPROGRESS) {
          error = ETIMEDOUT;
          if (wait_for(socket.fd(), POLLOUT, std::min(deadline, Clock::now() + std::chrono::seconds(5)))) {
            socklen_t length = sizeof error;
            ::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error, &length);
          }
        }
      }
      if (error == 0) {
        ::fcntl(socket.fd(), F_SETFL, ::fcntl(socket.fd(), F_GETFL) & ~O_NONBLOCK);
        ::freeaddrinfo(addresses);
        return socket;
      }
      last_error = errno_text(error);
    }
    if (addresses != nullptr) ::freeaddrinfo(addresses);
    MG_CHECK(Clock::now() < deadline, "init_process_group: rank ", options.rank,
             " could not reach rank 0 at ", where(options), " (MASTER_ADDR:MASTER_PORT) within ",
             options.timeout.count() / 1000.0, " s: ", last_error, ". Hint: rank 0 must be "
             "running, MASTER_ADDR must name its machine as this one can reach it, and every "
             "rank needs the same MASTER_PORT.");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::vector<std::byte> join(const RendezvousOptions& options, Clock::time_point deadline) {
  const Socket socket = connect_to_rank0(options, deadline);
  const Hello hello{htonl(kMagic), htonl(kProtocolVersion),
                    static_cast<int32_t>(htonl(static_cast<uint32_t>(options.rank))),
                    static_cast<int32_t>(htonl(static_cast<uint32_t>(options.world_size)))};
  uint32_t header[2] = {};
  const bool answered = write_all(socket.fd(), &hello, sizeof hello) &&
                        read_exact(socket.fd(), header, sizeof header, deadline);
  MG_CHECK(answered, "init_process_group: rank ", options.rank, " reached ", where(options),
           " but had no answer from rank 0 (the connection closed, or ",
           options.timeout.count() / 1000.0, " s passed). Hint: rank 0 stops at the first rank it "
           "refuses (see its error); or another program listens on MASTER_PORT: pick a free port.");
  std::vector<std::byte> answer(ntohl(header[1]));
  MG_CHECK(read_exact(socket.fd(), answer.data(), answer.size(), deadline), "init_process_group: "
           "rank ", options.rank, ": the rendezvous at ", where(options), " ended mid-answer.");
  if (ntohl(header[0]) == kRefused) {
    mg::detail::throw_error(std::string(reinterpret_cast<const char*>(answer.data()), answer.size()));
  }
  return answer;
}

}  // namespace

std::vector<std::byte> rendezvous_broadcast(const RendezvousOptions& options,
                                            const std::vector<std::byte>& payload) {
  MG_ASSERT(options.world_size >= 1 && options.rank >= 0 && options.rank < options.world_size,
            "rank ", options.rank, " of ", options.world_size);
  if (options.world_size == 1) return payload;
  MG_CHECK(!options.master_addr.empty() && options.master_port > 0, "init_process_group: rank ",
           options.rank, " of ", options.world_size, " needs MASTER_ADDR and MASTER_PORT to find "
           "rank 0 (got MASTER_ADDR=\"", options.master_addr, "\", MASTER_PORT=",
           options.master_port == 0 ? std::string("unset") : std::to_string(options.master_port),
           "). Hint: set both on every rank (torchrun does), e.g. MASTER_ADDR=127.0.0.1 "
           "MASTER_PORT=29500 on one machine; or start the job with mpirun.");
  const Clock::time_point deadline = Clock::now() + options.timeout;
  if (options.rank == 0) {
    serve(options, payload, deadline);
    return payload;
  }
  return join(options, deadline);
}

}  // namespace mg::distributed
