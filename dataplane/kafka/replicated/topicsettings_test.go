package replicated

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/dataplane/partition"
)

// TestTopicSettingsReachReplicas: a topic's segment and retention settings
// in the cell state are what every replica applies, a change through /v1
// reaches the open replicas without a restart, and DescribeConfigs reports
// the values the replicas apply (segment.bytes defaults to topicspec's one
// value on both sides).
func TestTopicSettingsReachReplicas(t *testing.T) {
	c := startLifecycleCell(t, nil)
	tn := c.cp.Signup("acme", "admin")
	ctx := context.Background()
	plain := c.createTopic(tn, "plain", 1, nil)
	tuned := c.createTopic(tn, "tuned", 2, map[string]string{"segment.bytes": "2097152", "retention.ms": "60000"})

	c.waitSettings("the tuned topic's settings on every replica", tuned, 2, func(s partition.Settings) bool {
		return s.Log.SegmentBytes == 2<<20 && s.Log.RetentionAge == time.Minute && s.Log.RetentionBytes == 0
	})

	seg, ret, rb := "4194304", "120000", "10485760"
	if _, err := tn.Key.UpdateTopic(ctx, "tuned", api.UpdateTopicRequest{Config: map[string]*string{
		"segment.bytes": &seg, "retention.ms": &ret, "retention.bytes": &rb}}); err != nil {
		t.Fatalf("update topic: %v", err)
	}
	c.waitSettings("the changed settings on every open replica", tuned, 2, func(s partition.Settings) bool {
		return s.Log.SegmentBytes == 4<<20 && s.Log.RetentionAge == 2*time.Minute && s.Log.RetentionBytes == 10<<20
	})

	adm := kadm.NewClient(c.client(tn))
	rcs, err := adm.DescribeTopicConfigs(ctx, "plain", "tuned")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Fatalf("describe %s: %v", rc.Name, rc.Err)
		}
		id := map[string]string{"plain": plain, "tuned": tuned}[rc.Name]
		applied := c.replica(0, id, 0).Settings().Log
		for _, cv := range rc.Configs {
			var want string
			switch cv.Key {
			case "segment.bytes":
				want = strconv.FormatInt(applied.SegmentBytes, 10)
			case "retention.ms":
				want = strconv.FormatInt(applied.RetentionAge.Milliseconds(), 10)
			case "segment.ms":
				want = strconv.FormatInt(applied.SegmentAge.Milliseconds(), 10)
			default:
				continue
			}
			if cv.MaybeValue() != want {
				t.Errorf("%s: DescribeConfigs says %s=%s, the replicas apply %s", rc.Name, cv.Key, cv.MaybeValue(), want)
			}
		}
	}
}
