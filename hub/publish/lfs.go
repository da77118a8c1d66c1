package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sourcegraph/conc/pool"

	"github.com/lfmq/lfmq/hub/hubapi"
)

// lfsMediaType is the git-lfs API's media type, for Accept and
// Content-Type.
const lfsMediaType = "application/vnd.git-lfs+json"

// Bounds on LFS answers.
const (
	batchSize     = 256 // objects per batch request, as huggingface_hub
	maxBatchBytes = 32 << 20
	maxParts      = 10000
)

// lfsAction is an action of a batch answer.
type lfsAction struct {
	Href   string            `json:"href"`
	Header map[string]string `json:"header"`
}

// batchObject is one object of a batch answer, checked.
type batchObject struct {
	OID  string
	Size int64
	// Upload is nil when the hub has the object already.
	Upload, Verify *lfsAction
	// Chunk > 0 selects the multipart transfer: Parts are the part URLs in
	// order and Upload.Href is the completion URL.
	Chunk int64
	Parts []string
}

// decodeBatch parses a batch answer (git-lfs batch API, with the hub's
// multipart transfer): {"transfer", "objects": [{"oid", "size",
// "actions": {"upload": {"href", "header"}, "verify": {…}}, "error":
// {"code", "message"}}]}. Every object must be one of want (oid → size)
// with its size; a per-object error is an error. For multipart the upload
// header holds "chunk_size" and parts "00001", "00002", … whose count is
// ceil(size/chunk_size) and whose numbers run from 1 without a gap.
func decodeBatch(data []byte, want map[string]int64) (map[string]batchObject, error) {
	var ans struct {
		Transfer string `json:"transfer"`
		Objects  []struct {
			OID     string `json:"oid"`
			Size    int64  `json:"size"`
			Actions *struct {
				Upload *lfsAction `json:"upload"`
				Verify *lfsAction `json:"verify"`
			} `json:"actions"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"objects"`
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return nil, err
	}
	if ans.Objects == nil {
		return nil, errors.New("no objects")
	}
	out := map[string]batchObject{}
	for _, o := range ans.Objects {
		size, ok := want[o.OID]
		switch {
		case !ok:
			return nil, fmt.Errorf("object %q was not asked for", o.OID)
		case o.Size != size:
			return nil, fmt.Errorf("object %s: size %d, asked %d", o.OID, o.Size, size)
		case o.Error != nil:
			return nil, fmt.Errorf("object %s: error %d: %s", o.OID, o.Error.Code, o.Error.Message)
		}
		if _, dup := out[o.OID]; dup {
			return nil, fmt.Errorf("object %s answered twice", o.OID)
		}
		b := batchObject{OID: o.OID, Size: o.Size}
		if o.Actions != nil && o.Actions.Upload != nil {
			b.Upload, b.Verify = o.Actions.Upload, o.Actions.Verify
			for _, a := range []*lfsAction{b.Upload, b.Verify} {
				if a != nil && !httpURL(a.Href) {
					return nil, fmt.Errorf("object %s: action href %q is not an http(s) URL", o.OID, a.Href)
				}
			}
			if cs, ok := b.Upload.Header["chunk_size"]; ok {
				chunk, err := strconv.ParseInt(cs, 10, 64)
				if err != nil || chunk <= 0 {
					return nil, fmt.Errorf("object %s: chunk_size %q", o.OID, cs)
				}
				n := (o.Size + chunk - 1) / chunk
				if n > maxParts {
					return nil, fmt.Errorf("object %s: %d parts", o.OID, n)
				}
				parts := make([]string, n)
				for k, v := range b.Upload.Header {
					if k == "chunk_size" {
						continue
					}
					num, err := strconv.Atoi(k)
					if err != nil || num < 1 || int64(num) > n || strings.TrimLeft(k, "0123456789") != "" {
						return nil, fmt.Errorf("object %s: header %q is neither chunk_size nor a part number of 1..%d", o.OID, k, n)
					}
					if parts[num-1] != "" {
						return nil, fmt.Errorf("object %s: part %d given twice", o.OID, num)
					}
					if !httpURL(v) {
						return nil, fmt.Errorf("object %s: part %d URL %q", o.OID, num, v)
					}
					parts[num-1] = v
				}
				for i, p := range parts {
					if p == "" {
						return nil, fmt.Errorf("object %s: part %d of %d has no URL", o.OID, i+1, n)
					}
				}
				b.Chunk, b.Parts = chunk, parts
			}
		}
		out[o.OID] = b
	}
	for oid := range want {
		if _, ok := out[oid]; !ok {
			return nil, fmt.Errorf("no answer for object %s", oid)
		}
	}
	return out, nil
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// batch asks the LFS batch API what to do with objects (oid → size):
//
//	POST {endpoint}/{repo}.git/info/lfs/objects/batch
//	Accept, Content-Type: application/vnd.git-lfs+json
//	{"operation": "upload", "transfers": ["basic", "multipart"],
//	 "ref": {"name": branch}, "objects": [{"oid", "size"}], "hash_algo": "sha256"}
//
// (huggingface_hub: lfs.post_lfs_batch_info; git-lfs docs/api/batch.md),
// 256 objects a request.
func (a *repoAPI) batch(ctx context.Context, branch string, objects map[string]int64, order []string) (map[string]batchObject, error) {
	owner, name, _ := strings.Cut(a.ID, "/")
	u := a.URL(url.PathEscape(owner) + "/" + url.PathEscape(name+".git") + "/info/lfs/objects/batch")
	out := map[string]batchObject{}
	for start := 0; start < len(order); start += batchSize {
		chunk := order[start:min(start+batchSize, len(order))]
		type obj struct {
			OID  string `json:"oid"`
			Size int64  `json:"size"`
		}
		req := struct {
			Operation string   `json:"operation"`
			Transfers []string `json:"transfers"`
			Ref       struct {
				Name string `json:"name"`
			} `json:"ref"`
			Objects  []obj  `json:"objects"`
			HashAlgo string `json:"hash_algo"`
		}{Operation: "upload", Transfers: []string{"basic", "multipart"}, HashAlgo: "sha256"}
		req.Ref.Name = branch
		want := map[string]int64{}
		for _, oid := range chunk {
			req.Objects = append(req.Objects, obj{oid, objects[oid]})
			want[oid] = objects[oid]
		}
		body, _ := json.Marshal(req)
		resp, err := a.Do(ctx, hubapi.Call{Op: "lfs batch", OK: []int{http.StatusOK}, Build: func() (*http.Request, error) {
			r, err := http.NewRequest(http.MethodPost, u.String(), bytes.NewReader(body))
			if err == nil {
				r.Header.Set("Accept", lfsMediaType)
				r.Header.Set("Content-Type", lfsMediaType)
			}
			return r, err
		}})
		if err != nil {
			return nil, err
		}
		data, err := hubapi.ReadJSON(resp, maxBatchBytes, nil)
		if err != nil {
			return nil, &hubapi.ProtocolError{Op: "lfs batch", URL: hubapi.Redact(u), Msg: err.Error()}
		}
		got, err := decodeBatch(data, want)
		if err != nil {
			return nil, &hubapi.ProtocolError{Op: "lfs batch", URL: hubapi.Redact(u), Msg: err.Error()}
		}
		for k, v := range got {
			out[k] = v
		}
	}
	return out, nil
}

// uploader moves LFS objects: parallel across objects (jobs at once) and
// across the parts of a multipart object, with at most jobs uploads in
// flight in all.
type uploader struct {
	api      *repoAPI
	root     *os.Root
	progress *progress
	jobs     int
	sem      chan struct{}
}

// lfsObject is one object to upload and the release paths that hold it.
type lfsObject struct {
	oid   string
	size  int64
	paths []string
	plan  batchObject
}

// run uploads every object and returns one error slot per object (an
// *UploadError, or nil). One object's failure does not stop the others:
// whatever completes is kept by the hub, so a second run sends only what
// is missing.
func (up *uploader) run(ctx context.Context, objects []*lfsObject) []error {
	up.sem = make(chan struct{}, up.jobs)
	errs := make([]error, len(objects))
	p := pool.New().WithMaxGoroutines(up.jobs)
	for i, o := range objects {
		p.Go(func() {
			if err := ctx.Err(); err != nil {
				errs[i] = err
				return
			}
			if err := up.object(ctx, o); err != nil {
				errs[i] = &UploadError{Path: o.paths[0], OID: o.oid, Err: err}
			}
		})
	}
	p.Wait()
	return errs
}

// object uploads one object (basic or multipart) and calls its verify
// action.
func (up *uploader) object(ctx context.Context, o *lfsObject) error {
	f, err := up.root.Open(o.paths[0])
	if err != nil {
		return err
	}
	defer f.Close()
	path := o.paths[0]
	up.progress.started(path, o.size)
	if o.plan.Chunk > 0 {
		err = up.multipart(ctx, f, o)
	} else {
		err = up.put(ctx, "upload", o.plan.Upload.Href, o.plan.Upload.Header, path, io.NewSectionReader(f, 0, o.size), nil)
	}
	if err != nil {
		return err
	}
	if v := o.plan.Verify; v != nil {
		body, _ := json.Marshal(map[string]any{"oid": o.oid, "size": o.size})
		if err := up.postLFS(ctx, "lfs verify", v.Href, v.Header, body); err != nil {
			return err
		}
	}
	up.progress.done(path, Uploaded)
	return nil
}

// put sends one body (a whole object, or a part) with PUT and its exact
// Content-Length, as object stores want; it returns the answer's ETag
// through etag when asked. The bytes read are reported as progress and
// taken back when an attempt fails.
func (up *uploader) put(ctx context.Context, op, href string, header map[string]string, path string, body *io.SectionReader, etag *string) error {
	select {
	case up.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-up.sem }()
	var sent *countingReader
	takeBack := func() {
		if sent != nil {
			sent.stopped.Store(true)
			up.progress.bytes(path, -sent.n.Swap(0))
		}
	}
	resp, err := up.api.Do(ctx, hubapi.Call{Op: op, OK: []int{http.StatusOK, http.StatusCreated, http.StatusNoContent},
		Failed: takeBack,
		Build: func() (*http.Request, error) {
			sent = &countingReader{r: io.NewSectionReader(body, 0, body.Size()), path: path, progress: up.progress}
			r, err := http.NewRequest(http.MethodPut, href, sent)
			if err == nil {
				setHeaders(r, header)
				r.ContentLength = body.Size()
				if body.Size() == 0 {
					r.Body = http.NoBody
				}
			}
			return r, err
		}})
	if err != nil {
		return err
	}
	resp.Body.Close()
	if etag != nil {
		*etag = resp.Header.Get("ETag")
		if *etag == "" {
			return &hubapi.ProtocolError{Op: op, URL: hubapi.Redact(resp.Request.URL), Msg: "no ETag"}
		}
	}
	return nil
}

// multipart uploads the parts (in parallel, each from its own section of
// the file) and posts the completion {"oid", "parts": [{"partNumber",
// "etag"}]} to the upload action's href (huggingface_hub:
// lfs._upload_multi_part). A failed part fails the object: the next run
// starts it again from the batch API.
func (up *uploader) multipart(ctx context.Context, f *os.File, o *lfsObject) error {
	n := len(o.plan.Parts)
	etags := make([]string, n)
	errs := make([]error, n)
	partCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, href := range o.plan.Parts {
		if partCtx.Err() != nil {
			break
		}
		off := int64(i) * o.plan.Chunk
		section := io.NewSectionReader(f, off, min(o.plan.Chunk, o.size-off))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := up.put(partCtx, "upload part", href, nil, o.paths[0], section, &etags[i]); err != nil {
				errs[i] = fmt.Errorf("part %d of %d: %w", i+1, n, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	type part struct {
		PartNumber int    `json:"partNumber"`
		ETag       string `json:"etag"`
	}
	completion := struct {
		OID   string `json:"oid"`
		Parts []part `json:"parts"`
	}{OID: o.oid}
	for i, e := range etags {
		completion.Parts = append(completion.Parts, part{i + 1, e})
	}
	body, _ := json.Marshal(completion)
	return up.postLFS(ctx, "complete multipart", o.plan.Upload.Href, nil, body)
}

// postLFS posts a JSON body in the LFS media type to an action's href (the
// verify call and the multipart completion), with the action's headers,
// and expects no content back.
func (up *uploader) postLFS(ctx context.Context, op, href string, header map[string]string, body []byte) error {
	resp, err := up.api.Do(ctx, hubapi.Call{Op: op, OK: []int{http.StatusOK, http.StatusCreated, http.StatusNoContent}, Build: func() (*http.Request, error) {
		r, err := http.NewRequest(http.MethodPost, href, bytes.NewReader(body))
		if err == nil {
			setHeaders(r, header)
			r.Header.Set("Accept", lfsMediaType)
			r.Header.Set("Content-Type", lfsMediaType)
		}
		return r, err
	}})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// setHeaders applies an action's headers, as the git-lfs basic transfer
// says, except those the HTTP client owns.
func setHeaders(r *http.Request, h map[string]string) {
	for k, v := range h {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Transfer-Encoding", "Host", "Connection":
			continue
		}
		r.Header.Set(k, v)
	}
}

// countingReader reports the bytes read from r as progress of path,
// until its attempt is given up (the transport may still read a little
// from a failed attempt's body).
type countingReader struct {
	r        io.Reader
	path     string
	progress *progress
	n        atomic.Int64
	stopped  atomic.Bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 && !c.stopped.Load() {
		c.n.Add(int64(n))
		c.progress.bytes(c.path, int64(n))
	}
	return n, err
}
