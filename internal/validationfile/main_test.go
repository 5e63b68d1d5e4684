package validationfile

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: Run and RunPermify open
// stores and API handlers, and the zed comparisons start processes.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
