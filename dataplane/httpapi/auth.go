package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

// caller is an authenticated request's principal and the state view it
// was checked against; a request uses that one view throughout.
type caller struct {
	p *cellview.Principal
	v *cellview.View
	// forwarded: another broker of the cell forwarded the request, with
	// proof (peer.go); it was admitted where it entered the cell.
	forwarded bool
}

const callerKey = "sluice.caller"

// authenticate checks HTTP basic credentials (API key id and secret)
// against the broker's cached cell state, as SASL/PLAIN on the Kafka
// listener does. Revoked keys are absent from the state, so they fail
// like unknown ones.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, secret, ok := c.Request().BasicAuth()
		if !ok {
			return catalog.Unauthenticated.New("send an API key as HTTP basic credentials (key id as the user name, secret as the password)")
		}
		v := s.cfg.State.View()
		p, err := v.Authenticate(id, secret, s.cfg.Now())
		switch {
		case errors.Is(err, cellview.ErrKeyExpired):
			return catalog.KeyExpired.New("")
		case errors.Is(err, cellview.ErrTenantSuspended):
			return catalog.TenantSuspended.New("")
		case err != nil && s.homes != nil && !v.HasKey(id):
			return s.followHome(c, v, id, secret)
		case err != nil:
			return catalog.Unauthenticated.New("the API key id or secret is wrong, or the key was revoked")
		}
		s.cfg.State.NoteKeyUse(p.KeyID)
		c.Set(callerKey, &caller{p: p, v: v, forwarded: s.fromPeer(c.Request(), id)})
		return next(c)
	}
}

func callerOf(c echo.Context) *caller { return c.Get(callerKey).(*caller) }

// topicAllowed checks the caller's ACLs on one of its topics, as the
// Kafka front door does.
func (cl *caller) topicAllowed(topic, op string) bool {
	return cl.v.Allowed(cl.p, authz.ResourceTopic, topic, op)
}

// groupAllowed checks the caller's ACLs on one of its groups.
func (cl *caller) groupAllowed(group, op string) bool {
	return cl.v.Allowed(cl.p, authz.ResourceGroup, group, op)
}

// unescapeColons lets clients that percent-encode ':' in the custom
// method of a path (".../messages%3Apublish") reach the same route.
func unescapeColons(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := c.Request().URL
		if u.RawPath != "" && strings.Contains(strings.ToUpper(u.RawPath), "%3A") {
			u.RawPath = strings.NewReplacer("%3A", ":", "%3a", ":").Replace(u.RawPath)
			if u.RawPath == u.EscapedPath() || u.RawPath == u.Path {
				u.RawPath = ""
			}
		}
		return next(c)
	}
}

// hopsHeader counts how many brokers forwarded a request.
const hopsHeader = "Sluice-Forwarded-Hops"

// maxHops bounds forwarding: a request already forwarded this many times
// is answered not_leader instead of forwarded again (leadership moving
// while a request travels must not bounce it around).
const maxHops = 2

func hops(r *http.Request) int {
	switch r.Header.Get(hopsHeader) {
	case "":
		return 0
	case "1":
		return 1
	}
	return maxHops
}
