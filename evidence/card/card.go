package card

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/units"
)

// Tags are the card's tags of an LFM2-MoE release
// (docs/release.md, "The model card").
var Tags = []string{"lfm2", "lfm2_moe", "moe", "quantized", "lfmq", "bfp4", "bfp8", "tenstorrent"}

// DenseTags are the card's tags of a dense LFM2 release: Tags without the
// MoE ones.
var DenseTags = []string{"lfm2", "quantized", "lfmq", "bfp4", "bfp8", "tenstorrent"}

// LFM3Tags are the card's tags of an LFM3 release: DenseTags under LFM3's
// model_type, since an lfm3 model is no lfm2 one to a hub search.
var LFM3Tags = []string{"lfm3", "quantized", "lfmq", "bfp4", "bfp8", "tenstorrent"}

// dense reports whether m is a dense LFM2 checkpoint (an ffn class, no
// routed experts).
func dense(m *lfmq1.Manifest) bool { return m.Architecture == "lfm2" || m.Quantization.FFN != nil }

// License is the card's licence metadata: the hub's license identifier
// (e.g. "apache-2.0", or "other" with a name and a link).
type License struct {
	ID   string
	Name string
	Link string
}

// Runtime is one file of the bundled runtime.
type Runtime struct {
	// Platform is "GOOS/GOARCH", or empty for the source archive.
	Platform string
	Path     string
	Size     int64
	SHA256   string
}

// Input is everything the card shows.
type Input struct {
	ReleaseID string
	// Revision is the hub tag of the release.
	Revision string
	// HubRepo is where the release is published ("owner/name"), named by
	// the download commands; required, since a card whose commands point
	// at a placeholder would not work for anyone who copies them.
	HubRepo string
	// BaseModel is the source repo id; BaseRevision its commit, if known.
	BaseModel    string
	BaseRevision string
	// LfmqVersion is the lfmq version of the runtime.
	LfmqVersion    string
	Manifest       *lfmq1.Manifest
	ManifestSHA256 string
	// Source is the runtime's source archive; Runtime the binaries.
	// SourceDirty lists the archived files that differed from the source
	// tree's git commit when the release was built with --allow-dirty.
	SourceDirty []string
	Source      Runtime
	Runtime     []Runtime
	License     License
	Language    []string
	// Notices are the release paths of NOTICE files passed through.
	Notices []string
	// Evidence are the release paths of the evidence files.
	Evidence []string
	// Plots are the images among the evidence files, shown in the quality
	// section in order.
	Plots []Plot
	// Quality is the quality section, already rendered as Markdown (the
	// tables of docs/scoring.md, "Output" with the noise floor and RTN
	// rows), one element per table with its heading; inserted in order.
	Quality []string
	// Drafter is the release's DSpark drafter, when it carries one.
	Drafter *Drafter
}

// Drafter is a release's DSpark drafter (docs/release.md, "A drafter"):
// its lfmq-1 manifest, whose source names the drafter it was quantized
// from, and the acceptance lfmq quantize --drafter measured.
type Drafter struct {
	Manifest       *lfmq1.Manifest
	ManifestSHA256 string
	Acceptance     DrafterAcceptance
}

// DrafterAcceptance is the acceptance record of a drafter's manifest
// (metrics "acceptance", written by lfmq quantize --drafter as
// quant.DrafterAcceptance): tokens per verify step with the BF16 and the
// quantized drafter, both on the quantized model.
type DrafterAcceptance struct {
	Setup struct {
		Records      int `json:"records"`
		PromptTokens int `json:"prompt_tokens"`
		NewTokens    int `json:"new_tokens"`
	} `json:"setup"`
	TargetManifestSHA256 string          `json:"target_manifest_sha256"`
	Corpora              []DrafterCorpus `json:"corpora"`
	BF16                 AcceptanceRun   `json:"bf16"`
	Quantized            AcceptanceRun   `json:"quantized"`
}

