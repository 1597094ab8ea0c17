// Internal to the importers (import.cc drives them; import_kineto.cc, import_nsys.cc and
// import_chrome.cc read). An importer reads its input, asks the RunSink for a rank's
// RankFileBuilder, and adds events to it; the sink writes the run directory.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "interop/interop.h"
#include "base/status.h"
#include "trace/events.h"
#include "trace/rank_meta.h"
#include "trace/reader.h"

namespace rankscope::trace {
class TraceWriter;
class SpanVisitor;
}

namespace rankscope::interop::import {

// simdjson reads this many bytes past the end of its input.
inline constexpr size_t kJsonPadding = 64;
// The largest JSON document simdjson parses (SIMDJSON_MAXSIZE_BYTES, 4 GiB - 1): a file
// that is more once unpacked cannot be imported, so nothing beyond it is ever inflated.
inline constexpr size_t kMaxJsonBytes = 0xFFFFFFFF;

// A file's bytes, gunzipped when they start with gzip's magic (several members included),
// with kJsonPadding spare capacity after them. One line naming the file on failure: missing,
// not a regular file (a FIFO would block the read), unreadable, a truncated or damaged gzip
// stream, or more than `max_bytes` as stored or once unpacked (inflating stops as soon as
// the output passes it: a gzip bomb costs no more than `max_bytes`).
Result<std::string> ReadMaybeGzip(const std::filesystem::path& file, size_t max_bytes = kMaxJsonBytes);

// UTF-8's byte-order mark, which some editors and Windows tools put before JSON text.
inline constexpr std::string_view kUtf8ByteOrderMark = "\xEF\xBB\xBF";
// `text` without a leading byte-order mark.
inline std::string_view WithoutByteOrderMark(std::string_view text) {
  return text.starts_with(kUtf8ByteOrderMark) ? text.substr(kUtf8ByteOrderMark.size()) : text;
}

// ---- the bad-event policy, one for every importer ------------------------------------------
//
// An event that lacks a field it needs, or has one of the wrong type, negative where it cannot
// be, not finite or out of range, is damaged: it is left out, counted by its kind and why, and
// the import goes on. Each kind's count becomes one note (ImportResult::notes) and one meta row
// of its rank file (`import.left_out.<kind>`), the same line in both. Only damaged structure
// fails an import, with one line naming the file: not JSON (or cut short), a top level that is
// not an object, traceEvents that is not an array, a truncated or damaged gzip or SQLite file,
// an nsys export without the tables or columns it needs or of a schema version not read here,
// a "rankscope" object whose ranks, lanes or strings are damaged.
class DamagedEvents {
 public:
  // One damaged event of `kind` (the event's category as its trace names it: "kernel",
  // "cpu_op", "NVTX range"; empty when it has none), left out for `reason` ("without a valid
  // ts/dur"). `detail` says which event and what exactly is wrong; the first of each kind is
  // kept for the note.
  void Count(std::string_view kind, std::string_view reason, std::string_view detail);

  struct Line {
    std::string kind;
    std::string meta_key;  // import.left_out.<kind>: lower case, '_' for anything else
    std::string text;      // "left out 3 kernel events without a valid ts/dur (first: ...)"
  };
  // One line per kind, in the order of the kinds' names.
  std::vector<Line> Lines() const;

