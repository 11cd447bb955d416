// The ranks of a data-parallel `wte train` job: a thin wrapper over the few MPI calls wte uses, with
// a one-rank stub when wte is built without MPI (CMake option WTE_MPI off) or started without mpirun.
// Only the `wte` tool links MPI; the library (wte_core, wte_simd) never does.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace wte {

/// MPI_COMM_WORLD of the job that started this process, or a one-rank communicator.
/// MPI is initialised (MPI_Init_thread, MPI_THREAD_FUNNELED: OpenMP threads compute, only the main
/// thread calls MPI) only when a launcher started the process: Open MPI's mpirun
/// (OMPI_COMM_WORLD_SIZE), a PMIx or PMI launcher such as Slurm's srun (PMIX_RANK, PMI_SIZE). A plain
/// `wte train` never touches MPI, so it runs exactly as a build without MPI.
/// Every collective is called by all ranks in the same order; counts may differ per rank where a
/// `v` says so. Throws wte::Error if a message exceeds MPI's int count limit (2^31 - 1 elements).
class Comm {
 public:
  /// The process's communicator, initialised on first use. Throws wte::Error if a launcher started
  /// several ranks but this wte was built without MPI (each would train alone, in one directory).
  static Comm& world();

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// True if MPI was initialised (a launcher started this process; size() may still be 1).
  bool mpi() const { return mpi_; }
  /// "Open MPI v4.1.4, ..." or "no MPI (built without WTE_MPI)" / "no MPI (not started by mpirun)".
  std::string describe() const;

  /// MPI_Finalize (no-op without MPI). Call once, at the end of a command.
  void finalize();
  /// Prints nothing; ends every rank of the job with `code` (MPI_Abort), or exits this process.
  [[noreturn]] void abort(int code);
  /// For an error on a rank other than 0, before abort(): waits until rank 0 has got through its
  /// start-up its own way, so that this rank's MPI_Abort does not kill rank 0 in the middle of it
  /// (say, after it created the run directory and before it removed it again on the same error).
  /// Rank 0 tells every other rank when it enters its first collective call, or finalize(): from
  /// then on it waits for the other ranks and holds no half-done work. If rank 0 meets an error
  /// first, it ends the job itself (MPI_Abort), and this process with it. The wait sleeps 1 ms
  /// between MPI_Test calls, leaving the core to rank 0. Returns at once on rank 0, with one
  /// rank, without MPI, once the notice has arrived, or if MPI reports an error. No timeout:
  /// every rank 0 either aborts, exits (mpirun then ends the job) or reaches a collective.
  void wait_for_rank0();

  void barrier();
  /// A barrier that waits in 1 ms sleeps (MPI_Ibarrier + MPI_Test) instead of spinning, so a rank
  /// that waits leaves its core to the others.
  void barrier_sleeping();
  /// recv (size() · bytes) = every rank's `bytes` bytes of send, in rank order.
  void allgather(const void* send, size_t bytes, void* recv);
  /// recv = the concatenation, in rank order, of every rank's send; recv_counts[r] = rank r's count
  /// of elements of `elem` bytes (send has recv_counts[rank()] elements).
  void allgatherv(const void* send, void* recv, const std::vector<size_t>& recv_counts, size_t elem);
  /// In place: floats [displs[r], displs[r] + counts[r]) of `data` come from rank r to every rank.
  void allgatherv_inplace(float* data, const std::vector<size_t>& counts,
                          const std::vector<size_t>& displs);
  /// Each rank sends floats [send_displs[r], +send_counts[r]) of send to rank r, and receives rank
  /// r's block into recv + recv_displs[r] (recv_counts[r] floats).
  void alltoallv(const float* send, const std::vector<size_t>& send_counts,
                 const std::vector<size_t>& send_displs, float* recv,
                 const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs);

 private:
  Comm() = default;
  void init();
  /// Called first by every collective and by finalize(): on rank 0, the first call sends the
  /// "started" notice of wait_for_rank0() to every other rank (MPI_Isend, completed in finalize()).
  void entering_collective();
  int rank_ = 0;
  int size_ = 1;
  bool mpi_ = false;
  bool finalized_ = false;
  std::string why_single_;
};

}  // namespace wte
