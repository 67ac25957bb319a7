// Test main: GoogleTest, then nats_CloseAndWait() so nats.c's process-wide threads and memory
// are gone before exit (keeps LeakSanitizer quiet). Only the process may do this, never a plugin.
#include <gtest/gtest.h>
#include <nats/nats.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  nats_CloseAndWait(5000);
  return rc;
}
