package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/authz"
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/contract/scram"
	"github.com/sluicehq/sluice/dataplane/cellview"
)

// DescribeUserScramCredentials and AlterUserScramCredentials (keys 50 and
// 51). The users are the API key ids of the caller's tenant; their SCRAM
// credentials are derived by the control plane when a key is created, so
// they are described here and never altered. Another tenant's key answers
// RESOURCE_NOT_FOUND exactly as a key that does not exist. The two keys
// share one mapping, so they share this file.

// scramMechanismCodes are Kafka's ScramMechanism enum values.
var scramMechanismCodes = map[string]int8{scram.SHA256.Name: 1, scram.SHA512.Name: 2}

func (c *conn) describeUserScramCredentials(r *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	v := c.s.cfg.State.View()
	if !c.clusterAllowed(v, authz.OpDescribe) {
		resp.ErrorCode, resp.ErrorMessage = entryCode(catalog.PermissionDenied, "describing SCRAM credentials needs describe on the cluster")
		return resp
	}
	keys := map[string]bool{}
	var ids []string
	for _, k := range v.TenantKeys(c.tenant()) {
		keys[k.ID] = true
		ids = append(ids, k.ID)
	}
	if r.Users == nil { // every user with credentials
		for _, id := range ids {
			if res := scramResult(v, id); res.ErrorCode == 0 {
				resp.Results = append(resp.Results, res)
			}
		}
		return resp
	}
	seen := map[string]int{}
	for _, u := range r.Users {
		seen[u.Name]++
	}
	for _, u := range r.Users {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u.Name
		switch {
		case seen[u.Name] > 1:
			res.ErrorCode, res.ErrorMessage = entryCode(catalog.InvalidRequest, "the user is listed more than once")
		case !keys[u.Name]:
			res.ErrorCode, res.ErrorMessage = entryCode(catalog.NotFound, "no such API key")
		default:
			res = scramResult(v, u.Name)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}

// scramResult describes one of the caller's keys.
func scramResult(v *cellview.View, id string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
	res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
	res.User = id
	for _, m := range scram.Mechanisms {
		cred, err := v.ScramCredential(id, m.Name)
		if err != nil {
			continue
		}
		info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		info.Mechanism, info.Iterations = scramMechanismCodes[m.Name], int32(cred.Iterations)
		res.CredentialInfos = append(res.CredentialInfos, info)
	}
	if len(res.CredentialInfos) == 0 {
		res.ErrorCode, res.ErrorMessage = entryCode(catalog.NotFound, msgScramNoCredentials)
	}
	return res
}

// msgScramDerived answers every AlterUserScramCredentials.
const msgScramDerived = "SCRAM credentials are derived from an API key's secret when the key is created and cannot be " +
	"set or deleted; create a new API key (or revoke one) through the API instead"

func (c *conn) alterUserScramCredentials(r *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	users := map[string]bool{}
	add := func(user string) {
		if users[user] {
			return
		}
		users[user] = true
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		res.ErrorCode, res.ErrorMessage = entryCode(catalog.InvalidRequest, msgScramDerived)
		resp.Results = append(resp.Results, res)
	}
	for _, d := range r.Deletions {
		add(d.Name)
	}
	for _, u := range r.Upsertions {
		add(u.Name)
	}
	return resp
}
