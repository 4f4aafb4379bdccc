// distributed/tcp_rendezvous.h — rank 0 hands a few bytes (NCCL's unique id) to every other
// rank over TCP at MASTER_ADDR:MASTER_PORT: the start-up of a torchrun-style launch, where
// no MPI is there to carry them.
//
// Rank 0 listens on MASTER_PORT (every interface); every other rank connects to
// MASTER_ADDR:MASTER_PORT, retrying until rank 0 listens, and says which rank it is and how
// many ranks it believes the world has. Rank 0 answers each with the bytes, once it has
// checked the world size and that no rank came twice, and returns once every rank has
// been answered. Nothing outlives the call: no file to go stale between runs, and a
// second job on the same port is refused at bind, not joined.
//
// NOTE: why TCP and not a file: a file under /tmp works only on one machine (or a shared
// file system), and one left by a crashed run would hand its dead id to the next run's
// early ranks. A listening socket exists exactly as long as rank 0 waits for the ranks.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace mg::distributed {

struct RendezvousOptions {
  std::string master_addr;  // the host rank 0 runs on (a name or an IPv4/IPv6 address)
  int master_port = 0;      // the port it listens on
  int rank = 0;
  int world_size = 1;
  // How long any rank waits for the others, from the call; then mg::Error naming who is missing.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
};

// On rank 0, sends `payload` to every other rank and returns it; on the others, returns
// rank 0's payload (their own `payload` is ignored). With a world of one, returns `payload`
// without opening a socket. Throws mg::Error when the address cannot be resolved or bound,
// a rank does not come within the timeout, or the ranks disagree about the world size.
std::vector<std::byte> rendezvous_broadcast(const RendezvousOptions& options,
                                            const std::vector<std::byte>& payload);

}  // namespace mg::distributed
