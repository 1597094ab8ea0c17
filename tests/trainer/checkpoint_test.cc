// Checkpoints: an exact round trip, atomic replacement (a failed save leaves the previous
// checkpoint loadable), clear errors for damaged files, and the resume compatibility check.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "tests/temp_dir.h"
#include "trainer/checkpoint.h"
#include "trainer/options.h"

namespace rankscope::trainer {
namespace {

using rankscope::testing::TempDir;

std::string ReadBytes(const std::string& path) {
  std::string bytes;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return bytes;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got <= 0) break;
    bytes.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return bytes;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path;
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t written = ::write(fd, bytes.data() + done, bytes.size() - done);
    ASSERT_GT(written, 0);
    done += static_cast<size_t>(written);
  }
  ::close(fd);
}

CheckpointContents SampleContents(size_t parameters, float base) {
  CheckpointContents c;
  c.features = 5;
  c.width = 7;
  c.depth = 2;
  c.classes = 3;
  c.activation = "gelu";
  c.optimizer = "adamw";
  c.seed = 0xDEADBEEFCAFEBABEull;  // above 2^63: must survive JSON as an unsigned number
  c.world_size = 4;
  c.batch = 16;
  c.accum = 3;
  c.steps_done = 12345678901ll;
  c.optimizer_steps = 4115226300ll;
  for (size_t i = 0; i < parameters; ++i) c.parameters.push_back(base + 0.5f * static_cast<float>(i));
  c.optimizer_state.push_back(std::vector<float>(parameters, base - 1.0f));
  c.optimizer_state.push_back(std::vector<float>(parameters / 2 + 1, base * 3.0f));
  return c;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void ExpectSame(const CheckpointContents& a, const CheckpointContents& b) {
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.depth, b.depth);
  EXPECT_EQ(a.classes, b.classes);
  EXPECT_EQ(a.activation, b.activation);
  EXPECT_EQ(a.optimizer, b.optimizer);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.world_size, b.world_size);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.accum, b.accum);
  EXPECT_EQ(a.steps_done, b.steps_done);
  EXPECT_EQ(a.optimizer_steps, b.optimizer_steps);
  EXPECT_TRUE(SameBits(a.parameters, b.parameters));
  ASSERT_EQ(a.optimizer_state.size(), b.optimizer_state.size());
  for (size_t i = 0; i < a.optimizer_state.size(); ++i) {
    EXPECT_TRUE(SameBits(a.optimizer_state[i], b.optimizer_state[i])) << "state " << i;
  }
}

size_t EntriesIn(const std::filesystem::path& directory) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(directory)) ++n;
  return n;
}

TEST(CheckpointTest, RoundTripKeepsEveryField) {
  TempDir dir;
  const std::string path = (dir / "model.ckpt").string();
  CheckpointContents saved = SampleContents(37, 0.25f);
  // Values that a text format or a conversion would change.
  saved.parameters[0] = -0.0f;
  saved.parameters[1] = std::numeric_limits<float>::denorm_min();
  saved.parameters[2] = std::numeric_limits<float>::infinity();
  saved.parameters[3] = std::numeric_limits<float>::quiet_NaN();
  saved.parameters[4] = 1.0f / 3.0f;
  ASSERT_TRUE(SaveCheckpoint(path, saved).ok());
  Result<CheckpointContents> loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectSame(saved, *loaded);
  EXPECT_EQ(EntriesIn(dir.path()), 1u);  // no temporary file left beside it
}

TEST(CheckpointTest, RoundTripOfEmptyArrays) {
  TempDir dir;
  const std::string path = (dir / "empty.ckpt").string();
  CheckpointContents saved = SampleContents(0, 1.0f);
  saved.optimizer_state.clear();
  saved.optimizer = "sgd";
  ASSERT_TRUE(SaveCheckpoint(path, saved).ok());
  Result<CheckpointContents> loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectSame(saved, *loaded);
}

TEST(CheckpointTest, SavingAgainReplacesTheCheckpoint) {
  TempDir dir;
  const std::string path = (dir / "model.ckpt").string();
  ASSERT_TRUE(SaveCheckpoint(path, SampleContents(10, 1.0f)).ok());
  const CheckpointContents b = SampleContents(20, 2.0f);
  ASSERT_TRUE(SaveCheckpoint(path, b).ok());
  Result<CheckpointContents> loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectSame(b, *loaded);
  EXPECT_EQ(EntriesIn(dir.path()), 1u);
}

