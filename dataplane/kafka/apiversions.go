package kafka

import (
	"regexp"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/catalog"
)

// apiKeys is the ApiVersions list, sorted by key.
var apiKeys = func() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for k, r := range apis {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: r.min, MaxVersion: r.max})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}()

// clientSoftwareRE is the rule Kafka applies to ApiVersions v3+ client
// software names and versions.
var clientSoftwareRE = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func (c *conn) apiVersions(r *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiKeys
	if c.s.cfg.ControlPlane == nil || c.s.cfg.ProducerIDs == nil || c.s.cfg.Groups == nil {
		resp.ApiKeys = nil
		for _, k := range apiKeys {
			if c.s.serves(k.ApiKey) {
				resp.ApiKeys = append(resp.ApiKeys, k)
			}
		}
	}
	if r.Version >= 3 && (!clientSoftwareRE.MatchString(r.ClientSoftwareName) || !clientSoftwareRE.MatchString(r.ClientSoftwareVersion)) {
		resp.ErrorCode, _ = entryCode(catalog.InvalidRequest, "")
	}
	return resp
}

// serves reports whether the server's configuration lets it serve an API
// of the table: the admin and ACL APIs need a control plane, InitProducerId a
// producer id source (without it franz-go and librdkafka turn idempotence
// off by themselves).
func (s *Server) serves(key int16) bool {
	switch {
	case adminAPIs[key], aclAPIs[key]:
		return s.cfg.ControlPlane != nil
	case key == 22:
		return s.cfg.ProducerIDs != nil
	case groupAPIs[key]:
		return s.cfg.Groups != nil
	}
	_, ok := apis[key]
	return ok
}

// unsupportedApiVersions is the v0 answer to an ApiVersions request of a
// version this broker does not know; it lists what the broker serves.
func unsupportedApiVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = catalog.UnsupportedVersion.KafkaCode
	resp.ApiKeys = apiKeys
	return resp
}
