package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/contract/api"
	"github.com/sluicehq/sluice/contract/client"
)

// The operator's fleet pages: pools, the cells of each pool, a cell's
// brokers and one broker's drain and removal. Every change is a form the
// API checks; its refusal is shown next to the form.

var poolKinds = []string{"shared", "dedicated"}

type poolsData struct {
	Pools []api.Pool
	Kinds []string
}

func (c *Console) adminPoolsPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderPools(w, r, s, nil, nil)
}

func (c *Console) renderPools(w http.ResponseWriter, r *http.Request, s *session, ue *uiError, form formInput) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	pools, err := s.api.AdminPools(r.Context())
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	p := sessionPage(s, "Pools", "admin-pools")
	p.Data = poolsData{Pools: pools, Kinds: poolKinds}
	// The notice names only a pool that is listed.
	if created := r.URL.Query().Get("created"); created != "" && ue == nil {
		for _, x := range pools {
			if x.ID == created {
				p.Notice = "Pool " + x.ID + " created."
			}
		}
	}
	c.renderForm(w, r, http.StatusOK, "admin_pools", p, ue, form)
}

func (c *Console) adminCreatePool(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	form := trimmed(r, "id", "kind", "description")
	req := api.CreatePoolRequest{ID: form["id"], Kind: form["kind"], Description: form["description"]}
	if _, err := s.api.AdminCreatePool(r.Context(), req); err != nil {
		c.formError(w, r, err, "create-pool", func(ue *uiError) { c.renderPools(w, r, s, ue, form) })
		return
	}
	c.redirect(w, r, "/admin/pools?"+url.Values{"created": {req.ID}}.Encode())
}

// poolCells is one pool with its cells, for the cells page.
type poolCells struct {
	Pool  api.Pool
	Cells []api.Cell
}

type cellsData struct {
	Pools []poolCells
	// Pool is the pool the create form selects: the one typed, or the
	// page's ?pool=.
	Pool string
}

func (c *Console) adminCellsPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderCells(w, r, s, nil, nil)
}

func (c *Console) renderCells(w http.ResponseWriter, r *http.Request, s *session, ue *uiError, form formInput) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	ctx := r.Context()
	pools, err := s.api.AdminPools(ctx)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	cells, err := s.api.AdminCells(ctx)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := cellsData{Pool: r.URL.Query().Get("pool")}
	if form != nil {
		d.Pool = form["pool_id"]
	}
	byPool := map[string]int{}
	for _, p := range pools {
		byPool[p.ID] = len(d.Pools)
		d.Pools = append(d.Pools, poolCells{Pool: p})
	}
	for _, cell := range cells {
		i, ok := byPool[cell.PoolID]
		if !ok { // a pool created between the two calls
			i = len(d.Pools)
			byPool[cell.PoolID] = i
			d.Pools = append(d.Pools, poolCells{Pool: api.Pool{ID: cell.PoolID}})
		}
		d.Pools[i].Cells = append(d.Pools[i].Cells, cell)
	}
	p := sessionPage(s, "Cells", "admin-cells")
	p.Data = d
	c.renderForm(w, r, http.StatusOK, "admin_cells", p, ue, form)
}

func (c *Console) adminCreateCell(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	form := trimmed(r, "id", "pool_id")
	req := api.CreateCellRequest{ID: form["id"], PoolID: form["pool_id"]}
	if _, err := s.api.AdminCreateCell(r.Context(), req); err != nil {
		c.formError(w, r, err, "create-cell", func(ue *uiError) { c.renderCells(w, r, s, ue, form) })
		return
	}
	c.redirect(w, r, "/admin/cells/"+url.PathEscape(req.ID)+"?created=1")
}

// cellBroker is a broker of the cell page with the unfinished moves that
// put a replica on it or take one off.
type cellBroker struct {
	api.Broker
	MovesOn, MovesOff int
}

type cellData struct {
	Cell    api.Cell
	Brokers []cellBroker
	// Unfinished counts the cell's running, cancelling and failed moves.
	Unfinished int
}

func (c *Console) adminCellPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderCell(w, r, s, nil, nil)
}

func (c *Console) renderCell(w http.ResponseWriter, r *http.Request, s *session, ue *uiError, form formInput) {
	cell, ok := c.pathCell(w, r, s)
	if !ok {
		return
	}
	moves, err := s.api.AdminMoves(r.Context(), client.MoveFilter{Cell: cell.ID})
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := cellData{Cell: cell}
	for _, b := range cell.Brokers {
		cb := cellBroker{Broker: b}
		for _, m := range moves {
			if !unfinished(m) {
				continue
			}
			onto, off := m.Ends()
			if slices.Contains(onto, b.NodeID) {
				cb.MovesOn++
			}
			if slices.Contains(off, b.NodeID) {
				cb.MovesOff++
			}
		}
		d.Brokers = append(d.Brokers, cb)
	}
	for _, m := range moves {
		if unfinished(m) {
			d.Unfinished++
		}
	}
	p := sessionPage(s, "Cell "+cell.ID, "admin-cells")
	p.Data = d
	if ue == nil {
		switch q := r.URL.Query(); {
		case q.Get("created") == "1":
			p.Notice = "Cell " + cell.ID + " created. Add its brokers below."
		case q.Get("added") != "":
			for _, b := range cell.Brokers {
				if b.ID == q.Get("added") {
					p.Notice = "Broker " + b.ID + " added."
				}
			}
		case q.Get("deleted") == "1":
			p.Notice = "Broker removed."
		}
	}
	c.renderForm(w, r, http.StatusOK, "admin_cell", p, ue, form)
}

