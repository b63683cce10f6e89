package console

import (
	"net/http"

	"github.com/sluicehq/sluice/controlplane/api"
)

// groupRow is one consumer group as the groups page shows it. The API has no
// /v1/groups yet, so the page renders its empty state; filling Groups from
// the client is all a later change needs.
type groupRow struct {
	ID               string
	State            string
	Members          int
	LagMessages      int64
	LagTime          string
	RetentionPercent int  // lag as a share of the topic's retention
	NearRetention    bool // the group risks losing unread messages
}

type groupsData struct{ Groups []groupRow }

func (c *Console) groupsPage(w http.ResponseWriter, r *http.Request, s *session) {
	p := sessionPage(s, "Consumer groups", "groups")
	p.Data = groupsData{}
	c.render(w, r, http.StatusOK, "groups", p)
}

// usageRow is one metering period. Like groups, usage has no API yet.
type usageRow struct {
	Period                          string
	BytesIn, BytesOut, StorageBytes int64
}

type usageData struct {
	Rows   []usageRow
	Quotas *api.Quotas
}

func (c *Console) usagePage(w http.ResponseWriter, r *http.Request, s *session) {
	d := usageData{}
	q, err := s.api.Quotas(r.Context())
	switch {
	case err == nil:
		d.Quotas = &q
	case c.authLost(w, r, err):
		return
	default:
		c.log.Warn("console load quotas", "err", err)
	}
	p := sessionPage(s, "Usage", "usage")
	p.Data = d
	c.render(w, r, http.StatusOK, "usage", p)
}