TEST(CheckpointTest, FailedSaveInReadOnlyDirectoryKeepsThePreviousCheckpoint) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  TempDir dir;
  const std::filesystem::path sub = dir / "ckpt";
  std::filesystem::create_directory(sub);
  const std::string path = (sub / "model.ckpt").string();
  const CheckpointContents a = SampleContents(10, 1.0f);
  ASSERT_TRUE(SaveCheckpoint(path, a).ok());
  ASSERT_EQ(::chmod(sub.c_str(), 0500), 0);
  const Status status = SaveCheckpoint(path, SampleContents(20, 2.0f));
  ::chmod(sub.c_str(), 0700);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kIo) << status.ToString();
  Result<CheckpointContents> loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectSame(a, *loaded);
}

// Writes past RLIMIT_FSIZE fail with EFBIG (SIGXFSZ ignored) for every user, root included:
// a save that dies half-way through its data, as on a full disk.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit limited = old_;
    limited.rlim_cur = bytes;
    ok_ = setrlimit(RLIMIT_FSIZE, &limited) == 0;
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  bool ok() const { return ok_; }

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
  bool ok_ = false;
};

TEST(CheckpointTest, SaveThatFailsHalfWayKeepsThePreviousCheckpoint) {
  TempDir dir;
  const std::string path = (dir / "model.ckpt").string();
  const CheckpointContents a = SampleContents(100, 1.0f);  // about 1.5 KB
  ASSERT_TRUE(SaveCheckpoint(path, a).ok());
  Status status;
  {
    FileSizeLimit limit(8192);
    ASSERT_TRUE(limit.ok());
    status = SaveCheckpoint(path, SampleContents(20000, 2.0f));  // about 120 KB
  }
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kIo) << status.ToString();
  Result<CheckpointContents> loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectSame(a, *loaded);
  EXPECT_EQ(EntriesIn(dir.path()), 1u) << "the partial temporary file must be removed";
}

TEST(CheckpointTest, SaveBelowARegularFileFails) {
  TempDir dir;
  WriteBytes((dir / "plain").string(), "not a directory");
  const Status status = SaveCheckpoint((dir / "plain" / "model.ckpt").string(), SampleContents(4, 1.0f));
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kIo);
  EXPECT_NE(status.message().find("model.ckpt"), std::string::npos) << status.message();
  EXPECT_EQ(ReadBytes((dir / "plain").string()), "not a directory");
}

TEST(CheckpointTest, MissingFileIsNotFound) {
  TempDir dir;
  Result<CheckpointContents> loaded = LoadCheckpoint((dir / "nope.ckpt").string());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
}

class DamagedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    good_path_ = (dir_ / "good.ckpt").string();
    bad_path_ = (dir_ / "bad.ckpt").string();
    ASSERT_TRUE(SaveCheckpoint(good_path_, SampleContents(16, 1.5f)).ok());
    good_ = ReadBytes(good_path_);
    ASSERT_GT(good_.size(), 16u + 16u * 4u);
  }

  // Loads `bytes` from a file; expects a clear error (no crash, no exception).
  Status Load(const std::string& bytes) {
    WriteBytes(bad_path_, bytes);
    Result<CheckpointContents> loaded = LoadCheckpoint(bad_path_);
    EXPECT_FALSE(loaded.ok());
    if (loaded.ok()) return Status::Ok();
    const Status status = loaded.status();
    EXPECT_NE(status.message().find(bad_path_), std::string::npos) << status.message();
    EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
    return status;
  }

  static std::string WithHeaderLength(std::string bytes, uint64_t length) {
    std::memcpy(bytes.data() + 8, &length, sizeof length);
    return bytes;
  }

  TempDir dir_;
  std::string good_path_;
  std::string bad_path_;
  std::string good_;
};

TEST_F(DamagedCheckpointTest, EmptyFile) {
  const Status status = Load("");
  EXPECT_EQ(status.code(), StatusCode::kCorrupt) << status.ToString();
}

TEST_F(DamagedCheckpointTest, WrongMagic) {
  std::string bytes = good_;
  std::memcpy(bytes.data(), "RSCKPT02", 8);
  const Status status = Load(bytes);
  EXPECT_EQ(status.code(), StatusCode::kCorrupt);
  EXPECT_NE(status.message().find("not a rankscope-trainer checkpoint"), std::string::npos) << status.message();
  const Status text = Load("this is a text file and not a checkpoint at all\n");
  EXPECT_EQ(text.code(), StatusCode::kCorrupt);
}

