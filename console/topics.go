package console

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/topicspec"
)

// Topic config keys the console edits; topicspec owns their rules.
const (
	keyRetentionMs     = topicspec.RetentionMs
	keyRetentionBytes  = topicspec.RetentionBytes
	keyMaxMessageBytes = topicspec.MaxMessageBytes
	keyCleanupPolicy   = topicspec.CleanupPolicy
)

const msPerHour = 3600 * 1000

func (c *Console) topicsPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderTopics(w, r, s, http.StatusOK, nil, nil)
}

func (c *Console) renderTopics(w http.ResponseWriter, r *http.Request, s *session, status int, ue *uiError, form formInput) {
	topics, err := s.api.Topics(r.Context())
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	sort.Slice(topics, func(i, j int) bool { return topics[i].Name < topics[j].Name })
	p := sessionPage(s, "Topics", "topics")
	p.Data, p.Error, p.Form = topics, ue, form
	if ue != nil {
		status = formStatus(ue)
	}
	// The notice names only a topic that is listed, so a crafted link
	// cannot make the page claim anything.
	if created := r.URL.Query().Get("created"); created != "" && ue == nil {
		for _, t := range topics {
			if t.Name == created {
				p.Notice = "Topic " + t.Name + " created."
			}
		}
	}
	c.render(w, r, status, "topics", p)
}

func (c *Console) createTopic(w http.ResponseWriter, r *http.Request, s *session) {
	form := formInput{
		"name":            strings.TrimSpace(r.PostFormValue("name")),
		"partitions":      strings.TrimSpace(r.PostFormValue("partitions")),
		"retention_hours": strings.TrimSpace(r.PostFormValue("retention_hours")),
		"cleanup_policy":  strings.TrimSpace(r.PostFormValue("cleanup_policy")),
	}
	req := api.CreateTopicRequest{Name: form["name"], Config: map[string]string{}}
	if form["partitions"] != "" {
		n, err := strconv.Atoi(form["partitions"])
		if err != nil {
			c.renderTopics(w, r, s, 0, inputError("create-topic", "partitions must be a whole number"), form)
			return
		}
		req.Partitions = n
	}
	if h := form["retention_hours"]; h != "" {
		ms, err := hoursToMillis(h)
		if err != nil {
			c.renderTopics(w, r, s, 0, inputError("create-topic", "retention must be a whole number of hours"), form)
			return
		}
		req.Config[keyRetentionMs] = ms
	}
	// The control plane checks the value (topicspec); "delete" is the
	// default and is left implicit.
	if p := form["cleanup_policy"]; p != "" && p != "delete" {
		req.Config[keyCleanupPolicy] = p
	}
	if len(req.Config) == 0 {
		req.Config = nil
	}
	if _, err := s.api.CreateTopic(r.Context(), req); err != nil {
		c.formError(w, r, err, "create-topic", func(ue *uiError) { c.renderTopics(w, r, s, 0, ue, form) })
		return
	}
	c.redirect(w, r, "/topics?"+url.Values{"created": {req.Name}}.Encode())
}

type topicData struct {
	Topic          api.Topic
	Keys           []string // every effective config key, sorted
	RetentionHours string   // the explicit retention in whole hours, if set
}

func (c *Console) topicPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderTopic(w, r, s, nil, nil)
}

func (c *Console) renderTopic(w http.ResponseWriter, r *http.Request, s *session, ue *uiError, form formInput) {
	t, err := s.api.Topic(r.Context(), r.PathValue("name"))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := topicData{Topic: t}
	for k := range t.EffectiveConfig {
		d.Keys = append(d.Keys, k)
	}
	sort.Strings(d.Keys)
	if n, ok := topicspec.Config(t.Config).RetentionMs(); ok && n%msPerHour == 0 {
		d.RetentionHours = strconv.FormatInt(n/msPerHour, 10)
	}
	if form != nil && form["retention_hours"] != "" {
		d.RetentionHours = form["retention_hours"]
	}
	p := sessionPage(s, "Topic "+t.Name, "topics")
	p.Data = d
	c.renderEditForm(w, r, "topic", p, "Changes saved.", ue, form)
}

func (c *Console) updateTopic(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	ctx := r.Context()
	cur, err := s.api.Topic(ctx, name)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	form := formInput{
		"partitions":        strings.TrimSpace(r.PostFormValue("partitions")),
		"retention_hours":   strings.TrimSpace(r.PostFormValue("retention_hours")),
		"retention_bytes":   strings.TrimSpace(r.PostFormValue("retention_bytes")),
		"max_message_bytes": strings.TrimSpace(r.PostFormValue("max_message_bytes")),
	}
	bad := func(msg string) { c.renderTopic(w, r, s, inputError("update-topic", msg), form) }
	var req api.UpdateTopicRequest
	if v := form["partitions"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			bad("partitions must be a whole number")
			return
		}
		if n != cur.Partitions {
			req.Partitions = &n
		}
	}
	req.Config = map[string]*string{}
	// An emptied field returns an explicitly set key to its default.
	set := func(key, val string) {
		_, explicit := cur.Config[key]
		switch {
		case val == "" && explicit:
			req.Config[key] = nil
		case val != "" && val != cur.Config[key]:
			req.Config[key] = &val
		}
	}
	retention := ""
	if h := form["retention_hours"]; h != "" {
		ms, err := hoursToMillis(h)
		if err != nil {
			bad("retention must be a whole number of hours")
			return
		}
		retention = ms
	}
	set(keyRetentionMs, retention)
	set(keyRetentionBytes, form["retention_bytes"])
	set(keyMaxMessageBytes, form["max_message_bytes"])
	if len(req.Config) == 0 {
		req.Config = nil
	}
	if req.Partitions != nil || req.Config != nil {
		if _, err := s.api.UpdateTopic(ctx, name, req); err != nil {
			c.formError(w, r, err, "update-topic", func(ue *uiError) { c.renderTopic(w, r, s, ue, form) })
			return
		}
	}
	c.redirect(w, r, "/topics/"+url.PathEscape(name)+"?saved=1")
}

func (c *Console) deleteTopic(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("name")
	if r.PostFormValue("confirm") != name {
		c.renderTopic(w, r, s, inputError("delete-topic", "type the topic's name exactly to delete it"), nil)
		return
	}
	if err := s.api.DeleteTopic(r.Context(), name); err != nil {
		c.formError(w, r, err, "delete-topic", func(ue *uiError) { c.renderTopic(w, r, s, ue, nil) })
		return
	}
	c.redirect(w, r, "/topics")
}

// inputError is a form the console could not even turn into a request.
func inputError(form, msg string) *uiError {
	return &uiError{Status: http.StatusUnprocessableEntity, Code: string(catalog.InvalidRequest.Code), Message: msg, Form: form}
}

func hoursToMillis(h string) (string, error) {
	n, err := strconv.ParseInt(h, 10, 64)
	if err != nil || n < 1 || n > 1<<40 {
		return "", strconv.ErrRange
	}
	return strconv.FormatInt(n*msPerHour, 10), nil
}
