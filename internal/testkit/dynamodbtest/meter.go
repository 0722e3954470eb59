package dynamodbtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Meter is an http.RoundTripper for a DynamoDB client that counts what the
// client costs: requests, bytes each way, and the read and write capacity
// units, computed from the items on the wire by DynamoDB's rules. It is what
// the benchmarks and cost tests measure with; it works with any DynamoDB
// endpoint, not only this package's server.
type Meter struct {
	// Next sends the requests; nil means http.DefaultTransport.
	Next http.RoundTripper

	mu    sync.Mutex
	usage Usage
}

// Usage is what a DynamoDB client consumed.
type Usage struct {
	Requests int
	// Sent and Received count body bytes.
	Sent, Received int
	// RCU and WCU are read and write capacity units: 1 RCU per 4 KB read
	// strongly consistently (a query rounds its total, GetItem its item),
	// 1 WCU per KB written per item, twice that in a transaction.
	RCU, WCU float64
	// ByOperation counts requests by operation, such as "Query".
	ByOperation map[string]int
}

// Take returns the usage since the last Take and starts counting afresh.
func (m *Meter) Take() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.usage
	m.usage = Usage{}
	return u
}

// RoundTrip implements http.RoundTripper.
func (m *Meter) RoundTrip(r *http.Request) (*http.Response, error) {
	next := m.Next
	if next == nil {
		next = http.DefaultTransport
	}
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndex(target, ".")+1:]
	var req []byte
	if r.Body != nil {
		var err error
		if req, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(req))
	}
	resp, err := next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))

	var rcu, wcu float64
	if resp.StatusCode == http.StatusOK {
		rcu, wcu = capacity(op, req, body)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage.Requests++
	m.usage.Sent += len(req)
	m.usage.Received += len(body)
	m.usage.RCU += rcu
	m.usage.WCU += wcu
	if m.usage.ByOperation == nil {
		m.usage.ByOperation = map[string]int{}
	}
	m.usage.ByOperation[op]++
	return resp, nil
}

// wireItem is an item in DynamoDB's JSON: attribute name to {type: value}.
type wireItem = map[string]map[string]json.RawMessage

// capacity computes the capacity units a successful request consumed.
func capacity(op string, req, resp []byte) (rcu, wcu float64) {
	units := func(size, unit int) float64 { return float64(max(1, (size+unit-1)/unit)) }
	switch op {
	case "Query":
		var out struct{ Items []wireItem }
		_ = json.Unmarshal(resp, &out)
		total := 0
		for _, it := range out.Items {
			total += ItemSize(it)
		}
		return units(total, 4096), 0
	case "GetItem":
		var out struct{ Item wireItem }
		_ = json.Unmarshal(resp, &out)
		return units(ItemSize(out.Item), 4096), 0
	case "PutItem":
		var in struct{ Item wireItem }
		_ = json.Unmarshal(req, &in)
		return 0, units(ItemSize(in.Item), 1024)
	case "UpdateItem":
		// An update costs the larger of the item before and after; with
		// ReturnValues ALL_NEW the answer holds the item after.
		var out struct{ Attributes wireItem }
		_ = json.Unmarshal(resp, &out)
		return 0, units(ItemSize(out.Attributes), 1024)
	case "TransactWriteItems":
		var in struct {
			TransactItems []struct {
				Put *struct{ Item wireItem }
			}
		}
		_ = json.Unmarshal(req, &in)
		for _, ti := range in.TransactItems {
			size := 0 // an update, delete or check of a small item
			if ti.Put != nil {
				size = ItemSize(ti.Put.Item)
			}
			wcu += 2 * units(size, 1024)
		}
		return 0, wcu
	case "BatchWriteItem", "DeleteItem":
		return 0, 1
	}
	return 0, 0
}

// ItemSize is the size of an item in DynamoDB's JSON as DynamoDB counts it:
// attribute names plus values, binary values decoded, lists and maps with
// their overhead.
func ItemSize(it wireItem) int {
	n := 0
	for name, v := range it {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v map[string]json.RawMessage) int {
	n := 0
	for typ, raw := range v {
		switch typ {
		case "S", "N":
			var s string
			_ = json.Unmarshal(raw, &s)
			n += len(s)
		case "B":
			var s string
			_ = json.Unmarshal(raw, &s)
			n += base64.StdEncoding.DecodedLen(len(s))
		case "L":
			var l []map[string]json.RawMessage
			_ = json.Unmarshal(raw, &l)
			n += 3
			for _, e := range l {
				n += 1 + valueSize(e)
			}
		case "M":
			var m wireItem
			_ = json.Unmarshal(raw, &m)
			n += 3
			for k, e := range m {
				n += 1 + len(k) + valueSize(e)
			}
		default:
			n++
		}
	}
	return n
}