// DrafterCorpus is one corpus of a DrafterAcceptance.
type DrafterCorpus struct {
	Name      string        `json:"name"`
	Records   int           `json:"records"`
	BF16      AcceptanceRun `json:"bf16"`
	Quantized AcceptanceRun `json:"quantized"`
}

// AcceptanceRun is one drafter's held-out run: its verify steps and the
// tokens each produced on average.
type AcceptanceRun struct {
	VerifySteps   int     `json:"verify_steps"`
	TokensPerStep float64 `json:"tokens_per_verify_step"`
}

// Plot is an image the card shows.
type Plot struct {
	// Path is the image's release path, e.g. "evidence/kl-chat.svg": a
	// relative link, so the image renders wherever the card is shown next
	// to the release's files, on the hub or in a clone.
	Path string
	// Alt is the image's alternative text, for readers who cannot see it.
	Alt string
}

// Error reports an Input the card cannot be rendered from. Field names it.
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string { return fmt.Sprintf("card: %s: %s", e.Field, e.Msg) }

var (
	repoRe  = regexp.MustCompile(`^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$`)
	plainRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*$`)
	hexRe   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// imageRe is a release path (segments of [A-Za-z0-9._-], none starting
	// with a dot, so no "." or ".." either) of an image the hub renders.
	imageRe = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*\.(svg|png)$`)
)

// Render returns the card's bytes.
func Render(in Input) ([]byte, error) {
	switch {
	case in.ReleaseID == "":
		return nil, &Error{Field: "ReleaseID", Msg: "empty"}
	case in.Revision == "":
		return nil, &Error{Field: "Revision", Msg: "empty"}
	case !repoRe.MatchString(in.BaseModel):
		return nil, &Error{Field: "BaseModel", Msg: fmt.Sprintf("%q is not a hub repo id", in.BaseModel)}
	case in.HubRepo == "":
		return nil, &Error{Field: "HubRepo", Msg: "empty; the download commands need the repo id the release is published under"}
	case !repoRe.MatchString(in.HubRepo):
		return nil, &Error{Field: "HubRepo", Msg: fmt.Sprintf("%q is not a hub repo id", in.HubRepo)}
	case in.Manifest == nil:
		return nil, &Error{Field: "Manifest", Msg: "nil"}
	case !hexRe.MatchString(in.ManifestSHA256):
		return nil, &Error{Field: "ManifestSHA256", Msg: "not 64 hex digits"}
	case in.License.ID == "":
		return nil, &Error{Field: "License.ID", Msg: "empty"}
	case !KnownLicense(in.License.ID):
		return nil, &Error{Field: "License.ID", Msg: fmt.Sprintf("%q is not a hub licence id", in.License.ID)}
	case in.License.ID == "other" && in.License.Name == "":
		return nil, &Error{Field: "License.Name", Msg: "required when the licence is \"other\""}
	}
	if d := in.Drafter; d != nil {
		switch {
		case d.Manifest == nil:
			return nil, &Error{Field: "Drafter.Manifest", Msg: "nil"}
		case !hexRe.MatchString(d.ManifestSHA256):
			return nil, &Error{Field: "Drafter.ManifestSHA256", Msg: "not 64 hex digits"}
		case d.Acceptance.TargetManifestSHA256 != in.ManifestSHA256:
			return nil, &Error{Field: "Drafter.Acceptance", Msg: fmt.Sprintf("measured on the model of manifest sha256 %q, not on this checkpoint", d.Acceptance.TargetManifestSHA256)}
		}
	}
	for i, q := range in.Quality {
		if strings.Contains(q, "\n---\n") || strings.HasPrefix(q, "---") {
			return nil, &Error{Field: fmt.Sprintf("Quality[%d]", i), Msg: "a YAML document marker would break the card"}
		}
	}
	for i, p := range in.Plots {
		switch {
		case !imageRe.MatchString(p.Path):
			return nil, &Error{Field: fmt.Sprintf("Plots[%d].Path", i), Msg: fmt.Sprintf("%q is not the release path of an .svg or .png image", p.Path)}
		case !slices.Contains(in.Evidence, p.Path):
			return nil, &Error{Field: fmt.Sprintf("Plots[%d].Path", i), Msg: fmt.Sprintf("%q is not among the evidence files", p.Path)}
		case mdAlt(p.Alt) == "":
			return nil, &Error{Field: fmt.Sprintf("Plots[%d].Alt", i), Msg: "empty; an image needs alternative text"}
		}
	}
	var b bytes.Buffer
	frontMatter(&b, in)
	body(&b, in)
	return b.Bytes(), nil
}

