#include "train/distributed/comm.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>

#include "wte/error.h"

#ifdef WTE_HAVE_MPI
// The C API only: Open MPI's mpi.h would pull in the deprecated C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace wte {
namespace {

// Set by mpirun (Open MPI), by PMIx launchers (srun --mpi=pmix, prun) and by PMI-1/2 launchers.
bool started_by_launcher(int* size_hint) {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') {
      *size_hint = std::atoi(v);
      return true;
    }
  }
  if (std::getenv("PMIX_RANK") != nullptr) {
    *size_hint = 0;  // size unknown until MPI_Init
    return true;
  }
  return false;
}

#ifdef WTE_HAVE_MPI
int count_of(size_t n, const char* what) {
  if (n > static_cast<size_t>(std::numeric_limits<int>::max()))
    throw Error(std::string("MPI message too large: ") + what + " of " + std::to_string(n) +
                " elements exceeds MPI's int count limit (2^31 - 1)");
  return static_cast<int>(n);
}

std::vector<int> counts_of(const std::vector<size_t>& v, const char* what) {
  std::vector<int> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = count_of(v[i], what);
  return out;
}

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(std::string(call) + " failed: " + std::string(text, static_cast<size_t>(len)));
}

// Rank 0's "started" notice (Comm::wait_for_rank0): one int from rank 0 to every other rank,
// sent when rank 0 enters its first collective call or finalize(). Its own tag on MPI_COMM_WORLD;
// wte sends no other point-to-point message (collectives have their own context).
constexpr int kRank0StartedTag = 0x77e0;
struct Rank0Notice {
  MPI_Request recv = MPI_REQUEST_NULL;  // ranks > 0: posted in init()
  int received = 0;
  bool arrived = false;
  std::vector<MPI_Request> sends;  // rank 0: one per other rank, completed in finalize()
  int payload = 1;
  bool sent = false;
};
Rank0Notice& rank0_notice() {
  static Rank0Notice n;
  return n;
}
#endif

}  // namespace

Comm& Comm::world() {
  static Comm comm;
  static bool initialised = false;
  if (!initialised) {
    initialised = true;
    comm.init();
  }
  return comm;
}

void Comm::init() {
  int size_hint = 1;
  const bool launched = started_by_launcher(&size_hint);
#ifdef WTE_HAVE_MPI
  if (!launched) {
    why_single_ = "no MPI (not started by mpirun or srun)";
    return;
  }
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  mpi_ = true;
  // Errors come back as return codes (check() turns them into wte::Error) instead of aborting
  // inside MPI without a word.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (rank_ != 0)
    check(MPI_Irecv(&rank0_notice().received, 1, MPI_INT, 0, kRank0StartedTag, MPI_COMM_WORLD,
                    &rank0_notice().recv),
          "MPI_Irecv");
#else
  why_single_ = "no MPI (wte was built without it: CMake option WTE_MPI off or MPI not found)";
  if (launched && size_hint > 1)
    throw Error("this wte was built without MPI (CMake option WTE_MPI off, or Open MPI's "
                "libopenmpi-dev missing at configure time), but a launcher started " +
                std::to_string(size_hint) +
                " ranks: each would train alone into the same run directory. Rebuild with "
                "libopenmpi-dev installed (cmake -DWTE_MPI=ON), or run one process");
#endif
}

std::string Comm::describe() const {
#ifdef WTE_HAVE_MPI
  if (mpi_) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string v(version, static_cast<size_t>(len));
    const size_t comma = v.find(',');
    if (comma != std::string::npos) v.resize(comma);
    return v;
  }
#endif
  return why_single_;
}

void Comm::finalize() {
#ifdef WTE_HAVE_MPI
  if (mpi_ && !finalized_) {
    // The notice's requests complete before MPI_Finalize: rank 0 sends it now if no collective
    // did, so every other rank's receive is matched.
    entering_collective();
    Rank0Notice& n = rank0_notice();
    if (rank_ == 0 && !n.sends.empty())
      MPI_Waitall(static_cast<int>(n.sends.size()), n.sends.data(), MPI_STATUSES_IGNORE);
    if (rank_ != 0 && !n.arrived) MPI_Wait(&n.recv, MPI_STATUS_IGNORE);
    MPI_Finalize();
  }
#endif
  finalized_ = true;
}

