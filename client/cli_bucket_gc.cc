// `hlocache gc --cache s3://BUCKET[/PREFIX]`: a size cap for a fleet's bucket.
#include <chrono>
#include <ostream>

#include "client/commands.h"
#include "common/byte_size.h"
#include "storage/s3_backend.h"

namespace hlocache::client {

int RunBucketGc(const BucketGcSettings& settings, std::ostream& out, std::ostream& err) {
  auto fail = [&](const std::string& why) {
    err << "hlocache gc: " << why << "\n";
    return 1;
  };
  if (!storage::IsS3Url(settings.bucket)) {
    return fail("--cache takes a bucket, s3://BUCKET[/PREFIX]; for a store directory use --dir");
  }
  auto limit = ParseByteSize(settings.max_size);
  if (!limit) return fail("--max-size: " + limit.error().message());
  if (settings.keep_used_within_seconds < 0) return fail("--keep-used-within must be >= 0");
  auto bucket = storage::MakeS3Backend(settings.bucket, {});
  if (!bucket) return fail(bucket.error().message());
  auto entries = (*bucket)->ListEntries();
  if (!entries) return fail(entries.error().message());
  const storage::BucketGcPlan plan =
      storage::PlanBucketGc(std::move(*entries), *limit, std::chrono::system_clock::now(),
                            std::chrono::seconds(settings.keep_used_within_seconds));
  out << (*bucket)->name() << ": " << plan.entries_before << " entries, " << plan.bytes_before
      << " bytes\n";
  uint64_t evicted_bytes = 0;
  size_t evicted = 0;
  for (const storage::BucketEntry& e : plan.evict) {
    if (settings.dry_run) {
      out << "would evict " << e.key << " (" << e.size << " bytes)\n";
    } else if (Status s = (*bucket)->Delete(e); !s.ok()) {
      out << "evicted " << evicted << " entries (" << evicted_bytes << " bytes) before the error\n";
      return fail(s.message());
    }
    ++evicted;
    evicted_bytes += e.size;
  }
  out << (settings.dry_run ? "would evict " : "evicted ") << evicted << " entries ("
      << evicted_bytes << " bytes); " << plan.entries_before - evicted << " entries ("
      << plan.bytes_after << " bytes) " << (settings.dry_run ? "would " : "") << "remain\n";
  if (plan.bytes_after > *limit) {
    out << "still over " << settings.max_size << ": " << plan.kept_as_recent
        << " entries used in the last " << settings.keep_used_within_seconds << " s are kept\n";
  }
  return 0;
}

}  // namespace hlocache::client
