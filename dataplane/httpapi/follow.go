package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/credential"
	"github.com/sluicehq/sluice/contract/wire"
	"github.com/sluicehq/sluice/dataplane/cellview"
	"github.com/sluicehq/sluice/dataplane/keyhome"
)

// A request whose API key this cell does not know follows the key's
// tenant home: the key-home lookup (Config.Homes, cached and rate limited
// as the Kafka listener's) says whether the key is valid and which cell
// the tenant lives on, and a valid key's request is proxied to a broker of
// that cell with the client's own credentials, as forward.go does inside a
// cell. The home authenticates, authorizes, admits and meters it as its
// own; the client gets the home's answer, with HomeCellHeader naming the
// home. So an HTTP client keeps working across a move of its tenant to
// another cell, whichever cell's address it holds. An invalid, expired or
// suspended key gets exactly the answer it gets today.

// HomeCellHeader names, on an answer proxied from the tenant's home cell,
// that cell.
const HomeCellHeader = "Sluice-Home-Cell"

// followedHeader marks a request proxied from another cell: one that the
// home does not know either (its state lags the control plane's) is not
// proxied again, so a request never travels between cells in a loop.
const followedHeader = "Sluice-Followed-From"

// maxFollowedAnswer bounds the body of a home cell's answer.
const maxFollowedAnswer = maxForwardedAnswer

// errBadKey is today's answer to a wrong, unknown or revoked key.
func errBadKey() error {
	return catalog.Unauthenticated.New("the API key id or secret is wrong, or the key was revoked")
}

// followHome answers a request whose key v does not hold: as a wrong key,
// an expired key or a suspended tenant when the lookup says so (or fails,
// or is over its limit), else with the answer of the tenant's home cell.
func (s *Server) followHome(c echo.Context, v *cellview.View, keyID, secret string) error {
	req := c.Request()
	if !credential.ValidKeyID(keyID) {
		return errBadKey()
	}
	home, err := s.homes.Lookup(req.Context(), keyID, secret)
	if err != nil {
		level := slog.LevelWarn
		if errors.Is(err, keyhome.ErrLimited) || req.Context().Err() != nil {
			level = slog.LevelDebug // a flood of unknown keys must not flood the log
		}
		s.cfg.Logger.Log(req.Context(), level, "http key-home lookup failed", "key_id", keyID, "err", err)
		return errBadKey()
	}
	switch {
	case home.Status == wire.KeyExpired:
		return catalog.KeyExpired.New("")
	case home.Status == wire.KeySuspended:
		return catalog.TenantSuspended.New("")
	case home.Status != wire.KeyValid:
		return errBadKey()
	case home.Cell == v.Cell:
		// The tenant is homed here and the state has not caught up: the
		// client's retry finds the key, as on the Kafka listener.
		return errBadKey()
	case req.Header.Get(followedHeader) != "":
		c.Response().Header().Set(HomeCellHeader, home.Cell)
		return catalog.Unavailable.New("the API key's home cell does not know the key yet (its tenant may be moving); retry shortly")
	}
	c.Response().Header().Set(HomeCellHeader, home.Cell)
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return catalog.BodyTooLarge.Newf("the request body is larger than %d bytes", s.cfg.MaxBodyBytes)
		}
		return catalog.InvalidRequest.Wrap(err, "the request body could not be read")
	}
	return s.proxyHome(c, v.Cell, home, body)
}

// proxyHome sends the request to the home cell's brokers, from a random
// one on, until one can be dialed, and answers with its answer. The whole
// exchange is bounded by the longest long poll a request may ask for
// (MaxWait) plus ForwardTimeout.
func (s *Server) proxyHome(c echo.Context, cell string, home wire.KeyHome, body []byte) error {
	req := c.Request()
	var nodes []wire.HomeNode
	for _, b := range home.Brokers {
		if b.HTTPAddr != "" {
			nodes = append(nodes, b)
		}
	}
	if len(nodes) == 0 {
		return catalog.Unavailable.New("the tenant's home cell has no known HTTP data API address yet; retry shortly")
	}
	ctx, cancel := context.WithTimeout(req.Context(), s.cfg.MaxWait+s.cfg.ForwardTimeout)
	defer cancel()
	first := rand.IntN(len(nodes))
	var errs []error
	for i := range nodes {
		n := nodes[(first+i)%len(nodes)]
		resp, err := s.sendHome(ctx, req, cell, n, body)
		if err != nil {
			errs = append(errs, err)
			// Only a broker that was never reached is safe to pass over:
			// one that may have received the request (a publish) is
			// left to the client's retry.
			var op *net.OpError
			if ctx.Err() != nil || !errors.As(err, &op) || op.Op != "dial" {
				break
			}
			continue
		}
		out, err := io.ReadAll(io.LimitReader(resp.Body, maxFollowedAnswer+1))
		resp.Body.Close()
		if err != nil {
			return catalog.Unavailable.Wrap(fmt.Errorf("read the answer of home node %d: %w", n.NodeID, err),
				"the tenant's home cell's answer was cut short; retry")
		}
		if len(out) > maxFollowedAnswer {
			return catalog.Unavailable.Wrap(fmt.Errorf("home node %d answered more than %d bytes", n.NodeID, maxFollowedAnswer),
				"the tenant's home cell's answer is too large to pass on; ask for less")
		}
		h := c.Response().Header()
		for _, k := range []string{"Retry-After", "WWW-Authenticate"} {
			if val := resp.Header.Get(k); val != "" {
				h.Set(k, val)
			}
		}
		ct := resp.Header.Get(echo.HeaderContentType)
		if ct == "" {
			ct = echo.MIMEApplicationJSON
		}
		return c.Blob(resp.StatusCode, ct, out)
	}
	return catalog.Unavailable.Wrap(errors.Join(errs...), "the tenant's home cell could not be reached; retry shortly")
}

// sendHome sends the request to one broker of the home cell with the
// client's credentials, and the answer's headers back.
func (s *Server) sendHome(ctx context.Context, in *http.Request, cell string, n wire.HomeNode, body []byte) (*http.Response, error) {
	scheme := "http://"
	if n.HTTPScheme == "https" {
		scheme = "https://"
	}
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	out, err := http.NewRequestWithContext(ctx, in.Method, scheme+n.HTTPAddr+in.URL.RequestURI(), rd)
	if err != nil {
		return nil, fmt.Errorf("home node %d: %w", n.NodeID, err)
	}
	for _, k := range []string{"Authorization", echo.HeaderContentType, "Accept"} {
		if v := in.Header.Get(k); v != "" {
			out.Header.Set(k, v)
		}
	}
	out.Header.Set(followedHeader, cell)
	resp, err := s.cfg.Client.Do(out)
	if err != nil {
		return nil, fmt.Errorf("home node %d at %s: %w", n.NodeID, n.HTTPAddr, err)
	}
	return resp, nil
}
