package authz

import (
	"fmt"
	"testing"
)

func TestAPIRoles(t *testing.T) {
	a, err := NewAPI()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		role, obj, act string
		want           bool
	}{
		{RoleViewer, ObjTopics, ActRead, true},
		{RoleViewer, ObjTopics, ActWrite, false},
		{RoleDeveloper, ObjTopics, ActWrite, true},
		{RoleDeveloper, ObjACLs, ActWrite, false},
		{RoleAdmin, ObjACLs, ActWrite, true},
		{RoleAdmin, ObjTenant, ActWrite, false},
		{RoleOwner, ObjTenant, ActWrite, true},
		{RoleOwner, ObjAdmin, ActRead, false},
		{RoleOperator, ObjAdmin, ActWrite, true},
		{RoleOperator, ObjTopics, ActRead, false},
		{RoleClient, ObjTopics, ActRead, false},
		{RoleClient, ObjTenant, ActRead, true},
		{"nobody", ObjTenant, ActRead, false},
	} {
		t.Run(tc.role+"/"+tc.obj+"/"+tc.act, func(t *testing.T) {
			if got := a.Allowed(tc.role, tc.obj, tc.act); got != tc.want {
				t.Fatalf("Allowed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAtMost(t *testing.T) {
	if !AtMost(RoleViewer, RoleDeveloper) || AtMost(RoleAdmin, RoleDeveloper) || AtMost(RoleOperator, RoleOwner) {
		t.Fatal("AtMost ordering is wrong")
	}
}

func TestACL(t *testing.T) {
	keys := []Key{{"KADMIN", RoleAdmin}, {"KDEV", RoleDeveloper}, {"KVIEW", RoleViewer}, {"KCLIENT", RoleClient}, {"KDEV2", RoleDeveloper}}
	rules := []Rule{
		{"KCLIENT", ResourceTopic, "orders", PatternLiteral, OpWrite, Allow},
		{"KCLIENT", ResourceTopic, "logs.", PatternPrefixed, OpRead, Allow},
		{"KCLIENT", ResourceGroup, "indexer", PatternLiteral, OpRead, Allow},
		{"KDEV", ResourceTopic, "secret.", PatternPrefixed, OpAll, Deny},
		{AnyKey, ResourceTopic, "audit", PatternLiteral, OpDelete, Deny},
		{"KADMIN", ResourceTopic, "locked.", PatternPrefixed, OpCreate, Deny},
		{"KADMIN", ResourceTopic, "frozen", PatternLiteral, OpAlter, Deny},
		{"KADMIN", ResourceTopic, "pinned", PatternLiteral, OpAlterConfigs, Deny},
		{"KADMIN", ResourceTopic, "opaque", PatternLiteral, OpDescribeConfigs, Deny},
		{"KADMIN", ResourceTopic, "hidden", PatternLiteral, OpDescribe, Deny},
		{"KVIEW", ResourceCluster, "kafka-cluster", PatternLiteral, OpCreate, Allow},
		{"KVIEW", ResourceTopic, "viewonly.", PatternPrefixed, OpCreate, Deny},
		{"KDEV2", ResourceCluster, "anything", PatternLiteral, OpCreate, Deny},
		{"KCLIENT", ResourceTopic, "tuned", PatternLiteral, OpAlterConfigs, Allow},
		{"KCLIENT", ResourceCluster, "*", PatternLiteral, OpDescribeConfigs, Allow},
	}
	acl, err := NewACL(keys, rules)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name               string
		key, rtype, rn, op string
		want               bool
	}{
		{"admin writes anything", "KADMIN", ResourceTopic, "x", OpWrite, true},
		{"deny for any key beats admin default", "KADMIN", ResourceTopic, "audit", OpDelete, false},
		{"developer creates", "KDEV", ResourceTopic, "new", OpCreate, true},
		{"developer denied by prefix", "KDEV", ResourceTopic, "secret.keys", OpRead, false},
		{"developer denied describe by deny all", "KDEV", ResourceTopic, "secret.keys", OpDescribe, false},
		{"developer outside denied prefix", "KDEV", ResourceTopic, "secretive", OpRead, true},
		{"viewer reads", "KVIEW", ResourceTopic, "orders", OpRead, true},
		{"viewer cannot write", "KVIEW", ResourceTopic, "orders", OpWrite, false},
		{"client has no defaults", "KCLIENT", ResourceTopic, "payments", OpRead, false},
		{"client literal allow", "KCLIENT", ResourceTopic, "orders", OpWrite, true},
		{"client literal is not prefix", "KCLIENT", ResourceTopic, "orders2", OpWrite, false},
		{"client write implies describe", "KCLIENT", ResourceTopic, "orders", OpDescribe, true},
		{"client write does not imply read", "KCLIENT", ResourceTopic, "orders", OpRead, false},
		{"client prefixed read", "KCLIENT", ResourceTopic, "logs.app", OpRead, true},
		{"client group read", "KCLIENT", ResourceGroup, "indexer", OpRead, true},
		{"client other group", "KCLIENT", ResourceGroup, "other", OpRead, false},
		{"unknown key", "KNOBODY", ResourceTopic, "orders", OpRead, false},
		{"topic deny create beats admin default", "KADMIN", ResourceTopic, "locked.x", OpCreate, false},
		{"admin creates outside the denied prefix", "KADMIN", ResourceTopic, "open.x", OpCreate, true},
		{"deny alter stops alter", "KADMIN", ResourceTopic, "frozen", OpAlter, false},
		{"deny alter stops alter_configs", "KADMIN", ResourceTopic, "frozen", OpAlterConfigs, false},
		{"deny alter_configs leaves alter", "KADMIN", ResourceTopic, "pinned", OpAlter, true},
		{"deny alter_configs stops it", "KADMIN", ResourceTopic, "pinned", OpAlterConfigs, false},
		{"deny describe_configs stops it", "KADMIN", ResourceTopic, "opaque", OpDescribeConfigs, false},
		{"deny describe beats what read and write imply", "KADMIN", ResourceTopic, "hidden", OpDescribe, false},
		{"deny describe leaves read", "KADMIN", ResourceTopic, "hidden", OpRead, true},
		{"deny describe stops describe_configs", "KADMIN", ResourceTopic, "hidden", OpDescribeConfigs, false},
		{"deny describe_configs leaves describe", "KADMIN", ResourceTopic, "opaque", OpDescribe, true},
		{"deny all stops describe_configs", "KDEV", ResourceTopic, "secret.x", OpDescribeConfigs, false},
		{"viewer describes configs", "KVIEW", ResourceTopic, "orders", OpDescribeConfigs, true},
		{"viewer may not alter configs", "KVIEW", ResourceTopic, "orders", OpAlterConfigs, false},
		{"cluster create allows topic create", "KVIEW", ResourceTopic, "anything", OpCreate, true},
		{"topic deny beats cluster allow", "KVIEW", ResourceTopic, "viewonly.x", OpCreate, false},
		{"cluster create does not allow write", "KVIEW", ResourceTopic, "anything", OpWrite, false},
		{"cluster deny create stops topic create", "KDEV2", ResourceTopic, "new", OpCreate, false},
		{"cluster deny create leaves write", "KDEV2", ResourceTopic, "new", OpWrite, true},
		{"cluster rule applies whatever its name", "KDEV2", ResourceCluster, ClusterName, OpCreate, false},
		{"developer describes the cluster", "KDEV", ResourceCluster, ClusterName, OpDescribe, true},
		{"developer may not alter the cluster", "KDEV", ResourceCluster, ClusterName, OpAlter, false},
		{"client alter_configs implies describe_configs", "KCLIENT", ResourceTopic, "tuned", OpDescribeConfigs, true},
		{"client alter_configs is not alter", "KCLIENT", ResourceTopic, "tuned", OpAlter, false},
		{"client read does not imply describe_configs", "KCLIENT", ResourceTopic, "logs.app", OpDescribeConfigs, false},
		{"client cluster describe_configs", "KCLIENT", ResourceCluster, ClusterName, OpDescribeConfigs, true},
		{"client cluster rules are not topic rules", "KCLIENT", ResourceTopic, "payments", OpDescribeConfigs, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The second answer is the remembered one.
			for range 2 {
				if got := acl.Allowed(tc.key, tc.rtype, tc.rn, tc.op); got != tc.want {
					t.Fatalf("Allowed(%s %s %s %s) = %v, want %v", tc.key, tc.rtype, tc.rn, tc.op, got, tc.want)
				}
			}
		})
	}
}

func TestACLRejectsLiteralStar(t *testing.T) {
	_, err := NewACL(nil, []Rule{{AnyKey, ResourceTopic, "a*", PatternLiteral, OpRead, Allow}})
	if err == nil {
		t.Fatal("literal name ending in * accepted")
	}
}

// An ACL remembers at most maxDecisions answers (names come from clients),
// and past that still answers from its rules.
func TestACLRemembersABoundedNumberOfAnswers(t *testing.T) {
	acl, err := NewACL([]Key{{"K", RoleDeveloper}}, []Rule{{"K", ResourceTopic, "odd.", PatternPrefixed, OpWrite, Deny}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 * maxDecisions {
		name := fmt.Sprintf("even.%d", i)
		if i%2 == 1 {
			name = fmt.Sprintf("odd.%d", i)
		}
		for range 2 {
			if got, want := acl.Allowed("K", ResourceTopic, name, OpWrite), i%2 == 0; got != want {
				t.Fatalf("Allowed(K topic %s write) = %v, want %v", name, got, want)
			}
		}
	}
	kept := 0
	acl.decisions.Range(func(any, any) bool { kept++; return true })
	if kept != maxDecisions || acl.kept.Load() != maxDecisions {
		t.Fatalf("%d answers kept (counter %d), want %d", kept, acl.kept.Load(), maxDecisions)
	}
}

// go test -run '^$' -bench ACLAllowed ./contract/authz/
func BenchmarkACLAllowed(b *testing.B) {
	acl, err := NewACL([]Key{{"K", RoleClient}}, []Rule{
		{"K", ResourceTopic, "orders", PatternLiteral, OpWrite, Allow},
		{"K", ResourceTopic, "logs.", PatternPrefixed, OpRead, Allow},
		{AnyKey, ResourceTopic, "audit", PatternLiteral, OpDelete, Deny},
	})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if !acl.Allowed("K", ResourceTopic, "orders", OpWrite) {
			b.Fatal("refused")
		}
	}
}
