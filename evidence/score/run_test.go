package score

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/evidence/refcache"
	"github.com/lfmq/lfmq/evidence/report"
	"github.com/lfmq/lfmq/format/lfmq1"
)

func corpora(names ...string) []CorpusSpec {
	var cs []CorpusSpec
	for _, n := range names {
		cs = append(cs, CorpusSpec{Name: n, Path: filepath.Join(corpDir, n+".jsonl")})
	}
	return cs
}

func results(f *evidence.File, variant string) map[string]evidence.Stats {
	m := map[string]evidence.Stats{}
	for _, r := range f.Results {
		if r.Candidate == variant {
			m[r.Corpus] = r.Stats
		}
	}
	return m
}

// TestRun scores the reference against itself, the two fixture candidates
// and the floors on the first records of two corpora.
func TestRun(t *testing.T) {
	keep, rtn := candidates(t)
	out, err := Run(context.Background(), Options{
		Reference:  tinyDir,
		Candidates: []Candidate{{Name: "self", Dir: tinyDir}, {Name: "bf16-experts", Dir: keep}, {Name: "rtn", Dir: rtn}},
		Corpora:    corpora("chat", "instruct"),
		Ctx:        256, MaxRecords: 4, NoiseFloor: true, Chunk: 7, Threads: 2,
		Command: "lfmq score …",
	})
	if err != nil {
		t.Fatal(err)
	}
	f := out.File
	if len(f.Results) != 5*3 || len(f.Comparisons) != 3*3 || len(out.Series) != 5*2 {
		t.Fatalf("%d results, %d comparisons, %d series", len(f.Results), len(f.Comparisons), len(out.Series))
	}

	// Self-score and the chunked noise floor: exactly the reference.
	for _, v := range []string{"self", "noise floor (chunk 7)"} {
		for corpus, st := range results(f, v) {
			if st.KLMax != 0 || st.KLMin != 0 || st.KLMean != 0 || st.Top1 != 1 || st.DPPLPct != 0 || st.LnRatio != 0 || st.PPLRef != st.PPLCand || st.RMSDP != 0 {
				t.Errorf("%s on %s: %+v, want exactly the reference", v, corpus, st)
			}
		}
	}
	if !strings.Contains(strings.Join(f.Notes, " "), "noise floor (chunk 7) is exactly zero") {
		t.Errorf("notes %q lack the zero-floor note", f.Notes)
	}
	// The storage floor: small, non-zero KL; NLL and top-1 exact.
	for corpus, st := range results(f, storageName) {
		if !(st.KLMean > 0 && st.KLMean < 1e-5 && st.KLMax < 1e-4) || st.Top1 != 1 || st.DPPLPct != 0 {
			t.Errorf("storage floor on %s: %+v", corpus, st)
		}
	}
	// RTN-BFP4 is further from the reference than BF16 experts + BFP8.
	kst, rst := results(f, "bf16-experts"), results(f, "rtn")
	for corpus := range kst {
		if !(kst[corpus].KLMean > 10*results(f, storageName)[corpus].KLMean && rst[corpus].KLMean > kst[corpus].KLMean && rst[corpus].Top1 < 1) {
			t.Errorf("%s: KL storage %g, bf16-experts %g, rtn %g", corpus, results(f, storageName)[corpus].KLMean, kst[corpus].KLMean, rst[corpus].KLMean)
		}
	}
	for _, c := range f.Comparisons {
		if c.A == "bf16-experts" && c.B == "rtn" && !(float64(c.KLDiff) > 3*float64(*c.KLDiffSE)) {
			t.Errorf("%s: rtn − bf16-experts KL %g ± %g, want clearly positive", c.Corpus, c.KLDiff, *c.KLDiffSE)
		}
	}

	// The reference PPL against the fixture's independent float32 values:
	// these instruct records are shorter than ctx, so both window rules
	// score the same tokens.
	e := readEvalPPL(t)
	var sum float64
	var n int
	for _, r := range e.Corpora["instruct"].PerRecord[:4] {
		sum += r.NLLSum
		n += r.NPredicted
	}
	st := results(f, "rtn")["instruct"]
	if st.Tokens != n || math.Abs(float64(st.PPLRef)/math.Exp(sum/float64(n))-1) > 2e-5 {
		t.Errorf("instruct: PPL %v over %d tokens, fixture %v over %d", st.PPLRef, st.Tokens, math.Exp(sum/float64(n)), n)
	}

	// Receipts.
	rc := f.Receipts
	if rc.Reference.Format != "hf" || len(rc.Reference.Identity) != 64 || len(rc.Reference.Files) != 7 || rc.Command != "lfmq score …" || len(rc.BinarySHA256) != 64 {
		t.Errorf("reference receipt %+v", rc.Reference)
	}
	_, sum256, err := lfmq1.ReadManifest(rtn)
	if err != nil || rc.Candidates[2].ManifestSHA256 != sum256 || rc.Candidates[2].Experts != "rtn bfp4_b" || rc.Candidates[1].Experts != "none bf16" {
		t.Errorf("candidate receipts %+v", rc.Candidates)
	}
	chatSum, _, _ := evidence.HashFile(filepath.Join(corpDir, "chat.jsonl"))
	if rc.Corpora[0].SHA256 != chatSum || rc.Corpora[0].Records != 4 || rc.Corpora[0].Tokens != results(f, "rtn")["chat"].Tokens {
		t.Errorf("corpus receipt %+v", rc.Corpora[0])
	}

	// The file re-renders to the same table.
	data, err := evidence.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := evidence.Parse("evidence.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if report.Markdown(back) != report.Markdown(f) {
		t.Errorf("re-rendered table differs:\n%s\nwant\n%s", report.Markdown(back), report.Markdown(f))
	}
	again, _ := evidence.Marshal(back)
	if !bytes.Equal(again, data) {
		t.Error("evidence file does not round-trip byte for byte")
	}
}