TEST_F(DamagedCheckpointTest, HeaderLengthLargerThanTheFile) {
  for (uint64_t length : {uint64_t{good_.size()} + 1, uint64_t{1} << 19, uint64_t{1} << 40,
                          std::numeric_limits<uint64_t>::max()}) {
    const Status status = Load(WithHeaderLength(good_, length));
    EXPECT_EQ(status.code(), StatusCode::kCorrupt) << "length " << length << ": " << status.ToString();
  }
  // Shorter than the real header: the JSON is cut off.
  const Status shorter = Load(WithHeaderLength(good_, 10));
  EXPECT_EQ(shorter.code(), StatusCode::kCorrupt) << shorter.ToString();
}

TEST_F(DamagedCheckpointTest, TruncatedAtEveryLength) {
  for (size_t length = 0; length < good_.size(); ++length) {
    SCOPED_TRACE("truncated to " + std::to_string(length) + " of " + std::to_string(good_.size()) + " bytes");
    const Status status = Load(good_.substr(0, length));
    EXPECT_EQ(status.code(), StatusCode::kCorrupt) << status.ToString();
  }
  // Appended bytes are as wrong as missing ones.
  EXPECT_EQ(Load(good_ + "x").code(), StatusCode::kCorrupt);
}

TEST_F(DamagedCheckpointTest, FlippedByteInTheDataIsAChecksumMismatch) {
  // The last 8 bytes are the checksum, the 16 · 4 + 9 · 4 + 8 · 4 bytes before them the arrays.
  for (size_t from_end : {size_t{9}, size_t{40}, size_t{100}, size_t{1}}) {
    std::string bytes = good_;
    bytes[bytes.size() - from_end] = static_cast<char>(bytes[bytes.size() - from_end] ^ 0x10);
    const Status status = Load(bytes);
    EXPECT_EQ(status.code(), StatusCode::kCorrupt);
    EXPECT_NE(status.message().find("checksum"), std::string::npos) << status.message();
  }
}

TEST_F(DamagedCheckpointTest, EveryFlippedByteIsDetected) {
  for (size_t i = 0; i < good_.size(); ++i) {
    SCOPED_TRACE("byte " + std::to_string(i));
    std::string bytes = good_;
    bytes[i] = static_cast<char>(bytes[i] ^ 0x01);
    const Status status = Load(bytes);
    EXPECT_TRUE(status.code() == StatusCode::kCorrupt || status.code() == StatusCode::kUnsupported)
        << status.ToString();
  }
}

// A file written by hand after the documented layout: "RSCKPT01", u64 header length, JSON
// header, the float arrays, u64 FNV-1a of everything before it.
std::string HandMade(const std::string& header, const std::vector<float>& floats) {
  std::string bytes = "RSCKPT01";
  const uint64_t length = header.size();
  bytes.append(reinterpret_cast<const char*>(&length), sizeof length);
  bytes += header;
  if (!floats.empty()) bytes.append(reinterpret_cast<const char*>(floats.data()), floats.size() * sizeof(float));
  uint64_t hash = 0xCBF29CE484222325ull;
  for (unsigned char byte : bytes) hash = (hash ^ byte) * 0x100000001B3ull;
  bytes.append(reinterpret_cast<const char*>(&hash), sizeof hash);
  return bytes;
}

std::string Header(const std::string& parameters, const std::string& state) {
  return R"({"format":"rankscope-trainer checkpoint","version":1,)"
         R"("model":{"features":2,"width":3,"depth":1,"classes":2,"activation":"relu"},)"
         R"("optimizer":"sgd","workload":{"seed":9,"world_size":2,"batch":8,"accum":1},)"
         R"("steps_done":5,"optimizer_steps":5,"parameters":)" +
         parameters + R"(,"optimizer_state":)" + state + "}";
}

TEST_F(DamagedCheckpointTest, HandMadeFileInTheDocumentedLayoutLoads) {
  const std::string path = (dir_ / "hand.ckpt").string();
  WriteBytes(path, HandMade(Header("3", "[2]"), {1.0f, 2.0f, 3.0f, -4.0f, -5.0f}));
  Result<CheckpointContents> loaded = LoadCheckpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->activation, "relu");
  EXPECT_EQ(loaded->steps_done, 5);
  EXPECT_EQ(loaded->parameters, (std::vector<float>{1.0f, 2.0f, 3.0f}));
  ASSERT_EQ(loaded->optimizer_state.size(), 1u);
  EXPECT_EQ(loaded->optimizer_state[0], (std::vector<float>{-4.0f, -5.0f}));
}

