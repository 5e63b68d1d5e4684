package permify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// stream posts to a streaming endpoint and returns the status, the results and the
// error object ending the stream, if any; every line must be one JSON object holding
// exactly one of "result" and "error", and an error only last.
func (a *api) stream(path string, body any) (int, []map[string]any, map[string]any) {
	a.t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		a.t.Fatal(err)
	}
	resp, err := http.Post(a.url+path, "application/json", bytes.NewReader(raw))
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var results []map[string]any
	var failure map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || len(line) != 1 || failure != nil {
			a.t.Fatalf("POST %s: stream line %q is not one result or a final error (%v)", path, sc.Bytes(), err)
		}
		if r, ok := line["result"].(map[string]any); ok {
			results = append(results, r)
		} else if failure, ok = line["error"].(map[string]any); !ok {
			a.t.Fatalf("POST %s: stream line %q", path, sc.Bytes())
		}
	}
	if err := sc.Err(); err != nil {
		a.t.Fatal(err)
	}
	return resp.StatusCode, results, failure
}

func TestLookupEntityStream(t *testing.T) {
	a := newAPI(t, nil)
	seedDocs(t, a, "t1")
	const path = "/v1/tenants/t1/permissions/lookup-entity-stream"
	query := map[string]any{"entity_type": "doc", "permission": "view", "subject": ref("user:alice")}
	status, results, failure := a.stream(path, query)
	if status != http.StatusOK || failure != nil || len(results) != 2 || results[0]["entity_id"] != "1" || results[1]["entity_id"] != "3" {
		t.Fatalf("stream: status %d, results %v, error %v; want doc 1 then 3", status, results, failure)
	}
	// Each result's token resumes after it.
	query["continuous_token"] = results[0]["continuous_token"]
	if _, rest, _ := a.stream(path, query); len(rest) != 1 || rest[0]["entity_id"] != "3" {
		t.Errorf("resumed after doc 1: %v, want doc 3", rest)
	}
	query["continuous_token"] = results[1]["continuous_token"]
	if _, rest, failure := a.stream(path, query); len(rest) != 0 || failure != nil {
		t.Errorf("resumed after doc 3: %v %v, want nothing", rest, failure)
	}
	query["continuous_token"], query["page_size"] = "", 1
	if _, page, _ := a.stream(path, query); len(page) != 1 || page[0]["entity_id"] != "1" {
		t.Errorf("page_size 1: %v, want doc 1 alone", page)
	}
	// An error before any result sets the status and is the stream's one object.
	status, results, failure = a.stream(path, map[string]any{"entity_type": "doc", "permission": "view", "subject": ref("user:alice"), "continuous_token": "bm9wZQ"})
	if status != http.StatusBadRequest || len(results) != 0 || failure["message"] != "ERROR_CODE_INVALID_CONTINUOUS_TOKEN" {
		t.Errorf("bad token: status %d, results %v, error %v", status, results, failure)
	}
	if status, _, failure := a.stream("/v1/tenants/nope/permissions/lookup-entity-stream", query); status != http.StatusNotFound || failure["message"] != "ERROR_CODE_TENANT_NOT_FOUND" {
		t.Errorf("unknown tenant: status %d, error %v", status, failure)
	}
}

// TestLookupPagesCoverTheAnswerOnce pages through 2,500 entities with page sizes 7,
// 100 and 1000 (and 300 one at a time, each page a request), on lookup-entity and
// lookup-entity-stream, and gets exactly the unpaged answer, in id order, each id once.
func TestLookupPagesCoverTheAnswerOnce(t *testing.T) {
	for _, c := range []struct {
		docs  int
		sizes []int
	}{{2500, []int{7, 100, 1000}}, {300, []int{1}}} {
		a := newAPI(t, nil)
		a.ok("/v1/tenants/t1/schemas/write", map[string]any{"schema": `entity user {}
entity doc {
    relation viewer @user
    relation banned @user
    permission view = viewer not banned
}`})
		var tuples []any
		for i := range c.docs {
			tuples = append(tuples, tuple(fmt.Sprintf("doc:%d", i), "viewer", "user:u"))
			if i%10 == 3 {
				tuples = append(tuples, tuple(fmt.Sprintf("doc:%d", i), "banned", "user:u"))
			}
		}
		a.ok("/v1/tenants/t1/data/write", map[string]any{"tuples": tuples})
		query := func(size int, token any) map[string]any {
			return map[string]any{"entity_type": "doc", "permission": "view", "subject": ref("user:u"), "page_size": size, "continuous_token": token}
		}
		all := idList(a.ok("/v1/tenants/t1/permissions/lookup-entity", query(0, ""))["entity_ids"])
		if len(all) != c.docs-c.docs/10 || !slices.IsSorted(all) {
			t.Fatalf("unpaged: %d ids (sorted %v), want %d in id order", len(all), slices.IsSorted(all), c.docs-c.docs/10)
		}
		for _, size := range c.sizes {
			var paged, streamed []string
			for token := any(""); ; {
				out := a.ok("/v1/tenants/t1/permissions/lookup-entity", query(size, token))
				paged = append(paged, idList(out["entity_ids"])...)
				if token = out["continuous_token"]; token == "" {
					break
				}
			}
			for token := any(""); ; {
				_, results, failure := a.stream("/v1/tenants/t1/permissions/lookup-entity-stream", query(size, token))
				if failure != nil {
					t.Fatalf("stream, page size %d: %v", size, failure)
				}
				for _, r := range results {
					streamed = append(streamed, r["entity_id"].(string))
				}
				if len(results) < size {
					break
				}
				token = results[len(results)-1]["continuous_token"]
			}
			if !slices.Equal(paged, all) || !slices.Equal(streamed, all) {
				t.Errorf("%d entities, page size %d: pages give %d ids, stream pages %d; want the %d of the unpaged answer in its order", c.docs, size, len(paged), len(streamed), len(all))
			}
		}
	}
}

// TestContinuousTokensBelongToTheirQuery: a token continues the query that issued it;
// one from another query, or not a token at all, is refused.
func TestContinuousTokensBelongToTheirQuery(t *testing.T) {
	a := newAPI(t, nil)
	seedDocs(t, a, "t1")
	const entities = "/v1/tenants/t1/permissions/lookup-entity"
	const subjects = "/v1/tenants/t1/permissions/lookup-subject"
	page := a.ok(entities, map[string]any{"entity_type": "doc", "permission": "view", "subject": ref("user:alice"), "page_size": 1})
	token := page["continuous_token"]
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{entities, map[string]any{"entity_type": "doc", "permission": "edit", "subject": ref("user:alice"), "continuous_token": token}},
		{entities, map[string]any{"entity_type": "doc", "permission": "view", "subject": ref("user:bob"), "continuous_token": token}},
		{entities, map[string]any{"entity_type": "doc", "permission": "view", "subject": ref("user:alice"), "continuous_token": "not base64!"}},
		{subjects, map[string]any{"entity": ref("doc:1"), "permission": "view", "subject_reference": map[string]any{"type": "user"}, "continuous_token": token}},
	} {
		a.fails(http.MethodPost, c.path, c.body, http.StatusBadRequest, 3, "ERROR_CODE_INVALID_CONTINUOUS_TOKEN")
	}
}

// idList is a JSON array of ids as strings.
func idList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, len(list))
	for i, x := range list {
		out[i], _ = x.(string)
	}
	return out
}
