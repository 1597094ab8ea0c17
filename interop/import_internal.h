// Internal to the importers (import.cc drives them; import_kineto.cc, import_nsys.cc read).
// An importer reads its input, asks the RunSink for a rank's RankFileBuilder, and adds
// events to it; the sink writes the run directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "interop/interop.h"
#include "base/status.h"
#include "trace/events.h"
#include "trace/rank_meta.h"

namespace rankscope::trace {
class TraceWriter;
}

namespace rankscope::interop::import {

// simdjson reads this many bytes past the end of its input.
inline constexpr size_t kJsonPadding = 64;

// A file's bytes, gunzipped when they start with gzip's magic (several members included),
// with kJsonPadding spare capacity after them. One line naming the file on failure: missing,
// unreadable, a truncated or damaged gzip stream, or more than `max_bytes` once unpacked.
Result<std::string> ReadMaybeGzip(const std::filesystem::path& file, size_t max_bytes = size_t{64} << 30);

// One rank file an importer writes. Lanes (by identity) and strings are looked up once;
// events go to the writer in batches, and the builder waits while the writer is behind
// rather than let it drop events.
class RankFileBuilder {
 public:
  static Result<std::unique_ptr<RankFileBuilder>> Create(const std::filesystem::path& file,
                                                         const trace::RankIdentity& who);
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

  uint64_t events_written() const { return written_; }
  const std::filesystem::path& path() const { return path_; }
  const trace::RankIdentity& identity() const { return identity_; }
  // Closes the file; an error when the writer failed or refused any event.
  Status Close();

 private:
  RankFileBuilder(std::filesystem::path path, trace::RankIdentity identity, std::unique_ptr<trace::TraceWriter> writer);

  std::filesystem::path path_;
  trace::RankIdentity identity_;
  std::unique_ptr<trace::TraceWriter> writer_;
  trace::EventTables batch_;
  uint64_t written_ = 0;
  std::unordered_map<std::string, trace::StringId> strings_;
  std::vector<std::pair<trace::Lane, trace::LaneId>> lanes_;  // few: a linear scan
  bool closed_ = false;
};

// The run an import writes: rank files on demand, one per rank, refusing a rank that two
// inputs claim; and the notes the user sees.
class RunSink {
 public:
  RunSink(std::filesystem::path run_dir, std::string run_id);
  ~RunSink();  // removes what it wrote unless Finish succeeded

  // The rank file for `who` (its run id is set here). A rank of nullopt takes the lowest
  // rank no input has claimed, which is noted unless the importer says why itself
  // (`note_assignment` false). `source` names the input in messages.
  Result<RankFileBuilder*> Rank(trace::RankIdentity who, std::string_view source, bool note_assignment = true);
  void Note(std::string line) { notes_.push_back(std::move(line)); }
  const std::string& run_id() const { return run_id_; }

  // Closes every file; ranks whose world size no input gave get the number of ranks
  // imported. Errors leave nothing behind.
  Status Finish(ImportResult* result);

 private:
  std::filesystem::path run_dir_;
  std::string run_id_;
  std::map<int, std::unique_ptr<RankFileBuilder>> ranks_;
  std::map<int, std::string> sources_;  // which input gave each rank
  std::set<int> unknown_world_size_;
  std::vector<std::string> notes_;
  bool finished_ = false;
};

// Kineto / PyTorch profiler JSON: one rank, from `distributedInfo` (or, for a rankscope
// Chrome export, every rank it holds).
Status ImportKineto(const std::filesystem::path& file, RunSink& sink);
// An nsys SQLite export: one rank per process with CUDA activity or API calls.
Status ImportNsys(const std::filesystem::path& file, RunSink& sink);
// A Chrome trace that ExportChromeTrace wrote (its top-level "rankscope" object lists the
// ranks, their meta and lanes): every rank in it, exactly as it was. `json` is the whole
// file's text with kJsonPadding bytes of capacity after it. ImportKineto hands such files
// here (export_chrome.cc / import_chrome.cc own the format).
Status ImportRankscopeChrome(const std::filesystem::path& file, const std::string& json, RunSink& sink);

// The first `bytes` of a file as stored (fewer when it is shorter; "" when unreadable).
std::string Head(const std::filesystem::path& path, size_t bytes);
// The first `max_bytes` of a file's text, gunzipped when it is gzip ("" when unreadable).
std::string TextHead(const std::filesystem::path& file, size_t max_bytes);

}  // namespace rankscope::interop::import