func (c *Console) adminCreateBroker(w http.ResponseWriter, r *http.Request, s *session) {
	if !c.operatorOnly(w, r, s) {
		return
	}
	cell := r.PathValue("cell")
	form := trimmed(r, "id", "node_id", "kafka_addr", "http_addr", "raft_addr")
	node, err := strconv.Atoi(form["node_id"])
	if err != nil {
		c.renderCell(w, r, s, inputError("add-broker", "node id must be a whole number"), form)
		return
	}
	req := api.CreateBrokerRequest{ID: form["id"], CellID: cell, NodeID: node,
		KafkaAddr: form["kafka_addr"], HTTPAddr: form["http_addr"], RaftAddr: form["raft_addr"]}
	if _, err := s.api.AdminCreateBroker(r.Context(), req); err != nil {
		c.formError(w, r, err, "add-broker", func(ue *uiError) { c.renderCell(w, r, s, ue, form) })
		return
	}
	c.redirect(w, r, "/admin/cells/"+url.PathEscape(cell)+"?"+url.Values{"added": {req.ID}}.Encode())
}

type brokerData struct {
	Cell   api.Cell
	Broker api.Broker
	// Moves are the moves onto or off the broker, newest first.
	Moves []api.Move
}

func (c *Console) adminBrokerPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.renderBroker(w, r, s, nil, nil)
}

// renderBroker renders a broker's page: what it is, the moves onto and
// off it, and the drain and delete forms, each confirmed by typing the
// broker's id.
func (c *Console) renderBroker(w http.ResponseWriter, r *http.Request, s *session, ue *uiError, form formInput) {
	cell, ok := c.pathCell(w, r, s)
	if !ok {
		return
	}
	i := slices.IndexFunc(cell.Brokers, func(b api.Broker) bool { return b.ID == r.PathValue("id") })
	if i < 0 {
		c.renderMessage(w, r, s, http.StatusNotFound, "Not found", "Cell "+cell.ID+" has no broker "+r.PathValue("id")+".")
		return
	}
	b := cell.Brokers[i]
	moves, err := s.api.AdminMoves(r.Context(), client.MoveFilter{Broker: b.ID})
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	slices.Reverse(moves)
	p := sessionPage(s, "Broker "+b.ID, "admin-cells")
	p.Data = brokerData{Cell: cell, Broker: b, Moves: moves}
	if r.URL.Query().Get("drained") == "1" && ue == nil && b.Status == "draining" {
		p.Notice = "Broker " + b.ID + " is draining: the moves taking its replicas off are listed below."
	}
	c.renderForm(w, r, http.StatusOK, "admin_broker", p, ue, form)
}

// pathCell is the cell of an operator's request path ({cell}), for the
// cell page and its brokers' pages; false when the caller is no operator
// or the API did not give the cell (both answered).
func (c *Console) pathCell(w http.ResponseWriter, r *http.Request, s *session) (api.Cell, bool) {
	if !c.operatorOnly(w, r, s) {
		return api.Cell{}, false
	}
	cell, err := s.api.AdminCell(r.Context(), r.PathValue("cell"))
	if err != nil {
		c.fail(w, r, s, err)
		return api.Cell{}, false
	}
	return cell, true
}

// brokerForm handles one of the broker page's forms (form is its id):
// an operator confirms it by typing the broker's id, then do asks the API.
// A request that is not confirmed, or that the API refuses, shows the
// broker's page again with the reason; true when do succeeded.
func (c *Console) brokerForm(w http.ResponseWriter, r *http.Request, s *session, form, verb string, do func() error) bool {
	if !c.operatorOnly(w, r, s) {
		return false
	}
	if strings.TrimSpace(r.PostFormValue("confirm")) != r.PathValue("id") {
		c.renderBroker(w, r, s, inputError(form, "type the broker's id exactly to "+verb+" it"), nil)
		return false
	}
	if err := do(); err != nil {
		c.formError(w, r, err, form, func(ue *uiError) { c.renderBroker(w, r, s, ue, nil) })
		return false
	}
	return true
}

func (c *Console) adminDrainBroker(w http.ResponseWriter, r *http.Request, s *session) {
	drain := func() error {
		_, err := s.api.AdminDrainBroker(r.Context(), r.PathValue("id"))
		return err
	}
	if c.brokerForm(w, r, s, "drain", "drain", drain) {
		c.redirect(w, r, brokerPath(r.PathValue("cell"), r.PathValue("id"))+"?drained=1")
	}
}

func (c *Console) adminDeleteBroker(w http.ResponseWriter, r *http.Request, s *session) {
	remove := func() error { return s.api.AdminDeleteBroker(r.Context(), r.PathValue("id")) }
	if c.brokerForm(w, r, s, "delete-broker", "delete", remove) {
		c.redirect(w, r, "/admin/cells/"+url.PathEscape(r.PathValue("cell"))+"?deleted=1")
	}
}

func brokerPath(cell, id string) string {
	return "/admin/cells/" + url.PathEscape(cell) + "/brokers/" + url.PathEscape(id)
}

// trimmed is the named fields of a posted form, spaces trimmed.
func trimmed(r *http.Request, names ...string) formInput {
	f := formInput{}
	for _, n := range names {
		f[n] = strings.TrimSpace(r.PostFormValue(n))
	}
	return f
}
