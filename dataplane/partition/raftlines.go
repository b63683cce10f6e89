package partition

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// electionLines are the prefixes of hashicorp/raft's messages about
// campaigns and votes: the few of its lines that explain why a partition
// had no leader for longer than it should. Everything else it says
// (replication retries, snapshots, configuration) the replica already
// reports in its own words, or is noise at a broker's scale.
var electionLines = []string{
	"entering candidate state",
	"election won",
	"pre-vote successful",
	"pre-vote campaign failed",
	"Election timeout reached",
	"heartbeat timeout reached",
	"rejecting vote request",
	"rejecting pre-vote request",
	"failed to make requestVote RPC",
	"duplicate requestVote",
}

// raftLogger is the hclog.Logger handed to hashicorp/raft: it writes
// nothing itself and passes the election lines to the replica's logger,
// refusals and timeouts at info, the steps of a campaign at debug.
func raftLogger(l *slog.Logger, replica string) hclog.Logger {
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Output: io.Discard, Level: hclog.Off})
	il.RegisterSink(&electionSink{l: l.With("replica", replica)})
	return il
}

type electionSink struct{ l *slog.Logger }

func (s *electionSink) Accept(_ string, level hclog.Level, msg string, args ...any) {
	if level < hclog.Info || !isElectionLine(msg) {
		return
	}
	sl := slog.LevelDebug
	if level >= hclog.Warn {
		sl = slog.LevelInfo
	}
	ctx := context.Background()
	if !s.l.Enabled(ctx, sl) {
		return
	}
	s.l.Log(ctx, sl, "raft: "+msg, raftArgs(args)...)
}

func isElectionLine(msg string) bool {
	for _, p := range electionLines {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// raftArgs turns hclog's key/value list into slog attributes, prefixing
// the keys so they cannot collide with the replica's own.
func raftArgs(args []any) []any {
	out := make([]any, 0, len(args)/2)
	for i := 0; i+1 < len(args); i += 2 {
		k, ok := args[i].(string)
		if !ok {
			continue
		}
		out = append(out, slog.Any("raft_"+k, args[i+1]))
	}
	return out
}
