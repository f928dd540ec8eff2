// torch_cudajit C++ tests: the POSIX file helpers of csrc/file_io.h that clean up after killed
// processes: which folders sweep_dead_process_folders removes (only its prefix followed by the
// id of a process that is gone, only folders of this user) and which it keeps.
#include "file_io.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

extern char** environ;

namespace torch_cudajit {
namespace {

// The id of a process that has exited and been reaped, so that it names no process now.
pid_t gone_pid() {
  pid_t pid = -1;
  char arg0[] = "true";
  char* argv[] = {arg0, nullptr};
  EXPECT_EQ(posix_spawnp(&pid, "true", nullptr, nullptr, argv, environ), 0);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return pid;
}

TEST(FileIoTest, SweepRemovesOnlyTheFoldersOfProcessesThatAreGone) {
  const std::string gone = std::to_string(gone_pid()), self = std::to_string(getpid());
  const std::string parent = std::to_string(getppid());
  const std::string prefix = "__nvrtc_auto_pch_";  // NVRTC's, as use_pch() sweeps them
  const std::string folder = cjtest::make_temp_dir();
  struct Entry {
    std::string name;
    bool folder;
    bool removed;
  };
  const std::vector<Entry> entries = {
      {prefix + gone + "_0", true, true},  // NVRTC's PCH folder of a killed process
      {prefix + gone + "_1", true, true},
      {prefix + self + "_0", true, false},    // this process's own
      {prefix + parent + "_0", true, false},  // a live process's
      {prefix + gone + "_2", false, false},   // a file, not a folder
      {prefix + "x" + gone + "_0", true, false},  // no process id after the prefix
      {"other_" + gone + "_0", true, false},       // another prefix
  };
  for (const auto& e : entries) {
    const std::string path = folder + "/" + e.name;
    if (e.folder) {
      ASSERT_EQ(mkdir(path.c_str(), 0700), 0) << path;
      cjtest::write_text(path + "/k_0.pch", "pch");
    } else {
      cjtest::write_text(path, "file");
    }
  }
  EXPECT_EQ(detail::sweep_dead_process_folders(folder, prefix), 2);
  for (const auto& e : entries) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(detail::file_exists(folder + "/" + e.name), !e.removed);
  }
  EXPECT_EQ(detail::sweep_dead_process_folders(folder + "/missing", prefix), 0);
  for (const auto& e : entries) {
    if (!e.folder) {
      unlink((folder + "/" + e.name).c_str());
    } else if (!e.removed) {
      detail::remove_flat_folder(folder + "/" + e.name);
    }
  }
  EXPECT_EQ(rmdir(folder.c_str()), 0);  // every entry went: the folder is empty
}

TEST(FileIoTest, TempFolderIsTmpdirOrTmp) {
  const char* saved = std::getenv("TMPDIR");
  const std::string before = saved != nullptr ? saved : "";
  setenv("TMPDIR", "/var/tmp", 1);
  EXPECT_EQ(detail::temp_folder(), "/var/tmp");
  setenv("TMPDIR", "", 1);
  EXPECT_EQ(detail::temp_folder(), "/tmp");
  if (saved != nullptr) {
    setenv("TMPDIR", before.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
}

}  // namespace
}  // namespace torch_cudajit
