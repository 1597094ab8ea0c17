// base/file_check.h: only regular files (and, where asked, directories) pass; anything
// else, which opening could block on or never finish reading, is one line naming the path
// and what it is.
#include "base/file_check.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/temp_dir.h"

namespace rankscope {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

void ExpectRefused(const Status& status, StatusCode code, const fs::path& path, const std::string& words) {
  ASSERT_FALSE(status.ok()) << path;
  EXPECT_EQ(status.code(), code) << status.message();
  EXPECT_EQ(status.message(), "'" + path.string() + "': " + words);
}

TEST(FileCheck, RegularFilesAndLinksToThemPass) {
  TempDir dir;
  std::ofstream(dir / "trace.json") << "{}";
  fs::create_symlink(dir / "trace.json", dir / "link.json");
  EXPECT_TRUE(CheckRegularFile(dir / "trace.json").ok());
  EXPECT_TRUE(CheckRegularFile(dir / "link.json").ok());
  EXPECT_TRUE(CheckRegularFileOrDirectory(dir / "trace.json").ok());
}

TEST(FileCheck, MissingPathsAndDanglingLinksAreNotFound) {
  TempDir dir;
  fs::create_symlink(dir / "gone.json", dir / "dangling.json");
  ExpectRefused(CheckRegularFile(dir / "none.json"), StatusCode::kNotFound, dir / "none.json",
                "no such file or directory");
  ExpectRefused(CheckRegularFileOrDirectory(dir / "dangling.json"), StatusCode::kNotFound, dir / "dangling.json",
                "no such file or directory");
}

TEST(FileCheck, DirectoriesPassOnlyWhereAsked) {
  TempDir dir;
  EXPECT_TRUE(CheckRegularFileOrDirectory(dir.path()).ok());
  ExpectRefused(CheckRegularFile(dir.path()), StatusCode::kInvalidArgument, dir.path(),
                "not a regular file (a directory)");
}

TEST(FileCheck, FifosSocketsAndDevicesAreRefusedWithoutOpeningThem) {
  TempDir dir;
  const fs::path fifo = dir / "trace.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  // Opening this FIFO for reading would block: the check must not.
  ExpectRefused(CheckRegularFile(fifo), StatusCode::kInvalidArgument, fifo, "not a regular file (a FIFO)");
  ExpectRefused(CheckRegularFileOrDirectory(fifo), StatusCode::kInvalidArgument, fifo, "not a regular file (a FIFO)");

  const fs::path socket_path = dir / "trace.sqlite";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.string().size(), sizeof(address.sun_path));
  std::strcpy(address.sun_path, socket_path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0) << std::strerror(errno);
  ExpectRefused(CheckRegularFile(socket_path), StatusCode::kInvalidArgument, socket_path,
                "not a regular file (a socket)");
  ::close(fd);

  ExpectRefused(CheckRegularFile("/dev/null"), StatusCode::kInvalidArgument, "/dev/null",
                "not a regular file (a character device)");
}

TEST(FileCheck, TypeNames) {
  EXPECT_EQ(FileTypeName(fs::file_type::fifo), "a FIFO");
  EXPECT_EQ(FileTypeName(fs::file_type::block), "a block device");
  EXPECT_EQ(FileTypeName(fs::file_type::unknown), "of an unknown type");
}

}  // namespace
}  // namespace rankscope