TEST_F(DamagedCheckpointTest, HeaderWithImpossibleSizesIsRejectedBeforeAllocating) {
  // Consistent checksum, but array sizes the file cannot hold.
  const Status huge = Load(HandMade(Header("1099511627776", "[]"), {1.0f}));
  EXPECT_EQ(huge.code(), StatusCode::kCorrupt) << huge.ToString();
  const Status huge_state = Load(HandMade(Header("1", "[4611686018427387904]"), {1.0f}));
  EXPECT_EQ(huge_state.code(), StatusCode::kCorrupt) << huge_state.ToString();
}

TEST_F(DamagedCheckpointTest, HeaderSizesWhoseSumWrapsAroundAreRejected) {
  // 2^64 − 1 parameters and a state of 2: the sum wraps around 2^64 to 1, the one float the
  // file does hold, so a size check on the sum alone passes.
  const Status wrapping = Load(HandMade(Header("18446744073709551615", "[2]"), {1.0f}));
  EXPECT_EQ(wrapping.code(), StatusCode::kCorrupt) << wrapping.ToString();
}

TEST_F(DamagedCheckpointTest, NegativeHeaderSizeIsRejected) {
  // -1 read as size_t is 2^64 − 1: the same wrap-around as above.
  const Status negative = Load(HandMade(Header("-1", "[2]"), {1.0f}));
  EXPECT_EQ(negative.code(), StatusCode::kCorrupt) << negative.ToString();
}

TEST_F(DamagedCheckpointTest, HeaderThatIsNotTheExpectedJson) {
  EXPECT_EQ(Load(HandMade("{not json", {})).code(), StatusCode::kCorrupt);
  EXPECT_EQ(Load(HandMade(R"({"version":1})", {})).code(), StatusCode::kCorrupt);
  EXPECT_EQ(Load(HandMade(R"([1,2,3])", {})).code(), StatusCode::kCorrupt);
  std::string other_version = Header("0", "[]");
  other_version.replace(other_version.find("\"version\":1"), 11, "\"version\":2");
  const Status status = Load(HandMade(other_version, {}));
  EXPECT_EQ(status.code(), StatusCode::kUnsupported) << status.ToString();
}

TrainerOptions MatchingOptions() {
  TrainerOptions o;
  o.features = 5;
  o.width = 7;
  o.depth = 2;
  o.classes = 3;
  o.activation = kernels::Activation::kGelu;
  o.optimizer = OptimizerKind::kAdamW;
  return o;
}

TEST(CheckResumableTest, MatchingModelAndOptimizerIsFine) {
  const CheckpointContents c = SampleContents(4, 1.0f);
  EXPECT_TRUE(CheckResumable(c, MatchingOptions()).ok());
  // The workload may differ (it is only reported).
  TrainerOptions o = MatchingOptions();
  o.batch = 3;
  o.seed = 99;
  o.accum = 7;
  EXPECT_TRUE(CheckResumable(c, o).ok());
}

TEST(CheckResumableTest, MismatchNamesBothShapes) {
  const CheckpointContents c = SampleContents(4, 1.0f);
  {
    TrainerOptions o = MatchingOptions();
    o.width = 8;
    const Status status = CheckResumable(c, o);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("width 7"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("width 8"), std::string::npos) << status.message();
  }
  {
    TrainerOptions o = MatchingOptions();
    o.activation = kernels::Activation::kRelu;
    const Status status = CheckResumable(c, o);
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.message().find("gelu"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("relu"), std::string::npos) << status.message();
  }
  {
    TrainerOptions o = MatchingOptions();
    o.optimizer = OptimizerKind::kSgd;
    const Status status = CheckResumable(c, o);
    EXPECT_FALSE(status.ok());
    EXPECT_NE(status.message().find("adamw"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("sgd"), std::string::npos) << status.message();
  }
  for (int field = 0; field < 4; ++field) {
    TrainerOptions o = MatchingOptions();
    (field == 0 ? o.features : field == 1 ? o.depth : field == 2 ? o.classes : o.width) += 1;
    EXPECT_FALSE(CheckResumable(c, o).ok()) << "field " << field;
  }
}

}  // namespace
}  // namespace rankscope::trainer
