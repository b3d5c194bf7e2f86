package accounting

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"fleetmesh.org/fleetmesh/meter"
)

// OfferRequest is what `fleetmesh grants offer` posts to the control
// socket.
type OfferRequest struct {
	To      string `json:"to"`
	Service string `json:"service"`
	Quota   uint64 `json:"quota"`
	Length  string `json:"length"`
	Notice  string `json:"notice"`
}

// RevokeRequest is what `fleetmesh grants revoke` posts.
type RevokeRequest struct {
	ID string `json:"id"`
}

// ControlHandler serves the node's operator on its control socket (a Unix
// socket only the node's user can open): GET /receipts?node=DID, GET
// /grants, POST /grants/offer, POST /grants/revoke, GET /forks, GET
// /disputes.
func (s *Service) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /receipts", s.ServeReceipts)
	mux.HandleFunc("GET /reports", s.ServeReports)
	mux.HandleFunc("GET /grants", func(w http.ResponseWriter, _ *http.Request) {
		gs, err := s.Grants()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, append([]GrantInfo{}, gs...))
	})
	mux.HandleFunc("POST /grants/offer", func(w http.ResponseWriter, r *http.Request) {
		var req OfferRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
			http.Error(w, "offer: "+err.Error(), http.StatusBadRequest)
			return
		}
		svc, ok := meter.ParseService(req.Service)
		if !ok {
			http.Error(w, fmt.Sprintf("unknown service %q (one of %v)", req.Service, meter.Names()), http.StatusBadRequest)
			return
		}
		length, err1 := time.ParseDuration(req.Length)
		notice, err2 := time.ParseDuration(req.Notice)
		if err1 != nil || err2 != nil || length <= 0 || notice < 0 {
			http.Error(w, "length and notice must be durations, e.g. 720h and 1h", http.StatusBadRequest)
			return
		}
		g, err := s.Offer(r.Context(), req.To, svc, req.Quota, length, notice)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		writeJSON(w, g)
	})
	mux.HandleFunc("POST /grants/revoke", func(w http.ResponseWriter, r *http.Request) {
		var req RevokeRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
			http.Error(w, "revoke: "+err.Error(), http.StatusBadRequest)
			return
		}
		g, err := s.Revoke(r.Context(), req.ID)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		writeJSON(w, g)
	})
	mux.HandleFunc("GET /disputes", func(w http.ResponseWriter, _ *http.Request) {
		ds, err := s.Disputes()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, ds)
	})
	mux.HandleFunc("GET /forks", func(w http.ResponseWriter, _ *http.Request) {
		ps, err := s.ForkProofs()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out := [][]byte{}
		for _, p := range ps {
			b, _ := p.Encode()
			out = append(out, b)
		}
		writeJSON(w, out)
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
