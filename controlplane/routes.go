package controlplane

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/sluicehq/sluice/contract/catalog"
)

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	// Rate limits key on the peer address; no proxy is trusted to name another.
	e.IPExtractor = echo.ExtractIPDirect()
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisablePrintStack: true,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			s.log.Error("handler panic", "path", c.Path(), "err", err, "stack", string(stack))
			return catalog.Internal.Wrap(err, "")
		},
	}))

	e.Use(s.metrics.middleware)
	if s.cfg.Metrics != nil {
		e.GET("/metrics", s.serveMetrics, s.authenticate)
	}

	v1 := e.Group("/v1")
	v1.GET("/openapi.json", s.openAPI)
	v1.POST("/signup", s.signup)
	v1.POST("/signup/confirm", s.confirmSignup)
	v1.POST("/invitations/accept", s.acceptInvitation)
	v1.POST("/sessions", s.createSession)

	a := v1.Group("", s.authenticate)
	a.DELETE("/sessions/current", s.deleteSession)
	a.GET("/me", s.me)
	a.GET("/tenant", s.getTenant)
	a.GET("/tenants", s.listUserTenants)
	a.POST("/tenants", s.createTenant)
	a.GET("/cluster", s.getCluster)

	a.GET("/api-keys", s.listKeys)
	a.POST("/api-keys", s.createKey)
	a.GET("/api-keys/:id", s.getKey)
	a.DELETE("/api-keys/:id", s.revokeKey)

	a.GET("/topics", s.listTopics)
	a.POST("/topics", s.createTopic)
	a.GET("/topics/:name", s.getTopic)
	a.PATCH("/topics/:name", s.updateTopic)
	a.DELETE("/topics/:name", s.deleteTopic)

	a.GET("/acls", s.listACLs)
	a.POST("/acls", s.createACL)
	a.GET("/acls/:id", s.getACL)
	a.DELETE("/acls/:id", s.deleteACL)

	a.GET("/quotas", s.getQuotas)

	a.GET("/groups", s.listGroups)
	a.GET("/groups/:group", s.getGroup)

	a.GET("/usage", s.getUsage)
	a.GET("/billing", s.getBilling)

	a.GET("/members", s.listMembers)
	a.POST("/members", s.addMember)
	a.PATCH("/members/:user_id", s.updateMember)
	a.DELETE("/members/:user_id", s.removeMember)

	op := a.Group("/admin")
	op.GET("/tenants", s.adminListTenants)
	op.GET("/tenants/:id", s.adminGetTenant)
	op.PATCH("/tenants/:id", s.adminUpdateTenant)
	op.GET("/tenants/:id/quotas", s.adminGetQuotas)
	op.PUT("/tenants/:id/quotas", s.adminSetQuotas)
	op.GET("/tenants/:id/throttle", s.adminGetThrottle)
	op.PUT("/tenants/:id/throttle", s.adminSetThrottle)
	op.DELETE("/tenants/:id/throttle", s.adminDeleteThrottle)
	op.DELETE("/tenants/:id/api-keys/:key", s.adminRevokeTenantKey)
	op.POST("/tenants/:id/move", s.adminMoveTenant)
	op.GET("/tenant-moves", s.adminListTenantMoves)
	op.GET("/tenant-moves/:id", s.adminGetTenantMove)
	op.PATCH("/tenant-moves/:id", s.adminUpdateTenantMove)
	op.POST("/tenant-moves/:id/cancel", s.adminCancelTenantMove)
	op.GET("/pools", s.adminListPools)
	op.POST("/pools", s.adminCreatePool)
	op.GET("/pools/:id", s.adminGetPool)
	op.GET("/cells", s.adminListCells)
	op.POST("/cells", s.adminCreateCell)
	op.GET("/cells/:id", s.adminGetCell)
	op.POST("/cells/:id/keys", s.adminCreateCellKey)
	op.GET("/brokers", s.adminListBrokers)
	op.POST("/brokers", s.adminCreateBroker)
	op.GET("/brokers/:id", s.adminGetBroker)
	op.PATCH("/brokers/:id", s.adminUpdateBroker)
	op.DELETE("/brokers/:id", s.adminDeleteBroker)
	op.POST("/brokers/:id/drain", s.adminDrainBroker)
	op.GET("/moves", s.adminListMoves)
	op.POST("/moves", s.adminCreateMove)
	op.GET("/moves/:id", s.adminGetMove)
	op.POST("/moves/:id/cancel", s.adminCancelMove)
	op.GET("/api-keys", s.adminListKeys)
	op.POST("/api-keys", s.adminCreateKey)
	op.DELETE("/api-keys/:id", s.adminRevokeKey)
	op.GET("/usage", s.adminGetUsage)
	op.GET("/billing/reconcile", s.adminBillingReconcile)

	in := e.Group("/internal/v1/cells/:cell")
	in.GET("/state", s.cellState)
	in.POST("/report", s.cellReport)
	in.POST("/producer-ids", s.producerIDs)
	in.POST("/key-home", s.keyHome)
	in.PUT("/brokers/:id", s.cellRegisterBroker)
	in.POST("/usage", s.shipUsage)

	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	return e
}
