package console

import (
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/contract/api"
)

// nearRetention is the share of retention from which the groups pages warn
// that a group may lose unread messages.
const nearRetention = 0.8

// groupRow is one consumer group (or one partition of it) as the groups
// pages show it.
type groupRow struct {
	api.Group
	RetentionPercent int  // the largest lag as a share of retention
	NearRetention    bool // the group risks losing (or lost) unread messages
}

func rowOf(g api.Group) groupRow {
	return groupRow{Group: g, RetentionPercent: percent(g.MaxRetentionFraction),
		NearRetention: g.Expired || g.MaxRetentionFraction >= nearRetention}
}

func percent(f float64) int { return int(math.Round(100 * f)) }

type groupsData struct{ Groups []groupRow }

func (c *Console) groupsPage(w http.ResponseWriter, r *http.Request, s *session) {
	gs, err := s.api.Groups(r.Context())
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := groupsData{}
	for _, g := range gs {
		d.Groups = append(d.Groups, rowOf(g))
	}
	p := sessionPage(s, "Consumer groups", "groups")
	p.Data = d
	c.render(w, r, http.StatusOK, "groups", p)
}

// partitionRow is one partition of a group.
type partitionRow struct {
	api.GroupPartition
	RetentionPercent int
	NearRetention    bool
}

type groupData struct {
	groupRow
	Rows []partitionRow
}

func (c *Console) groupPage(w http.ResponseWriter, r *http.Request, s *session) {
	g, err := s.api.Group(r.Context(), r.PathValue("group"))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := groupData{groupRow: rowOf(g)}
	for _, gp := range g.Partitions {
		d.Rows = append(d.Rows, partitionRow{GroupPartition: gp, RetentionPercent: percent(gp.RetentionFraction),
			NearRetention: gp.Expired || gp.RetentionFraction >= nearRetention})
	}
	p := sessionPage(s, "Consumer group "+g.Group, "groups")
	p.Data = d
	c.render(w, r, http.StatusOK, "group", p)
}

// lagTime renders a lag in seconds for people: "0s", "42s", "3m20s", "5h0m".
func lagTime(sec float64) string {
	d := time.Duration(sec * float64(time.Second)).Round(time.Second)
	if d >= time.Hour {
		d = d.Round(time.Minute)
		return strings.TrimSuffix(d.String(), "0s")
	}
	return d.String()
}
