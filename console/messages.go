package console

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/contract/api"
)

// The control plane never carries message bytes, so the console reads a
// topic's messages the way any client does: from a broker's HTTP data API,
// with an API key the user types in for this one read. The key is used
// once and kept nowhere (not in the session, the page or a log).

const (
	browseMaxBytes = 256 << 10 // what one page of messages reads at most
	browseTimeout  = 10 * time.Second
)

// browseData is the messages page: the topic, the form, and what was read.
type browseData struct {
	Topic    api.Topic
	Read     bool // a read was made (the table below is its answer)
	Messages []browseMessage
	Next     int64 // the offset after the last message shown
	HW       int64
	Start    int64
}

// browseMessage is one message as the page shows it: text when it is
// UTF-8, else base64.
type browseMessage struct {
	Offset    int64
	Time      string
	Key       string
	Value     string
	Headers   string
	MessageID string
}

func (c *Console) messagesPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderMessages(w, r, s, nil, formInput{"partition": "0", "offset": "0"}, nil)
}

func (c *Console) renderMessages(w http.ResponseWriter, r *http.Request, s *session, ue *uiError, form formInput, read *browseData) {
	t, err := s.api.Topic(r.Context(), r.PathValue("name"))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := browseData{Topic: t}
	if read != nil {
		d = *read
		d.Topic = t
	}
	p := sessionPage(s, "Messages of "+t.Name, "topics")
	p.Data = d
	c.renderForm(w, r, http.StatusOK, "messages", p, ue, form)
}

// readMessages reads one page of a partition from a broker with the key
// the form carries.
func (c *Console) readMessages(w http.ResponseWriter, r *http.Request, s *session) {
	form := formInput{
		"partition": strings.TrimSpace(r.PostFormValue("partition")),
		"offset":    strings.TrimSpace(r.PostFormValue("offset")),
		"key_id":    strings.TrimSpace(r.PostFormValue("key_id")),
	}
	secret := r.PostFormValue("key_secret")
	bad := func(msg string) {
		c.renderMessages(w, r, s, &uiError{Status: http.StatusBadRequest, Code: "invalid_request", Message: msg, Form: "browse"}, form, nil)
	}
	part, err := strconv.Atoi(form["partition"])
	if err != nil || part < 0 {
		bad("the partition is a whole number from 0")
		return
	}
	offset, err := strconv.ParseInt(form["offset"], 10, 64)
	if err != nil || offset < 0 {
		bad("the offset is a whole number from 0")
		return
	}
	if form["key_id"] == "" || secret == "" {
		bad("reading messages takes an API key with read on the topic: its id and secret")
		return
	}
	cl, err := s.api.Cluster(r.Context())
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	if len(cl.HTTPEndpoints) == 0 {
		bad("the tenant's cell lists no HTTP data endpoint")
		return
	}
	name := r.PathValue("name")
	d, ue := c.fetchPage(r.Context(), cl.HTTPEndpoints[0], name, part, offset, form["key_id"], secret)
	if ue != nil {
		ue.Form = "browse"
		c.renderMessages(w, r, s, ue, form, nil)
		return
	}
	form["offset"] = strconv.FormatInt(d.Next, 10) // the next page, if the user reads on
	c.renderMessages(w, r, s, nil, form, d)
}

// dataRead is the HTTP data API's answer to a partition read.
type dataRead struct {
	Messages []struct {
		Offset      int64  `json:"offset"`
		TimestampMs int64  `json:"timestamp_ms"`
		Key         []byte `json:"key"`
		Value       []byte `json:"value"`
		Headers     []struct {
			Key   string `json:"key"`
			Value []byte `json:"value"`
		} `json:"headers"`
		MessageID string `json:"message_id"`
	} `json:"messages"`
	NextOffset     int64 `json:"next_offset"`
	HighWatermark  int64 `json:"high_watermark"`
	LogStartOffset int64 `json:"log_start_offset"`
}

// fetchPage reads from the broker at endpoint without waiting
// for new messages.
func (c *Console) fetchPage(ctx context.Context, endpoint, topic string, part int, offset int64, keyID, secret string) (*browseData, *uiError) {
	// endpoint is a base URL as /v1/cluster lists it. tenantd serves TLS on
	// all of a process's client-facing listeners or on none, so the data
	// API speaks what the API does, and the API's HTTP client trusts its
	// certificates.
	base := strings.TrimRight(endpoint, "/")
	if strings.HasPrefix(c.cfg.APIURL, "https://") {
		base = "https://" + strings.TrimPrefix(base, "http://")
	}
	u := fmt.Sprintf("%s/v1/topics/%s/partitions/%d/messages?offset=%d&max_bytes=%d&max_wait_ms=0",
		base, url.PathEscape(topic), part, offset, browseMaxBytes)
	ctx, cancel := context.WithTimeout(ctx, browseTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, &uiError{Status: http.StatusBadRequest, Code: "invalid_request", Message: "the topic name cannot be read over HTTP"}
	}
	req.SetBasicAuth(keyID, secret)
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		c.log.Warn("read messages from the data api", "endpoint", endpoint, "err", err)
		return nil, &uiError{Status: http.StatusBadGateway, Code: "unavailable", Message: "the broker did not answer; try again"}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4*browseMaxBytes))
	if err != nil {
		return nil, &uiError{Status: http.StatusBadGateway, Code: "unavailable", Message: "the broker's answer was cut off; try again"}
	}
	if resp.StatusCode != http.StatusOK {
		var e api.Error
		if json.Unmarshal(body, &e) != nil || e.Code == "" {
			return nil, &uiError{Status: http.StatusBadGateway, Code: "unavailable", Message: fmt.Sprintf("the broker answered %d", resp.StatusCode)}
		}
		return nil, &uiError{Status: resp.StatusCode, Code: e.Code, Message: e.Message}
	}
	var rd dataRead
	if err := json.Unmarshal(body, &rd); err != nil {
		return nil, &uiError{Status: http.StatusBadGateway, Code: "unavailable", Message: "the broker's answer was not understood"}
	}
	d := &browseData{Read: true, Next: rd.NextOffset, HW: rd.HighWatermark, Start: rd.LogStartOffset}
	for _, m := range rd.Messages {
		var hs []string
		for _, h := range m.Headers {
			hs = append(hs, h.Key+"="+shown(h.Value))
		}
		d.Messages = append(d.Messages, browseMessage{Offset: m.Offset, Key: shown(m.Key), Value: shown(m.Value),
			Headers: strings.Join(hs, ", "), MessageID: m.MessageID,
			Time: time.UnixMilli(m.TimestampMs).UTC().Format("2006-01-02 15:04:05.000 UTC")})
	}
	return d, nil
}

// shown is bytes as text when they are UTF-8, else as base64 (marked).
func shown(b []byte) string {
	if b == nil {
		return ""
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b)
}
