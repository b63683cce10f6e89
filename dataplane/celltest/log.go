package celltest

import (
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/contract/testkit"
)

// Logger returns a logger that sends the lines at level and above to t's
// log, one t.Log call a line (testkit.Logger, the one test logger).
func Logger(t testing.TB, level slog.Level) *slog.Logger { return testkit.Logger(t, level) }
