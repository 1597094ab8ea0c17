// Where an import's ranks go: rank files written through trace::TraceWriter, or, for
// commands that analyze another tool's traces directly, the analysis's visitors
// (trace::SpanVisitor), with the same rows, strings, lanes and meta.
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "analyzer/rank_scan.h"
#include "interop/import_internal.h"
#include "trace/reader.h"
#include "trace/run_dir.h"
#include "trace/schema.h"
#include "trace/sqlite_util.h"
#include "trace/writer.h"

namespace rankscope::interop::import {
namespace fs = std::filesystem;

namespace {

constexpr size_t kBatchEvents = 65536;
// Beyond this many events handed to the writer and not yet committed, the importer waits:
// it must not outrun the writer's queue, which would drop events.
constexpr uint64_t kMaxBacklog = 512 * 1024;
// A streamed rank's batches are smaller: they go straight to the analysis, and memory is
// what the stream saves.
constexpr size_t kStreamBatchEvents = 8192;

}  // namespace

// ---- RankFileBuilder ------------------------------------------------------------------------

Result<std::unique_ptr<RankFileBuilder>> RankFileBuilder::Create(const fs::path& file, const trace::RankIdentity& who) {
  RS_ASSIGN_OR_RETURN(std::unique_ptr<trace::TraceWriter> writer, trace::TraceWriter::Create(file, who));
  return std::unique_ptr<RankFileBuilder>(new RankFileBuilder(file, who, std::move(writer), nullptr));
}

std::unique_ptr<RankFileBuilder> RankFileBuilder::CreateStream(trace::SpanVisitor& visitor,
                                                               const trace::RankIdentity& who, fs::path source,
                                                               trace::StreamOptions options) {
  auto builder = std::unique_ptr<RankFileBuilder>(new RankFileBuilder(std::move(source), who, nullptr, &visitor));
  builder->stream_options_ = options;
  return builder;
}

RankFileBuilder::RankFileBuilder(fs::path path, trace::RankIdentity identity,
                                 std::unique_ptr<trace::TraceWriter> writer, trace::SpanVisitor* visitor)
    : path_(std::move(path)), identity_(std::move(identity)), writer_(std::move(writer)), visitor_(visitor) {
  if (visitor_ != nullptr) stream_strings_.emplace_back();  // kEmptyString
}

RankFileBuilder::~RankFileBuilder() {
  if (!closed_ && writer_ != nullptr) (void)writer_->Close();
}

trace::LaneId RankFileBuilder::Lane(const trace::Lane& lane) {
  for (auto& [known, id] : lanes_) {
    if (known.SameIdentity(lane)) {
      if (!lane.name.empty() && lane.name != known.name) {
        known.name = lane.name;
        if (writer_ != nullptr) writer_->AddLane(lane);  // renames it; a stream's trailer has the name
      }
      return id;
    }
  }
  trace::LaneId id = 0;
  if (writer_ != nullptr) {
    id = writer_->AddLane(lane);
  } else {
    id = static_cast<trace::LaneId>(lanes_.size() + 1);
  }
  lanes_.emplace_back(lane, id);
  lanes_.back().first.id = id;
  return id;
}

trace::StringId RankFileBuilder::Intern(std::string_view text) {
  if (text.empty()) return trace::kEmptyString;
  auto it = strings_.find(std::string(text));
  if (it != strings_.end()) return it->second;
  trace::StringId id = 0;
  if (writer_ != nullptr) {
    id = writer_->Intern(text);
  } else {
    id = static_cast<trace::StringId>(stream_strings_.size());
    stream_strings_.emplace_back(text);
  }
  strings_.emplace(std::string(text), id);
  return id;
}

void RankFileBuilder::SetMeta(std::string_view key, std::string_view value) {
  if (writer_ != nullptr) {
    writer_->SetMeta(key, value);
  } else {
    meta_rows_[std::string(key)] = std::string(value);
  }
}

void RankFileBuilder::AddDrops(const trace::DropRecord& drop) {
  if (writer_ != nullptr) {
    writer_->AddDrops(drop);
  } else {
    drops_.push_back(drop);
  }
}

void RankFileBuilder::Flush(bool force) {
  const size_t pending = batch_.size();
  if (pending == 0 || (!force && pending < (writer_ != nullptr ? kBatchEvents : kStreamBatchEvents))) return;
  written_ += pending;
  if (writer_ == nullptr) {
    StreamBatch();
    return;
  }
  // The queue refuses batches it cannot hold: wait until the writer has room.
  for (;;) {
    const trace::WriterStats stats = writer_->stats();
    if (stats.events_submitted - stats.events_committed <= kMaxBacklog) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  writer_->Submit(std::move(batch_));
  batch_ = trace::EventTables{};
}

// The meta rows a rank file of this rank would hold, as its reader would parse them.
Result<trace::RankMeta> RankFileBuilder::StreamMeta() const {
  std::map<std::string, std::string> rows = trace::IdentityToMeta(identity_);
  for (const auto& [key, value] : meta_rows_) rows[key] = value;
  rows[std::string(trace::meta_key::kSchemaVersion)] = std::to_string(trace::kSchemaVersion);
  rows[std::string(trace::meta_key::kClosedCleanly)] = "1";
  Result<trace::RankMeta> meta = trace::MetaFromRows(std::move(rows));
  if (!meta.ok()) return Status(meta.status().code(), fmt::format("{}: {}", path_.string(), meta.status().message()));
  return meta;
}

void RankFileBuilder::StreamBatch() {
  // Marks, collectives and counters travel in the trailer, as a file's header carries them.
  std::move(batch_.nvtx_marks.begin(), batch_.nvtx_marks.end(), std::back_inserter(marks_));
  std::move(batch_.collectives.begin(), batch_.collectives.end(), std::back_inserter(collectives_));
  std::move(batch_.counter_samples.begin(), batch_.counter_samples.end(), std::back_inserter(counters_));
  if (stream_status_.ok()) {
    stream_status_ = [&]() -> Status {
      std::vector<trace::Lane> lanes;
      for (size_t i = lanes_sent_; i < lanes_.size(); ++i) lanes.push_back(lanes_[i].first);
      if (!header_sent_) {
        trace::StreamHeader header;
        RS_ASSIGN_OR_RETURN(header.meta, StreamMeta());
        header.strings = stream_strings_;
        header.lanes = std::move(lanes);
        RS_RETURN_IF_ERROR(visitor_->OnHeader(std::move(header)));
        header_sent_ = true;
      } else if (strings_sent_ < stream_strings_.size() || !lanes.empty()) {
        RS_RETURN_IF_ERROR(visitor_->OnMoreNames(
            std::span<const std::string>(stream_strings_).subspan(strings_sent_), lanes));
      }
      strings_sent_ = stream_strings_.size();
      lanes_sent_ = lanes_.size();
      return analyzer::FeedEventTables(batch_, *visitor_, stream_options_);
    }();
  }
  batch_.clear();
}

Status RankFileBuilder::Close() {
  if (closed_) return Status::Ok();
  Flush(/*force=*/true);
  closed_ = true;
  if (writer_ == nullptr) {
    if (!header_sent_) StreamBatch();  // a rank without rows still has its header
    return stream_status_;
  }
  const trace::WriterStats before = writer_->stats();
  RS_RETURN_IF_ERROR(writer_->Close());
  if (before.events_dropped > 0) {
    return InternalError(fmt::format("{}: the writer refused {} events (damaged input: events on unknown lanes "
                                     "or ending before they start?)",
                                     path_.string(), before.events_dropped));
  }
  return Status::Ok();
}

Status RankFileBuilder::SendTrailer(std::optional<int> world_size) {
  if (writer_ != nullptr) return InternalError("a rank file has no trailer to send");
  RS_RETURN_IF_ERROR(stream_status_);
  if (world_size) identity_.world_size = world_size;
  trace::StreamTrailer trailer;
  RS_ASSIGN_OR_RETURN(trailer.meta, StreamMeta());
  for (const auto& [lane, id] : lanes_) trailer.lanes.push_back(lane);
  trailer.drops = std::move(drops_);
  trailer.marks = std::move(marks_);
  trailer.collectives = std::move(collectives_);
  trailer.counters = std::move(counters_);
  return visitor_->OnTrailer(std::move(trailer));
}

// ---- RankClaims -----------------------------------------------------------------------------

void RankClaims::WaitForTurn(size_t input) {
  if (!ordered_) return;
  std::unique_lock<std::mutex> lock(mutex_);
  turn_.wait(lock, [&] { return next_ >= input; });
}

void RankClaims::DoneClaiming(size_t input) {
  if (!ordered_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_.insert(input);
    while (done_.contains(next_)) ++next_;
  }
  turn_.notify_all();
}

// ---- RunSink --------------------------------------------------------------------------------

namespace {

// Sets the world size of a rank file its writer already closed: an import knows it only once
// every input is read. The same meta row the writer would have written, one file at a time.
Status SetWorldSizeOfClosedFile(const fs::path& file, int world_size) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(file.c_str(), &raw, SQLITE_OPEN_READWRITE, nullptr);
  trace::sql::DbHandle db(raw);
  if (rc != SQLITE_OK) {
    return trace::sql::FromSqlite(raw, rc, "opening it to set its world size").WithContext(file.string());
  }
  sqlite3_busy_timeout(raw, 5000);
  RS_ASSIGN_OR_RETURN(trace::sql::Statement upsert,
                      trace::sql::Statement::Prepare(raw, "INSERT OR REPLACE INTO meta VALUES(?, ?)"));
  upsert.BindText(1, trace::meta_key::kWorldSize);
  upsert.BindText(2, std::to_string(world_size));
  Status set = upsert.StepDone("setting its world size");
  if (!set.ok()) return set.WithContext(file.string());
  return Status::Ok();
}

}  // namespace

RunSink::RunSink(fs::path run_dir, std::string run_id)
    : run_dir_(std::move(run_dir)), run_id_(std::move(run_id)), claims_(std::make_shared<RankClaims>(false)) {}

RunSink::RunSink(std::shared_ptr<RankClaims> claims, size_t input, RankStreamOpener open, std::string run_id,
                 trace::StreamOptions stream_options)
    : run_id_(std::move(run_id)),
      claims_(std::move(claims)),
      input_(input),
      open_stream_(std::move(open)),
      stream_options_(stream_options) {}

RunSink::~RunSink() {
  claims_->DoneClaiming(input_);
  if (finished_ || open_stream_) return;
  // An import that failed leaves no rank files of its own behind.
  std::error_code ec;
  for (auto& [rank, builder] : open_) {
    const fs::path path = builder->path();
    builder.reset();
    fs::remove(path, ec);
  }
  for (const auto& [rank, closed] : closed_) fs::remove(closed.path, ec);
}

Result<RankFileBuilder*> RunSink::Rank(trace::RankIdentity who, std::string_view source, bool note_assignment) {
  claims_->WaitForTurn(input_);
  std::map<int, std::string>& sources = claims_->sources;
  if (!who.rank) {
    int free_rank = 0;
    while (sources.contains(free_rank)) ++free_rank;
    who.rank = free_rank;
    if (note_assignment) notes_.push_back(fmt::format("{}: no rank recorded; imported as rank {}", source, free_rank));
  }
  const int rank = *who.rank;
  if (rank < 0 || rank >= (1 << 20)) {
    return InvalidArgument(fmt::format("{}: rank {} is out of range", source, rank));
  }
  if (auto taken = sources.find(rank); taken != sources.end()) {
    return InvalidArgument(
        fmt::format("{} and {} both hold rank {}: import the traces of one run at a time", taken->second, source, rank));
  }
  if (!who.world_size) unknown_world_size_.insert(rank);
  who.run_id = run_id_;
  std::unique_ptr<RankFileBuilder> builder;
  if (open_stream_) {
    const fs::path input(std::string{source});
    builder = RankFileBuilder::CreateStream(open_stream_(input), who, input, stream_options_);
  } else {
    RS_ASSIGN_OR_RETURN(builder, RankFileBuilder::Create(run_dir_ / trace::RankFileName(rank), who));
  }
  sources.emplace(rank, std::string(source));
  RankFileBuilder* raw = builder.get();
  open_.emplace(rank, std::move(builder));
  return raw;
}

void RunSink::DoneClaiming() { claims_->DoneClaiming(input_); }

void RunSink::NoteLeftOut(std::string line) {
  left_out_.push_back(line);
  notes_.push_back(std::move(line));
}

void RunSink::NoteDamaged(std::string_view source, const DamagedEvents& damaged) {
  for (const DamagedEvents::Line& line : damaged.Lines()) NoteLeftOut(fmt::format("{}: {}", source, line.text));
}

std::vector<int> RunSink::ranks_taken() {
  claims_->WaitForTurn(input_);
  std::vector<int> ranks;
  for (const auto& [rank, source] : claims_->sources) ranks.push_back(rank);
  return ranks;
}

Status RunSink::CloseOpenRanks() {
  while (!open_.empty()) {
    auto it = open_.begin();
    RankFileBuilder& builder = *it->second;
    ClosedRank closed;
    closed.path = builder.path();
    closed.events = builder.events_written() + builder.events().size();
    for (const DamagedEvents::Line& line : builder.damaged().Lines()) {
      closed.damaged.push_back(fmt::format("{}: {}", claims_->sources.at(it->first), line.text));
      builder.SetMeta(line.meta_key, line.text);
    }
    const Status status = builder.Close();
    if (builder.streamed()) closed.stream = std::move(it->second);
    // Closed or not, it is the sink's to remove on failure from here on.
    closed_.emplace(it->first, std::move(closed));
    open_.erase(it);
    RS_RETURN_IF_ERROR(status);
  }
  return Status::Ok();
}

Status RunSink::Finish(ImportResult* result) { return FinishAll({this}, result); }

Status RunSink::FinishAll(const std::vector<RunSink*>& sinks, ImportResult* result) {
  std::map<int, ClosedRank*> closed;  // every input's, by rank
  std::set<int> unknown_world_size;
  for (RunSink* sink : sinks) {
    RS_RETURN_IF_ERROR(sink->CloseOpenRanks());
    for (auto& [rank, rank_closed] : sink->closed_) closed.emplace(rank, &rank_closed);
    unknown_world_size.insert(sink->unknown_world_size_.begin(), sink->unknown_world_size_.end());
  }
  const int ranks = static_cast<int>(closed.size());
  if (ranks == 0) return InvalidArgument("nothing to import: no input held a rank with events");
  uint64_t events = 0;
  for (const auto& [rank, rank_closed] : closed) events += rank_closed->events;
  if (events == 0) {
    // A run with nothing in it would only puzzle every command that reads it.
    std::vector<std::string> why;
    for (RunSink* sink : sinks) why.insert(why.end(), sink->left_out_.begin(), sink->left_out_.end());
    for (const auto& [rank, rank_closed] : closed) {
      why.insert(why.end(), rank_closed->damaged.begin(), rank_closed->damaged.end());
    }
    if (why.empty()) {
      const std::map<int, std::string>& sources = sinks.front()->claims_->sources;
      std::string inputs;
      for (const auto& [rank, source] : sources) inputs += (inputs.empty() ? "" : ", ") + source;
      why.push_back(fmt::format("{} hold{} no events", inputs, sources.size() == 1 ? "s" : ""));
    }
    std::string line;
    for (const std::string& reason : why) line += (line.empty() ? "" : "; ") + reason;
    return InvalidArgument("no events rankscope imports: " + line);
  }
  std::vector<std::string> notes;
  for (RunSink* sink : sinks) notes.insert(notes.end(), sink->notes_.begin(), sink->notes_.end());
  // Where a trace does not say, the world holds at least every rank imported and the highest.
  const int assumed_world_size = std::max(ranks, closed.rbegin()->first + 1);
  if (!unknown_world_size.empty()) {
    notes.push_back(fmt::format("{} of the traces record no world size; taken as {} ({})", unknown_world_size.size(),
                                assumed_world_size,
                                assumed_world_size == ranks ? "the ranks imported" : "the highest rank imported + 1"));
  }
  for (const auto& [rank, rank_closed] : closed) {
    const bool unknown = unknown_world_size.contains(rank);
    if (rank_closed->stream) {
      RS_RETURN_IF_ERROR(rank_closed->stream->SendTrailer(unknown ? std::optional<int>(assumed_world_size)
                                                                  : std::nullopt));
    } else {
      if (unknown) RS_RETURN_IF_ERROR(SetWorldSizeOfClosedFile(rank_closed->path, assumed_world_size));
      result->rank_files.push_back(rank_closed->path);
    }
    notes.insert(notes.end(), rank_closed->damaged.begin(), rank_closed->damaged.end());
    result->events += rank_closed->events;
  }
  result->notes.insert(result->notes.end(), notes.begin(), notes.end());
  for (RunSink* sink : sinks) sink->finished_ = true;
  return Status::Ok();
}

}  // namespace rankscope::interop::import
