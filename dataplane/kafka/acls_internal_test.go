package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/contract/api"
)

// TestACLFilterMatches: DescribeAcls and DeleteAcls filters select ACLs as
// Kafka's do. MATCH on a name finds the literal ACLs of that name or of
// "*" and the prefixed ones whose prefix starts the name; ANY finds every
// pattern type of exactly that name; LITERAL and PREFIXED only their own;
// no name matches every name; a principal filter is exact ("User:*" finds
// the rules for every key, not every rule).
func TestACLFilterMatches(t *testing.T) {
	acl := func(principal, name, pattern string) api.ACL {
		return api.ACL{Principal: principal, ResourceType: "topic", ResourceName: name, PatternType: pattern,
			Operation: "read", Permission: "allow"}
	}
	var (
		literal  = acl("k1", "logs.app", "literal")
		wildcard = acl("*", "*", "literal")
		prefix   = acl("k1", "logs.", "prefixed")
		longer   = acl("k1", "logs.app.x", "prefixed")
		group    = api.ACL{Principal: "k1", ResourceType: "group", ResourceName: "logs.app", PatternType: "literal",
			Operation: "read", Permission: "allow"}
		all = []api.ACL{literal, wildcard, prefix, longer, group}
	)
	name := func(s string) *string { return &s }
	for _, tc := range []struct {
		name      string
		rtype     kmsg.ACLResourceType
		resource  *string
		pattern   kmsg.ACLResourcePatternType
		principal *string
		want      []api.ACL
	}{
		{"match on a name", kmsg.ACLResourceTypeTopic, name("logs.app"), kmsg.ACLResourcePatternTypeMatch, nil,
			[]api.ACL{literal, wildcard, prefix}},
		{"any on a name", kmsg.ACLResourceTypeAny, name("logs."), kmsg.ACLResourcePatternTypeAny, nil, []api.ACL{prefix}},
		{"literal on a name", kmsg.ACLResourceTypeAny, name("logs.app"), kmsg.ACLResourcePatternTypeLiteral, nil,
			[]api.ACL{literal, group}},
		{"prefixed without a name", kmsg.ACLResourceTypeTopic, nil, kmsg.ACLResourcePatternTypePrefixed, nil,
			[]api.ACL{prefix, longer}},
		{"any type, any name", kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, nil, all},
		{"every key", kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny, name("User:*"), []api.ACL{wildcard}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := newACLFilter(1, tc.rtype, tc.resource, tc.pattern, tc.principal, nil, kmsg.ACLOperationAny,
				kmsg.ACLPermissionTypeAny)
			if err != nil {
				t.Fatal(err)
			}
			var got []api.ACL
			for _, a := range all {
				if f.matches(a) {
					got = append(got, a)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("matched %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("matched %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}