 private:
  struct Kind {
    std::map<std::string, uint64_t, std::less<>> reasons;
    std::string first_detail;
  };
  std::map<std::string, Kind, std::less<>> kinds_;
};

// Where an import's ranks go when they are not written to files: commands that analyze
// another tool's traces stream each rank straight into a visitor (analyzer/) that this gives
// for the input (`source`) that holds it.
using RankStreamOpener = std::function<trace::SpanVisitor&(const std::filesystem::path& source)>;

// One rank an importer writes: into a rank file, or streamed into a visitor (the same rows,
// strings, lanes and meta the file would hold). Lanes (by identity) and strings are looked
// up once; events go out in batches; the file builder waits while the writer is behind
// rather than let it drop events.
class RankFileBuilder {
 public:
  static Result<std::unique_ptr<RankFileBuilder>> Create(const std::filesystem::path& file,
                                                         const trace::RankIdentity& who);
  // `source` (the input) stands for the file in messages.
  // `options.host_calls`: API calls and syncs too, with correlation ids (the viewer's).
  static std::unique_ptr<RankFileBuilder> CreateStream(trace::SpanVisitor& visitor, const trace::RankIdentity& who,
                                                       std::filesystem::path source, trace::StreamOptions options = {});
  ~RankFileBuilder();
  RankFileBuilder(const RankFileBuilder&) = delete;
  RankFileBuilder& operator=(const RankFileBuilder&) = delete;

  trace::LaneId Lane(const trace::Lane& lane);
  trace::StringId Intern(std::string_view text);
  void SetMeta(std::string_view key, std::string_view value);
  // Events the source itself lost while recording (its drops), recorded as they were.
  void AddDrops(const trace::DropRecord& drop);

  // Add events here, then call Flush: it submits once the batch is large (or `force`).
  trace::EventTables& events() { return batch_; }
  void Flush(bool force = false);

  // Damaged events of this rank, left out (the policy above); noted when the run finishes.
  DamagedEvents& damaged() { return damaged_; }
  const DamagedEvents& damaged() const { return damaged_; }

  uint64_t events_written() const { return written_; }
  const std::filesystem::path& path() const { return path_; }
  const trace::RankIdentity& identity() const { return identity_; }
  bool streamed() const { return visitor_ != nullptr; }
  // Closes the file; an error when the writer failed or refused any event. A stream sends
  // what is left of its rows; its trailer waits for SendTrailer.
  Status Close();
  // Streams only, after Close: the meta, lanes, marks, collectives and drops, with the world
  // size the run settled on when the trace gave none.
  Status SendTrailer(std::optional<int> world_size);

 private:
  RankFileBuilder(std::filesystem::path path, trace::RankIdentity identity, std::unique_ptr<trace::TraceWriter> writer,
                  trace::SpanVisitor* visitor);
  void StreamBatch();
  Result<trace::RankMeta> StreamMeta() const;

  std::filesystem::path path_;
  trace::RankIdentity identity_;
  std::unique_ptr<trace::TraceWriter> writer_;  // null when streamed
  trace::EventTables batch_;
  uint64_t written_ = 0;
  std::unordered_map<std::string, trace::StringId> strings_;
  std::vector<std::pair<trace::Lane, trace::LaneId>> lanes_;  // few: a linear scan
  DamagedEvents damaged_;
  bool closed_ = false;

  // Streamed: what a rank file would hold beside its rows.
  trace::SpanVisitor* visitor_ = nullptr;
  trace::StreamOptions stream_options_;
  std::vector<std::string> stream_strings_;  // index = StringId
  size_t strings_sent_ = 0;
  size_t lanes_sent_ = 0;
  bool header_sent_ = false;
  std::map<std::string, std::string> meta_rows_;  // SetMeta's
  std::vector<trace::DropRecord> drops_;
  std::vector<trace::NvtxMarkEvent> marks_;
  std::vector<trace::CounterSample> counters_;
  std::vector<trace::CollectiveEvent> collectives_;
  Status stream_status_ = Status::Ok();  // the visitor's first error
};

// Which input holds which rank, shared by the inputs of one run. Inputs read at once claim
// in their order, as a sequential import would: an input's first claim waits until every
// input before it is done claiming.
class RankClaims {
 public:
  explicit RankClaims(bool ordered) : ordered_(ordered) {}
  void WaitForTurn(size_t input);
  // Idempotent; every input must say it (also when it failed), or later inputs wait forever.
  void DoneClaiming(size_t input);
  // Read and written by the input holding the turn only (or after every input is done).
  std::map<int, std::string> sources;  // the input that gave each rank

