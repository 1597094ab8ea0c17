#include "trainer/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/text.h"

namespace rankscope::trainer {
namespace {

constexpr char kMagic[8] = {'R', 'S', 'C', 'K', 'P', 'T', '0', '1'};
constexpr uint64_t kMaxHeaderBytes = 1 << 20;

class Fnv1a {
 public:
  void Add(const void* data, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) hash_ = (hash_ ^ bytes[i]) * 0x100000001B3ull;
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xCBF29CE484222325ull;
};

Status WriteAll(int fd, const void* data, size_t size, Fnv1a* hash, const std::string& path) {
  if (hash != nullptr) hash->Add(data, size);
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return IoError(fmt::format("cannot write checkpoint {}: {}", path, std::strerror(errno)));
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return Status::Ok();
}

Status ReadAll(int fd, void* data, size_t size, Fnv1a* hash, const std::string& path) {
  auto* bytes = static_cast<char*>(data);
  size_t left = size;
  while (left > 0) {
    const ssize_t got = ::read(fd, bytes, left);
    if (got < 0) {
      if (errno == EINTR) continue;
      return IoError(fmt::format("cannot read checkpoint {}: {}", path, std::strerror(errno)));
    }
    if (got == 0) return Corrupt(fmt::format("checkpoint {} is truncated", path));
    bytes += got;
    left -= static_cast<size_t>(got);
  }
  if (hash != nullptr) hash->Add(data, size);
  return Status::Ok();
}

class FileCloser {
 public:
  explicit FileCloser(int fd) : fd_(fd) {}
  ~FileCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

nlohmann::json HeaderJson(const CheckpointContents& c) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& state : c.optimizer_state) shapes.push_back(state.size());
  return {{"format", "rankscope-trainer checkpoint"},
          {"version", 1},
          {"model", {{"features", c.features}, {"width", c.width}, {"depth", c.depth},
                     {"classes", c.classes}, {"activation", c.activation}}},
          {"optimizer", c.optimizer},
          {"workload", {{"seed", c.seed}, {"world_size", c.world_size}, {"batch", c.batch}, {"accum", c.accum}}},
          {"steps_done", c.steps_done},
          {"optimizer_steps", c.optimizer_steps},
          {"parameters", c.parameters.size()},
          {"optimizer_state", shapes}};
}

Status ParseHeader(const std::string& text, CheckpointContents& c, std::vector<size_t>& state_sizes,
                   size_t& parameter_count) {
  try {
    const nlohmann::json header = nlohmann::json::parse(text);
    if (header.at("version").get<int>() != 1) {
      return Unsupported(fmt::format("checkpoint version {} is not supported (this trainer reads 1)",
                                     header.at("version").dump()));
    }
    const auto& model = header.at("model");
    c.features = model.at("features").get<int>();
    c.width = model.at("width").get<int>();
    c.depth = model.at("depth").get<int>();
    c.classes = model.at("classes").get<int>();
    c.activation = model.at("activation").get<std::string>();
    c.optimizer = header.at("optimizer").get<std::string>();
    const auto& workload = header.at("workload");
    c.seed = workload.at("seed").get<uint64_t>();
    c.world_size = workload.at("world_size").get<int>();
    c.batch = workload.at("batch").get<int>();
    c.accum = workload.at("accum").get<int>();
    c.steps_done = header.at("steps_done").get<int64_t>();
    c.optimizer_steps = header.at("optimizer_steps").get<int64_t>();
    const auto& parameters = header.at("parameters");
    if (!parameters.is_number_unsigned()) return Corrupt("bad header: parameters is not a count");
    parameter_count = parameters.get<size_t>();
    for (const auto& size : header.at("optimizer_state")) {
      if (!size.is_number_unsigned()) return Corrupt("bad header: an optimizer-state size is not a count");
      state_sizes.push_back(size.get<size_t>());
    }
  } catch (const nlohmann::json::exception& error) {
    return Corrupt(fmt::format("bad header: {}", error.what()));
  }
  return Status::Ok();
}

}  // namespace

