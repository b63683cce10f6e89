package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

// maxForwardedAnswer bounds the body of another broker's answer.
const maxForwardedAnswer = 256 << 20

// answer is another broker's answer to a forwarded request.
type answer struct {
	status int
	body   []byte
	// retryAfter is its Retry-After, zero when it sent none.
	retryAfter time.Duration
}

// forward sends a request to broker node's HTTP API with the caller's own
// credentials (the other broker authenticates and authorizes it again)
// and a proof that this broker forwarded it (peer.go), and returns the
// answer. wait is the long poll the request asks for; ForwardTimeout is
// added to it. A broker that cannot be reached, or a request forwarded
// too often already, gives a retriable not_leader error.
func (s *Server) forward(c echo.Context, v *cellview.View, node int, method, uri string, body []byte, wait time.Duration) (answer, error) {
	route := routeName(c)
	fail := func(err error, msg string) (answer, error) {
		s.metrics.forwards.WithLabelValues(route, "failed").Inc()
		return answer{}, catalog.NotLeader.Wrap(err, msg)
	}
	h := hops(c.Request())
	if h >= maxHops {
		return fail(fmt.Errorf("%d hops", h), "leadership moved while the request was forwarded; retry")
	}
	if node == s.cfg.NodeID {
		return fail(fmt.Errorf("forward to self (node %d)", node), "")
	}
	b, ok := v.Broker(node)
	if !ok || b.HTTPAddr == "" {
		return fail(fmt.Errorf("broker node %d has no http address in the cell state", node), "the leader's HTTP address is not known; retry")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), wait+s.cfg.ForwardTimeout)
	defer cancel()
	scheme := "http://"
	if s.cfg.TLS != nil {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, method, scheme+b.HTTPAddr+uri, bytes.NewReader(body))
	if err != nil {
		return fail(err, "")
	}
	req.Header.Set("Authorization", c.Request().Header.Get("Authorization"))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(hopsHeader, strconv.Itoa(h+1))
	keyID, _, _ := c.Request().BasicAuth()
	s.signForward(req, keyID)
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return fail(fmt.Errorf("forward to node %d: %w", node, err), "the leader could not be reached; retry")
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardedAnswer))
	if err != nil {
		return fail(fmt.Errorf("read answer of node %d: %w", node, err), "the leader's answer was cut short; retry")
	}
	s.metrics.forwards.WithLabelValues(route, "answered").Inc()
	a := answer{status: resp.StatusCode, body: out}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		a.retryAfter = time.Duration(secs) * time.Second
	}
	return a, nil
}

// proxy forwards the request as it is and answers with the other
// broker's answer, its Retry-After included.
func (s *Server) proxy(c echo.Context, v *cellview.View, node int, body []byte, wait time.Duration) error {
	a, err := s.forward(c, v, node, c.Request().Method, c.Request().URL.RequestURI(), body, wait)
	if err != nil {
		return err
	}
	if a.retryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(a.retryAfter/time.Second)))
	}
	return c.Blob(a.status, echo.MIMEApplicationJSON, a.body)
}