// yamlScalar writes s plain when it is safe, else as a double-quoted
// scalar (JSON string syntax, which YAML accepts).
func yamlScalar(s string) string {
	if plainRe.MatchString(s) && s != "true" && s != "false" && s != "null" && s != "yes" && s != "no" {
		return s
	}
	q, _ := json.Marshal(s)
	return string(q)
}

func frontMatter(b *bytes.Buffer, in Input) {
	b.WriteString("---\n")
	fmt.Fprintf(b, "license: %s\n", yamlScalar(in.License.ID))
	if in.License.Name != "" {
		fmt.Fprintf(b, "license_name: %s\n", yamlScalar(in.License.Name))
	}
	if in.License.Link != "" {
		fmt.Fprintf(b, "license_link: %s\n", yamlScalar(in.License.Link))
	}
	fmt.Fprintf(b, "base_model: %s\n", yamlScalar(in.BaseModel))
	b.WriteString("base_model_relation: quantized\n")
	b.WriteString("pipeline_tag: text-generation\n")
	if len(in.Language) > 0 {
		b.WriteString("language:\n")
		for _, l := range in.Language {
			fmt.Fprintf(b, "- %s\n", yamlScalar(l))
		}
	}
	b.WriteString("tags:\n")
	tags := Tags
	switch {
	case in.Manifest.Architecture == "lfm3":
		tags = LFM3Tags
	case dense(in.Manifest):
		tags = DenseTags
	}
	for _, t := range tags {
		fmt.Fprintf(b, "- %s\n", t)
	}
	b.WriteString("---\n\n")
}

