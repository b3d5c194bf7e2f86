package nostr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Filter is a NIP-01 filter. A nil slice means the condition is absent; an
// empty non-nil slice matches nothing, as NIP-01 reads `"ids": []`.
type Filter struct {
	IDs     [][32]byte
	Authors [][32]byte
	Kinds   []int
	// Tags maps a single-letter tag name to the values any of which must
	// appear in a tag of that name.
	Tags  map[string][]string
	Since int64 // 0 = absent (nothing is older than 0)
	// Until is the newest created_at wanted when HasUntil is set.
	Until    int64
	HasUntil bool
	// Limit is the number of stored events asked for; HasLimit says whether
	// the filter had a limit at all (`"limit":0` asks for none).
	Limit    int
	HasLimit bool
	// Search is NIP-50's full-text query. fleetmesh does not index text, so
	// a filter with Search matches nothing stored rather than everything.
	Search string
}

// Matches reports whether e satisfies every condition of f.
func (f *Filter) Matches(e *Event) bool {
	if f.IDs != nil && !slices.Contains(f.IDs, e.ID) {
		return false
	}
	if f.Authors != nil && !slices.Contains(f.Authors, e.PubKey) {
		return false
	}
	if f.Kinds != nil && !slices.Contains(f.Kinds, e.Kind) {
		return false
	}
	if f.Since != 0 && e.CreatedAt < f.Since {
		return false
	}
	if f.HasUntil && e.CreatedAt > f.Until {
		return false
	}
	for name, values := range f.Tags {
		if !hasTagValue(e.Tags, name, values) {
			return false
		}
	}
	return f.Search == ""
}

func hasTagValue(tags Tags, name string, values []string) bool {
	for _, t := range tags {
		if len(t) >= 2 && t[0] == name && slices.Contains(values, t[1]) {
			return true
		}
	}
	return false
}

// MatchesAny reports whether e satisfies at least one filter.
func MatchesAny(filters []Filter, e *Event) bool {
	for i := range filters {
		if filters[i].Matches(e) {
			return true
		}
	}
	return false
}

// Empty reports whether the filter can match nothing because one of its
// lists is present but empty.
func (f *Filter) Empty() bool {
	if (f.IDs != nil && len(f.IDs) == 0) || (f.Authors != nil && len(f.Authors) == 0) || (f.Kinds != nil && len(f.Kinds) == 0) {
		return true
	}
	for _, v := range f.Tags {
		if len(v) == 0 {
			return true
		}
	}
	return f.HasUntil && f.Since > f.Until
}

// UnmarshalJSON parses a NIP-01 filter object. Unknown keys are ignored, as
// relays do, so a client using a newer NIP still gets an answer.
func (f *Filter) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("filter is not a JSON object: %w", plainJSONError(err))
	}
	*f = Filter{}
	for key, val := range raw {
		var err error
		switch {
		case key == "ids":
			f.IDs, err = decodeHexList(val)
		case key == "authors":
			f.Authors, err = decodeHexList(val)
		case key == "kinds":
			err = json.Unmarshal(val, &f.Kinds)
			if err == nil && f.Kinds == nil {
				err = errors.New("must be an array")
			}
			for _, k := range f.Kinds {
				if err == nil && (k < 0 || k > MaxKind) {
					err = fmt.Errorf("kind %d is outside 0..%d", k, MaxKind)
				}
			}
		case key == "since":
			f.Since, err = decodeTimestamp(val)
		case key == "until":
			f.Until, err = decodeTimestamp(val)
			f.HasUntil = true
		case key == "limit":
			var n int64
			n, err = decodeTimestamp(val)
			f.Limit, f.HasLimit = int(min(n, 1<<31)), true
		case key == "search":
			err = json.Unmarshal(val, &f.Search)
		case len(key) == 2 && key[0] == '#' && isLetter(key[1]):
			var vals []string
			err = json.Unmarshal(val, &vals)
			if err == nil && vals == nil {
				err = errors.New("must be an array of strings")
			}
			if f.Tags == nil {
				f.Tags = make(map[string][]string)
			}
			f.Tags[key[1:]] = vals
		}
		if err != nil {
			return fmt.Errorf("filter %q: %w", key, plainJSONError(err))
		}
	}
	return nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func decodeHexList(val json.RawMessage) ([][32]byte, error) {
	var ss []string
	if err := json.Unmarshal(val, &ss); err != nil {
		return nil, err
	}
	if ss == nil {
		return nil, errors.New("must be an array")
	}
	out := make([][32]byte, len(ss))
	for i, s := range ss {
		if err := DecodeHex(out[i][:], s); err != nil {
			return nil, fmt.Errorf("item %d %w", i, err)
		}
	}
	return out, nil
}

func decodeTimestamp(val json.RawMessage) (int64, error) {
	v := bytes.TrimSpace(val)
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(v), 64)
		if ferr != nil || f != float64(int64(f)) {
			return 0, errors.New("must be a non-negative integer")
		}
		n = int64(f)
	}
	if n < 0 {
		return 0, errors.New("must be a non-negative integer")
	}
	return n, nil
}

// MarshalJSON writes the filter as a NIP-01 filter object.
func (f Filter) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	hexes := func(list [][32]byte) []string {
		out := make([]string, len(list))
		for i, b := range list {
			out[i] = fmt.Sprintf("%x", b)
		}
		return out
	}
	if f.IDs != nil {
		m["ids"] = hexes(f.IDs)
	}
	if f.Authors != nil {
		m["authors"] = hexes(f.Authors)
	}
	if f.Kinds != nil {
		m["kinds"] = f.Kinds
	}
	for k, v := range f.Tags {
		m["#"+k] = v
	}
	if f.Since != 0 {
		m["since"] = f.Since
	}
	if f.HasUntil {
		m["until"] = f.Until
	}
	if f.HasLimit {
		m["limit"] = f.Limit
	}
	if f.Search != "" {
		m["search"] = f.Search
	}
	return json.Marshal(m)
}

// AppendJSON appends f as MarshalJSON writes it, for the encoders of
// messages that carry filters.
func (f *Filter) AppendJSON(b []byte) []byte {
	js, err := f.MarshalJSON()
	if err != nil {
		// A map of strings, string lists and integers always marshals.
		panic(fmt.Sprintf("nostr: marshal filter: %v", err))
	}
	return append(b, js...)
}
