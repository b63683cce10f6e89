package kafka

import (
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

// A tenant moved to another cell leaves this cell's state at the switch,
// and with it its keys. Its sessions here are not closed for that: a
// client whose every connection closes at once may give up (librdkafka,
// and so kcat, ends a producer when all its brokers are down). A PLAIN
// session, which keeps its secret, asks the key's home instead and, if
// the tenant now lives on another cell, becomes a redirect session
// (redirect.go): its Metadata names the new home's brokers, and the client
// moves there over connections that stay up. A key revoked, expired or
// suspended, or a SCRAM session (no secret to ask with), still closes.

// followHome makes the session a redirect session when the home of its
// key (p's) is another cell, and reports whether it did. The connection's
// goroutine calls it.
func (c *conn) followHome(p *cellview.Principal) bool {
	if c.dev || c.redirect != nil || c.s.homes == nil || c.secret == "" {
		return false
	}
	home, err := c.s.homes.lookup(c.s.ctx, p.KeyID, c.secret)
	if !movedAway(home, err, p, c.s.cfg.State.View().Cell) {
		return false
	}
	c.redirect = &redirectSession{keyID: p.KeyID, secret: c.secret, home: home, at: c.s.cfg.Now()}
	c.redirected.Store(true)
	c.s.cfg.Logger.Debug("kafka session's tenant moved to another cell; redirecting", "remote", c.remote, "key_id", p.KeyID,
		"tenant_id", home.TenantID, "home_cell", home.Cell)
	return true
}

// movedAway reports whether a key-home answer says p's key is valid, for
// the same tenant and role, on a cell other than this one.
func movedAway(home wire.KeyHome, err error, p *cellview.Principal, cell string) bool {
	return err == nil && home.Status == wire.KeyValid && home.TenantID == p.TenantID && home.Role == p.Role &&
		home.Cell != "" && home.Cell != cell
}

// closeUnlessMoved is the key watcher's verdict on a session whose key
// this cell no longer serves: closed now, unless it can follow its tenant
// (a PLAIN session), in which case the key's home is asked once, off the
// watcher's goroutine, and the session closed unless its tenant moved to
// another cell. A session left open is checked again with its next
// request (serve), and by the watcher once its key is valid here again.
func (s *Server) closeUnlessMoved(c *conn, p *cellview.Principal) {
	secret := c.following.Load()
	if secret == nil || s.homes == nil {
		s.closeInvalid(c, p)
		return
	}
	if !c.homeChecked.CompareAndSwap(false, true) {
		return
	}
	go func() {
		if home, err := s.homes.lookup(s.ctx, p.KeyID, *secret); movedAway(home, err, p, s.cfg.State.View().Cell) {
			s.cfg.Logger.Debug("kafka connection left open: its tenant moved to another cell", "key_id", p.KeyID,
				"tenant_id", p.TenantID, "home_cell", home.Cell, "remote", c.remote)
			return
		}
		s.closeInvalid(c, p)
	}()
}

func (s *Server) closeInvalid(c *conn, p *cellview.Principal) {
	s.cfg.Logger.Info("closing kafka connection: key no longer valid", "key_id", p.KeyID, "tenant_id", p.TenantID, "remote", c.remote)
	c.nc.Close()
}
