package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/client"
)

// Topic administration over Kafka goes through the control plane's API
// with the caller's own API key, so it is authorized, validated, audited
// and placed exactly as a call to /v1/topics would be. The broker keeps the
// key's secret in memory for the life of the connection only.

// adminWait bounds a CreateTopics or DeleteTopics request.
const adminWait = 30 * time.Second

// adminAPIs are served only when Config.ControlPlane is set.
var adminAPIs = map[int16]bool{19: true, 20: true, 33: true, 37: true, 44: true}

// callerAPI is the control-plane client acting as the caller: with the
// key's secret after PLAIN, or on the key's behalf with the cell key after
// SCRAM (which never sends the secret); either way the control plane
// applies exactly the key's role and ACLs. An error for a caller without
// a key (the DevTenant), or after SCRAM on a broker without a cell client.
func (c *conn) callerAPI() (*client.Client, error) {
	p := c.principal.Load()
	switch {
	case c.dev:
		return nil, catalog.PermissionDenied.New("administration over Kafka (topics, ACLs) needs an API key")
	case c.secret != "":
		return c.s.cfg.ControlPlane.With(client.WithAPIKey(p.KeyID, c.secret)), nil
	case c.s.cfg.CellControlPlane != nil:
		return c.s.cfg.CellControlPlane.With(client.OnBehalfOf(p.KeyID)), nil
	}
	return nil, catalog.PermissionDenied.New("administration over Kafka (topics, ACLs) needs an API key's secret on this broker; authenticate with SASL/PLAIN (SCRAM never sends the secret)")
}

// apiError maps a control-plane call's failure to a Kafka code and a
// caller-safe message.
func apiError(err error) (int16, *string) {
	var ce *client.Error
	if errors.As(err, &ce) {
		if e := catalog.Lookup(catalog.Code(ce.Code)); e != nil {
			return entryCode(e, ce.Message)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return entryCode(catalog.RequestTimedOut, "")
	}
	return entryCode(catalog.Unavailable, "the control plane could not be reached")
}

func adminContext(parent context.Context, timeoutMillis int32) (context.Context, context.CancelFunc) {
	d := time.Duration(timeoutMillis) * time.Millisecond
	if d <= 0 || d > adminWait {
		d = adminWait
	}
	return context.WithTimeout(parent, d)
}

func (c *conn) createTopics(r *kmsg.CreateTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	ctx, cancel := adminContext(c.s.ctx, r.TimeoutMillis)
	defer cancel()
	cpc, apiErr := c.callerAPI()
	var created []string
	for _, rt := range r.Topics {
		ot := kmsg.NewCreateTopicsResponseTopic()
		ot.Topic = rt.Topic
		switch {
		case apiErr != nil:
			ot.ErrorCode, ot.ErrorMessage = errCode(apiErr)
		case len(rt.ReplicaAssignment) > 0:
			ot.ErrorCode, ot.ErrorMessage = entryCode(catalog.InvalidRequest, "manual replica assignment is not supported; Sluice places partitions")
		case rt.NumPartitions == 0 || rt.NumPartitions < -1:
			ot.ErrorCode, ot.ErrorMessage = entryCode(catalog.InvalidPartitions, fmt.Sprintf("num_partitions %d: give at least 1, or -1 for the default of 1", rt.NumPartitions))
		default:
			req := api.CreateTopicRequest{Name: rt.Topic, ValidateOnly: r.ValidateOnly}
			if rt.NumPartitions > 0 {
				req.Partitions = int(rt.NumPartitions)
			}
			for _, kv := range rt.Configs {
				if kv.Value != nil {
					if req.Config == nil {
						req.Config = map[string]string{}
					}
					req.Config[kv.Name] = *kv.Value
				}
			}
			t, err := cpc.CreateTopic(ctx, req)
			if err != nil {
				ot.ErrorCode, ot.ErrorMessage = apiError(err)
				break
			}
			ot.NumPartitions, ot.ReplicationFactor = int32(t.Partitions), int16(t.ReplicationFactor)
			for k, v := range t.EffectiveConfig {
				cfg := kmsg.NewCreateTopicsResponseTopicConfig()
				cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
				cfg.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
				ot.Configs = append(ot.Configs, cfg)
			}
			if !r.ValidateOnly {
				created = append(created, rt.Topic)
			}
		}
		resp.Topics = append(resp.Topics, ot)
	}
	// Answer once this broker's state has the new topics, so that the
	// client's next Metadata request finds them (bounded by the timeout).
	c.waitForState(ctx, func() bool {
		v := c.s.cfg.State.View()
		for _, name := range created {
			if _, ok := v.Topic(c.tenant(), name); !ok {
				return false
			}
		}
		return true
	})
	c.waitForLeaders(ctx, created)
	return resp
}

func (c *conn) deleteTopics(r *kmsg.DeleteTopicsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	ctx, cancel := adminContext(c.s.ctx, r.TimeoutMillis)
	defer cancel()
	cpc, apiErr := c.callerAPI()
	names := r.TopicNames
	if r.Version >= 6 {
		names = nil
		for _, t := range r.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			} else {
				names = append(names, "") // by topic id: Sluice does not hand out Kafka topic ids yet
			}
		}
	}
	var deleted []string
	for _, name := range names {
		ot := kmsg.NewDeleteTopicsResponseTopic()
		ot.Topic = kmsg.StringPtr(name)
		switch {
		case apiErr != nil:
			ot.ErrorCode, ot.ErrorMessage = errCode(apiErr)
		case name == "":
			ot.ErrorCode, ot.ErrorMessage = entryCode(catalog.TopicNotFound, "delete topics by name")
		default:
			if err := cpc.DeleteTopic(ctx, name); err != nil {
				ot.ErrorCode, ot.ErrorMessage = apiError(err)
			} else {
				deleted = append(deleted, name)
			}
		}
		resp.Topics = append(resp.Topics, ot)
	}
	c.waitForState(ctx, func() bool {
		v := c.s.cfg.State.View()
		for _, name := range deleted {
			if _, ok := v.Topic(c.tenant(), name); ok {
				return false
			}
		}
		return true
	})
	return resp
}

// waitForState waits until done holds for the broker's state or ctx ends.
func (c *conn) waitForState(ctx context.Context, done func() bool) {
	for {
		changed := c.s.cfg.State.Changed()
		if done() {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}
