package client

import (
	"context"
	"net/http"

	"github.com/sluicehq/sluice/contract/api"
)

// Signup asks for a tenant and its owner; the answer is the same whether
// or not the email or name is taken, and the next step is mailed to the
// address (ConfirmSignup with its token).
func (c *Client) Signup(ctx context.Context, req api.SignupRequest) (api.SignupAccepted, error) {
	return call[api.SignupAccepted](ctx, c, http.MethodPost, "/v1/signup", req)
}

// ConfirmSignup creates the tenant and owner a signup asked for, with the
// token mailed to its address, and returns the owner's session.
func (c *Client) ConfirmSignup(ctx context.Context, token string) (api.SignupResponse, error) {
	return call[api.SignupResponse](ctx, c, http.MethodPost, "/v1/signup/confirm", api.ConfirmSignupRequest{Token: token})
}

// Login creates a session.
func (c *Client) Login(ctx context.Context, req api.SessionRequest) (api.Session, error) {
	return call[api.Session](ctx, c, http.MethodPost, "/v1/sessions", req)
}

// Logout ends the caller's session.
func (c *Client) Logout(ctx context.Context) error {
	return c.Do(ctx, http.MethodDelete, "/v1/sessions/current", nil, nil)
}

// Me describes the caller.
func (c *Client) Me(ctx context.Context) (api.Me, error) {
	return call[api.Me](ctx, c, http.MethodGet, "/v1/me", nil)
}

// Tenant returns the caller's tenant.
func (c *Client) Tenant(ctx context.Context) (api.Tenant, error) {
	return call[api.Tenant](ctx, c, http.MethodGet, "/v1/tenant", nil)
}

// Tenants lists every tenant the signed-in user belongs to, with the user's
// role in each; a session only, not an API key.
func (c *Client) Tenants(ctx context.Context) ([]api.UserTenant, error) {
	return all[api.UserTenant](ctx, c, "/v1/tenants")
}

// CreateTenant creates another tenant owned by the signed-in user and
// returns it with a session on it; a session only, not an API key.
func (c *Client) CreateTenant(ctx context.Context, req api.CreateTenantRequest) (api.CreateTenantResponse, error) {
	return call[api.CreateTenantResponse](ctx, c, http.MethodPost, "/v1/tenants", req)
}

// Cluster returns the caller's bootstrap endpoints.
func (c *Client) Cluster(ctx context.Context) (api.Cluster, error) {
	return call[api.Cluster](ctx, c, http.MethodGet, "/v1/cluster", nil)
}

// APIKeys lists every API key of the tenant.
func (c *Client) APIKeys(ctx context.Context) ([]api.APIKey, error) {
	return all[api.APIKey](ctx, c, "/v1/api-keys")
}

// CreateAPIKey creates a key; the answer holds the secret, once.
func (c *Client) CreateAPIKey(ctx context.Context, req api.CreateAPIKeyRequest) (api.APIKey, error) {
	return call[api.APIKey](ctx, c, http.MethodPost, "/v1/api-keys", req)
}

// APIKey returns one key.
func (c *Client) APIKey(ctx context.Context, id string) (api.APIKey, error) {
	return call[api.APIKey](ctx, c, http.MethodGet, "/v1/api-keys/"+esc(id), nil)
}

// RevokeAPIKey revokes a key.
func (c *Client) RevokeAPIKey(ctx context.Context, id string) (api.APIKey, error) {
	return call[api.APIKey](ctx, c, http.MethodDelete, "/v1/api-keys/"+esc(id), nil)
}

// Topics lists every topic of the tenant.
func (c *Client) Topics(ctx context.Context) ([]api.Topic, error) {
	return all[api.Topic](ctx, c, "/v1/topics")
}

// CreateTopic creates a topic.
func (c *Client) CreateTopic(ctx context.Context, req api.CreateTopicRequest) (api.Topic, error) {
	return call[api.Topic](ctx, c, http.MethodPost, "/v1/topics", req)
}

// Topic returns one topic.
func (c *Client) Topic(ctx context.Context, name string) (api.Topic, error) {
	return call[api.Topic](ctx, c, http.MethodGet, "/v1/topics/"+esc(name), nil)
}

// UpdateTopic grows partitions or changes config.
func (c *Client) UpdateTopic(ctx context.Context, name string, req api.UpdateTopicRequest) (api.Topic, error) {
	return call[api.Topic](ctx, c, http.MethodPatch, "/v1/topics/"+esc(name), req)
}

// DeleteTopic deletes a topic.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/topics/"+esc(name), nil, nil)
}

// ACLs lists every ACL of the tenant.
func (c *Client) ACLs(ctx context.Context) ([]api.ACL, error) {
	return all[api.ACL](ctx, c, "/v1/acls")
}

// CreateACL creates an ACL.
func (c *Client) CreateACL(ctx context.Context, req api.CreateACLRequest) (api.ACL, error) {
	return call[api.ACL](ctx, c, http.MethodPost, "/v1/acls", req)
}

// ACL returns one ACL.
func (c *Client) ACL(ctx context.Context, id string) (api.ACL, error) {
	return call[api.ACL](ctx, c, http.MethodGet, "/v1/acls/"+esc(id), nil)
}

// DeleteACL deletes an ACL.
func (c *Client) DeleteACL(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/acls/"+esc(id), nil, nil)
}

// Quotas returns the caller's tenant quotas.
func (c *Client) Quotas(ctx context.Context) (api.Quotas, error) {
	return call[api.Quotas](ctx, c, http.MethodGet, "/v1/quotas", nil)
}

// Members lists the tenant's members.
func (c *Client) Members(ctx context.Context) ([]api.Member, error) {
	return all[api.Member](ctx, c, "/v1/members")
}

// AddMember invites an address to the tenant; the answer is the same
// whether or not it has an account, and the invitation's token is mailed
// to it (AcceptInvitation).
func (c *Client) AddMember(ctx context.Context, req api.AddMemberRequest) (api.MemberInvited, error) {
	return call[api.MemberInvited](ctx, c, http.MethodPost, "/v1/members", req)
}

// AcceptInvitation makes the invited address a member with the mailed
// token (no credentials needed: the token is one).
func (c *Client) AcceptInvitation(ctx context.Context, token string) (api.Member, error) {
	return call[api.Member](ctx, c, http.MethodPost, "/v1/invitations/accept", api.AcceptInvitationRequest{Token: token})
}

// UpdateMember changes a member's role.
func (c *Client) UpdateMember(ctx context.Context, userID string, req api.UpdateMemberRequest) (api.Member, error) {
	return call[api.Member](ctx, c, http.MethodPatch, "/v1/members/"+esc(userID), req)
}

// RemoveMember removes a member.
func (c *Client) RemoveMember(ctx context.Context, userID string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/members/"+esc(userID), nil, nil)
}

// Groups lists the tenant's consumer groups with their total lag.
func (c *Client) Groups(ctx context.Context) ([]api.Group, error) {
	return all[api.Group](ctx, c, "/v1/groups")
}

// Group returns one consumer group with its lag per partition.
func (c *Client) Group(ctx context.Context, name string) (api.Group, error) {
	return call[api.Group](ctx, c, http.MethodGet, "/v1/groups/"+esc(name), nil)
}