func body(b *bytes.Buffer, in Input) {
	m := in.Manifest
	var plats []string
	for _, r := range in.Runtime {
		plats = append(plats, "`"+r.Platform+"`")
	}
	fmt.Fprintf(b, "# %s\n\n", in.ReleaseID)
	fmt.Fprintf(b, "[%s](https://huggingface.co/%s) quantized to the **lfmq-1** format by lfmq %s:\n", in.BaseModel, in.BaseModel, in.LfmqVersion)
	if q := m.Quantization.FFN; dense(m) && q != nil && slices.Equal(q.Formats, []lfmq1.TensorFormat{lfmq1.BFP8}) {
		b.WriteString("the FFN, attention, short-conv and LM-head weights in BFP8 (Tenstorrent `bfloat8_b`),\n")
		b.WriteString("everything else in its source precision.\n\n")
	} else if dense(m) {
		b.WriteString("the FFN weights in BFP4 (Tenstorrent `bfloat4_b`), attention, short-conv and LM-head\n")
		b.WriteString("weights in BFP8 (`bfloat8_b`), everything else in its source precision.\n\n")
	} else {
		b.WriteString("routed experts in BFP4 (Tenstorrent `bfloat4_b`), attention, short-conv, dense-FFN and\n")
		b.WriteString("LM-head weights in BFP8 (`bfloat8_b`), everything else in its source precision.\n\n")
	}
	b.WriteString("This repository is a complete, verifiable release:\n\n")
	b.WriteString("- `checkpoint/`: the lfmq-1 checkpoint; `checkpoint/manifest.json` records every tensor's\n")
	b.WriteString("  format, shape and sha256 and every quantization setting.\n")
	fmt.Fprintf(b, "- `runtime/`: the lfmq engine that runs it, for %s, built reproducibly\n", strings.Join(plats, ", "))
	b.WriteString("  (`CGO_ENABLED=0`, `-trimpath`, no dates or paths) from `runtime/lfmq-src.tar.gz`, the exact\n")
	b.WriteString("  source, vendored dependencies included.\n")
	if n := len(in.SourceDirty); n > 0 {
		fmt.Fprintf(b, "  It was built with `--allow-dirty` from a source tree with uncommitted changes to %d of\n  its files (listed in `runtime-release.json`, `lfmq.source_dirty`): the binaries are\n  reproducible from the archive, not from a commit.\n", n)
	}
	if in.Drafter != nil {
		b.WriteString("- `drafter/`: a DSpark drafter for the model, an lfmq-1 checkpoint of its own, with which\n")
		b.WriteString("  `launch` decodes several tokens per step (see Drafter).\n")
	}
	if len(in.Evidence) > 0 {
		b.WriteString("- `evidence/`: the measurements behind the quality tables, with their receipts.\n")
	}
	b.WriteString("- `runtime-release.json` and `SHA256SUMS`: the size and sha256 of every file.\n\n")
	b.WriteString("Transformers cannot load lfmq-1 weights; use the bundled runtime.\n\n")

	b.WriteString("## Precision\n\n")
	precisionTable(b, m)
	b.WriteString("\n")
	q := m.Quantization
	b.WriteString("| class | method | formats | tensors |\n|---|---|---|---:|\n")
	classes := []struct {
		name string
		spec lfmq1.ClassSpec
	}{{"experts", q.Experts}, {"dense", q.Dense}, {"head", q.Head}, {"kept", q.Kept}}
	if q.FFN != nil {
		// A dense checkpoint: its FFN class where the experts would be.
		classes[0].name, classes[0].spec = "ffn", *q.FFN
	}
	for _, c := range classes {
		var fs []string
		for _, f := range c.spec.Formats {
			fs = append(fs, string(f))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", c.name, mdCell(c.spec.Method), mdCell(strings.Join(fs, ", ")), count(int64(c.spec.Tensors)))
	}
	b.WriteString("\nEvery setting of the method is recorded in `checkpoint/manifest.json`.\n")
	bfp4 := "routed experts"
	if dense(m) {
		bfp4 = "BFP4 FFN weights"
		if q.FFN != nil && !slices.Contains(q.FFN.Formats, lfmq1.BFP4) {
			bfp4 = "" // a BFP8 FFN: nothing is BFP4
		}
	}
	b.WriteString(exponentNote(q.Settings, bfp4))
	b.WriteString("\n")

	b.WriteString("## Quality\n\n")
	switch {
	case len(in.Quality) > 0:
		for _, s := range in.Quality {
			b.WriteString(strings.TrimRight(s, "\n"))
			b.WriteString("\n\n")
		}
		if len(in.Evidence) > 0 {
			b.WriteString("Rendered from the evidence files, never typed by hand:\n\n")
			for _, e := range in.Evidence {
				fmt.Fprintf(b, "- `%s`\n", e)
			}
			b.WriteString("\n")
		}
	case len(in.Evidence) > 0:
		b.WriteString("The measurements of this release are in the evidence files:\n\n")
		for _, e := range in.Evidence {
			fmt.Fprintf(b, "- `%s`\n", e)
		}
		b.WriteString("\n")
	default:
		b.WriteString("No evidence files were published with this release.\n\n")
	}
	plots(b, in.Plots)
	if in.Drafter != nil {
		drafterSection(b, in.Drafter)
	}

	b.WriteString("## Download\n\n```sh\n")
	fmt.Fprintf(b, "lfmq download https://huggingface.co/%s --revision %s --cache-root ~/.cache/lfmq\n", in.HubRepo, in.Revision)
	b.WriteString("```\n\n")
	b.WriteString("`lfmq download` fetches `SHA256SUMS` first, then every file it lists, resumes interrupted\n")
	b.WriteString("files and verifies each one as it lands. Any other client works too, e.g.\n")
	fmt.Fprintf(b, "`hf download %s --revision %s --local-dir %s`; then verify.\n\n", in.HubRepo, in.Revision, in.ReleaseID)

	b.WriteString("## Verify\n\n```sh\n")
	b.WriteString("lfmq verify --release-dir .    # every byte, the lists and the pins\n")
	b.WriteString("sha256sum -c SHA256SUMS        # GNU coreutils, no lfmq needed\n")
	b.WriteString("```\n\n")
	fmt.Fprintf(b, "The release digest is the sha256 of `SHA256SUMS`; it is in the message of the `%s` tag.\n\n", in.Revision)
	b.WriteString("When the release has a `SHA256SUMS.sig`, that file is an SSH signature (namespace\n")
	b.WriteString("`lfmq-release`) over the exact bytes of `SHA256SUMS`, and through its digests over every\n")
	b.WriteString("file. To check it, put the publisher's public key, obtained from them rather than from this\n")
	b.WriteString("repository, in an `allowed_signers` file as a line `<identity> <key type> <base64 key>`\n")
	b.WriteString("(`man ssh-keygen`, ALLOWED SIGNERS), then run either command:\n\n```sh\n")
	b.WriteString("ssh-keygen -Y verify -f allowed_signers -I <identity> -n lfmq-release -s SHA256SUMS.sig < SHA256SUMS\n")
	b.WriteString("lfmq verify --release-dir . --allowed-signers allowed_signers --identity <identity>\n")
	b.WriteString("```\n\n")
	b.WriteString("`ssh-keygen` checks the signature only; follow it with `sha256sum -c SHA256SUMS`. `lfmq verify`\n")
	b.WriteString("checks both, and a missing or bad signature is then a failure. `lfmq download` and `lfmq launch`\n")
	b.WriteString("take the same two flags: download then refuses an unsigned or wrongly signed release before it\n")
	b.WriteString("fetches anything else, and launch starts nothing.\n\n")

	b.WriteString("## Run\n\n```sh\n")
	example := "runtime/lfmq-linux-amd64"
	for _, r := range in.Runtime {
		if r.Platform != "" {
			example = r.Path
			break
		}
	}
	fmt.Fprintf(b, "%s launch --release-dir . --sampling-preset agentic --port 8000\n", example)
	b.WriteString("curl -s localhost:8000/v1/chat/completions -H 'Content-Type: application/json' \\\n")
	b.WriteString("  -d '{\"messages\":[{\"role\":\"user\",\"content\":\"Hello!\"}]}'\n")
	b.WriteString("```\n\n")
	b.WriteString("`launch` verifies every byte of the release, checks the runtime against its pinned digest, then\n")
	b.WriteString("serves the checkpoint over an OpenAI-compatible API (`/v1/chat/completions`, `/v1/completions`,\n")
	b.WriteString("`/v1/models`, `/health`, `/metrics`); point any OpenAI client at `http://localhost:8000/v1`.\n")
	b.WriteString("Use the binary for your platform (`runtime/lfmq-<os>-<arch>`; `--print-command` shows what it\n")
	b.WriteString("runs; after a download that keeps no file modes, such as `hf download`, `chmod +x` it first).\n")
	for _, r := range in.Runtime {
		if strings.HasPrefix(r.Platform, "windows/") {
			// The example above is a Unix path, and Windows runs only
			// files named .exe.
			fmt.Fprintf(b, "On Windows: `%s launch --release-dir . --sampling-preset agentic --port 8000`.\n",
				strings.ReplaceAll(r.Path, "/", `\`))
			break
		}
	}
	b.WriteString("The engine runs the lfmq-1 weights directly on the CPU.\n\n")

	b.WriteString("## Pins\n\n| pin | value |\n|---|---|\n")
	fmt.Fprintf(b, "| release id | `%s` |\n", in.ReleaseID)
	fmt.Fprintf(b, "| revision | `%s` |\n", in.Revision)
	base := "`" + in.BaseModel + "`"
	if in.BaseRevision != "" {
		base += " @ `" + in.BaseRevision + "`"
	}
	fmt.Fprintf(b, "| base model | %s |\n", base)
	fmt.Fprintf(b, "| checkpoint manifest sha256 | `%s` |\n", in.ManifestSHA256)
	if in.Drafter != nil {
		fmt.Fprintf(b, "| drafter manifest sha256 | `%s` |\n", in.Drafter.ManifestSHA256)
	}
	fmt.Fprintf(b, "| lfmq version | `%s` |\n", mdCode(in.LfmqVersion))
	if in.Source.Path != "" {
		fmt.Fprintf(b, "| `%s` sha256 | `%s` |\n", in.Source.Path, in.Source.SHA256)
	}
	for _, r := range in.Runtime {
		fmt.Fprintf(b, "| `%s` sha256 | `%s` |\n", r.Path, r.SHA256)
	}
	b.WriteString("\n")

	b.WriteString("## Licence and modifications notice\n\n")
	fmt.Fprintf(b, "The weights in `checkpoint/` are a quantized derivative of `%s`", in.BaseModel)
	if in.BaseRevision != "" {
		fmt.Fprintf(b, " (commit `%s`)", in.BaseRevision)
	}
	fmt.Fprintf(b, ",\nproduced by lfmq %s with the settings recorded in `checkpoint/manifest.json`: the\n", in.LfmqVersion)
	b.WriteString("weights were re-encoded in block floating point (see Precision); tokenizer, configuration and\n")
	b.WriteString("chat template are unmodified copies. The licence terms of the base model are unchanged and\n")
	b.WriteString("apply to this release: see `LICENSE`")
	for _, n := range in.Notices {
		fmt.Fprintf(b, " and `%s`", n)
	}
	b.WriteString(", passed through byte for byte.\n")
	if d := in.Drafter; d != nil {
		from := "its source drafter"
		if d.Manifest.Source.Repo != "" {
			from = "`" + d.Manifest.Source.Repo + "`"
		}
		fmt.Fprintf(b, "The weights in `drafter/` are a quantized derivative of %s, re-encoded the same way\n", from)
		b.WriteString("(see Drafter) with its `config.json` copied unmodified; its licence terms apply to them.\n")
	}
}

// role classifies a tensor by its Hugging Face name for the precision
// table; roles are listed in table order.
var roles = []struct {
	name  string
	match func(string) bool
}{
	{"routed experts (w1, w3, w2)", func(n string) bool { return strings.Contains(n, ".feed_forward.experts.") }},
	// LFM3's per-head output gate is a projection too, but one row per
	// head: no BFP tile fits it and it stays BF16 (docs/lfm3.md), so it
	// gets its own row rather than a BF16 line among the projections.
	{"attention output gates (one row per head)", func(n string) bool { return strings.HasSuffix(n, ".self_attn.gate_proj.weight") }},
	{"attention q/k/v/out projections", func(n string) bool {
		return strings.Contains(n, ".self_attn.") && strings.HasSuffix(n, "_proj.weight")
	}},
	{"short-conv in/out projections", func(n string) bool {
		return strings.HasSuffix(n, ".conv.in_proj.weight") || strings.HasSuffix(n, ".conv.out_proj.weight")
	}},
	{"dense FFN (w1, w3, w2)", func(n string) bool {
		return strings.Contains(n, ".feed_forward.w1.") || strings.Contains(n, ".feed_forward.w2.") || strings.Contains(n, ".feed_forward.w3.")
	}},
	{"LM head", func(n string) bool { return n == "lm_head.weight" }},
	{"token embedding", func(n string) bool { return n == "model.embed_tokens.weight" }},
	{"short-conv kernels", func(n string) bool { return strings.HasSuffix(n, ".conv.conv.weight") }},
	{"router gates", func(n string) bool { return strings.HasSuffix(n, ".feed_forward.gate.weight") }},
	{"expert biases", func(n string) bool { return strings.Contains(n, "expert_bias") }},
	{"norms", func(n string) bool { return strings.Contains(n, "norm") }},
	{"other", func(string) bool { return true }},
}

var dtypeBytes = map[string]int64{"U8": 1, "I8": 1, "BF16": 2, "F16": 2, "F32": 4, "I32": 4, "F64": 8, "I64": 8}

func precisionTable(b *bytes.Buffer, m *lfmq1.Manifest) {
	type key struct {
		role   int
		format lfmq1.TensorFormat
	}
	type agg struct{ n, params, bytes int64 }
	groups := map[key]*agg{}
	var total agg
	for _, t := range m.Tensors {
		r := 0
		for i, ro := range roles {
			if ro.match(t.Name) {
				r = i
				break
			}
		}
		k := key{r, t.Format}
		g := groups[k]
		if g == nil {
			g = &agg{}
			groups[k] = g
		}
		params := product(t.Shape)
		size := product(t.StoredShape) * dtypeBytes[t.DType]
		g.n++
		g.params += params
		g.bytes += size
		total.n++
		total.params += params
		total.bytes += size
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.role != b.role {
			return a.role - b.role
		}
		return strings.Compare(string(a.format), string(b.format))
	})
	b.WriteString("| tensors | format | count | parameters | bits per weight | size |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|\n")
	row := func(name, format string, g agg) {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", name, format, count(g.n), count(g.params), bitsPerWeight(g.bytes, g.params), units.Bytes(g.bytes))
	}
	for _, k := range keys {
		row(roles[k.role].name, "`"+string(k.format)+"`", *groups[k])
	}
	row("**total**", "", total)
}

func product(shape []int64) int64 {
	p := int64(1)
	for _, d := range shape {
		p *= d
	}
	return p
}

func bitsPerWeight(bytes, params int64) string {
	if params == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(bytes)*8/float64(params))
}

// plots writes the images, each in its own paragraph so that they stack
// rather than run together on one line.
func plots(b *bytes.Buffer, ps []Plot) {
	if len(ps) == 0 {
		return
	}
	b.WriteString("### Plots\n\n")
	for _, p := range ps {
		fmt.Fprintf(b, "![%s](%s)\n\n", mdAlt(p.Alt), p.Path)
	}
}

// count formats a count with comma thousands separators ("2,262,658"),
// the style of the quality tables (evidence/report), so that every count
// on the card reads the same way.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	var out strings.Builder
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out.WriteByte(',')
		}
		out.WriteByte(s[i])
	}
	return sign + out.String()
}

// mdAlt makes s an image's alternative text: one line, with the characters
// that would end the text or start markup escaped.
func mdAlt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, "<", `\<`).Replace(s)
}

// mdCell escapes a value for a Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

func mdCode(s string) string { return strings.ReplaceAll(mdCell(s), "`", "'") }

// ErrFrontMatter is the sentinel of every front-matter parse error.
var ErrFrontMatter = errors.New("card: invalid front matter")

// exponentNote says how the BFP groups' shared exponents were chosen, from
// the exponent rules in the manifest's quantization settings, and that the
// plain packer's rule (the largest exponent, tt-metal's default and the
// reference release's method) is one flag away. Settings without the rules
// give "".
// bfp4 names the BFP4 tensors ("" when there are none).
func exponentNote(settings json.RawMessage, bfp4 string) string {
	var s struct {
		Experts string `json:"exponent_rule"`
		Dense   string `json:"dense_exponent_rule"`
	}
	if json.Unmarshal(settings, &s) != nil || s.Experts == "" {
		return ""
	}
	if s.Dense == "" {
		s.Dense = "max"
	}
	what := map[string]string{
		"max":     "the largest exponent of each group (tt-metal's packer)",
		"search":  "tt-metal's exponent search (one less than the largest when that lowers the group's error)",
		"hessian": "the exponent of least GPTQ loss among the largest and the two below it",
	}
	desc := func(r string) string {
		if d, ok := what[r]; ok {
			return "`" + r + "`, " + d
		}
		return "`" + r + "`"
	}
	var b strings.Builder
	b.WriteString("\nShared exponents of the BFP groups (`exponent_rule` in the settings): ")
	if bfp4 != "" {
		b.WriteString(bfp4 + " " + desc(s.Experts) + "; ")
	}
	b.WriteString("BFP8 tensors ")
	b.WriteString(desc(s.Dense))
	b.WriteString(".")
	if s.Experts != "max" || s.Dense != "max" {
		b.WriteString(" The plain rule `max`, the reference release's method, is one flag away:")
		b.WriteString(" `lfmq quantize --exponent-rule max --dense-exponent-rule max`.")
	}
	b.WriteString("\n")
	return b.String()
}

// drafterSection says which drafter the release carries, how it was
// quantized, and what that cost: the tokens per verify step of the
// published and the quantized drafter on held-out text.
func drafterSection(b *bytes.Buffer, d *Drafter) {
	m, a := d.Manifest, d.Acceptance
	b.WriteString("## Drafter\n\n")
	src := m.Source
	switch {
	case src.Repo != "" && src.Commit != "":
		fmt.Fprintf(b, "`drafter/` is [%s](https://huggingface.co/%s) (commit `%s`), a DSpark drafter,\n", src.Repo, src.Repo, src.Commit)
	case src.Repo != "":
		fmt.Fprintf(b, "`drafter/` is [%s](https://huggingface.co/%s), a DSpark drafter,\n", src.Repo, src.Repo)
	default:
		fmt.Fprintf(b, "`drafter/` is a DSpark drafter read from a local directory (its `config.json` has sha256\n`%s`),\n", src.ConfigSHA256)
	}
	b.WriteString("quantized by lfmq: its linear weights in BFP8 (`bfloat8_b`, rounded to nearest), its Markov\n")
	b.WriteString("table, norms and confidence head as published; it drafts with the model's own embedding and\n")
	fmt.Fprintf(b, "LM head. Its identity is the sha256 of `drafter/manifest.json`, `%s`.\n", d.ManifestSHA256)
	b.WriteString("`launch` serves with it (`--drafter off` serves without it); drafted decoding gives the same\n")
	b.WriteString("tokens as plain decoding, greedy or seeded.\n\n")
	fmt.Fprintf(b, "Tokens per verify step (greedy, every draft of the block verified; %d records per corpus,\n", a.Setup.Records)
	fmt.Fprintf(b, "each one's first %d tokens the prompt, %d new tokens), both drafters on this release's model:\n\n", a.Setup.PromptTokens, a.Setup.NewTokens)
	b.WriteString("| corpus | records | BF16 drafter | BFP8 drafter (this release) | change |\n|---|---:|---:|---:|---:|\n")
	row := func(name string, records int, bf, q AcceptanceRun) {
		change := "n/a"
		if bf.TokensPerStep > 0 {
			change = fmt.Sprintf("%+.1f%%", 100*(q.TokensPerStep/bf.TokensPerStep-1))
		}
		fmt.Fprintf(b, "| %s | %d | %.3f | %.3f | %s |\n", mdCell(name), records, bf.TokensPerStep, q.TokensPerStep, change)
	}
	n := 0
	for _, c := range a.Corpora {
		row(c.Name, c.Records, c.BF16, c.Quantized)
		n += c.Records
	}
	row("all", n, a.BF16, a.Quantized)
	b.WriteString("\nMeasured by `lfmq quantize --drafter` and recorded in `drafter/manifest.json` (metrics,\n`acceptance`).\n\n")
}
