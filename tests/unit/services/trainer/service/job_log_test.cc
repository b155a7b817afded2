// JobLogWriter and JobLogReader: output chunks become whole lines; readers see only whole lines.
#include "services/trainer/service/job_log.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/temp_dir.h"

namespace specd::trainer {
namespace {

TEST(JobLog, CarriageReturnsAndNewlinesEndLinesAndBlankOnesAreDropped) {
  specd::testing::TempDir dir;
  const std::filesystem::path path = dir.path() / "sub" / "job.log";
  absl::StatusOr<JobLogWriter> writer = JobLogWriter::Open(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_TRUE(writer->AppendOutput("\rstep 1/3   ").empty());
  EXPECT_EQ(writer->AppendOutput("\rstep 2/3   \n\nvalidation 2\nerr"),
            (std::vector<std::string>{"step 1/3", "step 2/3", "validation 2"}));
  writer->AppendTrainerLine("attempt 1 ended");
  EXPECT_EQ(writer->FlushOutput(), (std::vector<std::string>{"err"}));
  EXPECT_EQ(writer->last_output_line(), "err");

  JobLogReader reader(path);
  EXPECT_EQ(reader.ReadNewLines(), (std::vector<std::string>{"step 1/3", "step 2/3", "validation 2",
                                                             "[trainer] attempt 1 ended", "err"}));
  EXPECT_TRUE(reader.ReadNewLines().empty());
}

TEST(JobLog, AReaderReturnsALineOnlyOnceItIsComplete) {
  specd::testing::TempDir dir;
  const std::filesystem::path path = dir.path() / "job.log";
  JobLogReader reader(path);
  EXPECT_TRUE(reader.ReadNewLines().empty());  // no file yet
  std::ofstream out(path);
  out << "one\ntw" << std::flush;
  EXPECT_EQ(reader.ReadNewLines(), (std::vector<std::string>{"one"}));
  out << "o\n" << std::flush;
  EXPECT_EQ(reader.ReadNewLines(), (std::vector<std::string>{"two"}));
}

}  // namespace
}  // namespace specd::trainer
