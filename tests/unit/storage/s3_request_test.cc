// What S3 signs: the canonical query and encoded paths libcurl's SigV4 signs as given, and the
// few elements of S3's XML answers the backend reads. The requests themselves are tested on a
// real Ceph gateway (tests/integration/s3_backend_test.cc).
#include <gtest/gtest.h>

#include "storage/s3_backend.h"
#include "storage/s3_connection.h"
#include "tests/unit/status_matchers.h"

namespace hlocache::storage {
namespace {

TEST(S3RequestTest, TheQueryIsSortedByNameAndEveryPartEncoded) {
  EXPECT_EQ(CanonicalQuery({{"uploads", ""}}), "uploads=");
  EXPECT_EQ(CanonicalQuery({{"uploadId", "2~a/b+c"}, {"partNumber", "3"}}),
            "partNumber=3&uploadId=2~a%2Fb%2Bc");
  EXPECT_EQ(CanonicalQuery({{"prefix", "ab/"}, {"list-type", "2"}}), "list-type=2&prefix=ab%2F");
  EXPECT_EQ(CanonicalQuery({}), "");
}

TEST(S3RequestTest, PathsKeepTheirSlashesAndEncodeTheRest) {
  EXPECT_EQ(UriEncode("team a/0f/v1-0f12", true), "team%20a/0f/v1-0f12");
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(UriEncode("AZaz09-_.~", false), "AZaz09-_.~");
  EXPECT_EQ(UriEncode("\xff=", false), "%FF%3D");
}

TEST(S3RequestTest, ElementsAreReadFromAnswers) {
  const std::string error =
      "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message></Message></Error>";
  EXPECT_EQ(XmlElement(error, "Code"), "SlowDown");
  EXPECT_EQ(XmlElement(error, "Message"), "");
  EXPECT_EQ(XmlElement(error, "UploadId"), "");
  EXPECT_EQ(XmlElement("<UploadId>2~x", "UploadId"), "");  // Unclosed: nothing.
}

TEST(S3RequestTest, BucketUrlsAndCredentialsAreCheckedWhenTheBackendIsMade) {
  ::setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "very-secret-value", 1);
  EXPECT_FALSE(IsS3Url("http://host"));
  EXPECT_TRUE(IsS3Url("s3://bucket"));
  EXPECT_THAT(MakeS3Backend("s3://B", {}), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(MakeS3Backend("s3://ab", {}), StatusIs(StatusCode::kInvalidArgument));
  S3Options ftp;
  ftp.endpoint = "ftp://host";
  EXPECT_THAT(MakeS3Backend("s3://bucket", ftp), StatusIs(StatusCode::kInvalidArgument));
  auto made = MakeS3Backend("s3://my-bucket//team/a/", {});
  ASSERT_THAT(made, IsOk());
  EXPECT_EQ((*made)->name(), "s3://my-bucket/team/a");
  EXPECT_TRUE((*made)->remote());
  EXPECT_FALSE((*made)->CanCompile("cpu-x86-64-v2"));

  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  auto without = MakeS3Backend("s3://my-bucket", {});
  ASSERT_THAT(without, StatusIs(StatusCode::kPermissionDenied));
  EXPECT_NE(without.error().message().find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
  ::unsetenv("AWS_ACCESS_KEY_ID");
}

}  // namespace
}  // namespace hlocache::storage
