package echoapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/sluicehq/sluice/contract/catalog"
)

func TestToCatalog(t *testing.T) {
	rest := func(err error) *catalog.Error { return catalog.AlreadyExists.Wrap(err, "from rest") }
	cases := []struct {
		err  error
		want *catalog.Entry
	}{
		{echo.ErrNotFound, catalog.NotFound},
		{echo.ErrMethodNotAllowed, catalog.InvalidRequest},
		{echo.ErrStatusRequestEntityTooLarge, catalog.BodyTooLarge},
		{echo.ErrUnauthorized, catalog.Unauthenticated},
		{echo.ErrTeapot, catalog.Internal},
		{errors.New("plain"), catalog.AlreadyExists},
	}
	for _, c := range cases {
		if got := ToCatalog(c.err, rest); got.Entry != c.want {
			t.Errorf("ToCatalog(%v) = %s, want %s", c.err, got.Entry.Code, c.want.Code)
		}
	}
}

func TestServeDoc(t *testing.T) {
	doc := []byte(`{"openapi":"3.0.3"}`)
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil), rec)
	if err := ServeDoc(doc)(c); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || rec.Body.String() != string(doc) || rec.Header().Get(echo.HeaderContentType) != echo.MIMEApplicationJSON {
		t.Fatalf("answer %d %q %q", rec.Code, rec.Header().Get(echo.HeaderContentType), rec.Body)
	}
}

func TestRouteAndUnmatched(t *testing.T) {
	if got := Route("get", "/v1/topics/{name}/partitions/{partition_id}"); got != "GET /v1/topics/:name/partitions/:partition_id" {
		t.Fatalf("Route = %q", got)
	}
	doc := []string{"GET /v1/a", "POST /v1/b", "GET /v1/z"}
	reg := []string{"GET /v1/a", "DELETE /v1/c", "GET /v1/y"}
	undoc, unreg := Unmatched(doc, reg)
	if !slices.Equal(undoc, []string{"DELETE /v1/c", "GET /v1/y"}) || !slices.Equal(unreg, []string{"GET /v1/z", "POST /v1/b"}) {
		t.Fatalf("Unmatched = %v, %v", undoc, unreg)
	}
	if undoc, unreg := Unmatched(doc, doc); undoc != nil || unreg != nil {
		t.Fatalf("a document matching its routes: %v, %v", undoc, unreg)
	}
}
