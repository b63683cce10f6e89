package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/contract/scram"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

const mechanismPlain = "PLAIN"

// mechanisms is what SaslHandshake advertises.
var mechanisms = []string{mechanismPlain, scram.SHA256.Name, scram.SHA512.Name}

func (c *conn) saslHandshake(r *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = mechanisms
	_, isScram := scram.ByName(r.Mechanism)
	switch {
	case c.mechanism != "":
		resp.ErrorCode, _ = entryCode(catalog.InvalidRequest, "")
	case isScram && r.Version == 0:
		// SCRAM takes two round trips, which the bare tokens after a v0
		// handshake cannot frame as Kafka does; every client that speaks
		// SCRAM sends SaslHandshake v1 and SaslAuthenticate.
		resp.ErrorCode, _ = entryCode(catalog.UnsupportedMechanism, "")
	case r.Mechanism != mechanismPlain && !isScram:
		resp.ErrorCode, _ = entryCode(catalog.UnsupportedMechanism, "")
	default:
		c.mechanism = r.Mechanism
		c.rawSASL = r.Version == 0
	}
	return resp
}

func (c *conn) saslAuthenticate(r *kmsg.SASLAuthenticateRequest) (kmsg.Response, error) {
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if c.mechanism == "" || c.rawSASL || (c.principal.Load() != nil && !c.dev) {
		resp.ErrorCode, resp.ErrorMessage = entryCode(catalog.Unauthenticated, "send SaslHandshake with mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 first, once per connection")
		return resp, errCloseAfterReply
	}
	var err error
	if c.mechanism == mechanismPlain {
		err = c.authenticate(r.SASLAuthBytes)
	} else {
		resp.SASLAuthBytes, err = c.scramStep(r.SASLAuthBytes)
	}
	if err != nil {
		resp.SASLAuthBytes = nil
		resp.ErrorCode, resp.ErrorMessage = errCode(err)
		c.s.cfg.Logger.Info("kafka authentication failed", "remote", c.remote, "mechanism", c.mechanism, "err", err)
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
	if errors.Is(err, cellview.ErrBadCredentials) && c.s.homes != nil && !v.HasKey(keyID) && credential.ValidKeyID(keyID) {
		p, err = c.authenticateElsewhere(keyID, secret)
	}
	if err != nil {
		return authError(keyID, err)
	}
	if err := c.authenticated(p); err != nil {
		return err
	}
	c.secret = secret
	c.following.Store(&secret)
	return nil
}

// authError maps a failed key check onto the catalogue, as PLAIN and SCRAM
// both answer it.
func authError(keyID string, err error) error {
	switch {
	case errors.Is(err, cellview.ErrKeyExpired):
		return catalog.KeyExpired.Wrap(err, "")
	case errors.Is(err, cellview.ErrTenantSuspended):
		return catalog.TenantSuspended.Wrap(err, "")
	}
	return catalog.Unauthenticated.Wrap(fmt.Errorf("key %q: %w", keyID, err), "the API key id or secret is wrong")
}

// authenticated is the path after any mechanism has proved the key: the
// tenant's connection limit, then the connection serves as the key.
func (c *conn) authenticated(p *cellview.Principal) error {
	if err := c.admitConnection(p.TenantID); err != nil {
		return err
	}
	c.dev = false
	c.principal.Store(p)
	c.s.preAuth.give(c)
	c.s.cfg.Logger.Debug("kafka client authenticated", "remote", c.remote, "mechanism", c.mechanism, "key_id", p.KeyID, "tenant_id", p.TenantID)
	return nil
}

// Messages of a refused SCRAM exchange the client may act on.
const (
	msgScramUnknownKey = "the API key id or secret is wrong, or the key's tenant is not served by this cell: " +
		"SCRAM never sends the secret, which finding a key's home cell needs; connect to the tenant's own " +
		"bootstrap servers, or use SASL/PLAIN here"
	msgScramNoCredentials = "this API key was created before SCRAM was served and has no SCRAM credentials: " +
		"use SASL/PLAIN with it, or create a new API key"
)

// scramStep serves one SaslAuthenticate of a SCRAM exchange: the
// client-first message gets the server-first, the client-final message
// the server-final, after which the connection is authenticated. Keys
// other cells serve are refused (msgScramUnknownKey): no redirect session.
func (c *conn) scramStep(msg []byte) ([]byte, error) {
	if c.scram == nil {
		m, _ := scram.ByName(c.mechanism)
		srv := scram.NewServer(m)
		keyID, err := srv.Start(msg)
		if err != nil {
			return nil, catalog.Unauthenticated.Wrap(err, err.Error())
		}
		cred, err := c.s.cfg.State.View().ScramCredential(keyID, m.Name)
		switch {
		case errors.Is(err, cellview.ErrNoScram):
			return nil, catalog.Unauthenticated.Wrap(fmt.Errorf("key %q: %w", keyID, err), msgScramNoCredentials)
		case err != nil:
			return nil, catalog.Unauthenticated.Wrap(fmt.Errorf("key %q: %w", keyID, err), msgScramUnknownKey)
		}
		first, err := srv.Challenge(scram.Credential{Mechanism: cred.Mechanism, Salt: cred.Salt,
			Iterations: cred.Iterations, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey})
		if err != nil {
			return nil, catalog.Unauthenticated.Wrap(fmt.Errorf("key %q: %w", keyID, err), "")
		}
		c.scram, c.scramKey = srv, keyID
		return first, nil
	}
	srv, keyID := c.scram, c.scramKey
	c.scram = nil
	final, err := srv.Finish(msg)
	switch {
	case errors.Is(err, scram.ErrProof):
		return nil, catalog.Unauthenticated.Wrap(fmt.Errorf("key %q: %w", keyID, err), "the API key id or secret is wrong")
	case err != nil:
		return nil, catalog.Unauthenticated.Wrap(fmt.Errorf("key %q: %w", keyID, err), err.Error())
	}
	// A fresh view: the key may have been revoked, expired or its tenant
	// suspended since the exchange began.
	p, err := c.s.cfg.State.View().AdmitScram(keyID, c.s.cfg.Now())
	if err != nil {
		return nil, authError(keyID, err)
	}
	if err := c.authenticated(p); err != nil {
		return nil, err
	}
	return final, nil
}
