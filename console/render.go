package console

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// pageTemplate is the layout joined with one page's template.
type pageTemplate struct{ t *template.Template }

// page is what every template gets.
type page struct {
	Title  string
	Nav    string // the nav entry to mark current
	Me     *api.Me
	CSRF   string
	Notice string    // a one-line success message
	Error  *uiError  // a failure, shown next to the form it belongs to
	Form   formInput // what the user typed, to refill a rejected form
	Data   any
}

// uiError is an API rejection as the user sees it.
type uiError struct {
	Status  int
	Code    string
	Message string
	Form    string // the form it belongs to, e.g. "create-topic"
}

// formInput is a submitted form, by field name.
type formInput map[string]string

func (f formInput) Get(k string) string { return f[k] }

// ErrorFor returns the error of the named form, if it failed.
func (p page) ErrorFor(form string) *uiError {
	if p.Error != nil && p.Error.Form == form {
		return p.Error
	}
	return nil
}

var funcs = template.FuncMap{
	"when": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "never"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"date": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"bytes":    humanBytes,
	"dollars":  dollars,
	"duration": humanMillis,
	"pct": func(used, total int64) string {
		if total <= 0 {
			return "–"
		}
		return strconv.FormatFloat(100*float64(used)/float64(total), 'f', 0, 64) + "%"
	},
	"join":       strings.Join,
	"lagtime":    lagTime,
	"pathesc":    url.PathEscape,
	"int64":      func(i int) int64 { return int64(i) },
	"itoa":       func(i int64) string { return strconv.FormatInt(i, 10) },
	"nodes":      nodes,
	"eta":        eta,
	"unfinished": unfinished,
	"movetable":  newMoveTable[api.Move],
	"tmsummary":  summarizeTenantMove,
	"tmcancel":   tenantMoveCancellable,
	"tmfinished": tenantMoveFinished,
	"tmcopying":  tenantMoveCopying,
	"tmrate":     tenantMoveRate,
	"tmpartrate": tenantMovePartitionRate,
	"tmtable":    newMoveTable[api.TenantMove],
	"options":    newOptions,
	"confirm":    newConfirmForm,
}

// options is what the "options" template of the layout draws: a select's
// options, with the one the user chose (or the default) kept selected when
// a rejected form comes back.
type options struct {
	Values   []string
	Selected string
}

func newOptions(values []string, selected string) options {
	return options{Values: values, Selected: selected}
}

// confirmForm is what the "confirmform" template of the layout draws: the
// form of an action that cannot be undone, posted only with the name of
// what it acts on typed in. Every such form looks and behaves the same.
type confirmForm struct {
	ID, Action     string // the form's id and where it posts
	Input, Label   string // the confirmation field's id and label
	Submit, Button string // the submit button's id and text
	CSRF           string
	Error          *uiError // the form's refusal, if any
}

// newConfirmForm is form id of page p, its refusal p's error for the
// form named errFor (the name the handler gives its errors).
func newConfirmForm(p page, errFor, id, action, input, label, submit, button string) confirmForm {
	return confirmForm{ID: id, Action: action, Input: input, Label: label, Submit: submit, Button: button,
		CSRF: p.CSRF, Error: p.ErrorFor(errFor)}
}

func parsePages() (map[string]*pageTemplate, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("parse layout: %w", err)
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	out := map[string]*pageTemplate{}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", n, err)
		}
		out[name] = &pageTemplate{t: t}
	}
	return out, nil
}

// render writes a page with the layout. A template failure is logged and
// answered with a plain 500: it is a bug, not the user's doing.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	pt, ok := c.pages[name]
	if !ok {
		c.log.Error("console template missing", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := pt.t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		c.log.Error("console render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderForm renders page p of a form: with the error of the form's last
// submission (ue, whose status replaces status) and what was typed.
func (c *Console) renderForm(w http.ResponseWriter, r *http.Request, status int, name string, p page, ue *uiError, form formInput) {
	p.Error, p.Form = ue, form
	if ue != nil {
		status = formStatus(ue)
	}
	c.render(w, r, status, name, p)
}

// renderEditForm renders page p of a form that edits something in place:
// as renderForm, and with notice shown when the page is the redirect after
// a submission that saved (?saved=1).
func (c *Console) renderEditForm(w http.ResponseWriter, r *http.Request, name string, p page, notice string, ue *uiError, form formInput) {
	if r.URL.Query().Get("saved") == "1" && ue == nil {
		p.Notice = notice
	}
	c.renderForm(w, r, http.StatusOK, name, p, ue, form)
}

// sessionPage fills the fields every signed-in page has.
func sessionPage(s *session, title, nav string) page {
	p := page{Title: title, Nav: nav}
	if s != nil {
		p.CSRF = s.csrf
		if s.me.Role != "" {
			me := s.me
			p.Me = &me
		}
	}
	return p
}

// renderMessage renders a page that only explains something.
func (c *Console) renderMessage(w http.ResponseWriter, r *http.Request, s *session, status int, title, msg string) {
	p := sessionPage(s, title, "")
	p.Data = msg
	c.render(w, r, status, "message", p)
}

// toUIError turns a failed call into what the user may see. The API's
// messages are written for callers; anything else (the API did not answer)
// is logged and described generically.
func (c *Console) toUIError(r *http.Request, err error, form string) *uiError {
	var e *client.Error
	if errors.As(err, &e) {
		return &uiError{Status: e.Status, Code: e.Code, Message: e.Message, Form: form}
	}
	c.log.Error("console api call", "path", r.URL.Path, "err", err)
	return &uiError{Status: http.StatusBadGateway, Code: "unavailable", Form: form,
		Message: "The control plane did not answer. Nothing may have changed; try again in a moment."}
}

// renderAPIError renders a whole-page failure of a call.
func (c *Console) renderAPIError(w http.ResponseWriter, r *http.Request, s *session, err error) {
	ue := c.toUIError(r, err, "")
	title := "Something went wrong"
	switch ue.Status {
	case http.StatusForbidden:
		title = "Not allowed"
	case http.StatusNotFound:
		title = "Not found"
	case http.StatusTooManyRequests:
		title = "Slow down"
	}
	p := sessionPage(s, title, "")
	p.Error = ue
	c.render(w, r, ue.Status, "error", p)
}

// formError answers a form submission the API refused: the sign-in page
// if the session is gone, else rerender with the error shown next to form
// formID.
func (c *Console) formError(w http.ResponseWriter, r *http.Request, err error, formID string, rerender func(ue *uiError)) {
	if c.authLost(w, r, err) {
		return
	}
	rerender(c.toUIError(r, err, formID))
}

// fail handles the failure of a call a page needs: a lost session goes to
// the login page, anything else is rendered.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	if c.authLost(w, r, err) {
		return
	}
	c.renderAPIError(w, r, s, err)
}

// formStatus is the status of a page re-rendered for a rejected form.
func formStatus(ue *uiError) int {
	if ue.Status >= 400 {
		return ue.Status
	}
	return http.StatusUnprocessableEntity
}

func humanBytes(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// humanMillis renders a millisecond count from the API ("604800000") as
// "7d"; anything else is shown as it is.
func humanMillis(ms string) string {
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return ms
	}
	if n < 0 {
		return "forever"
	}
	d := time.Duration(n) * time.Millisecond
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}