Status SaveCheckpoint(const std::string& path, const CheckpointContents& contents) {
  const std::filesystem::path target(path);
  const std::filesystem::path directory = target.has_parent_path() ? target.parent_path() : ".";
  const std::string temporary = (directory / fmt::format(".{}.tmp.{}", target.filename().string(), ::getpid())).string();
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(fmt::format("cannot create checkpoint {}: {}", temporary, std::strerror(errno)));
  FileCloser closer(fd);
  auto fail = [&](Status status) {
    ::unlink(temporary.c_str());
    return status;
  };

  Fnv1a hash;
  const std::string header = HeaderJson(contents).dump();
  const uint64_t header_size = header.size();
  Status status = WriteAll(fd, kMagic, sizeof kMagic, &hash, path);
  if (status.ok()) status = WriteAll(fd, &header_size, sizeof header_size, &hash, path);
  if (status.ok()) status = WriteAll(fd, header.data(), header.size(), &hash, path);
  if (status.ok()) {
    status = WriteAll(fd, contents.parameters.data(), contents.parameters.size() * sizeof(float), &hash, path);
  }
  for (const auto& state : contents.optimizer_state) {
    if (status.ok()) status = WriteAll(fd, state.data(), state.size() * sizeof(float), &hash, path);
  }
  const uint64_t checksum = hash.value();
  if (status.ok()) status = WriteAll(fd, &checksum, sizeof checksum, nullptr, path);
  if (status.ok() && ::fsync(fd) != 0) {
    status = IoError(fmt::format("cannot flush checkpoint {}: {}", temporary, std::strerror(errno)));
  }
  if (::close(closer.release()) != 0 && status.ok()) {
    status = IoError(fmt::format("cannot close checkpoint {}: {}", temporary, std::strerror(errno)));
  }
  if (!status.ok()) return fail(status);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    return fail(IoError(fmt::format("cannot replace checkpoint {}: {}", path, std::strerror(errno))));
  }
  // The rename itself must reach the disk for the new checkpoint to survive a crash.
  const int directory_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd >= 0) {
    ::fsync(directory_fd);
    ::close(directory_fd);
  }
  return Status::Ok();
}

Result<CheckpointContents> LoadCheckpoint(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound(fmt::format("cannot open checkpoint {}: {}", path, std::strerror(errno)));
  FileCloser closer(fd);
  struct stat info {};
  if (::fstat(fd, &info) != 0) return IoError(fmt::format("cannot stat checkpoint {}: {}", path, std::strerror(errno)));
  const uint64_t file_size = static_cast<uint64_t>(info.st_size);

  auto corrupt = [&](const std::string& what) { return Corrupt(fmt::format("checkpoint {} {}", path, what)); };
  Fnv1a hash;
  char magic[sizeof kMagic];
  if (file_size < sizeof magic + 2 * sizeof(uint64_t)) return corrupt("is too short to be a checkpoint");
  RS_RETURN_IF_ERROR(ReadAll(fd, magic, sizeof magic, &hash, path));
  if (std::memcmp(magic, kMagic, sizeof magic) != 0) return corrupt("is not a rankscope-trainer checkpoint");
  uint64_t header_size = 0;
  RS_RETURN_IF_ERROR(ReadAll(fd, &header_size, sizeof header_size, &hash, path));
  if (header_size > kMaxHeaderBytes || header_size > file_size) return corrupt("has a bad header length");
  std::string header(header_size, '\0');
  RS_RETURN_IF_ERROR(ReadAll(fd, header.data(), header.size(), &hash, path));

  CheckpointContents contents;
  std::vector<size_t> state_sizes;
  size_t parameter_count = 0;
  if (Status status = ParseHeader(header, contents, state_sizes, parameter_count); !status.ok()) {
    return status.WithContext(fmt::format("checkpoint {}", path));
  }
  // The arrays must account for the rest of the file exactly; this also bounds the sizes
  // before anything is allocated.
  // Each size is checked before adding, so a hostile header cannot wrap the sum around.
  const uint64_t max_floats = file_size / sizeof(float);
  if (parameter_count > max_floats) return corrupt("has a bad parameter count");
  uint64_t floats = parameter_count;
  for (size_t size : state_sizes) {
    if (size > max_floats || floats + size > max_floats) return corrupt("has a bad optimizer-state size");
    floats += size;
  }
  const uint64_t expected = sizeof magic + sizeof header_size + header_size + floats * sizeof(float) + sizeof(uint64_t);
  if (floats > file_size || expected != file_size) {
    return corrupt(fmt::format("has {} bytes where its header describes {}", file_size, expected));
  }
  contents.parameters.resize(parameter_count);
  RS_RETURN_IF_ERROR(ReadAll(fd, contents.parameters.data(), parameter_count * sizeof(float), &hash, path));
  for (size_t size : state_sizes) {
    contents.optimizer_state.emplace_back(size);
    RS_RETURN_IF_ERROR(ReadAll(fd, contents.optimizer_state.back().data(), size * sizeof(float), &hash, path));
  }
  uint64_t checksum = 0;
  RS_RETURN_IF_ERROR(ReadAll(fd, &checksum, sizeof checksum, nullptr, path));
  if (checksum != hash.value()) return corrupt("is damaged (checksum mismatch)");
  return contents;
}

Status CheckResumable(const CheckpointContents& c, const TrainerOptions& o) {
  const std::string saved = fmt::format("features {} width {} depth {} classes {} {} {}", c.features, c.width,
                                        c.depth, c.classes, c.activation, c.optimizer);
  const std::string wanted = fmt::format("features {} width {} depth {} classes {} {} {}", o.features, o.width,
                                         o.depth, o.classes, ActivationName(o.activation), OptimizerName(o.optimizer));
  if (saved != wanted) {
    return InvalidArgument(fmt::format("the checkpoint is for another model or optimizer ({}; this run: {})",
                                       saved, wanted));
  }
  return Status::Ok();
}

}  // namespace rankscope::trainer