void Comm::entering_collective() {
#ifdef WTE_HAVE_MPI
  Rank0Notice& n = rank0_notice();
  if (!mpi_ || finalized_ || rank_ != 0 || n.sent) return;
  n.sent = true;
  n.sends.assign(static_cast<size_t>(size_ - 1), MPI_REQUEST_NULL);
  for (int r = 1; r < size_; ++r)
    check(MPI_Isend(&n.payload, 1, MPI_INT, r, kRank0StartedTag, MPI_COMM_WORLD,
                    &n.sends[static_cast<size_t>(r - 1)]),
          "MPI_Isend");
#endif
}

void Comm::wait_for_rank0() {
#ifdef WTE_HAVE_MPI
  Rank0Notice& n = rank0_notice();
  if (!mpi_ || finalized_ || rank_ == 0) return;
  while (!n.arrived) {
    int done = 0;
    // An MPI error here (rank 0 gone, say): nothing to wait for, the caller aborts.
    if (MPI_Test(&n.recv, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
    if (done) {
      n.arrived = true;
      return;
    }
    const struct timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
  }
#endif
}

void Comm::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef WTE_HAVE_MPI
  if (mpi_ && !finalized_) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

void Comm::barrier() {
#ifdef WTE_HAVE_MPI
  entering_collective();
  if (mpi_) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
#endif
}

void Comm::barrier_sleeping() {
#ifdef WTE_HAVE_MPI
  entering_collective();
  if (!mpi_) return;
  MPI_Request req;
  check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
  for (;;) {
    int done = 0;
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    const struct timespec ms{0, 1000000};
    nanosleep(&ms, nullptr);
  }
#endif
}

void Comm::allgather(const void* send, size_t bytes, void* recv) {
#ifdef WTE_HAVE_MPI
  entering_collective();
  if (mpi_) {
    const int n = count_of(bytes, "allgather");
    check(MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, MPI_COMM_WORLD), "MPI_Allgather");
    return;
  }
#endif
  std::memcpy(recv, send, bytes);
}

void Comm::allgatherv(const void* send, void* recv, const std::vector<size_t>& recv_counts,
                      size_t elem) {
#ifdef WTE_HAVE_MPI
  entering_collective();
  if (mpi_) {
    std::vector<size_t> bytes(recv_counts.size()), displs(recv_counts.size());
    size_t at = 0;
    for (size_t r = 0; r < recv_counts.size(); ++r) {
      bytes[r] = recv_counts[r] * elem;
      displs[r] = at;
      at += bytes[r];
    }
    const std::vector<int> c = counts_of(bytes, "allgatherv"), d = counts_of(displs, "allgatherv");
    check(MPI_Allgatherv(send, c[static_cast<size_t>(rank_)], MPI_BYTE, recv, c.data(), d.data(),
                         MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    return;
  }
#endif
  std::memcpy(recv, send, recv_counts[0] * elem);
}

void Comm::allgatherv_inplace(float* data, const std::vector<size_t>& counts,
                              const std::vector<size_t>& displs) {
#ifdef WTE_HAVE_MPI
  entering_collective();
  if (mpi_) {
    const std::vector<int> c = counts_of(counts, "allgatherv"), d = counts_of(displs, "allgatherv");
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, c.data(), d.data(), MPI_FLOAT,
                         MPI_COMM_WORLD),
          "MPI_Allgatherv");
  }
#endif
  (void)data, (void)counts, (void)displs;
}

void Comm::alltoallv(const float* send, const std::vector<size_t>& send_counts,
                     const std::vector<size_t>& send_displs, float* recv,
                     const std::vector<size_t>& recv_counts,
                     const std::vector<size_t>& recv_displs) {
#ifdef WTE_HAVE_MPI
  entering_collective();
  if (mpi_) {
    const std::vector<int> sc = counts_of(send_counts, "alltoallv"),
                           sd = counts_of(send_displs, "alltoallv"),
                           rc = counts_of(recv_counts, "alltoallv"),
                           rd = counts_of(recv_displs, "alltoallv");
    check(MPI_Alltoallv(send, sc.data(), sd.data(), MPI_FLOAT, recv, rc.data(), rd.data(),
                        MPI_FLOAT, MPI_COMM_WORLD),
          "MPI_Alltoallv");
    return;
  }
#endif
  std::memcpy(recv + recv_displs[0], send + send_displs[0], send_counts[0] * sizeof(float));
}

}  // namespace wte