 private:
  bool ordered_;
  std::mutex mutex_;
  std::condition_variable turn_;
  std::set<size_t> done_;
  size_t next_ = 0;
};

// What an import writes for one input (or, for tests, a whole run): rank files (or streams)
// on demand, one per rank, refusing a rank that two inputs claim; and the notes the user
// sees. Each input's rank files are closed once it is read (CloseOpenRanks), so the files an
// import holds open do not grow with its inputs.
class RunSink {
 public:
  // Rank files in `run_dir`, inputs read one after another through this one sink.
  RunSink(std::filesystem::path run_dir, std::string run_id);
  // Input `input` of several read at once, each with its own sink, its ranks streamed
  // through `open` (no files).
  RunSink(std::shared_ptr<RankClaims> claims, size_t input, RankStreamOpener open, std::string run_id,
          trace::StreamOptions stream_options = {});
  ~RunSink();  // removes every rank file it created unless Finish succeeded

  // The rank file for `who` (its run id is set here). A rank of nullopt takes the lowest
  // rank no input has claimed, which is noted unless the importer says why itself
  // (`note_assignment` false). `source` names the input in messages.
  Result<RankFileBuilder*> Rank(trace::RankIdentity who, std::string_view source, bool note_assignment = true);
  // The importer has made every claim it will (inputs after it may claim now).
  void DoneClaiming();
  void Note(std::string line) { notes_.push_back(std::move(line)); }
  // A note of events an input left out (kinds no importer reads); Finish quotes it too when
  // the import keeps no events at all.
  void NoteLeftOut(std::string line);
  // Damaged events that belong to no rank (their process is unknown): a note per kind, each
  // line starting with `source`.
  void NoteDamaged(std::string_view source, const DamagedEvents& damaged);
  const std::string& run_id() const { return run_id_; }
  // The ranks inputs have claimed so far, lowest first (waits for this input's turn).
  std::vector<int> ranks_taken();

  // Closes the rank files opened so far (an input's, once it is read); each rank's damaged
  // events become meta rows now and notes at Finish.
  Status CloseOpenRanks();

  // Closes every file; ranks whose world size no input gave get the number of ranks
  // imported (written into their closed files, one at a time); each rank's damaged events
  // become notes. An import that keeps no events fails, its one line saying what was left
  // out and why. Errors leave nothing behind.
  Status Finish(ImportResult* result);
  // Finish over the sinks of a run's inputs, in input order; streamed ranks get their
  // trailers here.
  static Status FinishAll(const std::vector<RunSink*>& sinks, ImportResult* result);

 private:
  struct ClosedRank {
    std::filesystem::path path;
    uint64_t events = 0;
    std::vector<std::string> damaged;  // the notes of its damaged events
    std::unique_ptr<RankFileBuilder> stream;  // streamed ranks wait here for their trailer
  };

