package partition

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestRaftLoggerPassesElectionLinesOnly(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	hl := raftLogger(l, "b1")
	hl.Warn("rejecting vote request since our last index is greater", "candidate", "b2", "last-index", 7)
	hl.Warn("Election timeout reached, restarting election")
	hl.Info("entering candidate state", "term", 4) // a step: debug, filtered at info
	hl.Error("failed to appendEntries to", "peer", "b3")
	hl.Debug("vote granted", "from", "b3")
	got := buf.String()
	for _, want := range []string{
		`msg="raft: rejecting vote request since our last index is greater" replica=b1 raft_candidate=b2 raft_last-index=7`,
		`msg="raft: Election timeout reached, restarting election" replica=b1`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"entering candidate state", "appendEntries", "vote granted"} {
		if strings.Contains(got, not) {
			t.Errorf("log has %q, which it should drop at info:\n%s", not, got)
		}
	}

	buf.Reset()
	l = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	raftLogger(l, "b1").Info("entering candidate state", "term", 4)
	if !strings.Contains(buf.String(), `level=DEBUG msg="raft: entering candidate state" replica=b1 raft_term=4`) {
		t.Errorf("campaign step not passed at debug:\n%s", buf.String())
	}
}