// TestRunCache saves the reference log-probs, scores again from the cache,
// and checks that NLL and top-1 are reproduced exactly, that KL only moves
// by storage rounding, and that a cache that does not match is refused.
func TestRunCache(t *testing.T) {
	keep, _ := candidates(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "ref.zst")
	base := Options{
		Reference: tinyDir, Candidates: []Candidate{{Name: "keep", Dir: keep}},
		Corpora: corpora("instruct"), Ctx: 128, MaxRecords: 3,
	}
	save := base
	save.SaveReference = cache
	direct, err := Run(context.Background(), save)
	if err != nil {
		t.Fatal(err)
	}
	cr := direct.File.Receipts.ReferenceCache
	if cr == nil || cr.Mode != "saved" || len(cr.SHA256) != 64 {
		t.Fatalf("cache receipt %+v", cr)
	}
	if sum, err := refcache.ReadSum(cache); err != nil || sum != cr.SHA256 {
		t.Fatalf("sha256 file: %v %v", sum, err)
	}
	// Reproducible bytes.
	save.SaveReference = filepath.Join(dir, "again.zst")
	if again, err := Run(context.Background(), save); err != nil || again.File.Receipts.ReferenceCache.SHA256 != cr.SHA256 {
		t.Fatalf("second save: %v, sha256 differs: %v", err, err == nil)
	}

	for _, noise := range []bool{false, true} {
		use := base
		use.ReferenceCache, use.NoiseFloor = cache, noise
		cached, err := Run(context.Background(), use)
		if err != nil {
			t.Fatal(err)
		}
		if c := cached.File.Receipts.ReferenceCache; c == nil || c.Mode != "used" || c.SHA256 != cr.SHA256 {
			t.Errorf("cache receipt %+v", c)
		}
		a, b := results(direct.File, "keep")["instruct"], results(cached.File, "keep")["instruct"]
		if a.PPLRef != b.PPLRef || a.PPLCand != b.PPLCand || a.Top1 != b.Top1 || a.DPPLPct != b.DPPLPct {
			t.Errorf("noise=%v: from the cache %+v, direct %+v: NLL and top-1 must be exact", noise, b, a)
		}
		if d := math.Abs(float64(b.KLMean - a.KLMean)); d > 1e-5 || d == 0 {
			t.Errorf("noise=%v: KL from the cache %g, direct %g", noise, b.KLMean, a.KLMean)
		}
		if noise {
			st := results(cached.File, storageName)["instruct"]
			if !(st.KLMean > 0 && st.KLMean < 1e-5) || st.Top1 != 1 {
				t.Errorf("storage floor from the cache: %+v", st)
			}
			if strings.Contains(strings.Join(cached.File.Notes, " "), "differ in NLL") {
				t.Errorf("notes: %q", cached.File.Notes)
			}
		}
	}

	// Refusals, naming the field that differs.
	mismatch := func(name string, o Options, field string) {
		t.Helper()
		_, err := Run(context.Background(), o)
		var mm *refcache.MismatchError
		if !errors.As(err, &mm) || mm.Field != field {
			t.Errorf("%s: err %v, want a mismatch of %s", name, err, field)
		}
	}
	o := base
	o.ReferenceCache, o.Ctx = cache, 256
	mismatch("other ctx", o, "ctx")
	o = base
	o.ReferenceCache, o.MaxRecords = cache, 2
	mismatch("fewer records", o, "corpora[0].records")

	data, _ := os.ReadFile(filepath.Join(corpDir, "instruct.jsonl"))
	changed := filepath.Join(dir, "instruct.jsonl")
	os.WriteFile(changed, bytes.Replace(data, []byte("\n"), []byte("\n\n"), 1), 0o644)
	o = base
	o.ReferenceCache, o.Corpora = cache, []CorpusSpec{{"instruct", changed}}
	mismatch("changed corpus", o, "corpora[0].sha256")

	// Another BF16 reference: the fixture with one more top-level file,
	// which changes its identity (an lfmq-1 checkpoint is no reference at
	// all: TestRunQuantizedReference).
	other := filepath.Join(dir, "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(tinyDir)
	for _, e := range entries {
		abs, _ := filepath.Abs(filepath.Join(tinyDir, e.Name()))
		if err := os.Symlink(abs, filepath.Join(other, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(other, "NOTICE"), []byte("another reference\n"), 0o644)
	o = base
	o.ReferenceCache, o.Reference = cache, other
	mismatch("other reference", o, "reference")

	blob, _ := os.ReadFile(cache)
	blob[len(blob)/2] ^= 1
	os.WriteFile(cache, blob, 0o644)
	o = base
	o.ReferenceCache = cache
	mismatch("damaged file", o, "sha256")
}

// TestReceiptsChange: a changed checkpoint byte or corpus byte changes the
// receipts.
func TestReceiptsChange(t *testing.T) {
	keep, _ := candidates(t)
	dir := t.TempDir()
	for _, src := range []string{tinyDir, keep} {
		cp := filepath.Join(dir, filepath.Base(src))
		os.MkdirAll(cp, 0o755)
		entries, _ := os.ReadDir(src)
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(src, e.Name()))
			os.WriteFile(filepath.Join(cp, e.Name()), b, 0o644)
		}
		before, err := evidence.IdentifyCheckpoint("x", cp)
		if err != nil {
			t.Fatal(err)
		}
		orig, _ := evidence.IdentifyCheckpoint("x", src)
		if before.Identity != orig.Identity {
			t.Fatalf("%s: a byte-identical copy has another identity", src)
		}
		// HF: any file; lfmq-1: the manifest (which pins every file; the
		// scorer opens lfmq-1 checkpoints with lfmq1.CheckFiles).
		victim := filepath.Join(cp, "model.safetensors")
		if before.Format == "lfmq-1" {
			victim = filepath.Join(cp, "manifest.json")
		}
		b, _ := os.ReadFile(victim)
		if before.Format == "lfmq-1" {
			b = bytes.Replace(b, []byte(`"created_by": "test"`), []byte(`"created_by": "tesT"`), 1)
		} else {
			b[len(b)-3] ^= 1
		}
		os.WriteFile(victim, b, 0o644)
		after, err := evidence.IdentifyCheckpoint("x", cp)
		if err != nil {
			t.Fatal(err)
		}
		if after.Identity == before.Identity {
			t.Errorf("%s: identity unchanged after changing %s", before.Format, filepath.Base(victim))
		}
	}
}

// TestRunQuantizedReference: Run refuses an lfmq-1 checkpoint as the
// reference (an OptionsError naming it), rather than scoring it under the
// label BF16.
func TestRunQuantizedReference(t *testing.T) {
	_, rtn := candidates(t)
	_, err := Run(context.Background(), Options{Reference: rtn, NoiseFloor: true, Corpora: corpora("instruct"), Ctx: 128, MaxRecords: 1})
	var oe *OptionsError
	if !errors.As(err, &oe) || oe.Field != "reference" || !strings.Contains(err.Error(), rtn+" is an lfmq-1 checkpoint, not the BF16 source") {
		t.Fatalf("Run with an lfmq-1 reference: %v, want an OptionsError for the reference", err)
	}
}