  std::filesystem::path run_dir_;
  std::string run_id_;
  std::shared_ptr<RankClaims> claims_;
  size_t input_ = 0;
  RankStreamOpener open_stream_;  // empty: rank files
  trace::StreamOptions stream_options_;
  std::map<int, std::unique_ptr<RankFileBuilder>> open_;
  std::map<int, ClosedRank> closed_;
  std::set<int> unknown_world_size_;
  std::vector<std::string> notes_;
  std::vector<std::string> left_out_;  // the notes of what was left out, also in notes_
  bool finished_ = false;
};

// ---- nsys: which process is which rank ---------------------------------------------------------

// What one process of an nsys export says about its rank.
struct NsysProcessEvidence {
  int64_t pid = 0;
  // (rank, rank count) of its world communicator, from NCCL's ncclCommInitRank payload.
  std::optional<std::pair<int, int>> nccl_rank;
  std::optional<int> mpi_rank;  // from nsys's MPI trace
  std::string mpi_evidence;     // where that was read: "MPI_RANKS", "thread 'MPI Rank 0'"
};

struct NsysRankEvidence {
  std::vector<NsysProcessEvidence> processes;  // the processes that become ranks, any order
  // The launched process's environment: evidence only for an export of one process, the one
  // case where nsys records whose environment it is.
  std::map<std::string, std::string> launch_environment;
  bool blobs_exported = false;  // nsys export --include-blobs=true: NCCL payloads are kept
  std::set<int> ranks_taken;    // by the run's other inputs: process-order ranks avoid them
};

enum class NsysRankSource { kNcclPayload, kMpi, kEnvironment, kProcessOrder };

struct NsysRankAssignment {
  int64_t pid = 0;
  int rank = 0;
  bool from_evidence = false;  // false: by process order
  std::optional<int> world_size;
  std::optional<int> local_rank;
};

struct NsysRankChoice {
  NsysRankSource source = NsysRankSource::kProcessOrder;
  std::vector<NsysRankAssignment> ranks;  // by pid
  std::vector<std::string> notes;         // how, and why not otherwise
};

// `import.rank_source` of a rank file: "nccl init payload", "nsys mpi trace", ...
std::string_view NsysRankSourceName(NsysRankSource source);

// Which process is which rank, from the evidence alone (it reads and writes nothing). The
// first kind of evidence that some process has and that gives no two processes one rank
// wins: NCCL init payloads, then nsys's MPI trace, then (for one process) the launch
// environment; processes without it take the lowest ranks left, by pid. An error for no
// processes or one pid listed twice.
Result<NsysRankChoice> ChooseNsysRanks(const NsysRankEvidence& evidence);

// The files `inputs` name (a directory of Kineto traces: each of them), with their formats;
// one line for an input that is not another tool's trace.
Result<std::vector<std::pair<std::filesystem::path, TraceFormat>>> ForeignTraceFiles(
    const std::vector<std::filesystem::path>& inputs);
// True when `inputs` is one run directory or rank file; false when they are all other tools'
// traces; one line for a report, a run among other inputs, or an input of no known format.
Result<bool> IsOneRankscopeRun(const std::vector<std::filesystem::path>& inputs);
// ImportNsys or ImportKineto, by format.
Status ImportOne(const std::filesystem::path& file, TraceFormat format, RunSink& sink);

// How a Kineto trace is read: whole when it is at most `whole_file_bytes` once unpacked (one
// parse), else in pieces (json_pieces.h: its top level, then traceEvents in chunks of
// `chunk_bytes`), so an importer holds about that much of a file whatever its size.
struct KinetoReadLimits {
  size_t whole_file_bytes = size_t{256} << 20;
  size_t chunk_bytes = size_t{32} << 20;
};

// Kineto / PyTorch profiler JSON: one rank, from `distributedInfo` (or, for a rankscope
// Chrome export, every rank it holds).
Status ImportKineto(const std::filesystem::path& file, RunSink& sink, KinetoReadLimits limits = {});
// ImportKineto keeps, per thread, the buffers it read its last file with (the next file
// reuses them); this frees the calling thread's.
void ReleaseReadingBuffers();
// An nsys SQLite export: one rank per process with CUDA activity or API calls.
Status ImportNsys(const std::filesystem::path& file, RunSink& sink);
// A Chrome trace that ExportChromeTrace wrote (its top-level "rankscope" object lists the
// ranks, their meta and lanes): every rank in it, exactly as it was. `json` is the whole
// file's text with kJsonPadding bytes of capacity after it. ImportKineto hands such files
// here (export_chrome.cc / import_chrome.cc own the format).
Status ImportRankscopeChrome(const std::filesystem::path& file, const std::string& json, RunSink& sink);

// The first `bytes` of a file as stored (fewer when it is shorter; "" when unreadable or not
// a regular file).
std::string Head(const std::filesystem::path& path, size_t bytes);
// The first `max_bytes` of a file's text, gunzipped when it is gzip ("" when unreadable).
std::string TextHead(const std::filesystem::path& file, size_t max_bytes);

}  // namespace rankscope::interop::import
