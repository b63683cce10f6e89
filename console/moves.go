package console

import (
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// The operator's replica moves page: the moves in progress with their
// progress and a cancel button, the recent finished ones, and a form that
// starts a move of one partition. The control plane decides whether a
// move may start; the page shows its answer.

// recentMoves is how many finished moves the page lists, newest first.
const recentMoves = 50

type movesData struct {
	Filter     client.MoveFilter
	InProgress []api.Move
	Recent     []api.Move
	// Finished is how many finished moves the filter matched, of which
	// Recent is the newest.
	Finished int
}

// unfinished is whether a move is still converging (to its target, or
// back to its original replicas); a failed move is, until cancelled.
func unfinished(m api.Move) bool {
	return m.State == "running" || m.State == "cancelling" || m.State == "failed"
}

func (c *Console) adminMovesPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderMoves(w, r, s, nil, nil)
}

func (c *Console) renderMoves(w http.ResponseWriter, r *http.Request, s *session, ue *uiError, form formInput) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	q := r.URL.Query()
	f := client.MoveFilter{Cell: q.Get("cell"), Broker: q.Get("broker")}
	moves, err := s.api.AdminMoves(r.Context(), f)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := movesData{Filter: f}
	d.InProgress, d.Recent, d.Finished = splitNewestFirst(moves, unfinished)
	p := sessionPage(s, "Replica moves", "admin-moves")
	p.Data = d
	// The notice names only a move that is listed, in the state it claims.
	if ue == nil {
		for _, m := range d.InProgress {
			switch strconv.FormatInt(m.ID, 10) {
			case q.Get("started"):
				p.Notice = "Move " + q.Get("started") + " started."
			case q.Get("cancelled"):
				if m.State == "cancelling" {
					p.Notice = "Move " + q.Get("cancelled") + " is rolling back to its original replicas."
				}
			}
		}
	}
	c.renderForm(w, r, http.StatusOK, "admin_moves", p, ue, form)
}

func (c *Console) adminCreateMove(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	form := trimmed(r, "topic_id", "partition", "replicas")
	part, err := strconv.Atoi(form["partition"])
	if err != nil {
		c.renderMoves(w, r, s, inputError("create-move", "partition must be a whole number"), form)
		return
	}
	nodes, err := parseNodes(form["replicas"])
	if err != nil {
		c.renderMoves(w, r, s, inputError("create-move", "target replicas must be broker node ids (whole numbers) separated by commas or spaces"), form)
		return
	}
	m, err := s.api.AdminCreateMove(r.Context(), api.CreateMoveRequest{TopicID: form["topic_id"], Partition: part, Replicas: nodes})
	if err != nil {
		c.formError(w, r, err, "create-move", func(ue *uiError) { c.renderMoves(w, r, s, ue, form) })
		return
	}
	c.redirect(w, r, "/admin/moves?started="+strconv.FormatInt(m.ID, 10))
}

func (c *Console) adminCancelMove(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	id, ok := pathID(r)
	if !ok {
		c.notFound(w, r)
		return
	}
	if _, err := s.api.AdminCancelMove(r.Context(), id); err != nil {
		c.formError(w, r, err, "moves", func(ue *uiError) { c.renderMoves(w, r, s, ue, nil) })
		return
	}
	c.redirect(w, r, "/admin/moves?"+url.Values{"cancelled": {strconv.FormatInt(id, 10)}}.Encode())
}

// moveTable is what a table of moves draws: the "movetable" template of
// the layout draws replica moves (M api.Move), the "tenantmovetable"
// template tenant moves (M api.TenantMove). ID is the table's id, CSRF
// the token its cancel forms carry.
type moveTable[M any] struct {
	ID    string
	Moves []M
	CSRF  string
}

func newMoveTable[M any](id string, moves []M, csrf string) moveTable[M] {
	return moveTable[M]{ID: id, Moves: moves, CSRF: csrf}
}

// splitNewestFirst splits moves, oldest first as the API lists them, for
// a moves page: the unfinished ones newest first, the newest recentMoves
// of the finished ones, and how many finished there are in all. Replica
// and tenant moves are listed the same way; only what "unfinished" means
// differs.
func splitNewestFirst[M any](moves []M, unfinished func(M) bool) (inProgress, recent []M, finished int) {
	for i := len(moves) - 1; i >= 0; i-- {
		m := moves[i]
		if unfinished(m) {
			inProgress = append(inProgress, m)
			continue
		}
		finished++
		if len(recent) < recentMoves {
			recent = append(recent, m)
		}
	}
	return inProgress, recent, finished
}

// pathID is the move id of a request's path ({id}); false when it is not
// a positive whole number.
func pathID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id, err == nil && id > 0
}

// parseNodes reads "4, 5 6" as node ids 4, 5 and 6; the API checks them.
func parseNodes(s string) ([]int, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	out := make([]int, 0, len(fields))
	for _, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// nodes renders node ids as "1, 2, 3".
func nodes(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ")
}

// eta renders a move's time to finish: "–" once finished, "not measured
// yet" until the leader's reports give a rate, else a rounded duration.
func eta(m api.Move) string {
	switch {
	case !unfinished(m):
		return "–"
	case m.ETASeconds == nil:
		return "not measured yet"
	case *m.ETASeconds < 1:
		return "under a second"
	}
	sec := math.Min(*m.ETASeconds, float64(math.MaxInt64/int64(time.Second)))
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d >= time.Hour:
		d = d.Round(time.Minute)
	default:
		d = d.Round(time.Second)
	}
	return d.String()
}
