package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/dataplane/state"
)

const mechanismPlain = "PLAIN"

func (c *conn) saslHandshake(r *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = []string{mechanismPlain}
	switch {
	case c.mechanism:
		resp.ErrorCode, _ = entryCode(catalog.InvalidRequest, "")
	case r.Mechanism != mechanismPlain:
		resp.ErrorCode, _ = entryCode(catalog.UnsupportedMechanism, "")
	default:
		c.mechanism = true
		c.rawSASL = r.Version == 0
	}
	return resp
}

func (c *conn) saslAuthenticate(r *kmsg.SASLAuthenticateRequest) (kmsg.Response, error) {
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if !c.mechanism || c.rawSASL || (c.principal.Load() != nil && !c.dev) {
		resp.ErrorCode, resp.ErrorMessage = entryCode(catalog.Unauthenticated, "send SaslHandshake with mechanism PLAIN first, once per connection")
		return resp, errCloseAfterReply
	}
	if err := c.authenticate(r.SASLAuthBytes); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err)
		c.s.cfg.Logger.Info("kafka authentication failed", "remote", c.remote, "err", err)
		return resp, errCloseAfterReply
	}
	return resp, nil
}

// rawAuthenticate serves the bare PLAIN token that follows a v0
// SaslHandshake: an empty frame on success, a closed connection otherwise.
func (c *conn) rawAuthenticate(token []byte) error {
	c.rawSASL = false
	if err := c.authenticate(token); err != nil {
		return err
	}
	c.nc.SetWriteDeadline(c.s.cfg.Now().Add(c.s.cfg.WriteTimeout))
	_, err := c.nc.Write(binary.BigEndian.AppendUint32(nil, 0))
	return err
}

// authenticate checks a PLAIN token (authzid NUL username NUL password):
// username is the API key id, password its secret.
func (c *conn) authenticate(token []byte) error {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return catalog.Unauthenticated.New("the SASL/PLAIN token is malformed")
	}
	if len(parts[0]) != 0 && !bytes.Equal(parts[0], parts[1]) {
		return catalog.Unauthenticated.New("the SASL/PLAIN authorization id must be empty or equal the username")
	}
	keyID, secret := string(parts[1]), string(parts[2])
	v := c.s.cfg.State.View()
	p, err := v.Authenticate(keyID, secret, c.s.cfg.Now())
	if errors.Is(err, state.ErrBadCredentials) && c.s.homes != nil && !v.HasKey(keyID) && credential.ValidKeyID(keyID) {
		p, err = c.authenticateElsewhere(keyID, secret)
	}
	switch {
	case errors.Is(err, state.ErrKeyExpired):
		return catalog.KeyExpired.Wrap(err, "")
	case errors.Is(err, state.ErrTenantSuspended):
		return catalog.TenantSuspended.Wrap(err, "")
	case err != nil:
		return catalog.Unauthenticated.Wrap(fmt.Errorf("key %q: %w", keyID, err), "the API key id or secret is wrong")
	}
	if err := c.admitConnection(p.TenantID); err != nil {
		return err
	}
	c.dev = false
	c.secret = secret
	c.principal.Store(p)
	c.s.authenticated(c)
	c.s.cfg.Logger.Debug("kafka client authenticated", "remote", c.remote, "key_id", p.KeyID, "tenant_id", p.TenantID)
	return nil
}
