package log

import (
	"log/slog"
	"testing"

	"github.com/sluicehq/sluice/contract/testkit"
)

// testLogger is the package's tests' logger: warnings and errors, through t.
func testLogger(t testing.TB) *slog.Logger { return testkit.Logger(t, slog.LevelWarn) }
